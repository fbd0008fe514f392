package template

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/workspace"
)

type env struct {
	t     *testing.T
	ctx   context.Context
	home  layout.Home
	store desk.Store
	guard *lifecycle.Guard
	svc   *Service
	hook  func(step string) error
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
	home := layout.Home{Root: t.TempDir()}
	st, err := sqlite.Open(ctx, home.DB())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := desk.Now()
	// The guard's leases need a live owner, or the next Acquire takes
	// them over.
	if err := st.RegisterOwner(ctx, &desk.Owner{ID: "own_test", Host: "test", PID: os.Getpid(), StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, home: home, store: st, guard: lifecycle.NewGuard(st, "own_test", lifecycle.GuardOptions{})}
	life := lifecycle.New(st, home, lifecycle.Options{Guard: e.guard})
	e.svc = New(st, home, workspace.New(st, home, "admin-token"), life, Options{Hook: func(step string) error {
		if e.hook != nil {
			return e.hook(step)
		}
		return nil
	}})
	return e
}

func (e *env) add(name, version string, files map[string]string) {
	e.t.Helper()
	var fs []desk.TemplateFile
	for p, c := range files {
		fs = append(fs, desk.TemplateFile{Path: p, Content: []byte(c)})
	}
	if _, err := e.svc.Add(e.ctx, name, version, fs); err != nil {
		e.t.Fatalf("add %s %s: %v", name, version, err)
	}
}

func (e *env) checkout(ws, p string) string {
	return filepath.Join(e.home.Workspace(ws), "checkout", filepath.FromSlash(p))
}

func (e *env) write(ws, p, content string) {
	e.t.Helper()
	f := e.checkout(ws, p)
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) read(ws, p string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.checkout(ws, p))
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// snapshot is every file under the workspace directory with its bytes.
func (e *env) snapshot(ws string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	root := e.home.Workspace(ws)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			out[rel+"/"] = ""
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
		e.t.Fatal(err)
	}
	return out
}

func git(t *testing.T, dir string, args ...string) string {
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

const (
	readmeV1 = "# Project\n\nline one\nline two\nline three\nline four\nline five\n"
	readmeV2 = "# Project\n\nline one\nline two\nline three\nline four\nline FIVE (template)\n"
	agentsV1 = "rules\nbe nice\n"
	agentsV2 = "rules\nbe very nice\n"
)

// v1 and v2 differ so that every status appears once the workspace has
// local edits (see edit).
func (e *env) twoVersions() {
	e.add("basic", "1", map[string]string{
		"README.md":                   readmeV1,
		"AGENTS.md":                   agentsV1,
		"CLAUDE.md":                   "claude v1\n",
		".agents/skills/a/SKILL.md":   "skill a v1\n",
		".agents/skills/same.md":      "same\n",
		".claude/skills/old/SKILL.md": "old skill\n",
		"src/main.go":                 "package main\n",
	})
	e.add("basic", "2", map[string]string{
		"README.md":                   readmeV2,
		"AGENTS.md":                   agentsV2,
		"CLAUDE.md":                   "claude v1\n",
		".agents/skills/a/SKILL.md":   "skill a v2\n",
		".agents/skills/same.md":      "same\n",
		".claude/skills/new/SKILL.md": "new skill\n",
		"src/main.go":                 "package main // v2\n",
	})
}

// edit makes the workspace's local changes: a non-overlapping README edit
// (clean merge), an overlapping AGENTS edit (conflict), a CLAUDE edit
// (preserved) and a local-only skill.
func (e *env) edit(ws string) {
	e.write(ws, "README.md", "# Project (local)\n\nline one\nline two\nline three\nline four\nline five\n")
	e.write(ws, "AGENTS.md", "rules\nbe kind\n")
	e.write(ws, "CLAUDE.md", "claude local\n")
	e.write(ws, ".agents/skills/local.md", "mine\n")
}

func statuses(p *desk.UpgradePlan) map[string]string {
	out := map[string]string{}
	for _, e := range p.Entries {
		out[e.Path] = e.Status
	}
	return out
}

func TestCreateFromTemplateRecordsBaseline(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, err := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(w.ID, "README.md"); got != readmeV1 {
		t.Fatalf("README = %q", got)
	}
	if got := e.read(w.ID, "src/main.go"); got != "package main\n" {
		t.Fatalf("unmanaged file = %q", got)
	}
	bl, err := e.svc.Baseline(e.ctx, w.ID)
	if err != nil || bl == nil {
		t.Fatalf("baseline %v %v", bl, err)
	}
	if bl.Template != "basic" || bl.Version != "1" || string(bl.Files["AGENTS.md"]) != agentsV1 {
		t.Fatalf("baseline = %+v", bl)
	}
	if _, ok := bl.Files["src/main.go"]; ok {
		t.Fatal("an unmanaged file is in the baseline")
	}
	// Latest by default.
	w2, err := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj2"}, "basic")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(w2.ID, "README.md"); got != readmeV2 {
		t.Fatalf("latest README = %q", got)
	}
	// Unknown templates create nothing.
	before, _ := e.store.ListWorkspaces(e.ctx)
	if _, err := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "x"}, "nope"); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("unknown template: %v", err)
	}
	after, _ := e.store.ListWorkspaces(e.ctx)
	if len(after) != len(before) {
		t.Fatal("a workspace was created for an unknown template")
	}
}

