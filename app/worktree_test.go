package app_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
)

// Worktree awareness through HTTP: a session on a git checkout shows its
// branch; binding it to a worktree (PATCH {"worktree"}) makes one with
// git worktree add and points its commands and /workspace there, and
// another session of the workspace is unaffected.

// gitInit makes dir a git repository on main with one commit.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
}

func (w *agentWorld) patchSession(ses string, body map[string]any) *desk.Session {
	w.T.Helper()
	var x desk.Session
	w.Must(200, "PATCH", "/v1/sessions/"+ses, body, &x)
	return &x
}

func (w *agentWorld) getSession(ses string) *desk.Session {
	w.T.Helper()
	var x desk.Session
	w.Must(200, "GET", "/v1/sessions/"+ses, nil, &x)
	return &x
}

func TestWorktreeBinding(t *testing.T) { inModes(t, testWorktreeBinding) }

func testWorktreeBinding(t *testing.T, mode string) {
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": mode})
	co := w.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	os.WriteFile(filepath.Join(co, "README.md"), []byte("hello\n"), 0o644)
	gitInit(t, co)

	probe := "cd /workspace 2>/dev/null || cd \"$DESK_WORKSPACE\"; git branch --show-current; cat README.md; ls; echo from-$DESK_SESSION_ID > made.txt"
	x := w.script(calls(tc("exec_command", map[string]any{"command": probe})), says("done"))
	y := w.script(calls(tc("exec_command", map[string]any{"command": probe})), says("done"))

	// On the checkout: the branch shows.
	if g := w.getSession(x.ID).Git; g == nil || g.Branch != "main" || g.Worktree != "" {
		t.Fatalf("git of a session on the checkout: %+v", g)
	}

	// Bind x to a new worktree.
	b := w.patchSession(x.ID, map[string]any{"worktree": "feature-x"})
	if b.Worktree != "feature-x" || b.Git == nil || b.Git.Branch != "feature-x" || b.Git.Worktree != "feature-x" {
		t.Fatalf("bound: %+v %+v", b, b.Git)
	}
	// The web UI's session header shows it.
	page := w.Req("GET", "/w/"+w.ws.ID+"/s/"+x.ID, "", nil, "Cookie", w.WebCookie(w.Token).String())
	if page.Status != 200 || !strings.Contains(string(page.Body), "worktree feature-x · feature-x</span>") {
		t.Fatalf("session page: %d, worktree badge missing", page.Status)
	}
	wt := w.App.Home.Abs(w.ws.ID, layout.WorktreeRel("feature-x"))
	if _, err := os.Stat(filepath.Join(wt, "README.md")); err != nil {
		t.Fatalf("the worktree was not checked out: %v", err)
	}
	var list struct{ Sessions []desk.Session }
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/sessions", nil, &list)
	for _, s := range list.Sessions {
		want := map[string]string{x.ID: "feature-x", y.ID: "main"}[s.ID]
		if want != "" && (s.Git == nil || s.Git.Branch != want) {
			t.Fatalf("listed %s with git %+v, want %s", s.ID, s.Git, want)
		}
	}

	// x's command runs in the worktree; y's in the checkout.
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	oneTerminal(t, w.settled(w.send(y.ID, "go").ExecutionID), desk.PhaseEnded)
	cx, cy := w.commands(x.ID)[0], w.commands(y.ID)[0]
	if cx.Status != desk.CommandSucceeded || !strings.HasPrefix(cx.Output, "feature-x\nhello\nREADME.md\n") {
		t.Fatalf("in the worktree: %s %q", cx.Status, cx.Output)
	}
	if cy.Status != desk.CommandSucceeded || !strings.HasPrefix(cy.Output, "main\nhello\nREADME.md\n") {
		t.Fatalf("on the checkout: %s %q", cy.Status, cy.Output)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "made.txt")); err != nil || string(b) != "from-"+x.ID+"\n" {
		t.Fatalf("x's file in the worktree: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(co, "made.txt")); err != nil || string(b) != "from-"+y.ID+"\n" {
		t.Fatalf("y's file in the checkout: %q %v", b, err)
	}
	// The file tools see the same /workspace as the commands.
	if r := w.Admin("GET", "/v1/sessions/"+x.ID+"/guest/file?path=/workspace/made.txt", nil); r.Status != 200 || string(r.Body) != "from-"+x.ID+"\n" {
		t.Fatalf("x's /workspace/made.txt through the guest API: %d %q", r.Status, r.Body)
	}

	// A name taken by x is refused for y; bad names and a branch checked
	// out elsewhere are refused with what was wrong; nothing changes.
	if r := w.Admin("PATCH", "/v1/sessions/"+y.ID, map[string]any{"worktree": "feature-x"}); r.Status != 409 || !strings.Contains(r.ErrorMessage(), x.ID) {
		t.Fatalf("taken: %d %s", r.Status, r.Body)
	}
	for _, bad := range []string{"../up", "a/b", ".hidden", "x.lock", strings.Repeat("n", 64)} {
		if r := w.Admin("PATCH", "/v1/sessions/"+y.ID, map[string]any{"worktree": bad}); r.Status != 400 || !strings.Contains(r.ErrorMessage(), "not a worktree name") {
			t.Fatalf("name %q: %d %s", bad, r.Status, r.Body)
		}
	}
	if r := w.Admin("PATCH", "/v1/sessions/"+y.ID, map[string]any{"worktree": "main"}); r.Status != 409 || !strings.Contains(r.ErrorMessage(), "main") {
		t.Fatalf("the checkout's own branch: %d %s", r.Status, r.Body)
	}
	if g := w.getSession(y.ID); g.Worktree != "" || g.Git.Branch != "main" {
		t.Fatalf("y after refusals: %+v", g)
	}

	// Unbinding returns x to the checkout and keeps the worktree; binding
	// the name again finds it.
	u := w.patchSession(x.ID, map[string]any{"worktree": ""})
	if u.Worktree != "" || u.Git == nil || u.Git.Branch != "main" {
		t.Fatalf("unbound: %+v %+v", u, u.Git)
	}
	if _, err := os.Stat(filepath.Join(wt, "made.txt")); err != nil {
		t.Fatalf("unbinding lost the worktree: %v", err)
	}
	if r := w.patchSession(y.ID, map[string]any{"worktree": "feature-x"}); r.Git.Branch != "feature-x" {
		t.Fatalf("y bound to the freed worktree: %+v", r.Git)
	}
}

