package lifecycle

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// rename is os.Rename; tests replace it to act out a move across file
// systems.
var rename = os.Rename

// partialOf is where a copy across file systems is assembled before it is
// renamed into place, next to the destination.
func partialOf(dst string) string {
	return filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".partial")
}

// moveDir moves the directory src to dst, atomically: within one file
// system by rename; across file systems by copying into a partial
// directory beside dst, renaming that into place, then deleting src. dst
// therefore only ever appears complete, and the move is idempotent from
// any point it was interrupted at:
//
//   - dst exists, src too: the copy finished and the delete did not, so
//     src is deleted;
//   - dst exists alone: done;
//   - src exists alone: (re)start, discarding a partial copy.
//
// step is called after the copy and after its rename, for failure
// injection.
func moveDir(src, dst string, step func(string) error) error {
	srcOK, err := isDir(src)
	if err != nil {
		return err
	}
	dstOK, err := isDir(dst)
	if err != nil {
		return err
	}
	partial := partialOf(dst)
	switch {
	case dstOK && srcOK:
		if err := os.RemoveAll(src); err != nil {
			return fmt.Errorf("remove %s after it was copied to %s: %w", src, dst, err)
		}
		syncDir(filepath.Dir(src))
		return os.RemoveAll(partial)
	case dstOK:
		return os.RemoveAll(partial)
	case !srcOK:
		return fmt.Errorf("neither %s nor %s exists", src, dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(partial); err != nil {
		return err
	}
	err = rename(src, dst)
	if err == nil {
		syncDir(filepath.Dir(dst))
		syncDir(filepath.Dir(src))
		return nil
	}
	if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("move %s to %s: %w", src, dst, err)
	}
	if err := copyTree(src, partial); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, partial, err)
	}
	if err := step("copied"); err != nil {
		return err
	}
	if err := os.Rename(partial, dst); err != nil {
		return fmt.Errorf("move %s into place: %w", partial, err)
	}
	syncDir(filepath.Dir(dst))
	if err := step("renamed"); err != nil {
		return err
	}
	if err := os.RemoveAll(src); err != nil {
		return fmt.Errorf("remove %s after it was copied to %s: %w", src, dst, err)
	}
	syncDir(filepath.Dir(src))
	return nil
}

func isDir(p string) (bool, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is not a directory", p)
	}
	return true, nil
}

// copyTree copies src to a new directory dst exactly: modes, modification
// times, symbolic links and hard links within the tree (the selection
// groups' materialized views are hard links), every file fsynced. Device
// files, sockets and pipes are refused: a workspace has none.
func copyTree(src, dst string) error {
	type dirTimes struct {
		path  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirTimes
	links := map[[2]uint64]string{} // (device, inode) → first copy
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			// Writable while it is filled; its own mode is set last.
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, dirTimes{to, fi.Mode().Perm() | fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky), fi.ModTime()})
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case fi.Mode().IsRegular():
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := [2]uint64{uint64(st.Dev), uint64(st.Ino)}
				if first, ok := links[key]; ok {
					return os.Link(first, to)
				}
				links[key] = to
			}
			return copyFile(p, to, fi)
		default:
			return fmt.Errorf("%s is a %s, which a workspace never holds", p, fi.Mode().Type())
		}
	})
	if err != nil {
		return err
	}
	// Innermost first, so setting a parent's time is not undone by a child.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		syncDir(d.path)
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chtimes(d.path, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string, fi fs.FileInfo) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if err := os.Chmod(to, fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	return os.Chtimes(to, fi.ModTime(), fi.ModTime())
}

// syncDir makes a rename or removal in dir durable; a failure to sync is
// not worth failing a move that already happened.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
