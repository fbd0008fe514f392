package fsjail

import (
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// MaxPathLen bounds the length of a guest path in bytes. It matches the
// common PATH_MAX so that nothing the host could not open anyway reaches
// os.Root, and it keeps the work done for one hostile request small.
const MaxPathLen = 4096

// Clean normalizes a guest path. It must be non-empty, valid UTF-8, start
// with "/", and contain no NUL, no backslash and no "." or ".." element;
// repeated and trailing slashes are collapsed. Elements are refused rather
// than resolved because "/artifacts/../context" is an escape attempt, and
// answering it would teach an agent that the string rules can be played with.
//
// Malformed input (empty, too long, relative, bad UTF-8, NUL, a "." element)
// is EINVALID. Escape attempts and host-style spellings (a ".." element, a
// backslash, "C:\x", "~/x") are EFORBIDDEN.
func Clean(guest string) (string, error) {
	switch {
	case guest == "":
		return "", desk.Errorf(desk.EINVALID, "empty path: guest paths are absolute, e.g. /artifacts/report.md")
	case len(guest) > MaxPathLen:
		return "", desk.Errorf(desk.EINVALID, "path is longer than %d bytes", MaxPathLen)
	case strings.IndexByte(guest, 0) >= 0:
		return "", desk.Errorf(desk.EINVALID, "path %q contains a NUL byte", guest)
	case !utf8.ValidString(guest):
		return "", desk.Errorf(desk.EINVALID, "path %q is not valid UTF-8", guest)
	case strings.IndexByte(guest, '\\') >= 0:
		// A backslash is an ordinary file name byte on Unix, but in a guest
		// path it is almost always a Windows separator, and letting it through
		// would make "/artifacts\..\x" mean different things to different
		// layers.
		return "", desk.Errorf(desk.EFORBIDDEN, "path %q contains a backslash; guest paths use / and never name host files", guest)
	case guest[0] == '~' || hasDriveLetter(guest):
		return "", desk.Errorf(desk.EFORBIDDEN, "path %q is a host path; guest paths start with / (e.g. /artifacts, /workspace)", guest)
	case guest[0] != '/':
		return "", desk.Errorf(desk.EINVALID, "path %q is relative; guest paths are absolute, e.g. /artifacts/report.md", guest)
	}

	var b strings.Builder
	b.Grow(len(guest))
	for elem := range strings.SplitSeq(guest[1:], "/") {
		switch elem {
		case "":
			continue
		case ".":
			return "", desk.Errorf(desk.EINVALID, "path %q contains a \".\" element; write the path without it", guest)
		case "..":
			return "", desk.Errorf(desk.EFORBIDDEN, "path %q contains a \"..\" element; paths may not climb out of a directory", guest)
		}
		b.WriteByte('/')
		b.WriteString(elem)
	}
	if b.Len() == 0 {
		return "/", nil
	}
	return b.String(), nil
}

// hasDriveLetter reports whether s starts like a Windows path ("C:").
func hasDriveLetter(s string) bool {
	if len(s) < 2 || s[1] != ':' {
		return false
	}
	c := s[0] | 0x20 // ASCII lower case
	return 'a' <= c && c <= 'z'
}
