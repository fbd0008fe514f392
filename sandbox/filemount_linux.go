package sandbox

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// openFileMount opens the regular file of a read-only file mount (see
// FromJail) for --ro-bind-fd, as fsjail.OpenDir does a directory: no
// symbolic link at its last element, and, with a Pin, the very file
// recorded when the mount was made.
func openFileMount(m fsjail.Mount) (*os.File, error) {
	host := filepath.Clean(m.Host)
	fd, err := unix.Open(host, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "mount %s: cannot open its file: %s", m.Guest, errText(&os.PathError{Op: "open", Path: host, Err: err}))
	}
	f := os.NewFile(uintptr(fd), host)
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = errors.New("not a regular file")
	}
	if err == nil && m.Pin != nil {
		if id, ok := fsjail.IdentityOf(fi); !ok || id != *m.Pin {
			err = errors.New("it was replaced since the mount was prepared")
		}
	}
	if err != nil {
		f.Close()
		return nil, desk.Errorf(desk.EUNAVAILABLE, "mount %s: %s", m.Guest, errText(err))
	}
	return f, nil
}
