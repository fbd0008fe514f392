package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func plant(t *testing.T, p string, m fs.FileMode) {
	t.Helper()
	write(t, p, "#!/bin/sh\n")
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, p); got != m {
		t.Fatalf("planted %s with mode %v, got %v", p, m, got)
	}
}

// TestSweepSetid: the sweep clears the bits of every regular file below
// its root, however deep or hidden, follows no link out of it, keeps
// setgid directories and everything else as it was.
func TestSweepSetid(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "home")
	outside := filepath.Join(t.TempDir(), "outside-suid")
	plant(t, outside, 0o755|fs.ModeSetuid)

	suid := filepath.Join(root, "workspaces/ws1/checkout/suid")
	sgid := filepath.Join(root, "workspaces/ws1/checkout/sub/sgid")
	both := filepath.Join(root, "runtime-state/ws1/rt/both")
	sticky := filepath.Join(root, "workspaces/ws1/.scratch/e1/sticky")
	plain := filepath.Join(root, "workspaces/ws1/checkout/plain")
	deep := filepath.Join(root, "workspaces/ws1/workspace/a", strings.Repeat("d/", 40), "deep")
	hidden := filepath.Join(root, "workspaces/ws1/checkout/locked/hidden")
	plant(t, suid, 0o755|fs.ModeSetuid)
	plant(t, sgid, 0o710|fs.ModeSetgid)
	plant(t, both, 0o700|fs.ModeSetuid|fs.ModeSetgid)
	plant(t, sticky, 0o755|fs.ModeSticky|fs.ModeSetuid)
	plant(t, plain, 0o640)
	plant(t, deep, 0o755|fs.ModeSetuid)
	plant(t, hidden, 0o755|fs.ModeSetuid)
	// A directory the command locked (search for others only, so a host
	// user could still run the file by name).
	locked := filepath.Dir(hidden)
	if err := os.Chmod(locked, 0o111); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o755)
	sgdir := filepath.Join(root, "workspaces/ws1/checkout/shared")
	if err := os.Mkdir(sgdir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sgdir, 0o2775|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	// Links to setuid files, out of the tree and into it, are not
	// followed (the one inside is cleared as itself).
	if err := os.Symlink(outside, filepath.Join(root, "workspaces/ws1/checkout/out-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(root, "workspaces/ws1/checkout/out-dir-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(suid, filepath.Join(root, "workspaces/ws1/checkout/in-link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(root, "workspaces/ws1/checkout/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}

	s, err := SweepSetid(root, filepath.Join(root, "does-not-exist"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Cleared != 6 || len(s.Paths) != 6 {
		t.Errorf("cleared %d (%v), want 6", s.Cleared, s.Paths)
	}
	if s.Skipped != 0 {
		t.Errorf("skipped %d", s.Skipped)
	}
	for p, want := range map[string]fs.FileMode{
		suid: 0o755, sgid: 0o710, both: 0o700, sticky: 0o755 | fs.ModeSticky, plain: 0o640, deep: 0o755,
		outside: 0o755 | fs.ModeSetuid,
		sgdir:   0o775 | fs.ModeSetgid | fs.ModeDir,
		locked:  0o111 | fs.ModeDir,
	} {
		if p == locked {
			continue // checked below, after the file in it
		}
		if got := mode(t, p); got != want {
			t.Errorf("%s: mode %v, want %v", p, got, want)
		}
	}
	if got := mode(t, locked); got != 0o111|fs.ModeDir {
		t.Errorf("the locked directory's mode is %v, want it given back (d--x--x--x)", got)
	}
	os.Chmod(locked, 0o755)
	if got := mode(t, hidden); got != 0o755 {
		t.Errorf("the file in the locked directory: mode %v", got)
	}
	// A second sweep finds nothing.
	if s, err := SweepSetid(root); err != nil || s.Cleared != 0 {
		t.Errorf("second sweep: %+v %v", s, err)
	}
}

// TestSweepSetidUnprivileged runs TestSweepSetid as an unprivileged user
// when the tests run as root: root reads any directory, so only an
// ordinary user takes the path that opens a directory it locked.
func TestSweepSetidUnprivileged(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("TestSweepSetid runs unprivileged already")
	}
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir's are 0700
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "sandbox.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestSweepSetid$", "-test.v")
	cmd.Env = []string{"TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSweepSetid ") {
		t.Fatalf("TestSweepSetid as uid 65534: %v\n%s", err, out)
	}
}

// TestSweepSetidRootLink: the root itself may be a link (DESK_HOME made
// as one); the post-run strip's roots may not.
func TestSweepSetidRootLink(t *testing.T) {
	t.Parallel()
	real := filepath.Join(t.TempDir(), "real")
	f := filepath.Join(real, "suid")
	plant(t, f, 0o755|fs.ModeSetuid)
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := stripSetid([]Mount{{Guest: "/workspace", Host: link, Writable: true}}); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, f); got&fs.ModeSetuid == 0 {
		t.Fatalf("the strip followed a linked mount root")
	}
	if s, err := SweepSetid(link); err != nil || s.Cleared != 1 {
		t.Fatalf("sweep through the home link: %+v %v", s, err)
	}
	if got := mode(t, f); got != 0o755 {
		t.Errorf("mode %v after the sweep", got)
	}
}

// BenchmarkSweepSetid sweeps a tree of 100,000 files (100 directories of
// 1,000; ten of them setuid, re-planted after each sweep), the cost the
// startup sweep adds per 100k files in DESK_HOME.
func BenchmarkSweepSetid(b *testing.B) {
	root := b.TempDir()
	var planted []string
	for d := range 100 {
		dir := filepath.Join(root, fmt.Sprintf("ws%d/checkout/src", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 1000 {
			p := filepath.Join(dir, fmt.Sprintf("f%d.go", f))
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				b.Fatal(err)
			}
			if f == 0 && d%10 == 0 {
				planted = append(planted, p)
			}
		}
	}
	for b.Loop() {
		b.StopTimer()
		for _, p := range planted {
			os.Chmod(p, 0o755|fs.ModeSetuid)
		}
		b.StartTimer()
		s, err := SweepSetid(root)
		if err != nil || s.Cleared != int64(len(planted)) || s.Entries < 100_000 {
			b.Fatalf("%+v %v", s, err)
		}
	}
}
