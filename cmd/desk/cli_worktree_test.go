package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// TestCLIWorktree: desk session worktree binds a session to a git
// worktree of the checkout and back, and says where the session stands;
// a plain checkout is a conflict.
func TestCLIWorktree(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "wt")
	var s desk.Session
	c.json(&s, "session", "create", ws.ID)
	c.fail(exitConflict, "session", "worktree", s.ID, "feature")

	co := c.app.Home.Abs(ws.ID, layout.CheckoutDir)
	os.WriteFile(filepath.Join(co, "x.txt"), []byte("x\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = co
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	if out := c.ok("session", "worktree", s.ID, "feature"); !strings.Contains(out, "bound session "+s.ID) || !strings.Contains(out, "worktree feature on feature") {
		t.Fatalf("bind: %q", out)
	}
	if out := c.ok("session", "show", s.ID); !strings.Contains(out, "feature") || !strings.Contains(out, "branch") {
		t.Fatalf("show: %q", out)
	}
	c.fail(exitInvalid, "session", "worktree", s.ID, "../x")
	var back desk.Session
	c.json(&back, "session", "worktree", s.ID)
	if back.Worktree != "" || back.Git == nil || back.Git.Branch != "main" {
		t.Fatalf("unbound: %+v %+v", back, back.Git)
	}
}
