package fsjail

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
)

func pinOf(t *testing.T, dir string) *FileID {
	t.Helper()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, ok := IdentityOf(fi)
	if !ok {
		t.Skip("this platform reports no inodes")
	}
	return &id
}

// TestPinnedMount: a pinned mount opens only while its host path is the
// declared directory itself: a symbolic link in its place (even to the
// same directory), another directory, or a zero pin is EFORBIDDEN, and a
// swap is a *SwappedError for the log.
func TestPinnedMount(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "proj")
	secret := filepath.Join(base, "secret")
	for _, d := range []string{dir, secret} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("declared"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secret, "a.txt"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	pin := pinOf(t, dir)
	read := func(p *FileID) (string, error) {
		j, err := New([]Mount{{Guest: "/srv/proj", Host: dir, Pin: p}})
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		f, err := j.Open("/srv/proj/a.txt")
		if err != nil {
			return "", err
		}
		defer f.Close()
		b := make([]byte, 64)
		n, _ := f.Read(b)
		return string(b[:n]), nil
	}
	if got, err := read(pin); err != nil || got != "declared" {
		t.Fatalf("the declared directory = %q, %v", got, err)
	}
	if _, err := read(&FileID{}); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("a zero pin = %v; want forbidden", err)
	}
	swap := func(to func()) {
		t.Helper()
		if err := os.Rename(dir, dir+".old"); err != nil {
			t.Fatal(err)
		}
		to()
		_, err := read(pin)
		var sw *SwappedError
		if !desk.IsCode(err, desk.EFORBIDDEN) || !errors.As(err, &sw) || sw.Guest != "/srv/proj" {
			t.Fatalf("after the swap: %v; want a SwappedError", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir+".old", dir); err != nil {
			t.Fatal(err)
		}
	}
	swap(func() { must(t, os.Symlink(secret, dir)) })
	swap(func() { must(t, os.Symlink(dir+".old", dir)) }) // a link to the very directory is still a link
	swap(func() { must(t, os.Mkdir(dir, 0o755)) })
	if got, err := read(pin); err != nil || got != "declared" {
		t.Fatalf("put back = %q, %v", got, err)
	}
	// CheckPinned reports a swap before anything binds the mounts by path.
	j, err := New([]Mount{{Guest: "/srv/proj", Host: dir, Pin: pin}, {Guest: "/artifacts", Host: secret}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if err := j.CheckPinned(); err != nil {
		t.Fatalf("CheckPinned on the declared directory: %v", err)
	}
	j2, _ := New([]Mount{{Guest: "/srv/proj", Host: secret, Pin: pin}})
	defer j2.Close()
	if err := j2.CheckPinned(); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("CheckPinned on another directory: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
