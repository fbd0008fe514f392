package absorb

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
	ws    desk.WorkspaceService
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
	if err := st.RegisterOwner(ctx, &desk.Owner{ID: "own_test", Host: "test", PID: os.Getpid(), StartedAt: now, HeartbeatAt: now}); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, home: home, store: st, guard: lifecycle.NewGuard(st, "own_test", lifecycle.GuardOptions{}), ws: workspace.New(st, home, "admin-token")}
	life := lifecycle.New(st, home, lifecycle.Options{Guard: e.guard})
	e.svc = New(st, home, life, Options{Hook: func(step string) error {
		if e.hook != nil {
			return e.hook(step)
		}
		return nil
	}})
	return e
}

func (e *env) workspace(name string) *desk.Workspace {
	e.t.Helper()
	w, err := e.ws.CreateWorkspace(e.ctx, desk.WorkspaceCreate{Name: name})
	if err != nil {
		e.t.Fatal(err)
	}
	return w
}

func (e *env) write(ws, p, content string) {
	e.t.Helper()
	f := filepath.Join(e.home.Workspace(ws), filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) read(dir, p string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	if errors.Is(err, fs.ErrNotExist) {
		return "<absent>"
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// snapshot is every entry under dir with its bytes (directories end in /,
// links show their target).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "checkout/.git/") {
			return nil
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "-> " + l
		case d.IsDir():
			// desk may create its own state directory in any workspace.
			if rel != ".system" {
				out[rel+"/"] = ""
			}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, _ := d.Info()
			out[rel] = fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertSame(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: %s was %q, now %q", what, k, v, after[k])
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				t.Errorf("%s: %s appeared", what, k)
			}
		}
	}
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

func gitInit(t *testing.T, dir string) {
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
}

// fixture makes a target and a source whose files cover every status and
// exclusion.
func (e *env) fixture() (target, source *desk.Workspace) {
	target, source = e.workspace("target"), e.workspace("Source Project")
	for p, c := range map[string]string{
		"checkout/dup.txt":   "same\n",
		"checkout/keep.txt":  "target keep\n",
		"checkout/both.txt":  "target both\n",
		"checkout/use.txt":   "target use\n",
		"checkout/dir/x.txt": "a directory in the target\n",
		"checkout/local.txt": "only in the target\n",
	} {
		e.write(target.ID, p, c)
	}
	for p, c := range map[string]string{
		"checkout/new.txt":                 "new from source\n",
		"checkout/sub/deep.txt":            "deep\n",
		"checkout/dup.txt":                 "same\n",
		"checkout/keep.txt":                "source keep\n",
		"checkout/both.txt":                "source both\n",
		"checkout/use.txt":                 "source use\n",
		"checkout/dir":                     "a file where the target has a directory\n",
		"checkout/node_modules/x/index.js": "cache\n",
		"checkout/.env":                    "SECRET=1\n",
		"checkout/.env.local":              "SECRET=2\n",
		"checkout/id_rsa":                  "key\n",
		"checkout/certs/server.pem":        "pem\n",
		"checkout/README.md":               "source readme\n",
		"checkout/.agents/skills/s.md":     "skill\n",
		"checkout/docs/README.md":          "docs readme is not managed\n",
		"skills/k.md":                      "skill file\n",
		"knowledge/n.md":                   "note\n",
		".system/state.json":               "{}",
	} {
		e.write(source.ID, p, c)
	}
	script := filepath.Join(e.home.Workspace(source.ID), "checkout", "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Symlink("new.txt", filepath.Join(e.home.Workspace(source.ID), "checkout", "link")); err != nil {
		e.t.Fatal(err)
	}
	return target, source
}

func TestExclude(t *testing.T) {
	for _, c := range []struct{ area, rel, reason string }{
		{"checkout", "src/main.go", ""},
		{"checkout", ".git/config", ReasonGit},
		{"checkout", "sub/.git", ReasonGit},
		{"checkout", ".system/x", ReasonDeskState},
		{"checkout", "a/.desk-tmp-123", ReasonDeskState},
		{"checkout", "README.md", ReasonManaged},
		{"checkout", "AGENTS.md", ReasonManaged},
		{"checkout", ".claude/skills/a/SKILL.md", ReasonManaged},
		{"checkout", ".pi/skills/a.md", ReasonManaged},
		{"checkout", "docs/README.md", ""},
		{"skills", "README.md", ""},
		{"checkout", ".env", ReasonEnv},
		{"checkout", "app/.env.production", ReasonEnv},
		{"checkout", "certs/tls.key", ReasonCredential},
		{"checkout", "id_ed25519.pub", ReasonCredential},
		{"checkout", ".npmrc", ReasonCredential},
		{"checkout", "config/credentials.json", ReasonCredential},
		{"checkout", ".ssh/config", ReasonCredential},
		{"checkout", "web/node_modules/react/index.js", ReasonCache},
		{"checkout", "pkg/__pycache__/m.pyc", ReasonCache},
		{"checkout", "target/debug/app", ReasonCache},
		{"checkout", "dist/app.js", ReasonCache},
		{"checkout", "target", ""}, // a file named target is not a build tree
	} {
		if got, _ := Exclude(c.area, c.rel); got != c.reason {
			t.Errorf("Exclude(%s, %s) = %q; want %q", c.area, c.rel, got, c.reason)
		}
	}
	if tag := ImportTag(&desk.Workspace{ID: "ws_01HZZZZZZZZZZZZZZZZZABC123", Name: "My Project / v2"}); tag != "My-Project-v2-ABC123" {
		t.Errorf("ImportTag = %q", tag)
	}
}

func TestAbsorbPlanApplyAndOffboard(t *testing.T) {
	e := newEnv(t)
	target, source := e.fixture()
	srcDir := e.home.Workspace(source.ID)
	srcBefore := snapshot(t, srcDir)

	plan, err := e.svc.Plan(e.ctx, target.ID, source.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, en := range plan.Entries {
		got[en.Path] = en.Status
	}
	want := map[string]string{
		"checkout/new.txt":        desk.AbsorbReady,
		"checkout/sub/deep.txt":   desk.AbsorbReady,
		"checkout/run.sh":         desk.AbsorbReady,
		"checkout/docs/README.md": desk.AbsorbReady,
		"skills/k.md":             desk.AbsorbReady,
		"knowledge/n.md":          desk.AbsorbReady,
		"checkout/dup.txt":        desk.AbsorbDuplicate,
		"checkout/keep.txt":       desk.AbsorbConflict,
		"checkout/both.txt":       desk.AbsorbConflict,
		"checkout/use.txt":        desk.AbsorbConflict,
		"checkout/dir":            desk.AbsorbConflict,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %v\nwant %v", got, want)
	}
	if plan.Summary[desk.AbsorbReady] != 6 || plan.Summary[desk.AbsorbDuplicate] != 1 || plan.Summary[desk.AbsorbConflict] != 4 {
		t.Fatalf("summary %v", plan.Summary)
	}
	reasons := map[string]string{}
	for _, x := range plan.Excluded {
		reasons[x.Path] = x.Reason
	}
	wantEx := map[string]string{
		"checkout/node_modules":     ReasonCache,
		"checkout/.env":             ReasonEnv,
		"checkout/.env.local":       ReasonEnv,
		"checkout/id_rsa":           ReasonCredential,
		"checkout/certs/server.pem": ReasonCredential,
		"checkout/README.md":        ReasonManaged,
		"checkout/.agents/skills":   ReasonManaged,
		"checkout/link":             ReasonLink,
	}
	if !reflect.DeepEqual(reasons, wantEx) {
		t.Fatalf("excluded %v\nwant %v", reasons, wantEx)
	}
	tag := ImportTag(source)
	if !strings.HasPrefix(tag, "Source-Project-") {
		t.Fatalf("tag %q", tag)
	}

	// "source" cannot replace a directory.
	bad := map[string]string{"checkout/keep.txt": "target", "checkout/both.txt": "both", "checkout/use.txt": "source", "checkout/dir": "source"}
	if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: bad}); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("source over a directory: %v", err)
	}
	res := map[string]string{"checkout/keep.txt": "target", "checkout/both.txt": "both", "checkout/use.txt": "source", "checkout/dir": "both"}
	out, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: res})
	if err != nil {
		t.Fatal(err)
	}
	tdir := e.home.Workspace(target.ID)
	for p, want := range map[string]string{
		"checkout/new.txt":                      "new from source\n",
		"checkout/sub/deep.txt":                 "deep\n",
		"checkout/keep.txt":                     "target keep\n",
		"checkout/both.txt":                     "target both\n",
		"checkout/imports/" + tag + "/both.txt": "source both\n",
		"checkout/imports/" + tag + "/dir":      "a file where the target has a directory\n",
		"checkout/use.txt":                      "source use\n",
		"checkout/local.txt":                    "only in the target\n",
		"checkout/dir/x.txt":                    "a directory in the target\n",
		"skills/k.md":                           "skill file\n",
		"knowledge/n.md":                        "note\n",
		"checkout/.env":                         "<absent>",
		"checkout/id_rsa":                       "<absent>",
		"checkout/README.md":                    "<absent>",
		"checkout/node_modules/x/index.js":      "<absent>",
		"checkout/link":                         "<absent>",
	} {
		if got := e.read(tdir, p); got != want {
			t.Errorf("target %s = %q; want %q", p, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(tdir, "checkout", "run.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("run.sh mode: %v %v", fi, err)
	}
	if len(out.Written) != 9 || out.ImportCommit != "" {
		t.Fatalf("written %v commit %q", out.Written, out.ImportCommit)
	}
	// The source departed intact, and the catalog says where it went.
	if out.Source == nil || out.Source.State != desk.WorkspaceDeparted || out.Source.AbsorbedInto != target.ID || out.Source.AbsorbedAt == nil {
		t.Fatalf("source catalog %+v", out.Source)
	}
	if _, err := os.Stat(srcDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("source directory still active: %v", err)
	}
	departed := snapshot(t, e.home.Departed(source.ID))
	for k, v := range srcBefore {
		if departed[k] != v {
			t.Errorf("departed source %s = %q; was %q", k, departed[k], v)
		}
	}
	if _, err := os.Stat(filepath.Join(tdir, ".system", "ops", op)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left: %v", err)
	}
}

func TestAbsorbRefusals(t *testing.T) {
	e := newEnv(t)
	target, source := e.fixture()
	plan, err := e.svc.Plan(e.ctx, target.ID, source.ID)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]string{"checkout/keep.txt": "target", "checkout/both.txt": "both", "checkout/use.txt": "source", "checkout/dir": "target"}
	if _, err := e.svc.Plan(e.ctx, target.ID, target.ID); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("self: %v", err)
	}
	if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest}); !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "unresolved conflicts") {
		t.Fatalf("unresolved: %v", err)
	}
	if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: map[string]string{"checkout/keep.txt": "mine"}}); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("bad resolution: %v", err)
	}
	e.write(source.ID, "checkout/new.txt", "changed after the plan\n")
	if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: all}); !desk.IsCode(err, desk.ESTALEPLAN) {
		t.Fatalf("stale: %v", err)
	}
	plan, _ = e.svc.Plan(e.ctx, target.ID, source.ID)
	// Either workspace's lease held by another operation: busy.
	release, err := e.guard.Acquire(e.ctx, desk.OpOffboard, source.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: all})
	release()
	if !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "is busy with offboard") {
		t.Fatalf("busy: %v", err)
	}
	// Neither lease is left behind: the target is free again.
	r2, err := e.guard.Acquire(e.ctx, desk.OpTemplateUpgrade, target.ID)
	if err != nil {
		t.Fatalf("the target's lease was kept: %v", err)
	}
	r2()
	// A staged index in the source is refused.
	gitInit(t, filepath.Join(e.home.Workspace(source.ID), "checkout"))
	e.write(source.ID, "checkout/staged.txt", "x")
	git(t, filepath.Join(e.home.Workspace(source.ID), "checkout"), "add", "staged.txt")
	plan, _ = e.svc.Plan(e.ctx, target.ID, source.ID)
	if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: all}); !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), "staged") {
		t.Fatalf("staged: %v", err)
	}
	w, _ := e.store.GetWorkspace(e.ctx, source.ID)
	if w.State != desk.WorkspaceActive {
		t.Fatalf("source is %s after refusals", w.State)
	}
}

