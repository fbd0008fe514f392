package fsjail

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/desk-runtime/desk"
)

// OpenDir opens the host directory of a mount as a descriptor for
// something that mounts it (the command sandbox binds it with bubblewrap's
// --bind-fd), so that what gets mounted is the directory desk checked, not
// whatever the path names a moment later. It is an O_PATH descriptor,
// close-on-exec, opened from the parent without following a symbolic link
// at the last element (a link there is refused). For a pinned mount (a
// declared host path) the rules of every other use apply (openPinned):
// the opened directory must be the declared one by device and inode, else
// a *SwappedError. Errors name the guest path only. The caller closes the
// file.
func OpenDir(m Mount) (*os.File, error) {
	if m.Pin != nil {
		if err := zeroPin(m); err != nil {
			return nil, err
		}
	}
	host := filepath.Clean(m.Host)
	if !filepath.IsAbs(host) || host == "/" {
		return nil, machineErr("open mount", m.Guest, errors.New("the host directory must be an absolute path below /"))
	}
	parent, name := filepath.Dir(host), filepath.Base(host)
	pfd, err := unix.Open(parent, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, mapErr("open mount", m.Guest, &os.PathError{Op: "open", Path: parent, Err: err})
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		// O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a link as for a file:
		// look again to say which.
		var st os.FileInfo
		if fi, lerr := os.Lstat(host); lerr == nil {
			st = fi
		}
		if st != nil && (st.Mode()&os.ModeSymlink != 0 || !st.IsDir()) {
			if m.Pin != nil {
				return nil, checkPin(m, st, false)
			}
			if st.Mode()&os.ModeSymlink != 0 {
				return nil, errLinkMount(m.Guest)
			}
		}
		return nil, mapErr("open mount", m.Guest, &os.PathError{Op: "open", Path: host, Err: err})
	}
	f := os.NewFile(uintptr(fd), host)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, mapErr("open mount", m.Guest, err)
	}
	if m.Pin != nil {
		if err := checkPin(m, fi, true); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// errLinkMount refuses a mount desk owns whose host directory was replaced
// by a symbolic link: nothing desk makes is one, so something planted it.
func errLinkMount(guest string) error {
	return desk.Errorf(desk.EFORBIDDEN, "%s: its host directory is a symbolic link, which is never mounted", guest)
}
