package checkout

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// Attack tests of host-side git: a repository planted with every program
// git can be made to run (hooks, filters, drivers, fsmonitor, pager,
// editor), each writing a marker; desk's git operations on it succeed and
// no marker appears, or desk refuses with ECONFLICT naming the key.

func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// plant arms the repository behind gitDir (hooks, config) and the work
// tree dir (.gitattributes) with programs that each write a file in the
// returned marker directory; a filter also passes its input through.
func plant(t *testing.T, dir, gitDir string) string {
	t.Helper()
	markers := t.TempDir()
	script := filepath.Join(t.TempDir(), "evil")
	put(t, filepath.Dir(script), "evil", "#!/bin/sh\necho ran >> "+markers+"/\"$1\"\ncat\n", 0o755)
	for _, h := range []string{"pre-commit", "post-commit", "commit-msg", "prepare-commit-msg", "post-checkout", "post-index-change", "reference-transaction", "pre-auto-gc", "fsmonitor-watchman"} {
		put(t, gitDir, "hooks/"+h, "#!/bin/sh\necho ran > "+markers+"/hook-"+h+"\n", 0o755)
	}
	for _, kv := range [][2]string{
		{"filter.x.clean", script + " clean"}, {"filter.x.smudge", script + " smudge"},
		{"filter.x.process", script + " process"}, {"filter.x.required", "true"},
		{"filter.a=b.clean", script + " clean-eq"},
		{"diff.x.textconv", script + " textconv"}, {"diff.x.command", script + " diffcmd"},
		{"diff.external", script + " external"}, {"merge.x.driver", script + " merge"},
		{"core.fsmonitor", script + " fsmonitor"}, {"core.pager", script + " pager"},
		{"core.editor", script + " editor"}, {"core.hooksPath", filepath.Join(gitDir, "hooks")},
		{"credential.helper", script + " credential"}, {"log.showSignature", "true"},
		{"gpg.program", script + " gpg"}, {"commit.gpgSign", "true"},
	} {
		gitT(t, dir, "config", "--file", filepath.Join(gitDir, "config"), kv[0], kv[1])
	}
	put(t, dir, ".gitattributes", "* filter=x diff=x merge=x\n*.eq filter=a=b\n", 0o644)
	put(t, gitDir, "info/attributes", "* filter=x diff=x merge=x\n", 0o644)
	return markers
}

func noMarkers(t *testing.T, markers string) {
	t.Helper()
	es, _ := os.ReadDir(markers)
	for _, e := range es {
		t.Errorf("a planted program ran on the host: %s", e.Name())
	}
}

func TestHostGitRunsNoRepositoryProgram(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	dir := filepath.Join(ws, layout.CheckoutDir)
	put(t, dir, "a.txt", "a\n", 0o644)
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	markers := plant(t, dir, filepath.Join(dir, ".git"))
	repo := OpenRepo(dir)

	put(t, dir, "a.txt", "changed\n", 0o644)
	put(t, dir, "b.eq", "eq\n", 0o644)
	if _, err := repo.Files(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := repo.Commit(ctx, []string{"a.txt", "b.eq", ".gitattributes"}, "desk: test\n")
	if err != nil || c == "" {
		t.Fatalf("commit %q: %v", c, err)
	}
	// The commit holds the bytes desk staged, not a filter's output.
	if got := gitT(t, dir, "-c", "filter.x.clean=", "-c", "filter.x.smudge=", "show", "HEAD:a.txt"); got != "changed" {
		t.Fatalf("committed a.txt = %q", got)
	}
	if _, _, err := repo.HeadHasTrailer(ctx, "op"); err != nil {
		t.Fatal(err)
	}
	if _, err := Git(ctx, dir, "status", "--porcelain", "-z", "--untracked-files=all"); err != nil {
		t.Fatal(err)
	}
	if _, err := Git(ctx, dir, "diff", "HEAD~1"); err == nil {
		// diff.external is emptied, so a diff that wants it fails rather
		// than running the planted one; either way nothing ran.
		t.Log("diff ran without an external driver")
	}
	// A worktree: checking out runs smudge filters and post-checkout.
	wt := filepath.Join(ws, layout.WorktreesDir, "feature")
	if err := AddWorktree(ctx, dir, wt, "feature"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(wt, "a.txt")); string(b) != "changed\n" {
		t.Fatalf("worktree a.txt = %q", b)
	}
	put(t, wt, "w.txt", "w\n", 0o644)
	if _, err := OpenRepo(wt).Commit(ctx, []string{"w.txt"}, "desk: in the worktree\n"); err != nil {
		t.Fatal(err)
	}
	if err := repo.ResetTo(ctx, c); err != nil {
		t.Fatal(err)
	}
	noMarkers(t, markers)
}

func TestHostGitRefusesWhatItCannotOverride(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, want string
		arm        func(t *testing.T, dir string)
	}{
		{"include.path", "include.path", func(t *testing.T, dir string) {
			put(t, dir, "inc", "[core]\n\tfsmonitor = /bin/false\n", 0o644)
			gitT(t, dir, "config", "include.path", filepath.Join(dir, "inc"))
		}},
		{"includeIf", "includeif.gitdir:/.path", func(t *testing.T, dir string) {
			gitT(t, dir, "config", "includeIf.gitdir:/.path", filepath.Join(dir, "inc"))
		}},
		{"include in config.worktree", "include.path", func(t *testing.T, dir string) {
			put(t, dir, ".git/config.worktree", "[include]\n\tpath = /tmp/x\n", 0o644)
		}},
		{"gitdir file", "names a git directory other than a worktree", func(t *testing.T, dir string) {
			other := t.TempDir()
			gitT(t, other, "init", "-q")
			os.RemoveAll(filepath.Join(dir, ".git"))
			put(t, dir, ".git", "gitdir: "+filepath.Join(other, ".git")+"\n", 0o644)
		}},
		{"symlinked .git", "symbolic link", func(t *testing.T, dir string) {
			other := t.TempDir()
			gitT(t, other, "init", "-q")
			os.RemoveAll(filepath.Join(dir, ".git"))
			if err := os.Symlink(filepath.Join(other, ".git"), filepath.Join(dir, ".git")); err != nil {
				t.Fatal(err)
			}
		}},
		{"commondir", "commondir", func(t *testing.T, dir string) {
			other := t.TempDir()
			gitT(t, other, "init", "-q")
			put(t, dir, ".git/commondir", filepath.Join(other, ".git")+"\n", 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), layout.CheckoutDir)
			put(t, dir, "a.txt", "a\n", 0o644)
			gitT(t, dir, "init", "-q")
			c.arm(t, dir)
			put(t, dir, "a.txt", "b\n", 0o644)
			_, err := (&Repo{dir: dir}).Commit(ctx, []string{"a.txt"}, "x\n")
			if !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("commit = %v; want ECONFLICT naming %q", err, c.want)
			}
		})
	}
}

