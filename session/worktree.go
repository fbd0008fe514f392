package session

import (
	"context"
	"os"
	"path/filepath"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/layout"
)

// Worktree binding. A session's /workspace is the workspace's checkout,
// or, once the session is bound to a worktree (PATCH {"worktree": name}),
// the git worktree worktrees/<name> of the workspace, made with `git
// worktree add` on the branch <name> (new from HEAD, or the existing
// branch). One session per worktree name; unbinding (name "") keeps the
// worktree and its branch, so nothing is lost, and binding the name again
// finds it. The binding applies from the session's next turn: a turn
// keeps the /workspace it started with.

// WorkspaceDir is the host directory behind a session's /workspace.
func WorkspaceDir(home layout.Home, x *desk.Session) string {
	if x.Worktree != "" {
		return home.Abs(x.WorkspaceID, layout.WorktreeRel(x.Worktree))
	}
	return home.Abs(x.WorkspaceID, layout.CheckoutDir)
}

// GitMounts are the extra mounts a sandboxed command of a session bound to
// a worktree needs for git to work in /workspace: the worktree's .git file
// names its git directory by host path (inside the checkout's .git), so
// the checkout's .git is mounted at that same path. Nothing else of the
// checkout is. Empty for a session on the checkout itself, whose .git is
// inside /workspace. Unless gitWritable (the workspace's git_writable),
// its hooks and config are read-only (GitReadOnly).
func GitMounts(home layout.Home, x *desk.Session, gitWritable bool) []fsjail.Mount {
	if x == nil || x.Worktree == "" {
		return nil
	}
	g, ok := checkout.GitDir(WorkspaceDir(home, x))
	if !ok {
		return nil
	}
	// The .git file is the agent's to write: it may name any directory.
	// Only the checkout's own .git is ever mounted, and only at the path
	// the file names when that path is it (as git wrote it, or after
	// symbolic links); anything else gets no mount, and git in
	// /workspace fails in the sandbox, where it harms nothing.
	common := filepath.Clean(checkout.CommonDir(g))
	want := filepath.Join(home.Abs(x.WorkspaceID, layout.CheckoutDir), ".git")
	if fi, err := os.Lstat(want); err != nil || !fi.IsDir() {
		return nil
	}
	real, err := filepath.EvalSymlinks(want)
	if err != nil || (common != want && common != real) {
		return nil
	}
	m := fsjail.Mount{Guest: filepath.ToSlash(common), Host: want}
	if !gitWritable {
		m.ReadOnlyDirs = GitReadOnly(common)
	}
	return []fsjail.Mount{m}
}

// withGit fills in what the session's /workspace has checked out.
func (s *Service) withGit(x *desk.Session) *desk.Session {
	if x == nil {
		return x
	}
	if g, ok := s.git.Read(WorkspaceDir(s.home, x)); ok {
		g.Worktree = x.Worktree
		x.Git = &g
	}
	return x
}

// bindWorktree checks and prepares the worktree name for session x:
// a valid name, a checkout that is a git repository, a name no other
// session of the workspace is bound to; then the worktree, made when
// missing. Nothing is stored here: Update stores the binding after.
func (s *Service) bindWorktree(ctx context.Context, x *desk.Session, name string) error {
	if name == "" || name == x.Worktree {
		return nil
	}
	if err := checkout.ValidWorktreeName(name); err != nil {
		return err
	}
	repo := s.home.Abs(x.WorkspaceID, layout.CheckoutDir)
	if checkout.OpenRepo(repo) == nil {
		return desk.Errorf(desk.ECONFLICT, "worktree: the workspace's checkout (/workspace) is not a git repository, so it has no worktrees; run git init there first")
	}
	all, err := s.store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: x.WorkspaceID})
	if err != nil {
		return err
	}
	for _, o := range all {
		if o.ID != x.ID && o.Worktree == name {
			return desk.Errorf(desk.ECONFLICT, "worktree: %s is taken: session %s is bound to it (unbind it there with {\"worktree\": \"\"}, or choose another name)", name, o.ID)
		}
	}
	return checkout.AddWorktree(ctx, repo, s.home.Abs(x.WorkspaceID, layout.WorktreeRel(name)), name)
}
