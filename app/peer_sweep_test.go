package app_test

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/gc"
	"github.com/desk-runtime/desk/layout"
)

// Attack (a peer's restart): another desk process on the same home runs
// its startup sweep while an artifact upload is under way here. The
// upload's temporary file is its writer's (locked) and survives; the
// upload then completes and reads back byte-exact. Before, the sweep
// deleted it, the upload answered 500 and left a row without bytes.
func TestPeerStartupSweepKeepsAnUploadUnderWay(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", w.Server.URL+"/v1/sessions/"+w.a.ID+"/artifacts?name=big.md", pr)
	req.Header.Set("Authorization", "Bearer "+w.Token)
	req.Header.Set("Content-Type", "text/markdown")
	type answer struct {
		status int
		body   string
	}
	done := make(chan answer, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		done <- answer{res.StatusCode, string(b)}
	}()
	first := bytes.Repeat([]byte("a"), 64<<10)
	if _, err := pw.Write(first); err != nil {
		t.Fatal(err)
	}
	// The upload's temporary file exists once its first bytes arrived.
	ws := layout.Home{Root: w.Config.Home}.Workspace(w.ws.ID)
	var temp string
	for deadline := time.Now().Add(10 * time.Second); temp == "" && time.Now().Before(deadline); {
		filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && atomicfile.IsTemp(d.Name()) {
				temp = p
			}
			return nil
		})
		if temp == "" {
			time.Sleep(5 * time.Millisecond) // polling the file system: no event to wait on
		}
	}
	if temp == "" {
		t.Fatal("the upload made no temporary file")
	}
	// The peer: a collector of its own on the same home and store.
	peer := &gc.Collector{Store: w.App.Store, Home: layout.Home{Root: w.Config.Home}}
	d, err := peer.SweepDebris(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d.Files != 0 {
		t.Fatalf("the peer's sweep removed %d files while an upload was under way", d.Files)
	}
	rest := bytes.Repeat([]byte("b"), 64<<10)
	pw.Write(rest)
	pw.Close()
	a := <-done
	if a.status != 201 {
		t.Fatalf("the upload answered %d %s", a.status, a.body)
	}
	arts := w.list(w.a.ID)
	if len(arts) != 1 || !bytes.Equal(w.content(w.a.ID, arts[0].ID), append(first, rest...)) {
		t.Fatalf("the uploaded artifact does not read back byte-exact")
	}
	// Abandoned debris (no writer holds it) is still swept.
	if err := os.WriteFile(filepath.Join(filepath.Dir(temp), atomicfile.TempPrefix+"abandoned"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := peer.SweepDebris(context.Background()); err != nil || d.Files != 1 {
		t.Fatalf("abandoned debris: %+v %v", d, err)
	}
}
