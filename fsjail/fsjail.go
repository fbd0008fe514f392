// Package fsjail owns the guest file system: it maps guest paths (/context,
// /artifacts, /scratch, /workspace and declared host paths) to host files
// through os.Root and denies everything else. It never creates, chmods or
// removes a mount's host directory itself; callers decide what exists.
//
// Containment rests on two layers. Guest paths are first cleaned by string
// rules (Clean), which refuse "..", NUL bytes and host-style spellings, so a
// request can only ever name a path below one mount. Every file system access
// then goes through the mount's *os.Root, which resolves symbolic links inside
// the host directory and refuses any that lead out of it, so a link planted in
// a writable mount cannot reach another session's files or the host.
//
// Error messages name guest paths only. Host paths never appear in an *Error,
// and machine failures are wrapped without the host path as well, because
// agents see the messages and must not learn where their files live.
package fsjail

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/desk-runtime/desk"
)

// Mount is one guest directory backed by a host directory.
type Mount struct {
	Guest    string // absolute, clean guest path, e.g. "/artifacts", "/context/grp_01…", "/home/me/proj"
	Host     string // absolute host directory
	ReadOnly bool   // no writes anywhere below Guest
	// ReadOnlyDirs are mount-relative subdirectories or files (slash
	// separated, e.g. "immutable", ".git/config") that are read-only even
	// when the mount is writable; the directories above them cannot be
	// removed or renamed either.
	ReadOnlyDirs []string
	// Pin, when set, is the identity of the directory Host named when it
	// was declared (a workspace's host paths, which desk does not own).
	// Every open checks that Host is still that directory and was not
	// replaced by a symbolic link; a zero Pin refuses the mount.
	Pin *FileID
}

// Jail is a set of mounts forming one guest file system. The *os.Root of a
// mount is opened on first use and cached until Close, so that a mount whose
// host directory appears later (a scratch directory, say) becomes usable
// without rebuilding the jail. A Jail is safe for concurrent use.
type Jail struct {
	mounts  []Mount        // sorted by Guest; never modified after New
	byGuest map[string]int // mount Guest → index in mounts

	mu     sync.Mutex
	roots  []*os.Root // roots[i] is the opened root of mounts[i], or nil
	closed bool
}

// New validates the mounts and returns a jail. Guest paths must be absolute
// and clean (see Clean), must not be "/" and must not repeat; no mount may be
// nested inside another one's guest path, because a nested mount would make
// the answer to "which rule holds here" depend on lookup order. Host paths
// must be absolute directory names without NUL bytes; ReadOnlyDirs must be
// clean, relative and slash separated. Any violation is EINVALID. A mount
// whose host directory does not exist is allowed: operations under it answer
// ENOTFOUND until the directory appears.
func New(mounts []Mount) (*Jail, error) {
	ms := make([]Mount, len(mounts))
	for i, m := range mounts {
		g, err := Clean(m.Guest)
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "mount %q: %s", m.Guest, desk.ErrorMessage(err))
		}
		if g != m.Guest {
			return nil, desk.Errorf(desk.EINVALID, "mount %q: guest path is not clean (want %q)", m.Guest, g)
		}
		if g == "/" {
			return nil, desk.Errorf(desk.EINVALID, "mount %q: the guest root cannot be a mount", m.Guest)
		}
		if m.Host == "" || strings.IndexByte(m.Host, 0) >= 0 || !filepath.IsAbs(m.Host) {
			// The host path is deliberately not quoted: it must not reach
			// an agent even through a configuration error.
			return nil, desk.Errorf(desk.EINVALID, "mount %q: host directory must be an absolute path without NUL bytes", m.Guest)
		}
		ro := make([]string, 0, len(m.ReadOnlyDirs))
		for _, d := range m.ReadOnlyDirs {
			c, err := Clean("/" + d)
			if d == "" || err != nil || c != "/"+d {
				return nil, desk.Errorf(desk.EINVALID, "mount %q: read-only directory %q must be a clean relative path", m.Guest, d)
			}
			ro = append(ro, d)
		}
		ms[i] = Mount{Guest: g, Host: filepath.Clean(m.Host), ReadOnly: m.ReadOnly, ReadOnlyDirs: ro}
		if m.Pin != nil {
			pin := *m.Pin
			ms[i].Pin = &pin
		}
	}
	slices.SortFunc(ms, func(a, b Mount) int { return strings.Compare(a.Guest, b.Guest) })
	j := &Jail{mounts: ms, byGuest: make(map[string]int, len(ms)), roots: make([]*os.Root, len(ms))}
	for i, m := range ms {
		if _, dup := j.byGuest[m.Guest]; dup {
			return nil, desk.Errorf(desk.EINVALID, "mount %q is declared twice", m.Guest)
		}
		j.byGuest[m.Guest] = i
	}
	// After sorting, a mount nested inside another one follows it, though
	// not necessarily immediately ("/a", "/a-b", "/a/c"), so every pair is
	// compared; the number of mounts is small.
	for i, a := range ms {
		for _, b := range ms[i+1:] {
			if under(b.Guest, a.Guest) {
				return nil, desk.Errorf(desk.EINVALID, "mount %q is nested inside mount %q; nested mounts are not supported", b.Guest, a.Guest)
			}
		}
	}
	return j, nil
}

