package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/fsjail"
)

// TestBubblewrapGitCarveOut: with .git/hooks and .git/config read-only
// entries of a writable /workspace (session.Mounts without git_writable),
// a command can commit but cannot write a hook or the config, not even by
// moving .git away and back; the host files stay as they were.
func TestBubblewrapGitCarveOut(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ws := t.TempDir()
	if out, err := exec.Command("git", "-C", ws, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	os.RemoveAll(filepath.Join(ws, ".git", "hooks"))
	config := readHost(t, filepath.Join(ws, ".git", "config"))
	ms, err := FromJail([]fsjail.Mount{{Guest: "/workspace", Host: ws, ReadOnlyDirs: []string{".git/hooks", ".git/config"}}})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(ws, ".git", "hooks")); err != nil || !fi.IsDir() {
		t.Fatalf("a missing hooks directory was not made: %v", err)
	}
	spec := func(cmd string) Spec {
		return Spec{Mounts: ms, Cwd: "/workspace", Command: cmd, Timeout: 30 * time.Second,
			Env: map[string]string{"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@a", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@a"}}
	}
	// The agent's own git works: objects, refs, index and HEAD.
	res := run(t, b, spec(`set -e; echo x > f; git add f; git commit -qm one; git log --oneline | wc -l`))
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "1" {
		t.Fatalf("commit in the sandbox: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, attack := range []string{
		`printf '#!/bin/sh\necho pwned\n' > .git/hooks/post-checkout`,
		`echo '[core] fsmonitor = /tmp/x' >> .git/config`,
		`git config filter.x.clean /tmp/x`,
		`rm -rf .git/hooks`,
		`mv .git/config .git/config.old`,
		`mv .git .git2`,
		`mkdir -p .git/hooks/x`,
	} {
		res := run(t, b, spec(attack))
		if res.ExitCode == 0 {
			t.Errorf("%s: succeeded in the sandbox", attack)
		}
	}
	if got := readHost(t, filepath.Join(ws, ".git", "config")); got != config {
		t.Errorf("config changed on the host:\n%s", got)
	}
	if es, _ := os.ReadDir(filepath.Join(ws, ".git", "hooks")); len(es) != 0 {
		t.Errorf("hooks written on the host: %v", es)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git", "HEAD")); err != nil {
		t.Errorf(".git was moved: %v", err)
	}
}
