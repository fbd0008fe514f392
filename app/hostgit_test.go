package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
)

// Attack tests of host-side git (issue 23, item 1): a real sandboxed
// command plants hooks, a clean/smudge filter and an fsmonitor in
// /workspace's repository, each a program that writes a marker on the
// host if it ever runs there; then desk runs git on the host for a
// worktree bind, an offboarding (its handoff's git status), a template
// upgrade and an absorb. Each either succeeds with no marker or is
// refused with 409 naming the key. Without the workspace's git_writable
// the sandbox cannot write .git/hooks or .git/config at all.

// plantCommand is the shell command that arms the repository of the
// checkout whose host directory is co: programs (by host path, as git on
// the host would run them) that append to marks/<name>.
func plantCommand(co, marks string) string {
	evil := co + "/.git/evil"
	return `set -e; cd /workspace
printf '#!/bin/sh\necho ran >> ` + marks + `/"$1"\ncat\n' > .git/evil; chmod +x .git/evil
mkdir -p .git/hooks
for h in pre-commit post-commit commit-msg post-checkout reference-transaction post-index-change; do
  printf '#!/bin/sh\necho ran > ` + marks + `/hook-%s\n' $h > .git/hooks/$h; chmod +x .git/hooks/$h
done
git config filter.x.clean "` + evil + ` clean"
git config filter.x.smudge "` + evil + ` smudge"
git config filter.x.required true
git config core.fsmonitor "` + evil + ` fsmonitor"
echo '* filter=x' > .gitattributes
echo planted`
}

