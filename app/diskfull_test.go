package app_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/store/sqlstore"
)

// fullDisk mounts a small tmpfs of its own for a desk home, or skips the
// test when this process may not mount (it needs root, or CAP_SYS_ADMIN).
func fullDisk(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=48m,nr_inodes=4096,mode=0700"); err != nil {
		t.Skipf("a full disk needs a file system of its own, and mounting a tmpfs failed (%v); run as root to test it", err)
	}
	// Registered before the desk starts, so it runs after the desk closed.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill takes every free block and inode of the file system holding dir,
// and returns a function that gives them back.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	must(t, os.Mkdir(filler, 0o700))
	f, err := os.Create(filepath.Join(filler, "blocks"))
	must(t, err)
	for _, step := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, step)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("fill the disk: %v", err)
				}
				break
			}
		}
	}
	f.Close()
	for i := 0; ; i++ {
		g, err := os.Create(filepath.Join(filler, strconv.Itoa(i)))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("use up the inodes: %v", err)
			}
			break
		}
		g.Close()
	}
	return func() { must(t, os.RemoveAll(filler)) }
}

// TestFullDiskAnswers507: on a disk with no free block or inode left,
// each write route tried — create a session, send a message, upload an
// artifact, upload a file — answers 507
// insufficient_storage and keeps nothing; once space is freed, the same
// requests succeed. The disk is a real full file system (a tmpfs), and
// SQLite meets it as SQLITE_FULL.
func TestFullDiskAnswers507(t *testing.T) {
	apptest.Parallel(t)
	home := fullDisk(t)
	w := newWorldOn(t, app.Config{Home: home, Model: "script"})
	// An empty write-ahead log, so the next commit must grow it.
	db, ok := w.App.Store.(*sqlstore.DB)
	if !ok {
		t.Fatalf("the store is %T, not SQLite", w.App.Store)
	}
	_, err := db.SQL().Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	must(t, err)
	free := fill(t, home)

	type write struct {
		name, method, path string
		body               any
		ok                 int
	}
	writes := []write{
		{"create a session", "POST", "/v1/workspaces/" + w.ws.ID + "/sessions", map[string]string{"title": "on a full disk"}, 201},
		{"send a message", "POST", "/v1/sessions/" + w.a.ID + "/messages", map[string]string{"text": "hello"}, 202},
		{"upload an artifact", "POST", "/v1/sessions/" + w.a.ID + "/artifacts?name=notes.txt", []byte("some notes\n"), 201},
		{"upload a file", "POST", fq(w.ws.ID, false, "upload", "path", "/report.txt"), []byte("a report\n"), 200},
	}
	for _, c := range writes {
		r := w.Admin(c.method, c.path, c.body)
		if r.Status != 507 || r.ErrorCode() != "insufficient_storage" {
			t.Errorf("%s on a full disk = %d %s; want 507 insufficient_storage", c.name, r.Status, r.Body)
		}
	}
	var list struct{ Sessions []struct{ Title string } }
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/sessions", nil, &list)
	for _, s := range list.Sessions {
		if s.Title == "on a full disk" {
			t.Errorf("the refused session was kept")
		}
	}
	if r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", "/report.txt"), nil); r.Status != 404 {
		t.Errorf("the refused file upload was kept: %d", r.Status)
	}

	free()
	for _, c := range writes {
		if r := w.Admin(c.method, c.path, c.body); r.Status != c.ok {
			t.Errorf("%s once space was freed = %d %s; want %d", c.name, r.Status, r.Body, c.ok)
		}
	}
}
