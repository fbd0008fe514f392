package app_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/template"
)

// tplFile is one file of a template registration body.
type tplFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content"`
}

func registerTemplate(e *apptest.Env, name, version string, files map[string]string) desk.TemplateVersion {
	e.T.Helper()
	var fs []tplFile
	for p, c := range files {
		fs = append(fs, tplFile{p, []byte(c)})
	}
	var tv desk.TemplateVersion
	e.Must(201, "POST", "/v1/templates", map[string]any{"name": name, "version": version, "files": fs}, &tv)
	return tv
}

func checkoutPath(e *apptest.Env, ws, p string) string {
	return filepath.Join(e.Config.Home, "workspaces", ws, "checkout", filepath.FromSlash(p))
}

func writeCheckout(e *apptest.Env, ws, p, content string) {
	e.T.Helper()
	f := checkoutPath(e, ws, p)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		e.T.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		e.T.Fatal(err)
	}
}

func readCheckout(e *apptest.Env, ws, p string) string {
	e.T.Helper()
	b, err := os.ReadFile(checkoutPath(e, ws, p))
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		e.T.Fatal(err)
	}
	return string(b)
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func gitRepo(t *testing.T, dir string) string {
	runGit(t, dir, "init", "-q")
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
	return runGit(t, dir, "rev-parse", "HEAD")
}

// treeSnapshot maps every file under dir (outside .git) to its bytes.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (d.Name() == ".git" || rel == ".system/ops") {
			return fs.SkipDir
		}
		if d.IsDir() {
			if rel != ".system" {
				out[rel+"/"] = ""
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	tReadme1 = "# Title\n\none\ntwo\nthree\nfour\nfive\n"
	tReadme2 = "# Title\n\none\ntwo\nthree\nfour\nFIVE from the template\n"
)

// templatedWorkspace registers basic 1 and 2 and creates a workspace from
// 1 with local edits that give every plan status.
func templatedWorkspace(e *apptest.Env) desk.Workspace {
	e.T.Helper()
	registerTemplate(e, "basic", "1", map[string]string{
		"README.md": tReadme1, "AGENTS.md": "rules\nbe nice\n", "CLAUDE.md": "claude\n",
		".agents/skills/a/SKILL.md": "a1\n", ".claude/skills/old.md": "old\n", ".agents/skills/same.md": "same\n",
		"src/app.go": "package app\n",
	})
	registerTemplate(e, "basic", "2", map[string]string{
		"README.md": tReadme2, "AGENTS.md": "rules\nbe very nice\n", "CLAUDE.md": "claude\n",
		".agents/skills/a/SKILL.md": "a2\n", ".claude/skills/new.md": "new\n", ".agents/skills/same.md": "same\n",
		"src/app.go": "package app // 2\n",
	})
	var w desk.Workspace
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "proj", "template": "basic@1"}, &w)
	writeCheckout(e, w.ID, "README.md", "# Title (local)\n\none\ntwo\nthree\nfour\nfive\n")
	writeCheckout(e, w.ID, "AGENTS.md", "rules\nbe kind\n")
	writeCheckout(e, w.ID, "CLAUDE.md", "claude, edited here\n")
	writeCheckout(e, w.ID, ".agents/skills/mine.md", "local only\n")
	return w
}

func planStatuses(p desk.UpgradePlan) map[string]string {
	out := map[string]string{}
	for _, e := range p.Entries {
		out[e.Path] = e.Status
	}
	return out
}

// TestTemplateUpgradeOverHTTP: template add and list, a workspace created
// from a template, the plan's statuses on a real template change (a clean
// three-way merge among them), and applying exactly the selected paths.
func TestTemplateUpgradeOverHTTP(t *testing.T) { testTemplateUpgradeOverHTTP(t, app.Config{}) }

// TestTemplatesAndAbsorbOnPostgres runs the same journeys on the Postgres
// store (skipped without DESK_TEST_POSTGRES).
func TestTemplatesAndAbsorbOnPostgres(t *testing.T) {
	apptest.Parallel(t)
	t.Run("TemplateUpgrade", func(t *testing.T) { testTemplateUpgradeOverHTTP(t, app.Config{Postgres: pgtest.DSN(t)}) })
	t.Run("Absorb", func(t *testing.T) { testAbsorbOverHTTP(t, app.Config{Postgres: pgtest.DSN(t)}) })
}