func TestAbsorbCommitsInTargetRepoAndListsGitFiles(t *testing.T) {
	e := newEnv(t)
	target, source := e.workspace("t"), e.workspace("s")
	e.write(target.ID, "checkout/a.txt", "a\n")
	tco := filepath.Join(e.home.Workspace(target.ID), "checkout")
	gitInit(t, tco)
	head := git(t, tco, "rev-parse", "HEAD")
	sco := filepath.Join(e.home.Workspace(source.ID), "checkout")
	e.write(source.ID, "checkout/.gitignore", "*.log\n")
	e.write(source.ID, "checkout/tracked.txt", "t\n")
	gitInit(t, sco)
	e.write(source.ID, "checkout/untracked.txt", "u\n")
	e.write(source.ID, "checkout/build.log", "ignored\n")
	plan, err := e.svc.Plan(e.ctx, target.ID, source.ID)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, en := range plan.Entries {
		paths = append(paths, en.Path)
	}
	if want := []string{"checkout/.gitignore", "checkout/tracked.txt", "checkout/untracked.txt"}; !reflect.DeepEqual(paths, want) {
		t.Fatalf("paths %v; want %v", paths, want)
	}
	out, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest})
	if err != nil {
		t.Fatal(err)
	}
	if out.ImportCommit == "" || git(t, tco, "rev-parse", "HEAD") != out.ImportCommit || git(t, tco, "rev-parse", "HEAD~1") != head {
		t.Fatalf("import commit %q", out.ImportCommit)
	}
	if msg := git(t, tco, "log", "-1", "--format=%B"); !strings.Contains(msg, "Desk-Absorbed-From: "+source.ID) {
		t.Fatalf("commit message %q", msg)
	}
	if out.Source.ImportCommit != out.ImportCommit {
		t.Fatalf("catalog import commit %q", out.Source.ImportCommit)
	}
}

