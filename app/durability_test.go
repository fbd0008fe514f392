package app_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/layout"
)

// imageStore takes a crash image of DESK_HOME (files and the SQLite
// database) at chosen moments of an artifact write: what a kill -9 at that
// instant would leave on disk.
type imageStore struct {
	desk.Store
	home   string
	mu     sync.Mutex
	armed  bool
	images map[string]string // moment → copy of the home
	dir    func() string
}

func (s *imageStore) snap(moment string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed {
		return
	}
	dst := s.dir()
	if err := copyTree(s.home, dst); err != nil {
		panic(err)
	}
	s.images[moment] = dst
}

func (s *imageStore) CreateArtifact(ctx context.Context, a *desk.Artifact) error {
	s.snap("before the row commits")
	err := s.Store.CreateArtifact(ctx, a)
	if err == nil {
		s.snap("after the row commits")
	}
	return err
}

func (s *imageStore) SetArtifactPending(ctx context.Context, id, pending string) error {
	s.snap("before the pending claim is cleared")
	return s.Store.SetArtifactPending(ctx, id, pending)
}

// copyTree copies a directory tree; SQLite's shared-memory index is left
// out, as a crash loses it too (SQLite rebuilds it from the WAL).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case strings.HasSuffix(p, "-shm") || !d.Type().IsRegular():
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		if _, err := io.Copy(f, in); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
}

// TestCrashDuringArtifactCreate takes crash images at every step of an
// artifact create (through the artifact API and through the file API's
// upload into a session folder), starts desk on each image, and checks
// what a crash may leave: no file in a session folder without its row, no
// temporary file, an artifact that exists byte-exact, and a client that
// retries the same create succeeds. Before the row was committed ahead of
// the rename, the image taken before the commit held the renamed file
// without a row, and the retry answered 409.
func TestCrashDuringArtifactCreate(t *testing.T) {
	apptest.Parallel(t)
	body := bytes.Repeat([]byte("durable bytes\n"), 5000)
	for _, door := range []string{"artifacts", "upload"} {
		t.Run(door, func(t *testing.T) {
			home := t.TempDir()
			is := &imageStore{home: home, images: map[string]string{}, dir: t.TempDir}
			w := newWorldOn(t, app.Config{Home: home, AdminToken: "crash",
				WrapStore: func(s desk.Store) desk.Store { is.Store = s; return is }})
			is.mu.Lock()
			is.armed = true
			is.mu.Unlock()
			create := func(e *apptest.Env) *apptest.Response {
				if door == "artifacts" {
					return e.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name=report.md", body)
				}
				return e.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/upload?path=/sessions/"+w.a.ID+"/report.md", body)
			}
			if r := create(w.Env); r.Status != 201 && r.Status != 200 {
				t.Fatalf("create = %d %s", r.Status, r.Body)
			}
			is.mu.Lock()
			is.armed = false
			images := is.images
			is.mu.Unlock()
			for _, moment := range []string{"before the row commits", "after the row commits", "before the pending claim is cleared"} {
				img := images[moment]
				if img == "" {
					t.Fatalf("no crash image %q", moment)
				}
				t.Run(moment, func(t *testing.T) {
					e := apptest.Start(t, app.Config{Home: img, AdminToken: "crash"})
					checkNoDebris(t, e, w.ws.ID)
					// The client retries the create it never heard back from.
					if r := create(e); r.Status != 201 && r.Status != 200 {
						t.Fatalf("retried create after the crash = %d %s", r.Status, r.Body)
					}
					var list struct{ Artifacts []desk.Artifact }
					e.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/artifacts", nil, &list)
					if len(list.Artifacts) != 1 || list.Artifacts[0].Name != "report.md" {
						t.Fatalf("artifacts after the retry: %+v", list.Artifacts)
					}
					r := e.Admin("GET", "/v1/sessions/"+w.a.ID+"/artifacts/"+list.Artifacts[0].ID+"/content", nil)
					if r.Status != 200 || !bytes.Equal(r.Body, body) {
						t.Fatalf("content after the retry: %d, %d bytes", r.Status, len(r.Body))
					}
					checkNoDebris(t, e, w.ws.ID)
				})
			}
		})
	}
}

