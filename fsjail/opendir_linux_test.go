package fsjail

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestOpenDir: the descriptor a sandbox binds is the declared directory;
// a link or another directory in its place is a *SwappedError for a
// pinned mount, a link is EFORBIDDEN for any mount, and a descriptor
// opened before a swap still refers to the original directory.
func TestOpenDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "proj")
	home := filepath.Join(base, "home")
	for _, d := range []string{dir, home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("declared"), 0o644); err != nil {
		t.Fatal(err)
	}
	pin := pinOf(t, dir)
	m := Mount{Guest: "/srv/proj", Host: dir, Pin: pin}
	f, err := OpenDir(m)
	if err != nil {
		t.Fatalf("OpenDir on the declared directory: %v", err)
	}
	defer f.Close()

	if err := os.Rename(dir, dir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(home, dir); err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := IdentityOf(fi); id != *pin {
		t.Errorf("the descriptor opened before the swap is %v, want the declared %v", id, *pin)
	}
	var sw *SwappedError
	if _, err := OpenDir(m); !errors.As(err, &sw) || !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("OpenDir on a link: %v; want a SwappedError", err)
	}
	if _, err := OpenDir(Mount{Guest: "/workspace", Host: dir}); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("OpenDir on a link, unpinned: %v; want EFORBIDDEN", err)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenDir(m); !errors.As(err, &sw) {
		t.Fatalf("OpenDir on another directory: %v; want a SwappedError", err)
	}
	if _, err := OpenDir(Mount{Guest: "/srv/proj", Host: dir, Pin: &FileID{}}); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("OpenDir with a zero pin: %v; want EFORBIDDEN", err)
	}
	if _, err := OpenDir(Mount{Guest: "/gone", Host: filepath.Join(base, "gone")}); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("OpenDir on a missing directory: %v; want ENOTFOUND", err)
	}
	g, err := OpenDir(Mount{Guest: "/workspace", Host: dir})
	if err != nil {
		t.Fatalf("OpenDir unpinned: %v", err)
	}
	g.Close()
}
