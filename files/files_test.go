package files_test

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/files"
	"github.com/desk-runtime/desk/layout"
)

func TestCleanPath(t *testing.T) {
	for _, c := range []struct {
		in, want, code string
	}{
		{"", "/", ""},
		{"/", "/", ""},
		{"reports", "/reports", ""},
		{"//reports///q1//", "/reports/q1", ""},
		{"/名前/ünï.txt", "/名前/ünï.txt", ""},
		{"/a/../b", "", desk.EFORBIDDEN},
		{"..", "", desk.EFORBIDDEN},
		{"/a/./b", "", desk.EINVALID},
		{"/a\x00b", "", desk.EINVALID},
		{"/a\nb", "", desk.EINVALID},
		{`/a\b`, "", desk.EFORBIDDEN},
		{"/.desk-tmp-x", "", desk.EINVALID},
		{"/" + strings.Repeat("x", 256), "", desk.EINVALID},
		{"/" + strings.Repeat("x/", 2100), "", desk.EINVALID},
		{"/\xff", "", desk.EINVALID},
	} {
		got, err := files.CleanPath(c.in)
		if desk.ErrorCode(err) != c.code || got != c.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q, code %q", c.in, got, err, c.want, c.code)
		}
	}
}

type env struct {
	*apptest.Env
	ws desk.Workspace
}

func start(t *testing.T) *env {
	e := &env{Env: apptest.Start(t, app.Config{})}
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "w"}, &e.ws)
	return e
}

func (e *env) upload(p string, body []byte) *apptest.Response {
	return e.Admin("POST", "/cells/"+e.ws.ID+"/workspace/upload?path="+url.QueryEscape(p), body)
}

func (e *env) ownerArea(t *testing.T) string {
	var out struct{ Actors []desk.Actor }
	e.Must(200, "GET", "/v1/workspaces/"+e.ws.ID+"/actors", nil, &out)
	return e.App.Home.Abs(e.ws.ID, layout.ActorRel(out.Actors[0].ID))
}

// TestDiskFull: a full disk answers 507 and leaves the previous file and no
// temporary file behind.
func TestDiskFull(t *testing.T) {
	e := start(t)
	if r := e.upload("/keep.bin", []byte("previous")); r.Status != 200 {
		t.Fatalf("upload = %d %s", r.Status, r.Body)
	}
	restore := files.SetFill(func(f *atomicfile.File, body io.Reader, _ int64) (int64, error) {
		// Write a little, as a real disk would before it fills up.
		n, _ := io.CopyN(f, body, 3)
		return n, &atomicfile.WriteError{Err: &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}}
	})
	defer restore()
	for _, p := range []string{"/keep.bin", "/new.bin"} {
		r := e.upload(p, bytes.Repeat([]byte("x"), 1<<20))
		if r.Status != 507 || r.ErrorCode() != desk.ENOSPACE {
			t.Fatalf("upload %s on a full disk = %d %s", p, r.Status, r.Body)
		}
	}
	restore()
	r := e.Admin("GET", "/cells/"+e.ws.ID+"/workspace/file?path=/keep.bin", nil)
	if string(r.Body) != "previous" {
		t.Fatalf("the previous file changed: %q", r.Body)
	}
	ents, _ := os.ReadDir(e.ownerArea(t))
	for _, x := range ents {
		if atomicfile.IsTemp(x.Name()) || x.Name() == "new.bin" {
			t.Fatalf("a full disk left %s", x.Name())
		}
	}
}

// TestLongAndShortBodies: a body that runs past or stops short of its
// declared size is refused and nothing is kept. Over HTTP a body can only
// be short (the server reads exactly Content-Length), so the long case is
// checked at the service.
func TestLongAndShortBodies(t *testing.T) {
	e := start(t)
	e.upload("/f.txt", []byte("old"))
	ctx := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
	for _, c := range []struct {
		body string
		size int64
	}{{"0123456789", 5}, {"01234", 10}} {
		_, err := e.App.Files.Upload(ctx, desk.FileScope{WorkspaceID: e.ws.ID}, desk.FilePut{Path: "/f.txt", Body: strings.NewReader(c.body), Size: c.size})
		if desk.ErrorCode(err) != desk.EINVALID {
			t.Fatalf("body %q with size %d: %v", c.body, c.size, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(e.ownerArea(t), "f.txt")); string(b) != "old" {
		t.Fatalf("the file changed: %q", b)
	}
}
