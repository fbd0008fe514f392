package checkout

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/desk-runtime/desk"
)

// Worktrees of a workspace's checkout: a session may be bound to one (its
// /workspace is then that worktree), and a session shows the branch its
// /workspace has checked out. This file owns both: naming, creating and
// finding worktrees with the git CLI, and reading a work tree's branch
// from its HEAD without running git (a session list reads it per row).

var worktreeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidWorktreeName refuses a name that is not a safe directory and branch
// name: 1–63 letters, digits, '.', '_' or '-', starting with a letter or
// digit, without "..", not ending in ".lock" or ".".
func ValidWorktreeName(name string) error {
	if !worktreeName.MatchString(name) || strings.Contains(name, "..") || strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") {
		return desk.Errorf(desk.EINVALID, "worktree: %q is not a worktree name: use 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit (no \"..\", not ending in \".lock\" or \".\")", name)
	}
	return nil
}

// GitDir is the git directory of the work tree dir: dir/.git when it is a
// directory, or the directory a .git file names (a worktree's
// "gitdir: …"). ok is false when dir is no work tree of its own.
func GitDir(dir string) (string, bool) {
	p := filepath.Join(dir, ".git")
	fi, err := os.Lstat(p)
	if err != nil {
		return "", false
	}
	if fi.IsDir() {
		return p, true
	}
	if !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return "", false
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", false
	}
	g, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return "", false
	}
	g = strings.TrimSpace(g)
	if !filepath.IsAbs(g) {
		g = filepath.Join(dir, g)
	}
	return g, true
}

// CommonDir is the repository's own git directory behind a worktree's git
// directory (its "commondir" file), or gitDir itself.
func CommonDir(gitDir string) string {
	b, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if err != nil {
		return gitDir
	}
	c := strings.TrimSpace(string(b))
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitDir, c)
	}
	return filepath.Clean(c)
}

// AddWorktree makes path a worktree of the repository whose work tree is
// repo, on the branch name: a new branch from HEAD when there is none of
// that name, else the existing branch. It is idempotent: a path that is a
// worktree of this repository already is left as it is. Git's refusals
// (the branch is checked out elsewhere, a repository without commits)
// come back as ECONFLICT in git's words.
func AddWorktree(ctx context.Context, repo, path, name string) error {
	if g, ok := GitDir(path); ok {
		want, _ := GitDir(repo)
		if filepath.Clean(CommonDir(g)) == filepath.Clean(want) {
			return nil
		}
		return desk.Errorf(desk.ECONFLICT, "worktree %s: its directory holds a work tree of another repository", name)
	}
	if _, err := os.Lstat(path); err == nil {
		return desk.Errorf(desk.ECONFLICT, "worktree %s: its directory exists and is not a worktree of the checkout; move it away first", name)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	args := []string{"worktree", "add", path, name}
	if _, err := Git(ctx, repo, "rev-parse", "-q", "--verify", "refs/heads/"+name); err != nil {
		var ge *GitError
		if !errors.As(err, &ge) {
			return err
		}
		args = []string{"worktree", "add", "-b", name, path}
	}
	if _, err := Git(ctx, repo, args...); err != nil {
		os.Remove(path) // an empty directory git may have left
		return Refused(err, "the workspace's checkout", "the worktree "+name+" was not created")
	}
	return nil
}
