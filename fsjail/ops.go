package fsjail

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/desk-runtime/desk"
)

// Entry describes one file or directory as the guest sees it.
type Entry struct {
	Path     string    `json:"path"` // guest path
	Name     string    `json:"name"`
	Type     string    `json:"type"` // "file" or "dir"
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	ReadOnly bool      `json:"read_only"`
}

// Entry types.
const (
	TypeFile = "file"
	TypeDir  = "dir"
)

// maxLinks bounds the symbolic links followed by canonical. It is generous
// compared with os.Root's limit of 8 per lookup because canonical follows
// the links of every element of a path, not only of one lookup.
const maxLinks = 40

// Stat describes the file or directory at guest, following symbolic links
// that stay inside the mount. Virtual directories are described as read-only
// directories. Special files (FIFOs, sockets, devices) are EINVALID: the
// guest file system has only files and directories.
func (j *Jail) Stat(guest string) (Entry, error) {
	r, err := j.Resolve(guest)
	if err != nil {
		return Entry{}, err
	}
	if r.Virtual {
		return virtualEntry(r.Guest), nil
	}
	root, err := j.Root(r)
	if err != nil {
		return Entry{}, err
	}
	fi, err := root.Stat(r.Rel)
	if err != nil {
		return Entry{}, mapErr("stat", r.Guest, err)
	}
	ro, err := readOnlyAt(r.Mount, root, r.Rel, "")
	if err != nil {
		return Entry{}, mapErr("stat", r.Guest, err)
	}
	e, ok := makeEntry(r.Guest, fi, ro)
	if !ok {
		return Entry{}, desk.Errorf(desk.EINVALID, "%s is not a regular file or directory", r.Guest)
	}
	return e, nil
}

