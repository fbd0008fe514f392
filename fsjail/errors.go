package fsjail

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/desk-runtime/desk"
)

// escapeText is the text of os.Root's unexported error for a path or a
// symbolic link that leads outside the root. os does not export the value,
// so it is recognised by its exact text (see isEscape).
const escapeText = "path escapes from parent"

// errEscape is this package's own escape error, returned when it resolves
// symbolic links itself (see canonical). It carries the same text as the
// os.Root error so that both are mapped the same way.
var errEscape = errors.New(escapeText)

// isEscape reports whether some error in err's chain is exactly the os.Root
// escape error. Only whole error texts are compared: a substring match would
// be fooled by a file name that happens to contain the phrase.
func isEscape(err error) bool {
	for err != nil {
		if err.Error() == escapeText {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}

// mapErr turns an error from os or os.Root into what a guest may see. The
// guest path is the only path named; request-level conditions become
// *desk.Error values, everything else is a machine failure (see machineErr).
func mapErr(op, guest string, err error) error {
	switch {
	case err == nil:
		return nil
	case isEscape(err):
		return desk.Errorf(desk.EFORBIDDEN, "%s leads outside the guest file system", guest)
	case errors.Is(err, fs.ErrNotExist):
		return desk.Errorf(desk.ENOTFOUND, "%s: no such file or directory", guest)
	case errors.Is(err, syscall.ENOTDIR):
		// POSIX says "not a directory" when a parent is a file; to a guest
		// the path simply does not exist.
		return desk.Errorf(desk.ENOTFOUND, "%s: no such file or directory (a parent is not a directory)", guest)
	case errors.Is(err, fs.ErrPermission):
		return desk.Errorf(desk.EFORBIDDEN, "%s: permission denied", guest)
	case errors.Is(err, syscall.ELOOP):
		return desk.Errorf(desk.EINVALID, "%s: too many levels of symbolic links", guest)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return desk.Errorf(desk.EINVALID, "%s: file name too long", guest)
	}
	return machineErr(op, guest, err)
}

// opError is a machine failure. It is not a *desk.Error, so desk reports it
// as internal and never shows its text to clients; it still leaves the host
// path out, so that logs that end up in front of an agent do not leak it.
type opError struct {
	op    string
	guest string
	err   error
}

func (e *opError) Error() string { return "fsjail: " + e.op + " " + e.guest + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// machineErr wraps err with the operation and the guest path, replacing any
// *fs.PathError or *os.LinkError (which carry host paths) by its cause.
func machineErr(op, guest string, err error) error {
	for {
		var pe *fs.PathError
		var le *os.LinkError
		switch {
		case errors.As(err, &pe):
			err = pe.Err
			continue
		case errors.As(err, &le):
			err = le.Err
			continue
		}
		break
	}
	return &opError{op: op, guest: guest, err: err}
}
