package app_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// modelServer is a model server that answers every request with one
// fixed response and counts what it received.
type modelServer struct {
	*httptest.Server
	hits atomic.Int32
}

func newModelServer(t *testing.T, status int, ctype, body string) *modelServer {
	t.Helper()
	m := &modelServer{}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.hits.Add(1)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(m.Close)
	return m
}

// spec is the openai-compatible reference of the server.
func (m *modelServer) spec(model string) string {
	return "openai-compatible:" + m.URL + "/v1#" + model
}

type modelList struct {
	Default string   `json:"default"`
	Models  []string `json:"models"`
	Note    string   `json:"note"`
}

// TestModelsUndeclaredRefused: a session's model is one the operator
// declared. Any other — a URL of the caller's choosing above all — is
// refused with 400 naming the allowed ones, for an actor token and the
// admin token alike, before anything is created or any request leaves
// desk; GET /v1/models lists exactly the declared ones.
func TestModelsUndeclaredRefused(t *testing.T) {
	apptest.Parallel(t)
	trap := newModelServer(t, 200, "application/json", `{}`)
	compat := "openai-compatible:http://LLM.internal:8000/v1/#qwen"
	w := newWorldOn(t, app.Config{Model: "anthropic:claude-sonnet-4-5", Models: []string{"openai:gpt-4.1", compat}})
	_, actorTok := w.newActor("mallory")
	allowed := []string{"anthropic:claude-sonnet-4-5", "openai:gpt-4.1", compat, "script"}

	var got modelList
	if r := w.Req("GET", "/v1/models", actorTok, nil); r.Status != 200 {
		t.Fatalf("GET /v1/models = %d %s", r.Status, r.Body)
	} else {
		r.Decode(t, &got)
	}
	if got.Default != allowed[0] || !slices.Equal(got.Models, allowed) || got.Note != "" {
		t.Fatalf("GET /v1/models = %+v, want default %s and exactly %q", got, allowed[0], allowed)
	}

	sessions := func() int {
		var out struct{ Sessions []desk.Session }
		w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/sessions", nil, &out)
		return len(out.Sessions)
	}
	before := sessions()
	for _, model := range []string{
		trap.spec("m"),
		trap.spec("qwen"),
		"openai-compatible:http://llm.internal:8000/v2#qwen", // a declared host, another path
		"openai-compatible:http://llm.internal:8000/v1#other",
		"openai:gpt-5",
		"anthropic:claude-opus-4-1",
		"openai-compatible:http://169.254.169.254/latest#m",
	} {
		for who, tok := range map[string]string{"actor": actorTok, "admin": w.Token} {
			r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", tok, map[string]any{"title": "x", "model": model})
			if r.Status != 400 || r.ErrorCode() != desk.EINVALID {
				t.Fatalf("%s creating a session on %s = %d %s, want 400", who, model, r.Status, r.Body)
			}
			for _, a := range allowed {
				if !strings.Contains(r.ErrorMessage(), a) {
					t.Errorf("%s on %s: %q does not name %s", who, model, r.ErrorMessage(), a)
				}
			}
		}
	}
	if n := trap.hits.Load(); n != 0 {
		t.Fatalf("the undeclared server received %d requests", n)
	}
	if after := sessions(); after != before {
		t.Fatalf("%d sessions after the refusals, %d before", after, before)
	}

	// The declared ones are accepted, also spelt another way, and stored
	// in their declared form.
	var x desk.Session
	r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", actorTok, map[string]any{"model": "openai-compatible:http://llm.internal:8000/v1#qwen"})
	if r.Status != 201 {
		t.Fatalf("declared model = %d %s", r.Status, r.Body)
	}
	r.Decode(t, &x)
	if x.Model != compat {
		t.Fatalf("stored model %q, want the declared %q", x.Model, compat)
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": " openai:gpt-4.1 "}, &x)
	if x.Model != "openai:gpt-4.1" {
		t.Fatalf("stored model %q", x.Model)
	}
}

// TestModelsNoLongerDeclared: a session keeps the model it was made
// with; once the operator stops declaring it, its turn fails naming the
// model and the allowed ones, and no request reaches the old server.
func TestModelsNoLongerDeclared(t *testing.T) {
	apptest.Parallel(t)
	old := newModelServer(t, 200, "application/json", `{}`)
	w := newAgentWorld(t, func(c *app.Config) { c.Models = []string{old.spec("m")} })
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": old.spec("m")}, &x)

	w.Config.Models = []string{"openai:gpt-4.1"}
	w.Restart()
	exe := w.settled(w.send(x.ID, "hello").ExecutionID)
	oneTerminal(t, exe, desk.PhaseFailed)
	t.Logf("reason: %s", exe.Reason)
	for _, want := range []string{old.spec("m"), "openai:gpt-4.1", "script", "not offered"} {
		if !strings.Contains(exe.Reason, want) {
			t.Errorf("reason %q does not name %q", exe.Reason, want)
		}
	}
	if err := w.App.Agent.Close(t.Context()); err != nil { // the title job, if any, has finished
		t.Fatal(err)
	}
	if n := old.hits.Load(); n != 0 {
		t.Fatalf("the model no longer declared received %d requests", n)
	}
}

// TestModelsProviderErrorRedacted: a declared server's error body reaches
// the execution's reason only as its status, error type and message,
// redacted and cut to 300 characters; a body that is not JSON adds
// nothing but the status.
func TestModelsProviderErrorRedacted(t *testing.T) {
	const key = "ocKey-0123456789-zyxwvutsrq"
	t.Setenv("OPENAI_COMPATIBLE_API_KEY", key)
	secrets := []string{key, "sk-live-ABCDEF0123456789abcdef", "ABCDEF0123456789abcdef", "secret123", "debug", "<html", "internal-host-17"}
	jsonBody := `{"error":{"type":"invalid_request_error","message":"bad key sk-live-ABCDEF0123456789abcdef in header (yours: ` + key + `) ` +
		strings.Repeat("and more words ", 60) + `"}, "debug":"Authorization: Bearer secret123 internal-host-17"}`
	htmlBody := `<html><body>proxy error at internal-host-17: Authorization: Bearer secret123 sk-live-ABCDEF0123456789abcdef</body></html>`
	js := newModelServer(t, 400, "application/json", jsonBody)
	html := newModelServer(t, 400, "text/html", htmlBody)
	w := newAgentWorld(t, func(c *app.Config) { c.Model = js.spec("m"); c.Models = []string{html.spec("m")} })

	var onJSON, onHTML desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{}, &onJSON)
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": html.spec("m")}, &onHTML)
	for _, tc := range []struct {
		x    desk.Session
		srv  *modelServer
		want []string
	}{
		{onJSON, js, []string{"HTTP 400", "invalid_request_error", "bad key", "[redacted] in header"}},
		{onHTML, html, []string{"HTTP 400"}},
	} {
		exe := w.settled(w.send(tc.x.ID, "hello").ExecutionID)
		oneTerminal(t, exe, desk.PhaseFailed)
		if tc.srv.hits.Load() == 0 {
			t.Fatalf("the declared server was not called")
		}
		t.Logf("reason: %s", exe.Reason)
		for _, s := range tc.want {
			if !strings.Contains(exe.Reason, s) {
				t.Errorf("reason %q lacks %q", exe.Reason, s)
			}
		}
		for _, s := range secrets {
			if strings.Contains(exe.Reason, s) {
				t.Errorf("reason %q holds %q", exe.Reason, s)
			}
		}
		// What the provider said follows "(HTTP 400): " and precedes the
		// kind desk appends.
		_, said, _ := strings.Cut(exe.Reason, "(HTTP 400): ")
		if i := strings.LastIndex(said, " ("); i >= 0 {
			said = said[:i]
		}
		if n := utf8.RuneCountInString(said); n > 300 {
			t.Errorf("the provider's part of the reason is %d characters: %q", n, said)
		}
		if tc.x.ID == onHTML.ID && strings.Contains(said, "proxy") {
			t.Errorf("the HTML body reached the reason: %q", exe.Reason)
		}
	}
}