// ReadDir lists a directory sorted by name. For a virtual directory it lists
// the next path element of the mounts below it, as directories; a mount whose
// host directory does not exist yet is left out, so that every listed entry
// can also be Stat-ed. Inside a mount, symbolic links are described by what
// they point to when that stays inside the mount; links that lead out,
// dangle or loop are omitted, never described, and so are special files.
func (j *Jail) ReadDir(guest string) ([]Entry, error) {
	r, err := j.Resolve(guest)
	if err != nil {
		return nil, err
	}
	if r.Virtual {
		return j.virtualDir(r.Guest)
	}
	root, err := j.Root(r)
	if err != nil {
		return nil, err
	}
	f, err := root.Open(r.Rel)
	if err != nil {
		return nil, mapErr("open", r.Guest, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, mapErr("stat", r.Guest, err)
	}
	if !fi.IsDir() {
		return nil, desk.Errorf(desk.EINVALID, "%s is not a directory", r.Guest)
	}
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, mapErr("readdir", r.Guest, err)
	}

	// The canonical form of the directory is computed once; only the
	// children that are links need their own resolution.
	canonDir := ""
	if needCanonical(r.Mount) {
		if canonDir, err = canonical(root, r.Rel); err != nil {
			return nil, mapErr("readdir", r.Guest, err)
		}
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		rel := joinRel(r.Rel, de.Name())
		p := joinGuest(r.Mount.Guest, rel)
		var info fs.FileInfo
		canon := ""
		if de.Type()&fs.ModeSymlink != 0 {
			// Whatever goes wrong with a link (it leads out, dangles,
			// loops), the entry cannot be described and is left out.
			if info, err = root.Stat(rel); err != nil {
				continue
			}
			if needCanonical(r.Mount) {
				if canon, err = canonical(root, rel); err != nil {
					continue
				}
			}
		} else {
			if info, err = root.Lstat(rel); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // removed since the listing was read
				}
				return nil, mapErr("stat", p, err)
			}
			if needCanonical(r.Mount) {
				canon = joinRel(canonDir, de.Name())
			}
		}
		ro, err := readOnlyAt(r.Mount, root, rel, canon)
		if err != nil {
			continue
		}
		// A link that replaced a plain entry after the listing was read
		// shows up here as a symlink FileInfo, which makeEntry refuses.
		if e, ok := makeEntry(p, info, ro); ok {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// virtualDir lists the virtual directory g.
func (j *Jail) virtualDir(g string) ([]Entry, error) {
	prefix := g + "/"
	if g == "/" {
		prefix = "/"
	}
	var out []Entry
	seen := make(map[string]bool)
	for i, m := range j.mounts {
		rest, ok := strings.CutPrefix(m.Guest, prefix)
		if !ok {
			continue
		}
		name, _, deeper := strings.Cut(rest, "/")
		if seen[name] {
			continue
		}
		if deeper {
			seen[name] = true
			out = append(out, virtualEntry(prefix+name))
			continue
		}
		root, err := j.rootOf(i, m.Guest)
		if desk.IsCode(err, desk.ENOTFOUND) {
			continue
		}
		if err != nil {
			return nil, err
		}
		fi, err := root.Stat(".")
		if err != nil {
			return nil, mapErr("stat", m.Guest, err)
		}
		seen[name] = true
		if e, ok := makeEntry(m.Guest, fi, m.ReadOnly); ok {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Open opens a regular file for reading through the mount's os.Root. A
// directory is EINVALID ("is a directory"), and so is a special file; a
// missing file is ENOTFOUND; a symbolic link that leads outside the mount, or
// any other os.Root escape, is EFORBIDDEN.
//
// The returned file's Name is its host path, as os.Root sets it; callers
// must not show it (or errors that embed it) to agents.
func (j *Jail) Open(guest string) (*os.File, error) {
	r, err := j.Resolve(guest)
	if err != nil {
		return nil, err
	}
	if r.Virtual {
		return nil, desk.Errorf(desk.EINVALID, "%s is a directory", r.Guest)
	}
	root, err := j.Root(r)
	if err != nil {
		return nil, err
	}
	// Stat first so that a FIFO or a device is refused without being
	// opened at all: opening can block (a FIFO without a writer) or have
	// side effects (some devices).
	fi, err := root.Stat(r.Rel)
	if err != nil {
		return nil, mapErr("stat", r.Guest, err)
	}
	if err := wantRegular(r.Guest, fi); err != nil {
		return nil, err
	}
	// The file may have been swapped between Stat and open. O_NONBLOCK
	// keeps a swapped-in FIFO from blocking the open, and the Stat of the
	// opened descriptor below is the check that counts.
	f, err := root.OpenFile(r.Rel, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, mapErr("open", r.Guest, err)
	}
	fi, err = f.Stat()
	if err == nil {
		err = wantRegular(r.Guest, fi)
	} else {
		err = mapErr("stat", r.Guest, err)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func wantRegular(guest string, fi fs.FileInfo) error {
	switch {
	case fi.IsDir():
		return desk.Errorf(desk.EINVALID, "%s is a directory", guest)
	case !fi.Mode().IsRegular():
		return desk.Errorf(desk.EINVALID, "%s is not a regular file", guest)
	}
	return nil
}

// Writable resolves guest for writing. It is EFORBIDDEN when the path is
// virtual, lies in a read-only mount, is at or below one of the mount's
// ReadOnlyDirs, is the mount root itself, or reaches any of these (or the
// outside) through a symbolic link. It returns the resolved path and the
// mount's *os.Root so the caller can write atomically through it (Create a
// temp file, fsync, Rename) without the path ever being re-interpreted as a
// host path. The root belongs to the jail; callers must not close it.
//
// The mount root is refused because the jail never creates, replaces or
// removes a mount's host directory; that is the callers' decision, taken
// outside the guest file system.
//
// ReadOnlyDirs are a policy check made at the time of the call. A guest that
// can run commands in a writable mount could swap a directory for a link
// afterwards, so read-only directories that must hold against such a guest
// should also be read-only on the host (which the caller arranges).
func (j *Jail) Writable(guest string) (Resolved, *os.Root, error) {
	r, err := j.Resolve(guest)
	if err != nil {
		return Resolved{}, nil, err
	}
	switch {
	case r.Virtual:
		return Resolved{}, nil, desk.Errorf(desk.EFORBIDDEN, "%s is read-only: it is a directory above the mounts, not a place to write", r.Guest)
	case r.Mount.ReadOnly:
		return Resolved{}, nil, roErr(r.Guest, r.Mount.Guest)
	case r.Rel == ".":
		return Resolved{}, nil, desk.Errorf(desk.EFORBIDDEN, "%s is the root of a mount and cannot be written, replaced or removed", r.Guest)
	}
	// The plain string check comes first so that the common refusal does
	// not depend on the host directory existing.
	for _, d := range r.Mount.ReadOnlyDirs {
		if under(r.Rel, d) {
			return Resolved{}, nil, roErr(r.Guest, joinGuest(r.Mount.Guest, d))
		}
		if under(d, r.Rel) {
			// Removing or renaming a directory above a read-only one
			// would take it along, to be written at its new name.
			return Resolved{}, nil, desk.Errorf(desk.EFORBIDDEN, "%s holds the read-only %s and cannot be replaced, renamed or removed", r.Guest, joinGuest(r.Mount.Guest, d))
		}
	}
	root, err := j.Root(r)
	if err != nil {
		return Resolved{}, nil, err
	}
	canon, err := canonical(root, r.Rel)
	if err != nil {
		return Resolved{}, nil, mapErr("resolve", r.Guest, err)
	}
	if canon == "." {
		return Resolved{}, nil, desk.Errorf(desk.EFORBIDDEN, "%s leads to the root of a mount, which cannot be written, replaced or removed", r.Guest)
	}
	hit, err := roDirHit(r.Mount, root, r.Rel, canon)
	if err != nil {
		return Resolved{}, nil, mapErr("resolve", r.Guest, err)
	}
	if hit != "" {
		return Resolved{}, nil, roErr(r.Guest, hit)
	}
	for _, d := range r.Mount.ReadOnlyDirs {
		if under(d, canon) {
			return Resolved{}, nil, desk.Errorf(desk.EFORBIDDEN, "%s holds the read-only %s and cannot be replaced, renamed or removed", r.Guest, joinGuest(r.Mount.Guest, d))
		}
	}
	return r, root, nil
}

// roErr says which read-only rule refuses a write to guest.
func roErr(guest, roPath string) error {
	if guest == roPath {
		return desk.Errorf(desk.EFORBIDDEN, "%s is read-only", guest)
	}
	return desk.Errorf(desk.EFORBIDDEN, "%s: %s is read-only", guest, roPath)
}

// needCanonical reports whether read-only checks in m need symbolic links
// resolved: only a writable mount with read-only subdirectories does.
func needCanonical(m Mount) bool { return !m.ReadOnly && len(m.ReadOnlyDirs) > 0 }

// readOnlyAt reports whether rel is read-only in m. canon is rel's canonical
// form when the caller has it, or "" to have it computed.
func readOnlyAt(m Mount, root *os.Root, rel, canon string) (bool, error) {
	if m.ReadOnly {
		return true, nil
	}
	if len(m.ReadOnlyDirs) == 0 {
		return false, nil
	}
	if canon == "" {
		var err error
		if canon, err = canonical(root, rel); err != nil {
			return false, err
		}
	}
	hit, err := roDirHit(m, root, rel, canon)
	return hit != "", err
}

// roDirHit returns the guest path of the read-only directory of m that holds
// rel, or "" if none does. Both rel and its canonical form canon are checked
// against both the declared directory and its own canonical form, so that
// neither a link to a read-only directory nor a read-only directory that is
// itself a link slips through.
func roDirHit(m Mount, root *os.Root, rel, canon string) (string, error) {
	for _, d := range m.ReadOnlyDirs {
		dc, err := canonical(root, d)
		if err != nil {
			// A read-only directory whose own link leads out or loops
			// guards nothing inside the mount; its literal path still does.
			dc = d
		}
		if under(rel, d) || under(canon, d) || under(rel, dc) || under(canon, dc) {
			return joinGuest(m.Guest, d), nil
		}
	}
	return "", nil
}

// canonical resolves the symbolic links of every existing element of the
// mount-relative path rel inside root and returns the resulting clean,
// link-free mount-relative path ("." for the root). Elements that do not
// exist are kept as written, so the path of a file about to be created has a
// canonical form too. A link that is absolute or climbs above the root is
// errEscape, as it is for os.Root.
func canonical(root *os.Root, rel string) (string, error) {
	todo := splitRel(rel)
	var done []string
	links := 0
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", errEscape
			}
			done = done[:len(done)-1]
			continue
		}
		p := joinRel(strings.Join(done, "/"), name)
		fi, err := root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			done = append(done, name)
			continue
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			done = append(done, name)
			continue
		}
		if links++; links > maxLinks {
			return "", syscall.ELOOP
		}
		target, err := root.Readlink(p)
		if err != nil {
			return "", err
		}
		if target == "" || target[0] == '/' || target[0] == os.PathSeparator {
			return "", errEscape
		}
		todo = append(splitRel(target), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

func splitRel(rel string) []string {
	if rel == "." || rel == "" {
		return nil
	}
	return strings.Split(rel, "/")
}

// makeEntry describes fi at guest path p. It reports false for anything but
// a regular file or a directory. Directories have size 0: the host's
// directory sizes describe its file system, not the guest's files.
func makeEntry(p string, fi fs.FileInfo, ro bool) (Entry, bool) {
	e := Entry{Path: p, Name: base(p), Modified: fi.ModTime().UTC(), ReadOnly: ro}
	switch {
	case fi.IsDir():
		e.Type = TypeDir
	case fi.Mode().IsRegular():
		e.Type = TypeFile
		e.Size = fi.Size()
	default:
		return Entry{}, false
	}
	return e, true
}

// virtualEntry describes a virtual directory: nothing can be written there.
func virtualEntry(g string) Entry {
	return Entry{Path: g, Name: base(g), Type: TypeDir, ReadOnly: true}
}
