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
	return &File{File: f, root: root, Target: target, Temp: tmp}, nil
}

// Close flushes and closes the temporary file without renaming it, for
// callers that record the pending rename durably before doing it: the
// bytes and the temporary name itself (its directory entry) are durable
// when it returns, so a record that claims the name never outlives it.
func (f *File) Close() error {
	if err := f.flush(); err != nil {
		return err
	}
	return SyncDir(f.root, path.Dir(f.Temp))
}

// flush makes the bytes durable and closes the file.
func (f *File) flush() error {
	if err := f.File.Sync(); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

// Commit makes the bytes durable and renames them over the target.
func (f *File) Commit() error {
	// The rename's own directory sync below also makes the temporary
	// name durable, so flush suffices here.
	if err := f.flush(); err != nil && !errors.Is(err, os.ErrClosed) {
		f.Abort()
		return err
	}
	if err := f.root.Rename(f.Temp, f.Target); err != nil {
		f.Abort()
		return err
	}
	f.done = true
	return SyncDir(f.root, path.Dir(f.Target))
}

// Keep disarms Abort: from now on the temporary file belongs to the caller,
// typically because a store row records it as pending installation.
func (f *File) Keep() { f.done = true }

// Abort removes the temporary file. It is safe to call after Commit, which
// makes `defer f.Abort()` the normal way to clean up on every error path.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	_ = f.root.Remove(f.Temp)
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