// A worktree whose .git file is turned towards another repository, or
// whose git directory's commondir is, is refused.
func TestHostGitRefusesARedirectedWorktree(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	dir := filepath.Join(ws, layout.CheckoutDir)
	put(t, dir, "a.txt", "a\n", 0o644)
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	wt := filepath.Join(ws, layout.WorktreesDir, "w")
	if err := AddWorktree(ctx, dir, wt, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := Git(ctx, wt, "status"); err != nil {
		t.Fatalf("status in a sound worktree: %v", err)
	}
	other := t.TempDir()
	gitT(t, other, "init", "-q")
	g, _ := GitDir(wt)
	put(t, g, "commondir", filepath.Join(other, ".git")+"\n", 0o644)
	if _, err := Git(ctx, wt, "status"); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("commondir elsewhere: %v", err)
	}
	put(t, wt, ".git", "gitdir: "+filepath.Join(other, ".git")+"\n", 0o644)
	if _, err := Git(ctx, wt, "status"); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("gitdir elsewhere: %v", err)
	}
}

// Attack: the agent rewrites its worktree's .git file (or the checkout's
// HEAD) to name a directory elsewhere on the host: the session's git
// information, which the agent reads, must not carry what that directory's
// HEAD says.
func TestReadGitReadsOnlyRepositoriesDeskMade(t *testing.T) {
	t.Parallel()
	dir, wt := checkoutWithWorktree(t)
	if g, ok := ReadGit(dir); !ok || g.Branch != "main" {
		t.Fatalf("the checkout: %+v %v", g, ok)
	}
	if g, ok := ReadGit(wt); !ok || g.Branch != "w" {
		t.Fatalf("the worktree: %+v %v", g, ok)
	}
	secret := t.TempDir()
	put(t, secret, "HEAD", "ref: refs/heads/another-actors-secret-branch\n", 0o644)
	put(t, wt, ".git", "gitdir: "+secret+"\n", 0o644)
	if g, ok := ReadGit(wt); ok {
		t.Fatalf("a .git file naming a foreign directory was read: %+v", g)
	}
	// HEAD a link to a file elsewhere, in the checkout's own .git.
	head := filepath.Join(dir, ".git", "HEAD")
	os.Remove(head)
	if err := os.Symlink(filepath.Join(secret, "HEAD"), head); err != nil {
		t.Fatal(err)
	}
	if g, ok := ReadGit(dir); ok {
		t.Fatalf("a HEAD linking elsewhere was followed: %+v", g)
	}
}

// checkoutWithWorktree makes a workspace's checkout as desk lays it out: a
// repository on main with one commit, and a worktree w of it on branch w.
func checkoutWithWorktree(t *testing.T) (dir, wt string) {
	t.Helper()
	ws := t.TempDir()
	dir = filepath.Join(ws, layout.CheckoutDir)
	put(t, dir, "a.txt", "a\n", 0o644)
	gitT(t, dir, "init", "-q", "-b", "main")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "init")
	wt = filepath.Join(ws, layout.WorktreesDir, "w")
	if err := AddWorktree(context.Background(), dir, wt, "w"); err != nil {
		t.Fatal(err)
	}
	return dir, wt
}