// TestWorktreeNotGit: a checkout that is not a git repository has no
// branch to show and no worktrees to bind.
func TestWorktreeNotGit(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	if g := w.getSession(w.a.ID).Git; g != nil {
		t.Fatalf("git of a plain checkout: %+v", g)
	}
	r := w.Admin("PATCH", "/v1/sessions/"+w.a.ID, map[string]any{"worktree": "feature"})
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "not a git repository") {
		t.Fatalf("bind on a plain checkout: %d %s", r.Status, r.Body)
	}
	if x := w.getSession(w.a.ID); x.Worktree != "" {
		t.Fatalf("stored anyway: %+v", x)
	}
}

// TestWorktreeThread: a handler thread runs in its session's /workspace,
// so a session bound to a worktree has threads whose commands run there,
// and the thread's own row (GET /v1/threads/{thr}, the thread list, the
// web thread page) shows that branch, following the session's binding.
func TestWorktreeThread(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "full-access"})
	co := w.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	os.WriteFile(filepath.Join(co, "README.md"), []byte("hello\n"), 0o644)
	gitInit(t, co)

	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "builder", "objective": "build on the branch"}}})),
			says("delegated"), says("noted"),
		},
		"handlers": map[string]any{"builder": []map[string]any{
			calls(tc("exec_command", map[string]any{"command": "cd /workspace 2>/dev/null || cd \"$DESK_WORKSPACE\"; git branch --show-current"})),
			calls(tc("thread_report", map[string]any{"title": "built", "body": "done on the branch"})), says("reported"),
		}},
	}}, &x)
	w.patchSession(x.ID, map[string]any{"worktree": "feature-t"})
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)

	var th desk.Thread
	eventually(t, "the thread to report", func() bool {
		ts := w.threads(x.ID)
		if len(ts) == 1 && ts[0].LatestEpisode != nil {
			th = ts[0]
		}
		return th.ID != ""
	})
	if th.Git == nil || th.Git.Branch != "feature-t" || th.Git.Worktree != "feature-t" {
		t.Fatalf("listed thread's git = %+v, want branch and worktree feature-t", th.Git)
	}
	// Its command ran in the worktree, on the branch its row names.
	var ran bool
	for _, m := range w.surfaceMessages(x.ID, th.SurfaceID) {
		for _, c := range m.Commands {
			if c.Tool == "exec_command" {
				ran = true
				if c.Status != desk.CommandSucceeded || strings.TrimSpace(c.Output) != "feature-t" {
					t.Fatalf("the thread's command: %s %q", c.Status, c.Output)
				}
			}
		}
	}
	if !ran {
		t.Fatal("the thread ran no exec_command")
	}
	var one desk.Thread
	w.Must(200, "GET", "/v1/threads/"+th.ID, nil, &one)
	if one.Git == nil || one.Git.Branch != "feature-t" || one.Git.Worktree != "feature-t" {
		t.Fatalf("GET /v1/threads/%s git = %+v", th.ID, one.Git)
	}
	if page := w.webPage("/w/" + w.ws.ID + "/s/" + x.ID + "/t/" + th.ID); !strings.Contains(page, "worktree feature-t · feature-t</span>") {
		t.Fatal("the thread page has no worktree badge")
	}

	// Unbound, the session and its thread are back on the checkout's main.
	w.patchSession(x.ID, map[string]any{"worktree": ""})
	var back desk.Thread
	w.Must(200, "GET", "/v1/threads/"+th.ID, nil, &back)
	if back.Git == nil || back.Git.Branch != "main" || back.Git.Worktree != "" {
		t.Fatalf("after unbinding, the thread's git = %+v, want main on the checkout", back.Git)
	}
}

