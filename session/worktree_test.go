package session

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
)

// TestGitMountsOnlyTheCheckoutsGit: a worktree's .git file, which the
// agent can rewrite, never makes GitMounts mount another host directory;
// the checkout's .git is mounted with hooks and config read-only unless
// git_writable.
func TestGitMountsOnlyTheCheckoutsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	home := layout.Home{Root: t.TempDir()}
	x := &desk.Session{WorkspaceID: "ws_1", Worktree: "feature"}
	co := home.Abs(x.WorkspaceID, layout.CheckoutDir)
	if err := os.MkdirAll(co, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = co
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	wt := WorkspaceDir(home, x)
	if err := checkout.AddWorktree(context.Background(), co, wt, "feature"); err != nil {
		t.Fatal(err)
	}
	ms := GitMounts(home, x, false)
	real, _ := filepath.EvalSymlinks(filepath.Join(co, ".git"))
	if len(ms) != 1 || ms[0].Host != filepath.Join(co, ".git") || (ms[0].Guest != filepath.Join(co, ".git") && ms[0].Guest != real) ||
		len(ms[0].ReadOnlyDirs) != 2 {
		t.Fatalf("mounts of a sound worktree: %+v", ms)
	}
	if ms := GitMounts(home, x, true); len(ms) != 1 || len(ms[0].ReadOnlyDirs) != 0 {
		t.Fatalf("mounts with git_writable: %+v", ms)
	}
	secret := t.TempDir()
	for _, target := range []string{secret, filepath.Join(co, ".git", "worktrees")} {
		if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: "+target+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if ms := GitMounts(home, x, false); len(ms) != 0 {
			t.Errorf(".git naming %s: mounts %+v", target, ms)
		}
	}
}