// Close closes every opened os.Root. Later operations on the jail fail with
// EUNAVAILABLE. Close may be called more than once.
func (j *Jail) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	var errs []error
	for i, r := range j.roots {
		if r != nil {
			if err := r.Close(); err != nil {
				errs = append(errs, machineErr("close mount", j.mounts[i].Guest, err))
			}
			j.roots[i] = nil
		}
	}
	return errors.Join(errs...)
}

// Mounts returns a copy of the mounts, sorted by guest path.
func (j *Jail) Mounts() []Mount {
	out := make([]Mount, len(j.mounts))
	for i, m := range j.mounts {
		m.ReadOnlyDirs = slices.Clone(m.ReadOnlyDirs)
		out[i] = m
	}
	return out
}

// Resolved is a guest path resolved to its mount.
type Resolved struct {
	Guest   string // clean guest path
	Mount   Mount  // the mount that holds it (zero Mount for virtual directories)
	Rel     string // mount-relative path, "." for the mount root (os.Root/fs.FS style, slash separated)
	Virtual bool   // true for "/" and for intermediate directories above mounts such as "/context" or "/home"
}

// Resolve cleans guest and finds its mount: the mount whose Guest equals it
// or is its prefix at a "/" boundary. "/" and the directories above mounts
// are Virtual. Anything else is EFORBIDDEN: it lies outside the guest file
// system. Resolve is pure string work; it does not touch the disk.
func (j *Jail) Resolve(guest string) (Resolved, error) {
	g, err := Clean(guest)
	if err != nil {
		return Resolved{}, err
	}
	if i, ok := j.mountOf(g); ok {
		m := j.mounts[i]
		m.ReadOnlyDirs = slices.Clone(m.ReadOnlyDirs)
		rel := "."
		if g != m.Guest {
			rel = g[len(m.Guest)+1:]
		}
		return Resolved{Guest: g, Mount: m, Rel: rel}, nil
	}
	if j.isVirtual(g) {
		return Resolved{Guest: g, Rel: ".", Virtual: true}, nil
	}
	return Resolved{}, desk.Errorf(desk.EFORBIDDEN, "%s is outside the guest file system", g)
}

// mountOf returns the index of the mount holding the clean guest path g.
func (j *Jail) mountOf(g string) (int, bool) {
	// Mounts are not nested, so at most one mount can hold g, and it is
	// one of g's ancestors (or g itself): walk up and look each one up.
	for p := g; p != "/"; p = parent(p) {
		if i, ok := j.byGuest[p]; ok {
			return i, true
		}
	}
	return 0, false
}

