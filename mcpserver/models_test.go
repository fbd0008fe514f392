package mcpserver_test

import (
	"context"
	"github.com/desk-runtime/desk/app/apptest"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/desk-runtime/desk/client"
)

// TestSessionCreateUndeclaredModel: session_create with a model the
// operator did not declare (a URL of the caller's choosing) is a tool
// error naming the allowed models; nothing is created and the URL
// receives nothing.
func TestSessionCreateUndeclaredModel(t *testing.T) {
	apptest.Parallel(t)
	var hits atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer trap.Close()
	w := newWorld(t)
	cs := w.connect(t, w.tokA)
	for _, model := range []string{"openai-compatible:" + trap.URL + "/v1#m", "openai:gpt-5"} {
		msg := callErr(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": model})
		if !strings.Contains(msg, "not offered") || !strings.Contains(msg, "script") {
			t.Errorf("session_create on %s: %q does not name the allowed models", model, msg)
		}
	}
	ss, err := w.admin.ListSessions(context.Background(), w.ws, client.SessionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 0 || hits.Load() != 0 {
		t.Fatalf("%d sessions made, %d requests to the undeclared server", len(ss), hits.Load())
	}
}
