package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/session"
)

// MaxPathLen bounds a file API path in bytes (the common PATH_MAX).
const MaxPathLen = 4096

// SessionsDir is the folder of an actor's area that holds one artifact
// directory per session (layout.SessionRel).
const SessionsDir = "sessions"

// CleanPath normalizes a file API path: a leading "/" is added when
// missing, repeated and trailing slashes are collapsed, and "" means the
// area itself ("/"). Elements follow session.ValidRel: no NUL, control
// character, backslash, "." or ".." element, nothing longer than 255 bytes,
// and nothing named like desk's temporary files. It is pure string work.
func CleanPath(p string) (string, error) {
	if len(p) > MaxPathLen {
		return "", desk.Errorf(desk.EINVALID, "path is longer than %d bytes", MaxPathLen)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", desk.Errorf(desk.EINVALID, "path %q contains a NUL byte", p)
	}
	var elems []string
	for e := range strings.SplitSeq(p, "/") {
		if e != "" {
			elems = append(elems, e)
		}
	}
	if len(elems) == 0 {
		return "/", nil
	}
	rel, err := session.ValidRel(strings.Join(elems, "/"))
	if err != nil {
		return "", err
	}
	return "/" + rel, nil
}

// relOf turns a clean file API path into an os.Root name.
func relOf(p string) string {
	if p == "/" {
		return "."
	}
	return p[1:]
}

// cleanPrefix normalizes a delete-by-prefix prefix. Like CleanPath, but a
// trailing "/" is kept because it changes the meaning (a folder's subtree
// rather than a string prefix), and the last element may be any partial
// name. The area itself ("" or "/") is refused: deleting everything is
// never one request away from a typo.
func cleanPrefix(prefix string) (string, error) {
	folder := strings.HasSuffix(prefix, "/")
	p, err := CleanPath(prefix)
	if err != nil {
		return "", err
	}
	if p == "/" {
		return "", desk.Errorf(desk.EINVALID, "prefix %q would delete the whole area; name a folder (e.g. /temp/) or a name prefix", prefix)
	}
	if folder {
		p += "/"
	}
	return p, nil
}

// noLinks refuses a path that goes through a symbolic link, or names one
// when final is set. os.Root would already keep a link inside the area, but
// a link inside the area could still lead into a session folder from
// outside it (or from one session folder into another), and a path must
// mean what it says. It stops quietly at the first missing element: what
// does not exist cannot be a link.
func noLinks(root *os.Root, rel string, final bool) error {
	if rel == "." {
		return nil
	}
	elems := strings.Split(rel, "/")
	p := ""
	for i, e := range elems {
		p = path.Join(p, e)
		if i == len(elems)-1 && !final {
			return nil
		}
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			if isNotDir(err) {
				return desk.Errorf(desk.ENOTFOUND, "/%s: a parent of it is a file, not a folder", rel)
			}
			return diskerr.Discarded("check path", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if p == rel {
				return desk.Errorf(desk.EFORBIDDEN, "/%s is a symbolic link; the file API never follows links", rel)
			}
			return desk.Errorf(desk.EFORBIDDEN, "/%s goes through a symbolic link (/%s); the file API never follows links", rel, p)
		}
	}
	return nil
}

// splitSession recognises paths in the sessions folder: "sessions" itself
// (ses == ""), a session folder (rest == "") or a file in one.
func splitSession(rel string) (ses, rest string, ok bool) {
	if rel == SessionsDir {
		return "", "", true
	}
	after, found := strings.CutPrefix(rel, SessionsDir+"/")
	if !found {
		return "", "", false
	}
	ses, rest, _ = strings.Cut(after, "/")
	return ses, rest, true
}

// sessionOf returns the session whose folder a write names, checking that
// it is a session of the area's actor. An actor token learns nothing about
// other actors' sessions (not found); the admin is told whose it is.
func (s *Service) sessionOf(ctx context.Context, a *area, ses string) (*desk.Session, error) {
	if !desk.HasPrefix(ses, desk.PrefixSession) {
		return nil, desk.Errorf(desk.EINVALID, "/%s holds one folder per session, named by its id (ses_…); %q is not a session id", SessionsDir, ses)
	}
	x, err := s.store.GetSession(ctx, ses)
	if err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "session %s not found", ses)
	}
	if x.WorkspaceID != a.ws.ID || x.Actor != a.actor.ID {
		if a.admin && x.WorkspaceID == a.ws.ID {
			return nil, desk.Errorf(desk.EFORBIDDEN, "session %s belongs to actor %s; its files are in that actor's area (actor=%s)", ses, x.Actor, x.Actor)
		}
		return nil, desk.Errorf(desk.ENOTFOUND, "session %s not found", ses)
	}
	return x, nil
}

func isNotDir(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
