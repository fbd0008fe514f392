package transfer

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/layout"
)

// relinkWorktrees points the imported git worktrees and the checkout's
// record of them back at each other under the workspace's new directory,
// target. A worktree and its repository name each other by absolute path
// (the worktree's .git file names checkout/.git/worktrees/<id>, whose
// gitdir file names the worktree's .git), and both paths were the
// exporting desk's. This is what `git worktree repair` does, done on the
// staged tree through its os.Root: no git is needed and no link is
// followed out. A worktree whose links are not the pair git makes keeps
// its files as they came; only the names under worktrees/ are held to the
// rules a PATCH {"worktree"} is, since a session's /workspace is one.
func (x *extractor) relinkWorktrees(target string) error {
	ents, err := fs.ReadDir(x.tree.FS(), layout.WorktreesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return diskerr.Discarded("import", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() {
			return desk.Errorf(desk.EINVALID, "archive entry %s/%s is not a worktree directory; refused", layout.WorktreesDir, name)
		}
		if err := checkout.ValidWorktreeName(name); err != nil {
			return desk.Errorf(desk.EINVALID, "archive directory %s/%s: %s", layout.WorktreesDir, name, desk.ErrorMessage(err))
		}
		dotgit := path.Join(layout.WorktreeRel(name), ".git")
		b, ok := x.smallFile(dotgit)
		if !ok {
			continue
		}
		old, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !ok {
			continue
		}
		id := filepath.Base(filepath.Clean(old))
		admin := path.Join(layout.CheckoutDir, ".git", "worktrees", id)
		if checkout.ValidWorktreeName(id) != nil || filepath.Base(filepath.Dir(filepath.Clean(old))) != "worktrees" {
			continue
		}
		if fi, err := x.tree.Lstat(admin); err != nil || !fi.IsDir() {
			continue
		}
		newAdmin := filepath.Join(target, filepath.FromSlash(admin))
		newDotgit := filepath.Join(target, filepath.FromSlash(dotgit))
		if err := x.tree.WriteFile(dotgit, []byte("gitdir: "+newAdmin+"\n"), 0o644); err != nil {
			return diskerr.Discarded("import", err)
		}
		if err := x.tree.WriteFile(path.Join(admin, "gitdir"), []byte(newDotgit+"\n"), 0o644); err != nil {
			return diskerr.Discarded("import", err)
		}
	}
	return nil
}

// smallFile reads a regular file of the staged tree of at most 4 KiB (a
// .git file is one line); ok is false for anything else.
func (x *extractor) smallFile(name string) ([]byte, bool) {
	fi, err := x.tree.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 4096 {
		return nil, false
	}
	f, err := x.tree.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	return b, err == nil
}