// isVirtual reports whether the clean guest path g is "/" or lies strictly
// above at least one mount.
func (j *Jail) isVirtual(g string) bool {
	if g == "/" {
		return true
	}
	for _, m := range j.mounts {
		if strings.HasPrefix(m.Guest, g+"/") {
			return true
		}
	}
	return false
}

// Root returns the cached *os.Root of the mount holding a resolved path, for
// reads. The jail owns the root: callers must not close it. A virtual path
// has no root (EINVALID); a mount whose host directory is missing answers
// ENOTFOUND.
func (j *Jail) Root(r Resolved) (*os.Root, error) {
	if r.Virtual {
		return nil, desk.Errorf(desk.EINVALID, "%s is a virtual directory and has no files of its own", r.Guest)
	}
	i, ok := j.byGuest[r.Mount.Guest]
	if !ok {
		return nil, desk.Errorf(desk.EINVALID, "%s does not belong to a mount of this guest file system", r.Guest)
	}
	return j.rootOf(i, r.Guest)
}

// rootOf returns the root of mounts[i], opening and caching it on first use.
// guest names the path being worked on, for error messages.
func (j *Jail) rootOf(i int, guest string) (*os.Root, error) {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil, errClosed()
	}
	if r := j.roots[i]; r != nil {
		j.mu.Unlock()
		return r, nil
	}
	j.mu.Unlock()

	// The directory is opened without holding the lock, so that a slow
	// file system stalls only the callers that need this mount. Two callers
	// may race to open it; the loser closes its copy.
	var r *os.Root
	var err error
	if j.mounts[i].Pin != nil {
		r, err = openPinned(j.mounts[i], guest)
	} else if r, err = os.OpenRoot(j.mounts[i].Host); err != nil {
		err = mapErr("open mount", guest, err)
	}
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		r.Close()
		return nil, errClosed()
	}
	if existing := j.roots[i]; existing != nil {
		r.Close()
		return existing, nil
	}
	j.roots[i] = r
	return r, nil
}

func errClosed() error {
	return desk.Errorf(desk.EUNAVAILABLE, "the guest file system is closed")
}

// WorkDir returns the guest working directory for a command: explicit cwd >
// primary root > scratch > artifacts (Wesclaw INV-IO-03). Empty strings mean
// "not available". The chosen directory must resolve in the jail, and its
// error is returned otherwise: an unresolvable explicit cwd is the caller's
// mistake, and an unresolvable fallback is a wiring bug that must not be
// papered over by silently choosing a different directory. When nothing is
// available the answer is EINVALID. WorkDir does not touch the disk.
func (j *Jail) WorkDir(explicit, primaryRoot, scratch, artifacts string) (string, error) {
	for _, dir := range []string{explicit, primaryRoot, scratch, artifacts} {
		if dir == "" {
			continue
		}
		r, err := j.Resolve(dir)
		if err != nil {
			return "", err
		}
		return r.Guest, nil
	}
	return "", desk.Errorf(desk.EINVALID, "no working directory is available: no cwd, primary root, scratch or artifacts")
}

// joinGuest turns a mount-relative path back into a guest path.
func joinGuest(mountGuest, rel string) string {
	if rel == "." || rel == "" {
		return mountGuest
	}
	return mountGuest + "/" + rel
}

// joinRel joins two mount-relative paths.
func joinRel(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

// under reports whether the slash-separated path p equals dir or lies below
// it at a "/" boundary.
func under(p, dir string) bool {
	if dir == "." {
		return true
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// parent returns the parent of a clean absolute guest path.
func parent(g string) string {
	i := strings.LastIndexByte(g, '/')
	if i <= 0 {
		return "/"
	}
	return g[:i]
}

// base returns the last element of a clean absolute guest path ("/" for "/").
func base(g string) string {
	if g == "/" {
		return "/"
	}
	return g[strings.LastIndexByte(g, '/')+1:]
}