// hostGitWorld is an agent world (sandboxed, auto-review) whose workspace
// checkout ws is a git repository with one commit.
func hostGitWorld(t *testing.T) (*agentWorld, string) {
	w := newAgentWorld(t)
	needSandbox(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	co := w.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	os.WriteFile(filepath.Join(co, "README.md"), []byte("hello\n"), 0o644)
	gitInit(t, co)
	return w, co
}

// runIn runs command as a sandboxed exec_command of a new script session
// of workspace ws and returns the command.
func (w *agentWorld) runIn(ws, command string) *desk.Command {
	w.T.Helper()
	return w.callIn(ws, sh(command))
}

// callIn makes one tool call in a new script session of workspace ws.
func (w *agentWorld) callIn(ws string, call map[string]any) *desk.Command {
	w.T.Helper()
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+ws+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": []map[string]any{calls(call), says("done")}}}, &x)
	oneTerminal(w.T.(*testing.T), w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	cs := w.commands(x.ID)
	if len(cs) != 1 {
		w.T.Fatalf("commands %+v", cs)
	}
	return cs[0]
}

// plantIn arms ws's checkout co through the sandbox, with git_writable on
// for the time of the command (the agent had the opt-in).
func (w *agentWorld) plantIn(ws, co string) string {
	w.T.Helper()
	marks := w.T.(*testing.T).TempDir()
	w.Must(200, "PATCH", "/v1/workspaces/"+ws+"/agent", map[string]any{"git_writable": true}, nil)
	c := w.runIn(ws, plantCommand(co, marks))
	w.Must(200, "PATCH", "/v1/workspaces/"+ws+"/agent", map[string]any{"git_writable": false}, nil)
	if c.Status != desk.CommandSucceeded || !strings.Contains(c.Output, "planted") {
		w.T.Fatalf("planting with git_writable: %s %q", c.Status, c.Output)
	}
	return marks
}

func assertNoMarks(t *testing.T, marks string) {
	t.Helper()
	es, _ := os.ReadDir(marks)
	for _, e := range es {
		t.Errorf("a program the sandbox planted ran on the host: %s", e.Name())
	}
}

// TestHostGitSandboxCannotWriteGitConfig: without git_writable a
// sandboxed command cannot write /workspace/.git/hooks or .git/config
// (nor move .git away to do it), and neither can the file tools.
func TestHostGitSandboxCannotWriteGitConfig(t *testing.T) {
	apptest.Parallel(t)
	w, co := hostGitWorld(t)
	config, _ := os.ReadFile(filepath.Join(co, ".git", "config"))
	for _, attack := range []string{
		`printf '#!/bin/sh\necho x\n' > /workspace/.git/hooks/post-checkout`,
		`git -C /workspace config core.fsmonitor /tmp/x`,
		`echo '[filter "x"] clean = /tmp/x' >> /workspace/.git/config`,
		`mv /workspace/.git /workspace/.git2`,
	} {
		if c := w.runIn(w.ws.ID, "("+attack+") && echo WROTE"); strings.Contains(c.Output, "WROTE") {
			t.Errorf("%s: succeeded (%q)", attack, c.Output)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(co, ".git", "config")); string(b) != string(config) {
		t.Fatalf(".git/config changed on the host:\n%s", b)
	}
	if es, _ := os.ReadDir(filepath.Join(co, ".git", "hooks")); len(es) != 0 {
		for _, e := range es {
			if !strings.HasSuffix(e.Name(), ".sample") {
				t.Errorf("a hook appeared on the host: %s", e.Name())
			}
		}
	}
	// The file tools refuse it too.
	for _, call := range []map[string]any{
		tc("write_file", map[string]any{"path": "/workspace/.git/config", "content": "[core]\n\tfsmonitor = /tmp/x\n"}),
		tc("write_file", map[string]any{"path": "/workspace/.git/hooks/pre-commit", "content": "#!/bin/sh\n"}),
	} {
		if c := w.callIn(w.ws.ID, call); c.Status == desk.CommandSucceeded {
			t.Errorf("%v: succeeded", call)
		}
	}
	// With the opt-in the same command goes through.
	w.settings(map[string]any{"git_writable": true})
	if c := w.runIn(w.ws.ID, `git -C /workspace config desk.test yes && echo ok`); c.Status != desk.CommandSucceeded {
		t.Fatalf("with git_writable: %s %q", c.Status, c.Output)
	}
}

// TestHostGitWorktreeBindRunsNoPlantedProgram: binding a session to a
// worktree (git worktree add: checkout, smudge, post-checkout) on a
// planted repository runs nothing planted.
func TestHostGitWorktreeBindRunsNoPlantedProgram(t *testing.T) {
	apptest.Parallel(t)
	w, co := hostGitWorld(t)
	marks := w.plantIn(w.ws.ID, co)
	b := w.patchSession(w.a.ID, map[string]any{"worktree": "feature"})
	if b.Git == nil || b.Git.Branch != "feature" {
		t.Fatalf("bound: %+v", b.Git)
	}
	if got, _ := os.ReadFile(filepath.Join(w.App.Home.Abs(w.ws.ID, layout.WorktreeRel("feature")), "README.md")); string(got) != "hello\n" {
		t.Fatalf("worktree README.md = %q", got)
	}
	assertNoMarks(t, marks)
}

// TestHostGitOffboardRunsNoPlantedProgram: the offboarding's git status
// (the handoff's uncommitted files) of a planted checkout and of its
// worktree runs nothing planted, and the handoff still lists the files.
func TestHostGitOffboardRunsNoPlantedProgram(t *testing.T) {
	apptest.Parallel(t)
	w, co := hostGitWorld(t)
	w.patchSession(w.b.ID, map[string]any{"worktree": "feature"})
	marks := w.plantIn(w.ws.ID, co)
	os.WriteFile(filepath.Join(co, "new.txt"), []byte("new\n"), 0o644)
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]any{"reason": "done"}, nil)
	assertNoMarks(t, marks)
	b, err := os.ReadFile(filepath.Join(w.App.Home.Departed(w.ws.ID), lifecycle.OffboardingFile))
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		IsGit       bool     `json:"is_git"`
		Uncommitted []string `json:"uncommitted"`
		GitError    string   `json:"git_error"`
	}
	json.Unmarshal(b, &h)
	if !h.IsGit || h.GitError != "" || !strings.Contains(strings.Join(h.Uncommitted, "\n"), "?? new.txt") {
		t.Fatalf("handoff git: %+v", h)
	}
}

// TestHostGitTemplateUpgradeRunsNoPlantedProgram: a template upgrade
// commits in a planted checkout: no hook, filter or fsmonitor runs, and
// the commit holds the bytes desk wrote.
func TestHostGitTemplateUpgradeRunsNoPlantedProgram(t *testing.T) {
	apptest.Parallel(t)
	w, _ := hostGitWorld(t)
	tw := templatedWorkspace(w.Env)
	w.settingsOf(tw.ID, map[string]any{"approval_mode": "auto-review"})
	co := checkoutPath(w.Env, tw.ID, "")
	gitRepo(t, co)
	marks := w.plantIn(tw.ID, co)
	var plan desk.UpgradePlan
	w.Must(200, "GET", "/v1/workspaces/"+tw.ID+"/template-upgrade?to=2", nil, &plan)
	var res desk.UpgradeResult
	w.Must(200, "POST", "/v1/workspaces/"+tw.ID+"/template-upgrade?to=2",
		map[string]any{"digest": plan.Digest, "resolutions": map[string]string{"AGENTS.md": "template"}}, &res)
	if res.Commit == "" {
		t.Fatalf("no commit: %+v", res)
	}
	assertNoMarks(t, marks)
	if got := runGit(t, co, "-c", "filter.x.clean=", "-c", "filter.x.smudge=", "-c", "filter.x.required=false", "-c", "core.hooksPath=/dev/null", "show", "HEAD:AGENTS.md"); got != "rules\nbe very nice" {
		t.Fatalf("committed AGENTS.md = %q", got)
	}
}