func TestAddValidatesAndVersionsAreImmutable(t *testing.T) {
	e := newEnv(t)
	e.add("t", "1", map[string]string{"README.md": "x"})
	for _, c := range []struct {
		name, version string
		files         []desk.TemplateFile
		code          string
	}{
		{"t", "1", []desk.TemplateFile{{Path: "README.md", Content: []byte("y")}}, desk.ECONFLICT},
		{"bad name", "1", []desk.TemplateFile{{Path: "a"}}, desk.EINVALID},
		{"t", "", []desk.TemplateFile{{Path: "a"}}, desk.EINVALID},
		{"t", "2", nil, desk.EINVALID},
		{"t", "2", []desk.TemplateFile{{Path: "../x"}}, desk.EINVALID},
		{"t", "2", []desk.TemplateFile{{Path: "/etc/passwd"}}, desk.EINVALID},
		{"t", "2", []desk.TemplateFile{{Path: ".git/config"}}, desk.EINVALID},
		{"t", "2", []desk.TemplateFile{{Path: "a"}, {Path: "a"}}, desk.EINVALID},
		{"t", "2", []desk.TemplateFile{{Path: "a"}, {Path: "a/b"}}, desk.EINVALID},
	} {
		if _, err := e.svc.Add(e.ctx, c.name, c.version, c.files); !desk.IsCode(err, c.code) {
			t.Errorf("add %q %q %v: %v; want %s", c.name, c.version, c.files, err, c.code)
		}
	}
	all, err := e.svc.List(e.ctx)
	if err != nil || len(all) != 1 || all[0].Files[0].SHA256 != checkout.SHA256([]byte("x")) {
		t.Fatalf("list = %+v %v", all, err)
	}
	if !all[0].Files[0].Managed {
		t.Fatal("README.md is not marked managed")
	}
	actor := desk.WithPrincipal(context.Background(), desk.Principal{WorkspaceID: "ws_x", ActorID: "act_x"})
	if _, err := e.svc.List(actor); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("actor list: %v", err)
	}
}