func testTemplateUpgradeOverHTTP(t *testing.T, cfg app.Config) {
	e := apptest.Start(t, cfg)
	w := templatedWorkspace(e)
	var list struct{ Templates []desk.TemplateVersion }
	e.Must(200, "GET", "/v1/templates", nil, &list)
	if len(list.Templates) != 2 || list.Templates[1].Version != "2" {
		t.Fatalf("templates %+v", list.Templates)
	}
	if got := readCheckout(e, w.ID, "src/app.go"); got != "package app\n" {
		t.Fatalf("template file not installed: %q", got)
	}
	var plan desk.UpgradePlan
	e.Must(200, "GET", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2", nil, &plan)
	want := map[string]string{
		"README.md": "ready", "AGENTS.md": "conflict", "CLAUDE.md": "preserved",
		".agents/skills/a/SKILL.md": "ready", ".agents/skills/same.md": "unchanged",
		".claude/skills/old.md": "remove", ".claude/skills/new.md": "add",
	}
	if got := planStatuses(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("plan %v\nwant %v", got, want)
	}
	for _, en := range plan.Entries {
		if en.Path == "README.md" && !en.Merged {
			t.Fatal("README.md is ready but not from a clean three-way merge")
		}
	}
	// Without a resolution for AGENTS.md: 409, nothing changes.
	r := e.Admin("POST", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2", map[string]any{"digest": plan.Digest})
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "AGENTS.md") {
		t.Fatalf("unresolved = %d %s", r.Status, r.Body)
	}
	var res desk.UpgradeResult
	e.Must(200, "POST", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2",
		map[string]any{"digest": plan.Digest, "resolutions": map[string]string{"AGENTS.md": "workspace"}}, &res)
	for p, want := range map[string]string{
		"README.md":                 "# Title (local)\n\none\ntwo\nthree\nfour\nFIVE from the template\n",
		"AGENTS.md":                 "rules\nbe kind\n",
		"CLAUDE.md":                 "claude, edited here\n",
		".agents/skills/a/SKILL.md": "a2\n",
		".claude/skills/old.md":     "<absent>",
		".claude/skills/new.md":     "new\n",
		".agents/skills/mine.md":    "local only\n",
		"src/app.go":                "package app\n",
	} {
		if got := readCheckout(e, w.ID, p); got != want {
			t.Errorf("%s = %q; want %q", p, got, want)
		}
	}
	if len(res.Written) != 3 || len(res.Deleted) != 1 {
		t.Fatalf("result %+v", res)
	}
	// The baseline advanced: planning 2 again shows the local edits kept.
	e.Must(200, "GET", "/v1/workspaces/"+w.ID+"/template-upgrade", nil, &plan)
	if plan.FromVersion != "2" || planStatuses(plan)["AGENTS.md"] != "preserved" {
		t.Fatalf("after upgrade: %+v", plan)
	}
	// Actor tokens may not plan upgrades.
	var ac struct{ Token string }
	e.Must(201, "POST", "/v1/workspaces/"+w.ID+"/actors", map[string]string{"name": "bot", "kind": "agent"}, &ac)
	if r := e.Req("GET", "/v1/workspaces/"+w.ID+"/template-upgrade", ac.Token, nil); r.Status != 403 {
		t.Fatalf("actor plan = %d", r.Status)
	}
	// An unknown template creates no workspace.
	if r := e.Admin("POST", "/v1/workspaces", map[string]string{"name": "x", "template": "nope"}); r.Status != 400 {
		t.Fatalf("unknown template = %d %s", r.Status, r.Body)
	}
}

// TestTemplateUpgradeRefusals: stale digest, running sessions, a staged
// index and a held guard each answer 409 and change nothing; a checkout
// that is a git repository gets a commit.
func TestTemplateUpgradeRefusals(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{})
	w := templatedWorkspace(e)
	dir := checkoutPath(e, w.ID, "")
	head := gitRepo(t, dir)
	before := treeSnapshot(t, dir)
	var plan desk.UpgradePlan
	e.Must(200, "GET", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2", nil, &plan)
	body := map[string]any{"digest": plan.Digest, "resolutions": map[string]string{"AGENTS.md": "template"}}
	url := "/v1/workspaces/" + w.ID + "/template-upgrade?to=2"

	// Stale: the plan was for other local bytes.
	writeCheckout(e, w.ID, "CLAUDE.md", "changed after the plan\n")
	if r := e.Admin("POST", url, body); r.Status != 409 || r.ErrorCode() != desk.ESTALEPLAN {
		t.Fatalf("stale = %d %s", r.Status, r.Body)
	}
	writeCheckout(e, w.ID, "CLAUDE.md", "claude, edited here\n")

	// A running session.
	var ses desk.Session
	e.Must(201, "POST", "/v1/workspaces/"+w.ID+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "slow", "delay_ms": 60000}}}}, &ses)
	var sub desk.SubmitResult
	e.Must(202, "POST", "/v1/sessions/"+ses.ID+"/messages", map[string]string{"text": "go"}, &sub)
	waitFor(t, "the turn to run", func() bool {
		var q struct{ Items []desk.QueueItem }
		e.Must(200, "GET", "/v1/sessions/"+ses.ID+"/queue?all=true", nil, &q)
		if len(q.Items) == 0 || q.Items[0].ExecutionID == "" {
			return false
		}
		var x desk.Execution
		e.Must(200, "GET", "/v1/executions/"+q.Items[0].ExecutionID, nil, &x)
		sub.ExecutionID = x.ID
		return x.Phase == desk.PhaseRunning
	})
	if r := e.Admin("POST", url, body); r.Status != 409 || r.ErrorCode() != desk.EBLOCKED || !strings.Contains(r.ErrorMessage(), ses.ID) {
		t.Fatalf("running = %d %s", r.Status, r.Body)
	}
	e.Must(200, "POST", "/v1/sessions/"+ses.ID+"/executions/"+sub.ExecutionID+"/interrupt", nil, nil)
	waitFor(t, "the turn to stop", func() bool {
		var x desk.Execution
		e.Must(200, "GET", "/v1/executions/"+sub.ExecutionID, nil, &x)
		return !desk.PhaseActive(x.Phase)
	})

	// A staged index.
	writeCheckout(e, w.ID, "half.txt", "half-made commit\n")
	runGit(t, dir, "add", "half.txt")
	if r := e.Admin("POST", url, body); r.Status != 409 || !strings.Contains(r.ErrorMessage(), "staged") {
		t.Fatalf("staged = %d %s", r.Status, r.Body)
	}
	runGit(t, dir, "reset", "-q")
	os.Remove(checkoutPath(e, w.ID, "half.txt"))

	// A held guard.
	release, err := e.App.Guard.Acquire(context.Background(), desk.OpTemplateUpgrade, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := e.Admin("POST", url, body)
	// While the lease is held nothing starts in the workspace: a message
	// waits in its queue, and runs once the lease is given back.
	var quick desk.Session
	e.Must(201, "POST", "/v1/workspaces/"+w.ID+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "done"}}}}, &quick)
	var held desk.SubmitResult
	e.Must(202, "POST", "/v1/sessions/"+quick.ID+"/messages", map[string]string{"text": "while leased"}, &held)
	queued := func() string {
		var q struct{ Items []desk.QueueItem }
		e.Must(200, "GET", "/v1/sessions/"+quick.ID+"/queue?all=true", nil, &q)
		if len(q.Items) != 1 {
			t.Fatalf("queue of %s: %+v", quick.ID, q.Items)
		}
		return q.Items[0].Status
	}
	e.App.Exec.Wake()
	testwait.Never(t, 300*time.Millisecond, func() bool { return queued() != "queued" }, "a message sent while the workspace was leased to leave the queue")
	release()
	waitFor(t, "the held message to run once the lease is released", func() bool { return queued() == "delivered" })
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "workspace "+w.ID+" is busy with template-upgrade") {
		t.Fatalf("held guard = %d %s", r.Status, r.Body)
	}
	if got := treeSnapshot(t, dir); !reflect.DeepEqual(got, before) || runGit(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("a refused upgrade changed the checkout")
	}

	// Now it applies, with a commit of only the managed paths.
	var res desk.UpgradeResult
	e.Must(200, "POST", url, body, &res)
	if res.Commit == "" || runGit(t, dir, "rev-parse", "HEAD") != res.Commit {
		t.Fatalf("commit %q", res.Commit)
	}
	changed := strings.Fields(runGit(t, dir, "show", "--name-only", "--format=", "HEAD"))
	for _, p := range changed {
		if !template.Managed(p) {
			t.Errorf("commit touched the unmanaged %s", p)
		}
	}
	if runGit(t, dir, "status", "--porcelain") != "" {
		t.Fatalf("checkout not clean after the upgrade commit: %s", runGit(t, dir, "status", "--porcelain"))
	}
}