// TestHostGitAbsorbRunsNoPlantedProgram: an absorb commits the import in
// a planted target checkout: nothing planted runs.
func TestHostGitAbsorbRunsNoPlantedProgram(t *testing.T) {
	apptest.Parallel(t)
	w, _ := hostGitWorld(t)
	target, source, _ := absorbPair(w.Env)
	w.settingsOf(target.ID, map[string]any{"approval_mode": "auto-review"})
	tco := checkoutPath(w.Env, target.ID, "")
	gitRepo(t, tco)
	marks := w.plantIn(target.ID, tco)
	url := "/v1/workspaces/" + target.ID + "/absorb?source=" + source.ID
	var plan desk.AbsorbPlan
	w.Must(200, "GET", url, nil, &plan)
	var res struct {
		ImportCommit string `json:"import_commit"`
	}
	w.Must(200, "POST", url, map[string]any{"digest": plan.Digest,
		"resolutions": map[string]string{"checkout/plan.md": "source", "checkout/keep.md": "both"}}, &res)
	if res.ImportCommit == "" {
		t.Fatal("no import commit")
	}
	assertNoMarks(t, marks)
}

// TestHostGitRefusesWhatItCannotNeutralise: an include.path the agent
// planted, and a .git file naming another repository on the host, make
// desk refuse with 409 naming the cause; nothing planted runs, and the
// other repository is untouched.
func TestHostGitRefusesWhatItCannotNeutralise(t *testing.T) {
	apptest.Parallel(t)
	t.Run("include.path", func(t *testing.T) {
		w, co := hostGitWorld(t)
		marks := w.plantIn(w.ws.ID, co)
		w.settings(map[string]any{"git_writable": true})
		if c := w.runIn(w.ws.ID, `printf '[core]\n\tfsmonitor = `+co+`/.git/evil inc\n' > /workspace/.git/inc && git -C /workspace config include.path `+co+`/.git/inc`); c.Status != desk.CommandSucceeded {
			t.Fatalf("planting include.path: %s %q", c.Status, c.Output)
		}
		r := w.Admin("PATCH", "/v1/sessions/"+w.a.ID, map[string]any{"worktree": "feature"})
		if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "include.path") {
			t.Fatalf("bind with include.path = %d %s", r.Status, r.Body)
		}
		assertNoMarks(t, marks)
	})
	t.Run("gitdir elsewhere", func(t *testing.T) {
		w, _ := hostGitWorld(t)
		other := t.TempDir()
		os.WriteFile(filepath.Join(other, "o.txt"), []byte("other\n"), 0o644)
		gitInit(t, other)
		head := runGit(t, other, "rev-parse", "HEAD")
		w.settings(map[string]any{"git_writable": true})
		if c := w.runIn(w.ws.ID, `cd /workspace && mv .git .git-old && echo 'gitdir: `+other+`/.git' > .git`); c.Status != desk.CommandSucceeded {
			t.Fatalf("planting the .git file: %s %q", c.Status, c.Output)
		}
		r := w.Admin("PATCH", "/v1/sessions/"+w.a.ID, map[string]any{"worktree": "feature"})
		if r.Status != 409 || !strings.Contains(r.ErrorMessage(), ".git file") {
			t.Fatalf("bind with a foreign gitdir = %d %s", r.Status, r.Body)
		}
		if runGit(t, other, "rev-parse", "HEAD") != head || runGit(t, other, "branch", "--list", "feature") != "" {
			t.Fatal("the other repository changed")
		}
	})
}

// settingsOf patches the agent settings of workspace ws.
func (w *agentWorld) settingsOf(ws string, patch map[string]any) {
	w.T.Helper()
	w.Must(200, "PATCH", "/v1/workspaces/"+ws+"/agent", patch, nil)
}
