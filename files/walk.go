package files

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/desk-runtime/desk/atomicfile"
)

// node is one entry met by a walk.
type node struct {
	rel   string      // relative to the area, slash separated
	info  fs.FileInfo // from lstat: a link is described as a link
	level int         // 1 for the entries of the start directory
}

// walk visits the entries below dir (rel, "." for the area itself) in path
// order: siblings by name, and each directory immediately followed by its
// own entries (so "/a", "/a/b", "/a-b"). visit says whether to descend into
// a directory; maxDepth 0 means no limit. post, if not nil, is called for
// each directory visit descended into, after its entries.
//
// Each directory is opened as an os.Root of its own, relative to its
// parent's, and read with one getdents pass; in a root, os describes each
// entry with fstatat on the directory's descriptor, so a walk costs about
// one system call per entry and never resolves a path twice or follows a
// link. Memory is bounded by the entries of the directories on the current
// path, never by the size of the tree.
func walk(root *os.Root, dir string, maxDepth int, visit func(node) (bool, error), post func(node) error) error {
	r := root
	if dir != "." {
		sub, err := root.OpenRoot(dir)
		if err != nil {
			return err
		}
		defer sub.Close()
		r = sub
	}
	return walkRoot(r, dir, 1, maxDepth, visit, post)
}

func walkRoot(r *os.Root, dir string, level, maxDepth int, visit func(node) (bool, error), post func(node) error) error {
	f, err := r.Open(".")
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for i, de := range ents {
		ents[i] = nil // let what was visited go
		info, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since the directory was read
		}
		if err != nil {
			return err
		}
		n := node{rel: joinRel(dir, de.Name()), info: info, level: level}
		descend, err := visit(n)
		if err != nil {
			return err
		}
		if !descend || !info.IsDir() {
			continue
		}
		if maxDepth == 0 || level < maxDepth {
			child, err := r.OpenRoot(de.Name())
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			err = walkRoot(child, n.rel, level+1, maxDepth, visit, post)
			child.Close()
			if err != nil {
				return err
			}
		}
		if post != nil {
			if err := post(n); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// hidden reports whether an entry never appears in the file API: desk's
// temporary files (an upload in flight, or debris GC collects).
func hidden(name string) bool { return atomicfile.IsTemp(name) }

// isLink reports whether an lstat result is a symbolic link.
func isLink(fi fs.FileInfo) bool { return fi.Mode()&fs.ModeSymlink != 0 }
