package fsjail

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/desk-runtime/desk"
)

// FileID identifies a directory on its host: device and inode.
type FileID struct {
	Dev uint64
	Ino uint64
}

// Zero reports whether the identity was never recorded.
func (f FileID) Zero() bool { return f == FileID{} }

// SwappedError is the error of a pinned mount whose directory was
// replaced after its declaration (see desk.SwappedError).
type SwappedError = desk.SwappedError

func swapped(guest, why string) error {
	return &SwappedError{Guest: guest, Why: why, Err: desk.Errorf(desk.EFORBIDDEN,
		"%s is no longer the directory that was declared (it was replaced after the declaration); declare the host path again", guest)}
}

// openPinned opens a pinned mount's host directory as an os.Root without
// trusting its last element: the parent is opened, the last element is
// looked at without following it (a symbolic link there is refused), and
// the root opened from it is checked to be the declared directory by
// device and inode. The identity check is made on the opened root itself,
// so a swap between the look and the open is caught as well. OpenDir
// applies the same rules (checkPin) to a descriptor.
func openPinned(m Mount, guest string) (*os.Root, error) {
	if err := zeroPin(m); err != nil {
		return nil, err
	}
	parent, name := filepath.Dir(m.Host), filepath.Base(m.Host)
	pr, err := os.OpenRoot(parent)
	if err != nil {
		return nil, mapErr("open mount", guest, err)
	}
	defer pr.Close()
	fi, err := pr.Lstat(name)
	if err != nil {
		return nil, mapErr("open mount", guest, err)
	}
	if err := checkPin(m, fi, false); err != nil {
		return nil, err
	}
	r, err := pr.OpenRoot(name)
	if err != nil {
		return nil, mapErr("open mount", guest, err)
	}
	st, err := r.Stat(".")
	if err != nil {
		r.Close()
		return nil, mapErr("open mount", guest, err)
	}
	if err := checkPin(m, st, true); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// zeroPin refuses a pinned mount whose identity was never recorded.
func zeroPin(m Mount) error {
	if m.Pin == nil || m.Pin.Zero() {
		return desk.Errorf(desk.EFORBIDDEN, "%s was declared before desk recorded which directory it is; declare the host path again", m.Guest)
	}
	return nil
}

// checkPin compares what a pinned mount's host path is now with its
// declaration: fi describes the last element, not followed (a look before
// the open), or the opened directory itself (opened set), which is what
// decides, since it cannot change under the caller any more.
func checkPin(m Mount, fi fs.FileInfo, opened bool) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return swapped(m.Guest, "the host path is now a symbolic link")
	case !fi.IsDir():
		return swapped(m.Guest, "the host path is no longer a directory")
	}
	if id, ok := IdentityOf(fi); !ok || id != *m.Pin {
		if opened {
			return swapped(m.Guest, "the host path was replaced while it was being opened")
		}
		return swapped(m.Guest, "the host path is another directory now (device and inode differ)")
	}
	return nil
}

// CheckPinned opens every pinned mount (the declared host paths), so that a
// caller about to hand the mounts to something that binds them by path (a
// sandbox) refuses a swapped one first. The roots stay cached in the jail.
func (j *Jail) CheckPinned() error {
	for i, m := range j.mounts {
		if m.Pin == nil {
			continue
		}
		if _, err := j.rootOf(i, m.Guest); err != nil {
			return err
		}
	}
	return nil
}