// checkNoDebris fails when a session folder of ws holds a file without an
// artifact row, or the workspace holds a temporary file.
func checkNoDebris(t *testing.T, e *apptest.Env, ws string) {
	t.Helper()
	rows := map[string]bool{}
	var sessions struct{ Sessions []desk.Session }
	e.Must(200, "GET", "/v1/workspaces/"+ws+"/sessions", nil, &sessions)
	for _, x := range sessions.Sessions {
		var list struct{ Artifacts []desk.Artifact }
		e.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts", nil, &list)
		for _, a := range list.Artifacts {
			rows[filepath.Join(layout.SessionRel(x.Actor, x.ID), strings.TrimPrefix(a.Path, "/artifacts/"))] = true
		}
	}
	for _, p := range debris(t, e.Config.Home, rows) {
		t.Errorf("after restart: %s", p)
	}
}

// debris lists temporary files anywhere in the home and files in session
// folders that no artifact row (rows: workspace-relative paths) describes.
func debris(t *testing.T, home string, rows map[string]bool) []string {
	t.Helper()
	var out []string
	root := layout.Home{Root: home}.Workspaces()
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if atomicfile.IsTemp(d.Name()) {
			out = append(out, "temporary file "+p)
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil
		}
		parts := strings.SplitN(filepath.ToSlash(rel), "/", 2) // ws, rest
		if len(parts) == 2 && strings.HasPrefix(parts[1], layout.ActorsDir+"/") && strings.Contains(parts[1], "/sessions/") && !rows[parts[1]] {
			out = append(out, fmt.Sprintf("file without an artifact row %s", p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStartupSweepsTemporaryFiles plants what a crash leaves behind in
// every place desk writes temporary files, restarts, and checks all of it
// is gone while the user's files stay.
func TestStartupSweepsTemporaryFiles(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	a := w.put(w.a.ID, "keep.md", []byte("keep"))
	home := w.Config.Home
	ws := layout.Home{Root: home}.Workspace(w.ws.ID)
	var x desk.Session
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID, nil, &x)
	planted := []string{
		filepath.Join(ws, layout.SessionRel(x.Actor, x.ID), atomicfile.TempPrefix+"artifact"),        // an artifact upload
		filepath.Join(ws, layout.ActorRel(x.Actor), "reports", atomicfile.TempPrefix+"file"),         // a file API upload
		filepath.Join(ws, layout.CheckoutDir, atomicfile.TempPrefix+"checkout"),                      // a checkout write
		filepath.Join(ws, layout.ItemsDir, atomicfile.TempPrefix+"item"),                             // a captured item
		filepath.Join(ws, "conversations", atomicfile.TempPrefix+"view"),                             // an archive view
		filepath.Join(home, "departed-workspaces", "ws_gone", "checkout", atomicfile.TempPrefix+"x"), // a departed workspace
		filepath.Join(ws, ".desk-handoff-123"),                                                       // an offboarding note
		filepath.Join(home, ".admin.token-123"),                                                      // the admin token
		filepath.Join(home, "templates", ".staging-123", "files", "a.md"),                            // a template version
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	for _, p := range planted {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, big, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	user := filepath.Join(ws, layout.ActorRel(x.Actor), "reports", "mine.txt")
	if err := os.WriteFile(user, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.Restart()
	for _, p := range planted {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("debris survived the restart: %s (%v)", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(home, "templates", ".staging-123")); !os.IsNotExist(err) {
		t.Errorf("template staging directory survived the restart")
	}
	if b, err := os.ReadFile(user); err != nil || string(b) != "mine" {
		t.Fatalf("a user file was touched: %q %v", b, err)
	}
	if got := w.content(w.a.ID, a.ID); string(got) != "keep" {
		t.Fatalf("an artifact was touched: %q", got)
	}
}
