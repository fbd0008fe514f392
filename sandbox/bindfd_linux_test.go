package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// hostPath makes a declared host path (a directory outside the home with
// a.txt in it) and returns it with its pin, as hostpath.Check records it.
func hostPath(t *testing.T) (string, *fsjail.FileID) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "proj")
	write(t, filepath.Join(dir, "a.txt"), "declared\n")
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := fsjail.IdentityOf(fi)
	if !ok {
		t.Skip("this platform reports no inodes")
	}
	return dir, &id
}

// TestBubblewrapBindsOpenedDirectory: a declared host path swapped for a
// symbolic link to desk's home after desk opened it (after every check,
// before bwrap mounts anything) shows the command the directory that was
// declared and checked, never the link's target; and a later run, which
// opens the path again, refuses it with the *fsjail.SwappedError. When the
// sandbox bound mounts by path, the command read the admin token here.
func TestBubblewrapBindsOpenedDirectory(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	proj, pin := hostPath(t)
	var once sync.Once
	b.opened = func() {
		once.Do(func() {
			if err := os.Rename(proj, proj+".declared"); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(h.root, proj); err != nil {
				t.Error(err)
			}
		})
	}
	s := h.spec(`cat /home/me/proj/a.txt; cat /home/me/proj/admin.token; echo w > /home/me/proj/new.txt; ls /home/me/proj`)
	s.Mounts = append(slices.Clone(s.Mounts), Mount{Guest: "/home/me/proj", Host: proj, Writable: true, Pin: pin})
	res := run(t, b, s)
	if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "workspaces") {
		t.Fatalf("the command saw desk's home through the swapped host path: %q", res.Stdout)
	}
	if want := "declared\n"; !strings.HasPrefix(res.Stdout, want) {
		t.Errorf("stdout %q, want it to start with %q (the declared directory's file)", res.Stdout, want)
	}
	if got := readHost(t, filepath.Join(proj+".declared", "new.txt")); got != "w\n" {
		t.Errorf("the write landed elsewhere: declared/new.txt = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(h.root, "new.txt")); err == nil {
		t.Error("the command wrote into desk's home")
	}

	// The next run opens the path again and finds the link.
	_, err := b.Run(t.Context(), s, nil)
	var sw *fsjail.SwappedError
	if !errors.As(err, &sw) || !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("run over the swapped host path: %v; want a SwappedError (EFORBIDDEN)", err)
	}
	if strings.Contains(err.Error(), proj) || strings.Contains(err.Error(), h.root) {
		t.Errorf("the error names a host path: %v", err)
	}

	// Another directory in its place (a different inode) is refused too.
	if err := os.Remove(proj); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(proj, "a.txt"), "impostor\n")
	if _, err := b.Run(t.Context(), s, nil); !errors.As(err, &sw) {
		t.Fatalf("run over a replaced host path: %v; want a SwappedError", err)
	}
}

// TestBubblewrapRefusesLinkedMount: a mount desk owns (here /workspace)
// whose host directory became a symbolic link is never bound: the run is
// refused before anything starts.
func TestBubblewrapRefusesLinkedMount(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	if err := os.Rename(h.workspace, h.workspace+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.root, h.workspace); err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(t.Context(), h.spec(`cat /workspace/admin.token`), nil)
	if !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("run with /workspace a link: %v (result %+v); want EFORBIDDEN", err, res)
	}
	if strings.Contains(err.Error(), h.root) {
		t.Errorf("the error names a host path: %v", err)
	}
}

// TestBubblewrapReadOnlyHostPath: a read-only host path is bound with
// --ro-bind-fd and stays read-only (also against a remount), a writable
// one with --bind-fd; no mount's host path is on bwrap's command line.
func TestBubblewrapReadOnlyHostPath(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	data, pin := hostPath(t)
	s := h.spec(`cat /srv/data/a.txt`)
	s.Mounts = append(slices.Clone(s.Mounts), Mount{Guest: "/srv/data", Host: data, Pin: pin})
	if res := run(t, b, s); res.ExitCode != 0 || res.Stdout != "declared\n" {
		t.Fatalf("read: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for _, cmd := range []string{
		`echo x > /srv/data/new.txt`,
		`echo x > /srv/data/a.txt`,
		`rm /srv/data/a.txt`,
		`mount -o remount,rw,bind /srv/data; echo x > /srv/data/new.txt`,
	} {
		s.Command = cmd
		if res := run(t, b, s); res.ExitCode == 0 {
			t.Errorf("%q succeeded on a read-only host path", cmd)
		}
	}
	if got := readHost(t, filepath.Join(data, "a.txt")); got != "declared\n" {
		t.Errorf("a.txt = %q", got)
	}
	if _, err := os.Lstat(filepath.Join(data, "new.txt")); err == nil {
		t.Error("new.txt was written into the read-only host path")
	}

	p, err := prepare(s, false)
	if err != nil {
		t.Fatal(err)
	}
	args := bwrapArgs(p, true, nil)
	for i, m := range p.mounts {
		op := "--ro-bind-fd"
		if m.Writable {
			op = "--bind-fd"
		}
		want := []string{op, strconv.Itoa(fdMounts + i), m.Guest}
		if !slices.ContainsFunc(windows(args, 3), func(w []string) bool { return slices.Equal(w, want) }) {
			t.Errorf("mount %s: no %v in bwrap's arguments", m.Guest, want)
		}
		if slices.Contains(args, m.Host) {
			t.Errorf("mount %s: its host path is on bwrap's command line", m.Guest)
		}
	}
}

func windows(a []string, n int) [][]string {
	var out [][]string
	for i := 0; i+n <= len(a); i++ {
		out = append(out, a[i:i+n])
	}
	return out
}