func TestUpgradePlanStatusesAndApply(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, err := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	if err != nil {
		t.Fatal(err)
	}
	e.edit(w.ID)
	plan, err := e.svc.Plan(e.ctx, w.ID, "2")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"README.md":                   desk.UpgradeReady,
		"AGENTS.md":                   desk.UpgradeConflict,
		"CLAUDE.md":                   desk.UpgradePreserved,
		".agents/skills/a/SKILL.md":   desk.UpgradeReady,
		".agents/skills/same.md":      desk.UpgradeUnchanged,
		".claude/skills/old/SKILL.md": desk.UpgradeRemove,
		".claude/skills/new/SKILL.md": desk.UpgradeAdd,
	}
	if got := statuses(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("statuses = %v\nwant %v", got, want)
	}
	for _, en := range plan.Entries {
		switch en.Path {
		case "README.md":
			if !en.Merged {
				t.Error("README.md is ready without a merge")
			}
		case "AGENTS.md":
			if !strings.Contains(en.ConflictPreview, "<<<<<<< workspace") || !strings.Contains(en.ConflictPreview, "||||||| base") {
				t.Errorf("conflict preview = %q", en.ConflictPreview)
			}
		}
	}
	if plan.Summary[desk.UpgradeReady] != 2 || plan.Summary[desk.UpgradeConflict] != 1 || len(plan.Digest) != 64 {
		t.Fatalf("summary %v digest %q", plan.Summary, plan.Digest)
	}
	// The same inputs give the same digest.
	again, _ := e.svc.Plan(e.ctx, w.ID, "2")
	if again.Digest != plan.Digest {
		t.Fatal("digest is not stable")
	}

	// An unresolved conflict is refused, and so is a resolution of a
	// path that is not a conflict.
	if _, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest}); !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "AGENTS.md") {
		t.Fatalf("unresolved: %v", err)
	}
	if _, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest, Resolutions: map[string]string{"AGENTS.md": "workspace", "CLAUDE.md": "template"}}); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("resolution of a non-conflict: %v", err)
	}
	res, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest, Resolutions: map[string]string{"AGENTS.md": "workspace"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(w.ID, "README.md"); got != "# Project (local)\n\nline one\nline two\nline three\nline four\nline FIVE (template)\n" {
		t.Fatalf("merged README = %q", got)
	}
	checks := map[string]string{
		"AGENTS.md":                   "rules\nbe kind\n",
		"CLAUDE.md":                   "claude local\n",
		".agents/skills/a/SKILL.md":   "skill a v2\n",
		".claude/skills/old/SKILL.md": "<absent>",
		".claude/skills/new/SKILL.md": "new skill\n",
		".agents/skills/local.md":     "mine\n",
		"src/main.go":                 "package main\n", // unmanaged: never upgraded
	}
	for p, want := range checks {
		if got := e.read(w.ID, p); got != want {
			t.Errorf("%s = %q; want %q", p, got, want)
		}
	}
	if _, err := os.Stat(e.checkout(w.ID, ".claude/skills/old")); err != nil {
		// The directory the template dropped a file from stays: it is the
		// workspace's to tidy.
		t.Logf("old skill directory: %v", err)
	}
	if len(res.Written) != 3 || len(res.Deleted) != 1 || res.Commit != "" {
		t.Fatalf("result %+v", res)
	}
	bl, _ := e.svc.Baseline(e.ctx, w.ID)
	if bl.Version != "2" || string(bl.Files["AGENTS.md"]) != agentsV2 {
		t.Fatalf("baseline not advanced: %+v", bl)
	}
	// Upgrading again to the same version: the conflict resolved for the
	// workspace is now a preserved local edit.
	p2, _ := e.svc.Plan(e.ctx, w.ID, "2")
	if s := statuses(p2); s["AGENTS.md"] != desk.UpgradePreserved || s["README.md"] != desk.UpgradePreserved || s[".claude/skills/new/SKILL.md"] != desk.UpgradeUnchanged {
		t.Fatalf("second plan = %v", s)
	}
	if _, err := os.Stat(filepath.Join(e.home.Workspace(w.ID), ".system", "ops", opUpgrade)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left behind: %v", err)
	}
}

func TestResolveForTemplate(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, _ := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	e.edit(w.ID)
	// Deleted locally and changed in the template: a conflict too.
	os.Remove(e.checkout(w.ID, ".agents/skills/a/SKILL.md"))
	plan, _ := e.svc.Plan(e.ctx, w.ID, "2")
	if s := statuses(plan); s[".agents/skills/a/SKILL.md"] != desk.UpgradeConflict {
		t.Fatalf("statuses %v", s)
	}
	_, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest, Resolutions: map[string]string{"AGENTS.md": "template", ".agents/skills/a/SKILL.md": "template"}})
	if err != nil {
		t.Fatal(err)
	}
	if e.read(w.ID, "AGENTS.md") != agentsV2 || e.read(w.ID, ".agents/skills/a/SKILL.md") != "skill a v2\n" {
		t.Fatal("template resolutions not applied")
	}
	for _, p := range []string{"AGENTS.md", "README.md"} {
		if strings.Contains(e.read(w.ID, p), "<<<<<<<") {
			t.Fatalf("%s has conflict markers", p)
		}
	}
}

