package app_test

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// benchReads is a desk with a workspace whose checkout is a git
// repository and one session in it; the hot reads run against its
// handler in-process, so the figures are desk's own cost per request
// (bench/reads measures the same over TCP beside a bare net/http).
func benchReads(b *testing.B) (*apptest.Env, string) {
	e := apptest.Start(b, app.Config{})
	var ws desk.Workspace
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "reads"}, &ws)
	co := filepath.Join(e.Config.Home, "workspaces", ws.ID, "checkout")
	if out, err := exec.Command("git", "init", "-q", "-b", "main", co).CombinedOutput(); err != nil {
		b.Fatalf("git init: %v: %s", err, out)
	}
	var x desk.Session
	e.Must(201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]string{"title": "A"}, &x)
	return e, x.ID
}

func benchGet(b *testing.B, e *apptest.Env, path string) {
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// A request per call: the mux writes path values into it.
			w := httptest.NewRecorder()
			e.App.Handler.ServeHTTP(w, req.Clone(req.Context()))
			if w.Code != http.StatusOK {
				b.Errorf("GET %s: %d %s", path, w.Code, w.Body)
				return
			}
		}
	})
}

func BenchmarkGetSessionInProcess(b *testing.B) {
	e, ses := benchReads(b)
	benchGet(b, e, "/v1/sessions/"+ses)
}

func BenchmarkListMessagesInProcess(b *testing.B) {
	e, ses := benchReads(b)
	benchGet(b, e, "/v1/sessions/"+ses+"/messages")
}

func BenchmarkListArtifactsInProcess(b *testing.B) {
	e, ses := benchReads(b)
	benchGet(b, e, "/v1/sessions/"+ses+"/artifacts")
}