// TestWorktreeExportImport: an export carries the worktrees sessions are
// bound to, uncommitted work included, and the import relinks each one
// with the checkout's git directory at its new place, so git works in it
// on the second desk and knows nothing of the first one's paths.
func TestWorktreeExportImport(t *testing.T) {
	apptest.Parallel(t)
	w, x, oldWT := worktreeWithWIP(t)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body

	e2 := apptest.Start(t, app.Config{})
	e2.Must(201, "POST", "/v1/workspaces/import", exported, nil)
	var got desk.Session
	e2.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
	if got.Worktree != "feature-x" || got.Git == nil || got.Git.Branch != "feature-x" || got.Git.Worktree != "feature-x" {
		t.Fatalf("the imported session: worktree %q git %+v", got.Worktree, got.Git)
	}
	newWT := e2.App.Home.Abs(w.ws.ID, layout.WorktreeRel("feature-x"))
	newCO := e2.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	if b, err := os.ReadFile(filepath.Join(newWT, "wip.txt")); err != nil || string(b) != "not committed\n" {
		t.Fatalf("the uncommitted file did not travel: %q %v", b, err)
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v in %s: %v: %s", args, dir, err, out)
		}
		return string(out)
	}
	if b := strings.TrimSpace(git(newWT, "branch", "--show-current")); b != "feature-x" {
		t.Fatalf("branch in the imported worktree = %q", b)
	}
	if st := git(newWT, "status", "--porcelain"); !strings.Contains(st, "?? wip.txt") {
		t.Fatalf("git status in the imported worktree = %q", st)
	}
	common, _ := filepath.Abs(strings.TrimSpace(git(newWT, "rev-parse", "--git-common-dir")))
	if !strings.HasPrefix(common, newCO) {
		t.Fatalf("the imported worktree's git directory is %s, not under %s", common, newCO)
	}
	list := git(newCO, "worktree", "list", "--porcelain")
	if !strings.Contains(list, "worktree "+newWT+"\n") || strings.Contains(list, oldWT) {
		t.Fatalf("git worktree list of the imported checkout:\n%s", list)
	}
}

// TestWorktreeOffboardHandoff: offboarding a workspace lists, in
// HANDOFF.md, the uncommitted work of every worktree sessions were bound
// to, beside the checkout's; a restore brings the worktree back where git
// finds it again.
func TestWorktreeOffboardHandoff(t *testing.T) {
	apptest.Parallel(t)
	w, _, wt := worktreeWithWIP(t)
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]any{"reason": "done"}, nil)
	h, err := os.ReadFile(filepath.Join(w.App.Home.Departed(w.ws.ID), lifecycle.HandoffFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(h), "## Uncommitted changes in checkout/\n\nNone: the working tree was clean.") ||
		!strings.Contains(string(h), "## Uncommitted changes in worktrees/feature-x/\n\n- `?? wip.txt`") {
		t.Fatalf("HANDOFF.md does not list the worktree's uncommitted work:\n%s", h)
	}
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/restore", nil, nil)
	out, err := exec.Command("git", "-C", wt, "status", "--porcelain").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "?? wip.txt") {
		t.Fatalf("git status in the restored worktree: %v %s", err, out)
	}
}

// worktreeWithWIP makes a git checkout, binds a script session to the
// worktree feature-x and leaves an uncommitted wip.txt in it; it returns
// the world, the session and the worktree's host path.
func worktreeWithWIP(t *testing.T) (*agentWorld, desk.Session, string) {
	t.Helper()
	w := newAgentWorld(t)
	co := w.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	os.WriteFile(filepath.Join(co, "README.md"), []byte("hello\n"), 0o644)
	gitInit(t, co)
	x := w.script(says("hi"))
	w.patchSession(x.ID, map[string]any{"worktree": "feature-x"})
	wt := w.App.Home.Abs(w.ws.ID, layout.WorktreeRel("feature-x"))
	if err := os.WriteFile(filepath.Join(wt, "wip.txt"), []byte("not committed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w, x, wt
}