func TestAbsorbFailureMidwayLeavesBothAsTheyWere(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(e *env, tco string)
	}{
		{"git refuses the commit", func(e *env, tco string) {
			// A config value only git commit reads: the import's files
			// are written and staged when git refuses, so this is the
			// midway rollback. (A refusing hook no longer does this: no
			// repository hook runs, see TestAbsorbRunsNoRepositoryProgram.)
			git(t, tco, "config", "commit.cleanup", "bogus")
		}},
		{"injected error before offboarding", func(e *env, tco string) {
			e.hook = func(step string) error {
				if step == "offboard" {
					return errors.New("injected")
				}
				return nil
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			target, source := e.fixture()
			tco := filepath.Join(e.home.Workspace(target.ID), "checkout")
			gitInit(t, tco)
			head := git(t, tco, "rev-parse", "HEAD")
			c.fail(e, tco)
			tBefore, sBefore := snapshot(t, e.home.Workspace(target.ID)), snapshot(t, e.home.Workspace(source.ID))
			plan, err := e.svc.Plan(e.ctx, target.ID, source.ID)
			if err != nil {
				t.Fatal(err)
			}
			res := map[string]string{"checkout/keep.txt": "target", "checkout/both.txt": "both", "checkout/use.txt": "source", "checkout/dir": "both"}
			if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: res}); err == nil {
				t.Fatal("absorb succeeded")
			}
			assertSame(t, "target", tBefore, snapshot(t, e.home.Workspace(target.ID)))
			assertSame(t, "source", sBefore, snapshot(t, e.home.Workspace(source.ID)))
			if git(t, tco, "rev-parse", "HEAD") != head || git(t, tco, "diff", "--cached", "--name-only") != "" {
				t.Fatal("target git changed")
			}
			w, _ := e.store.GetWorkspace(e.ctx, source.ID)
			ce, _ := e.store.GetCatalogEntry(e.ctx, source.ID)
			if w.State != desk.WorkspaceActive || ce.AbsorbedInto != "" {
				t.Fatalf("source %s absorbed into %q", w.State, ce.AbsorbedInto)
			}
		})
	}
}