func TestApplyRefusesStaleDigestStagedIndexAndHeldGuard(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, _ := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	plan, err := e.svc.Plan(e.ctx, w.ID, "2")
	if err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(w.ID)

	// A local edit after the plan makes it stale.
	e.write(w.ID, "CLAUDE.md", "edited after the plan\n")
	_, err = e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest})
	if !desk.IsCode(err, desk.ESTALEPLAN) {
		t.Fatalf("stale: %v", err)
	}
	e.write(w.ID, "CLAUDE.md", "claude v1\n")
	// A template version registered after the plan makes a plan for the
	// latest version stale too.
	latest, _ := e.svc.Plan(e.ctx, w.ID, "")
	e.add("basic", "3", map[string]string{"README.md": "three\n"})
	if _, err := e.svc.Apply(e.ctx, w.ID, "", desk.UpgradeApply{Digest: latest.Digest}); !desk.IsCode(err, desk.ESTALEPLAN) {
		t.Fatalf("stale latest: %v", err)
	}

	// A staged index is refused.
	dir := e.checkout(w.ID, "")
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "init")
	e.write(w.ID, "notes.txt", "half-made commit\n")
	git(t, dir, "add", "notes.txt")
	before = e.snapshot(w.ID)
	if _, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest}); !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "staged") {
		t.Fatalf("staged: %v", err)
	}
	git(t, dir, "reset", "-q")

	// A held guard answers busy.
	release, err := e.guard.Acquire(e.ctx, desk.OpTemplateUpgrade, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest})
	release()
	if !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "is busy with template-upgrade") {
		t.Fatalf("held guard: %v", err)
	}
	after := e.snapshot(w.ID)
	for k, v := range before {
		if strings.Contains(k, ".git/") {
			continue
		}
		if after[k] != v {
			t.Errorf("%s changed by a refused apply", k)
		}
	}
}

func TestApplyCommitsInGit(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, _ := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	dir := e.checkout(w.ID, "")
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "init")
	head := git(t, dir, "rev-parse", "HEAD")
	e.write(w.ID, "scratch.txt", "unrelated, not staged\n")
	plan, _ := e.svc.Plan(e.ctx, w.ID, "2")
	res, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == "" || res.Commit == head || git(t, dir, "rev-parse", "HEAD") != res.Commit {
		t.Fatalf("commit %q head %q", res.Commit, head)
	}
	if got := git(t, dir, "log", "-1", "--format=%an <%ae>|%cn"); got != "desk <desk@localhost>|desk" {
		t.Fatalf("author = %q", got)
	}
	files := strings.Fields(git(t, dir, "show", "--name-only", "--format=", "HEAD"))
	wantFiles := []string{".agents/skills/a/SKILL.md", ".claude/skills/new/SKILL.md", ".claude/skills/old/SKILL.md", "AGENTS.md", "README.md"}
	if !reflect.DeepEqual(files, wantFiles) {
		t.Fatalf("committed %v; want %v", files, wantFiles)
	}
	if st := git(t, dir, "status", "--porcelain"); st != "?? scratch.txt" {
		t.Fatalf("status after commit = %q", st)
	}
}

func TestGitRefusingTheCommitLeavesWorkspaceAsItWas(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, _ := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	e.edit(w.ID)
	dir := e.checkout(w.ID, "")
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "init")
	// A config value only git commit reads: the upgrade's files are
	// written and staged when git refuses. (A refusing hook no longer
	// does this: no repository hook runs.)
	git(t, dir, "config", "commit.cleanup", "bogus")
	head := git(t, dir, "rev-parse", "HEAD")
	before := e.snapshot(w.ID)
	plan, _ := e.svc.Plan(e.ctx, w.ID, "2")
	_, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest, Resolutions: map[string]string{"AGENTS.md": "template"}})
	if !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "Invalid cleanup mode bogus") {
		t.Fatalf("apply with git refusing the commit: %v", err)
	}
	if git(t, dir, "rev-parse", "HEAD") != head || git(t, dir, "diff", "--cached", "--name-only") != "" {
		t.Fatal("git state changed")
	}
	assertSameFiles(t, before, e.snapshot(w.ID))
}

