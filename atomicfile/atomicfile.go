// Package atomicfile owns crash-safe file replacement inside an os.Root:
// bytes go to a temporary file in the target's own directory, are fsynced,
// and are renamed over the target, and the directory is fsynced. A crash
// leaves either the old file or the new one, never a torn file, and the only
// debris is a temporary file whose name starts with TempPrefix.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// TempPrefix starts the name of every temporary file, so listings can hide
// them and garbage collection can find abandoned ones.
const TempPrefix = ".desk-tmp-"

// IsTemp reports whether a file name is one of ours.
func IsTemp(name string) bool { return strings.HasPrefix(path.Base(name), TempPrefix) }

// File is a temporary file that becomes Target when committed.
type File struct {
	*os.File
	root   *os.Root
	Target string // slash-separated path inside root
	Temp   string // slash-separated path of the temporary file inside root
	done   bool
}

// Create makes the target's parent directories (mode 0755) and a new
// temporary file beside the target.
func Create(root *os.Root, target string) (*File, error) {
	dir := path.Dir(target)
	if dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	tmp := TempName(dir)
	f, err := root.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	// The writer's lock: a sweep of abandoned temporary files (another
	// desk's startup on a shared home) leaves a locked one alone. Nobody
	// else knows the fresh name, so the lock is always free here.
	if err := flock(f); err != nil {
		f.Close()
		_ = root.Remove(tmp)
		return nil, fmt.Errorf("lock %s: %w", tmp, err)
	}
	return &File{File: f, root: root, Target: target, Temp: tmp}, nil
}

// LinkTemp makes a temporary file in dir that is a hard link of src (no
// copy), locked like Create's: the lock is taken on src before the link
// exists, and the two names share it, so no sweep can take the new name
// in between. Keep, Abort or Commit it as a created one.
func LinkTemp(root *os.Root, src, dir string) (*File, error) {
	f, err := root.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", src, err)
	}
	tmp := TempName(dir)
	if err := root.Link(src, tmp); err != nil {
		f.Close()
		return nil, err
	}
	return &File{File: f, root: root, Temp: tmp}, nil
}

func flock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}

// TryLock takes the writer's lock of the temporary file at p (a host
// path) when nobody holds it: ok is false while a writer (of any process
// sharing the file system) still holds it, or when p is gone. While the
// caller holds the lock no writer can be using the file; unlock releases
// it.
func TryLock(p string) (unlock func(), ok bool) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	if flock(f) != nil {
		f.Close()
		return nil, false
	}
	return func() { f.Close() }, true
}

// Close makes the bytes and the temporary name durable without renaming,
// for callers that record the pending rename durably before doing it, so
// a record that claims the name never outlives it. The descriptor, and
// with it the writer's lock, stays open until Keep, Commit or Abort: until
// the record claims the name, the lock is what keeps a sweep off it.
func (f *File) Close() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	return SyncDir(f.root, path.Dir(f.Temp))
}

// Commit makes the bytes durable and renames them over the target. The
// lock is held across the rename.
func (f *File) Commit() error {
	// The rename's own directory sync below also makes the temporary
	// name durable, so syncing the bytes suffices here.
	if err := f.File.Sync(); err != nil {
		f.Abort()
		return err
	}
	if err := f.root.Rename(f.Temp, f.Target); err != nil {
		f.Abort()
		return err
	}
	f.done = true
	cerr := f.File.Close()
	if err := SyncDir(f.root, path.Dir(f.Target)); err != nil {
		return err
	}
	return cerr
}

// Keep disarms Abort and releases the writer's lock: from now on the
// temporary file belongs to the caller, typically because a store row
// records it as pending installation (which keeps sweeps off it).
func (f *File) Keep() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
}

// Abort removes the temporary file. It is safe to call after Commit, which
// makes `defer f.Abort()` the normal way to clean up on every error path.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	_ = f.root.Remove(f.Temp)
	f.File.Close()
}

// Install renames an already durable file (such as a pending temporary file
// recorded in the store) over target and syncs the directory.
func Install(root *os.Root, temp, target string) error {
	if err := root.Rename(temp, target); err != nil {
		return err
	}
	return SyncDir(root, path.Dir(target))
}

// SyncDir fsyncs a directory so a rename or removal in it is durable.
func SyncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer d.Close()
	return d.Sync()
}

// TempName returns a fresh temporary-file path inside dir.
func TempName(dir string) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return path.Join(dir, TempPrefix+hex.EncodeToString(r[:]))
}
