package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk/internal/ownerlock"
)

// The sandbox's /etc as one mount. Binding each entry of etcEntries on
// its own costs bubblewrap a bind and a read-only remount per entry:
// about 30 mounts, 7 ms of every command's start on the development
// machine (docs/benchmarks.md). Instead desk keeps a private copy of
// exactly those entries (files copied, symbolic links recreated as links,
// directories walked) with empty placeholders for the files each run
// binds over it (passwd, group, hosts, nsswitch.conf, and resolv.conf
// with the network), and binds the copy read-only at /etc: one mount.
//
// The copy is checked against the host at most once a second (the size,
// mode and modification time of every file it holds) and rebuilt when
// something changed, so a package that updates the certificates or the
// linker cache is seen within a second. It lives in a directory only
// desk's user can enter (os.MkdirTemp: 0700), named after desk's pid;
// copies a dead desk left are removed when the first one is made. When a
// copy cannot be made, or would be too big, the entries are bound one by
// one as before (etcBinds).

const (
	// etcMaxBytes bounds the copy; a host whose entries hold more is
	// served by binding them one by one.
	etcMaxBytes = 32 << 20
	// etcRecheck is how often the copy is compared with the host.
	etcRecheck = time.Second
)

// etcPlaceholders are the files a run binds over the copy.
var etcPlaceholders = []string{"passwd", "group", "hosts", "nsswitch.conf"}

type etcCopy struct {
	mu      sync.Mutex
	dir     map[bool]string // by network: the copy's directory
	sig     string          // the host entries' signature the copies were made from
	checked time.Time
	broken  bool // a copy failed: bind one by one from now on
	// locks hold the private directories (by the copy's directory) as
	// this process's, so another desk's sweep leaves them (ownerlock).
	locks map[string]*os.File
}

var etcCache = &etcCopy{dir: map[bool]string{}, locks: map[string]*os.File{}}

// etcSnapshot returns the directory to bind at /etc for a command with or
// without the network, or "" when the entries must be bound one by one.
func etcSnapshot(network bool) string {
	c := etcCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken {
		return ""
	}
	if time.Since(c.checked) < etcRecheck && c.dir[network] != "" {
		return c.dir[network]
	}
	files, sig, size := etcSources()
	c.checked = time.Now()
	if size > etcMaxBytes {
		c.broken = true
		return ""
	}
	if sig != c.sig {
		for k, d := range c.dir {
			os.RemoveAll(filepath.Dir(d)) // the private directory around it
			if l := c.locks[d]; l != nil {
				l.Close()
			}
			delete(c.locks, d)
			delete(c.dir, k)
		}
		c.sig = sig
	}
	if d := c.dir[network]; d != "" {
		return d
	}
	d, lock, err := makeEtcCopy(files, network)
	if err != nil {
		c.broken = true
		return ""
	}
	c.dir[network], c.locks[d] = d, lock
	return d
}

// etcSources lists what etcEntries match on the host, every file under
// them, with a signature of their sizes, modes and times.
func etcSources() (files []string, sig string, size int64) {
	h := sha256.New()
	for _, pat := range etcEntries {
		matches, _ := filepath.Glob(filepath.Join("/etc", pat))
		for _, m := range matches {
			filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return nil
				}
				fi, err := d.Info()
				if err != nil {
					return nil
				}
				files = append(files, p)
				if fi.Mode().IsRegular() {
					size += fi.Size()
				}
				fmt.Fprintf(h, "%s\x00%d\x00%o\x00%d\n", p, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
				return nil
			})
		}
	}
	return files, hex.EncodeToString(h.Sum(nil)), size
}

// makeEtcCopy copies files (host paths under /etc, parents before their
// children) into a new directory etc inside a private one (0700: only
// desk's user may enter it), with the placeholders. A symbolic link is
// recreated as a link when it leads into the system directories the
// sandbox shows (/usr, …); one that leads to a file elsewhere is copied
// as that file (as bubblewrap's bind showed it); one that leads to a
// directory elsewhere fails the copy (the entries are then bound one by
// one).
func makeEtcCopy(files []string, network bool) (_ string, _ *os.File, err error) {
	removeStaleEtc()
	priv, err := os.MkdirTemp("", fmt.Sprintf("desk-sandbox-etc-%d-", os.Getpid()))
	if err != nil {
		return "", nil, err
	}
	lock, err := ownerlock.Hold(priv)
	if err != nil {
		os.RemoveAll(priv)
		return "", nil, err
	}
	dir := filepath.Join(priv, "etc")
	fail := func(err error) (string, *os.File, error) {
		lock.Close()
		os.RemoveAll(priv)
		return "", nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail(err)
	}
	for _, p := range files {
		rel, err := filepath.Rel("/etc", p)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fail(err)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			continue // vanished meanwhile
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				continue
			}
			resolved, err := filepath.EvalSymlinks(p)
			if err != nil {
				// Dangling on the host: dangling in the sandbox too.
				if err := os.Symlink(target, dst); err != nil {
					return fail(err)
				}
				continue
			}
			if inSystemDir(resolved) {
				if err := os.Symlink(target, dst); err != nil {
					return fail(err)
				}
				continue
			}
			rfi, err := os.Stat(resolved)
			if err != nil || !rfi.Mode().IsRegular() {
				return fail(fmt.Errorf("%s leads to %s, which the copy cannot hold", p, resolved))
			}
			if err := copyRegular(resolved, dst, rfi.Mode().Perm()); err != nil && !os.IsPermission(err) {
				return fail(err)
			}
		case fi.IsDir():
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fail(err)
			}
		case fi.Mode().IsRegular():
			if err := copyRegular(p, dst, fi.Mode().Perm()); err != nil && !os.IsPermission(err) {
				return fail(err) // an unreadable file is left out: unreadable in the sandbox too
			}
		}
	}
	places := etcPlaceholders
	if network {
		places = append(places[:len(places):len(places)], "resolv.conf")
	}
	for _, name := range places {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			return fail(err)
		}
	}
	return dir, lock, nil
}

func copyRegular(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm&0o755|0o444)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// removeStaleEtc removes the copies of desk processes that are gone: a
// copy whose owner lock nobody holds. A pid in the name cannot say so: a
// desk in another PID namespace sharing /tmp (a container) has pids this
// one cannot see, and removing its copy failed its sandboxed commands.
// The copies of this process are locked by it and never swept.
func removeStaleEtc() {
	ownerlock.Sweep(os.TempDir(), "desk-sandbox-etc-", "")
}
