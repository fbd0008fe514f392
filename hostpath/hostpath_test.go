package hostpath

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestCheck: a declaration records the directory's identity; links, the
// system trees and desk's home are refused with the codes PATCH answers.
func TestCheck(t *testing.T) {
	home, host := t.TempDir(), t.TempDir()
	dir := filepath.Join(host, "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(host, "link")); err != nil {
		t.Fatal(err)
	}
	got, err := Check(home, []desk.HostPath{{Path: dir, Dev: 7, Ino: 7}})
	if err != nil || len(got) != 1 || got[0].Mode != desk.HostPathRO || got[0].Ino == 0 || got[0].Ino == 7 {
		t.Fatalf("Check = %+v, %v; want the directory's own identity", got, err)
	}
	fi, _ := os.Stat(dir)
	if p := Pin(got[0]); p.Zero() || fi == nil {
		t.Fatalf("Pin = %+v", p)
	}
	for path, code := range map[string]string{
		filepath.Join(host, "link"): desk.EINVALID,
		home:                        desk.EFORBIDDEN,
		filepath.Join(home, "x"):    desk.EINVALID, // missing
		"/proc":                     desk.EFORBIDDEN,
		"/etc":                      desk.EFORBIDDEN,
		"/dev":                      desk.EFORBIDDEN,
		"/sys":                      desk.EFORBIDDEN,
		"/":                         desk.EINVALID,
		"/artifacts":                desk.EINVALID,
	} {
		if _, err := Check(home, []desk.HostPath{{Path: path}}); desk.ErrorCode(err) != code {
			t.Errorf("Check(%s) = %v; want %s", path, err, code)
		}
	}
	if err := os.MkdirAll(filepath.Join(home, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(home, []desk.HostPath{{Path: filepath.Join(home, "x")}}); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Errorf("a directory inside desk's home = %v; want forbidden", err)
	}
}
