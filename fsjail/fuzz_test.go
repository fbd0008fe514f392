package fsjail

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// FuzzGuestPath feeds arbitrary guest paths to every operation of a jail over
// the shared test tree. Whatever the input, nothing may panic, no read may
// return the secret marker (which exists only outside the mounts), and every
// success must name a host file inside the mount that answered.
//
// Run it with:
//
//	go test -fuzz=FuzzGuestPath -fuzztime=20s ./fsjail
func FuzzGuestPath(f *testing.F) {
	// The tree is built once per fuzz process. The marker is random so that
	// no test file or corpus entry can contain it by accident.
	var rb [8]byte
	rand.Read(rb[:])
	marker := "FUZZ-SECRET-" + hex.EncodeToString(rb[:])
	tr := buildTree(f, f.TempDir(), marker)
	f.Cleanup(func() { tr.jail.Close() })

	for _, s := range []string{
		"/", "/artifacts", "/artifacts/a.txt", "/artifacts/ok_link",
		"/artifacts/evil_abs", "/artifacts/evil_rel", "/artifacts/evil_dir",
		"/artifacts/evil_dir/secret.txt", "/artifacts/ro_link/lock.txt",
		"/artifacts/../x", "/artifacts/./a.txt", "/etc/passwd", "/home",
		`C:\x`, "~/x", "a.txt", "", "/artifacts/a\x00.txt", "/artifacts/\xff",
		"/context", "/context/grp_01/item.md", "/scratch/tmp.txt", "/workspace/README.md",
		tr.hostRO + "/ro.txt", tr.hostRW + "/escape", tr.hostRW + "/to_root/rw.txt",
		filepath.ToSlash(tr.secret),
		filepath.ToSlash(filepath.Join(tr.dir, "home", "ses_B", "artifacts", "secret.txt")),
		tr.hostRW + "/../outside/secret.txt",
	} {
		f.Add(s)
	}

	mounts := tr.jail.Mounts()
	f.Fuzz(func(t *testing.T, guest string) {
		// inside checks that a successful answer about the clean guest path
		// g is backed by a host file inside g's own mount.
		inside := func(op, g string) {
			t.Helper()
			r, err := tr.jail.Resolve(g)
			if err != nil {
				t.Fatalf("%s(%q) succeeded but %q does not resolve: %v", op, guest, g, err)
			}
			if r.Virtual {
				return
			}
			host := filepath.Join(r.Mount.Host, filepath.FromSlash(r.Rel))
			if !hostInside(host, r.Mount.Host) {
				t.Fatalf("%s(%q) succeeded for %q, whose host file lies outside its mount", op, guest, g)
			}
		}
		checkMessage := func(op string, err error) {
			t.Helper()
			if err == nil {
				return
			}
			if strings.Contains(err.Error(), marker) {
				t.Fatalf("%s(%q) error carries the secret: %v", op, guest, err)
			}
			if desk.ErrorCode(err) == desk.EINTERNAL {
				t.Fatalf("%s(%q) failed as a machine error: %v", op, guest, err)
			}
		}

		e, err := tr.jail.Stat(guest)
		checkMessage("Stat", err)
		if err == nil {
			inside("Stat", e.Path)
		}

		es, err := tr.jail.ReadDir(guest)
		checkMessage("ReadDir", err)
		for _, e := range es {
			inside("ReadDir", e.Path)
		}

		file, err := tr.jail.Open(guest)
		checkMessage("Open", err)
		if err == nil {
			b, rerr := io.ReadAll(file)
			file.Close()
			if rerr != nil {
				t.Fatalf("read %q: %v", guest, rerr)
			}
			if bytes.Contains(b, []byte(marker)) {
				t.Fatalf("Open(%q) returned the secret", guest)
			}
			r, _ := tr.jail.Resolve(guest)
			inside("Open", r.Guest)
		}

		r, root, err := tr.jail.Writable(guest)
		checkMessage("Writable", err)
		if err == nil {
			if root == nil || r.Virtual || r.Mount.ReadOnly || r.Rel == "." {
				t.Fatalf("Writable(%q) = %+v, root %v", guest, r, root)
			}
			for _, m := range mounts {
				if m.Guest == r.Mount.Guest && m.ReadOnly {
					t.Fatalf("Writable(%q) allowed a write in read-only mount %s", guest, m.Guest)
				}
			}
			for _, d := range r.Mount.ReadOnlyDirs {
				if under(r.Rel, d) {
					t.Fatalf("Writable(%q) allowed a write in read-only directory %s", guest, d)
				}
			}
			// The context groups and the read-only host path are on the
			// host as writable as anything else; only the jail guards them.
			host := filepath.Join(r.Mount.Host, filepath.FromSlash(r.Rel))
			for _, ro := range []string{tr.hostRO, filepath.Join(tr.dir, "context"), filepath.Join(r.Mount.Host, "immutable")} {
				if hostInside(host, ro) {
					t.Fatalf("Writable(%q) leads into read-only %s", guest, ro)
				}
			}
			inside("Writable", r.Guest)
		}
	})
}