// TestTemplateUpgradeCrashRecovery: desk dies in the middle of applying;
// the next start undoes the half-applied upgrade, and a further start
// changes nothing.
func TestTemplateUpgradeCrashRecovery(t *testing.T) {
	apptest.Parallel(t)
	var crash atomic.Bool
	var n atomic.Int32
	cfg := app.Config{Templates: template.Options{Hook: func(step string) error {
		if crash.Load() && step == "apply" && n.Add(1) == 2 {
			return checkout.ErrSimulatedCrash
		}
		return nil
	}}}
	e := apptest.Start(t, cfg)
	w := templatedWorkspace(e)
	wsDir := filepath.Join(e.Config.Home, "workspaces", w.ID)
	before := treeSnapshot(t, wsDir)
	var plan desk.UpgradePlan
	e.Must(200, "GET", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2", nil, &plan)
	crash.Store(true)
	body := map[string]any{"digest": plan.Digest, "resolutions": map[string]string{"AGENTS.md": "template"}}
	if r := e.Admin("POST", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2", body); r.Status != 500 {
		t.Fatalf("crashing apply = %d %s", r.Status, r.Body)
	}
	crash.Store(false)
	if reflect.DeepEqual(before, treeSnapshot(t, wsDir)) {
		t.Fatal("nothing was half-applied; the test proves nothing")
	}
	e.Restart()
	if got := treeSnapshot(t, wsDir); !reflect.DeepEqual(got, before) {
		t.Fatalf("recovery did not undo the upgrade:\n%v\nwant\n%v", got, before)
	}
	e.Restart()
	if got := treeSnapshot(t, wsDir); !reflect.DeepEqual(got, before) {
		t.Fatal("a second recovery changed something")
	}
	// The same plan is still good and applies.
	e.Must(200, "POST", "/v1/workspaces/"+w.ID+"/template-upgrade?to=2", body, nil)
	if readCheckout(e, w.ID, "AGENTS.md") != "rules\nbe very nice\n" {
		t.Fatal("upgrade after recovery did not apply")
	}
}

// tplFixture is what the OpenAPI contract test needs for the template and
// absorb routes: a templated idle workspace with a plan digest, and an
// idle target and source with an absorb plan digest.
type tplFixture struct {
	name, ws, digest         string
	target, source, absorbed string
}

var tplSeq atomic.Int32

func (w *world) templateFixtures(t *testing.T) tplFixture {
	t.Helper()
	n := tplSeq.Add(1)
	name := fmt.Sprintf("fx%d", n)
	registerTemplate(w.Env, name, "1", map[string]string{"README.md": "# fixture\n", "AGENTS.md": "rules\n"})
	var tw, target, source desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "templated-" + name, "template": name}, &tw)
	var plan desk.UpgradePlan
	w.Must(200, "GET", "/v1/workspaces/"+tw.ID+"/template-upgrade", nil, &plan)
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "absorb-target-" + name}, &target)
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "absorb-source-" + name}, &source)
	writeCheckout(w.Env, source.ID, "notes.md", "from the source\n")
	var ap desk.AbsorbPlan
	w.Must(200, "GET", "/v1/workspaces/"+target.ID+"/absorb?source="+source.ID, nil, &ap)
	return tplFixture{name: name, ws: tw.ID, digest: plan.Digest, target: target.ID, source: source.ID, absorbed: ap.Digest}
}

// rewrite points the template and absorb routes at the fixture's own idle
// workspaces (the contract test's main workspace runs work).
func (f tplFixture) rewrite(p, url, ws string) string {
	switch {
	case strings.HasSuffix(p, "/template-upgrade"):
		return strings.Replace(url, ws, f.ws, 1)
	case strings.HasSuffix(p, "/absorb"):
		return strings.Replace(url, ws, f.target, 1)
	}
	return url
}

// body returns the request body of a template or absorb schema.
func (f tplFixture) body(schema string) (any, bool) {
	switch schema {
	case "TemplateCreate":
		return map[string]any{"name": f.name + "-new", "version": "1", "files": []tplFile{{"README.md", []byte("# new\n")}}}, true
	case "UpgradeApply":
		return map[string]any{"digest": f.digest}, true
	case "AbsorbApply":
		return map[string]any{"digest": f.absorbed}, true
	}
	return nil, false
}