// assertSameFiles compares snapshots, ignoring git's own bookkeeping.
func assertSameFiles(t *testing.T, before, after map[string]string) {
	t.Helper()
	skip := func(k string) bool {
		return strings.HasPrefix(k, "checkout/.git/") || k == "checkout/.git"
	}
	for k, v := range before {
		if skip(k) {
			continue
		}
		if got, ok := after[k]; !ok || got != v {
			t.Errorf("%s: was %q, now %q (present %v)", k, v, got, ok)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok && !skip(k) {
			t.Errorf("%s appeared", k)
		}
	}
}

func TestCrashMidwayIsRolledBackByRecover(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, _ := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	e.edit(w.ID)
	dir := e.checkout(w.ID, "")
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "init")
	head := git(t, dir, "rev-parse", "HEAD")
	before := e.snapshot(w.ID)
	plan, _ := e.svc.Plan(e.ctx, w.ID, "2")
	n := 0
	e.hook = func(step string) error {
		if step == "apply" {
			n++
			if n == 2 {
				return checkout.ErrSimulatedCrash
			}
		}
		return nil
	}
	_, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest, Resolutions: map[string]string{"AGENTS.md": "template"}})
	if !errors.Is(err, checkout.ErrSimulatedCrash) {
		t.Fatalf("apply: %v", err)
	}
	e.hook = nil
	if e.read(w.ID, ".agents/skills/a/SKILL.md") != "skill a v2\n" {
		t.Fatal("the crash came before any file changed; the test proves nothing")
	}
	// Another upgrade waits for recovery.
	if _, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest}); !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "awaits recovery") {
		t.Fatalf("apply before recovery: %v", err)
	}
	if err := e.svc.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	assertSameFiles(t, before, e.snapshot(w.ID))
	if git(t, dir, "rev-parse", "HEAD") != head {
		t.Fatal("HEAD moved")
	}
	once := e.snapshot(w.ID)
	if err := e.svc.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(once, e.snapshot(w.ID)) {
		t.Fatal("a second Recover changed something")
	}
	// The same plan applies cleanly now.
	if _, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest, Resolutions: map[string]string{"AGENTS.md": "template"}}); err != nil {
		t.Fatal(err)
	}
}

func TestCrashAfterCommitIsFinishedByRecover(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	w, _ := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1")
	dir := e.checkout(w.ID, "")
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "init")
	plan, _ := e.svc.Plan(e.ctx, w.ID, "2")
	e.hook = func(step string) error {
		if step == "committed" {
			return checkout.ErrSimulatedCrash
		}
		return nil
	}
	if _, err := e.svc.Apply(e.ctx, w.ID, "2", desk.UpgradeApply{Digest: plan.Digest}); !errors.Is(err, checkout.ErrSimulatedCrash) {
		t.Fatalf("apply: %v", err)
	}
	e.hook = nil
	head := git(t, dir, "rev-parse", "HEAD")
	if err := e.svc.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	if git(t, dir, "rev-parse", "HEAD") != head || e.read(w.ID, "README.md") != readmeV2 {
		t.Fatal("the committed upgrade was undone")
	}
	bl, _ := e.svc.Baseline(e.ctx, w.ID)
	if bl.Version != "2" {
		t.Fatalf("baseline %s", bl.Version)
	}
	once := e.snapshot(w.ID)
	if err := e.svc.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(once, e.snapshot(w.ID)) {
		t.Fatal("a second Recover changed something")
	}
}

func TestInterruptedInstallIsFinishedByRecover(t *testing.T) {
	e := newEnv(t)
	e.twoVersions()
	n := 0
	e.hook = func(step string) error {
		if step == "install" {
			n++
			if n == 3 {
				return checkout.ErrSimulatedCrash
			}
		}
		return nil
	}
	if _, err := e.svc.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: "proj"}, "basic@1"); err == nil {
		t.Fatal("the install did not stop")
	}
	e.hook = nil
	all, _ := e.store.ListWorkspaces(e.ctx)
	if len(all) != 1 {
		t.Fatalf("%d workspaces", len(all))
	}
	ws := all[0].ID
	if bl, _ := e.svc.Baseline(e.ctx, ws); bl != nil {
		t.Fatal("baseline written before the files")
	}
	if err := e.svc.Recover(e.ctx); err != nil {
		t.Fatal(err)
	}
	bl, err := e.svc.Baseline(e.ctx, ws)
	if err != nil || bl == nil || bl.Version != "1" {
		t.Fatalf("baseline after recovery: %+v %v", bl, err)
	}
	if e.read(ws, "src/main.go") != "package main\n" || e.read(ws, "README.md") != readmeV1 {
		t.Fatal("install not finished")
	}
}

func TestManaged(t *testing.T) {
	for p, want := range map[string]bool{
		"README.md": true, "AGENTS.md": true, "CLAUDE.md": true,
		".agents/skills/x/SKILL.md": true, ".claude/skills/y.md": true,
		"docs/README.md": false, "src/main.go": false, ".agents/other.md": false, "readme.md": false,
	} {
		if Managed(p) != want {
			t.Errorf("Managed(%q) = %v", p, !want)
		}
	}
}