func TestAbsorbCrashRecovery(t *testing.T) {
	for _, c := range []struct {
		step     string
		nth      int
		finished bool
	}{
		{"copy", 3, false},
		{"copied", 1, false},
		{"committed", 1, true},
		{"offboarded", 1, true},
	} {
		t.Run(c.step, func(t *testing.T) {
			e := newEnv(t)
			target, source := e.fixture()
			tco := filepath.Join(e.home.Workspace(target.ID), "checkout")
			gitInit(t, tco)
			head := git(t, tco, "rev-parse", "HEAD")
			tBefore, sBefore := snapshot(t, e.home.Workspace(target.ID)), snapshot(t, e.home.Workspace(source.ID))
			plan, _ := e.svc.Plan(e.ctx, target.ID, source.ID)
			n := 0
			e.hook = func(step string) error {
				if step == c.step {
					n++
					if n == c.nth {
						return checkout.ErrSimulatedCrash
					}
				}
				return nil
			}
			res := map[string]string{"checkout/keep.txt": "target", "checkout/both.txt": "both", "checkout/use.txt": "source", "checkout/dir": "target"}
			if _, err := e.svc.Apply(e.ctx, target.ID, source.ID, desk.AbsorbApply{Digest: plan.Digest, Resolutions: res}); !errors.Is(err, checkout.ErrSimulatedCrash) {
				t.Fatalf("apply: %v", err)
			}
			e.hook = nil
			if err := e.svc.Recover(e.ctx); err != nil {
				t.Fatal(err)
			}
			w, _ := e.store.GetWorkspace(e.ctx, source.ID)
			ce, _ := e.store.GetCatalogEntry(e.ctx, source.ID)
			if c.finished {
				if w.State != desk.WorkspaceDeparted || ce.AbsorbedInto != target.ID || ce.ImportCommit == "" {
					t.Fatalf("not finished: %s %+v", w.State, ce)
				}
				if e.read(e.home.Workspace(target.ID), "checkout/new.txt") != "new from source\n" {
					t.Fatal("target lost the import")
				}
			} else {
				if w.State != desk.WorkspaceActive || ce.AbsorbedInto != "" {
					t.Fatalf("not undone: %s %+v", w.State, ce)
				}
				assertSame(t, "target", tBefore, snapshot(t, e.home.Workspace(target.ID)))
				assertSame(t, "source", sBefore, snapshot(t, e.home.Workspace(source.ID)))
				if git(t, tco, "rev-parse", "HEAD") != head {
					t.Fatal("target HEAD moved")
				}
			}
			tOnce := snapshot(t, e.home.Workspace(target.ID))
			if err := e.svc.Recover(e.ctx); err != nil {
				t.Fatal(err)
			}
			assertSame(t, "second recovery", tOnce, snapshot(t, e.home.Workspace(target.ID)))
		})
	}
}
