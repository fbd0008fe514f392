package web_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestNewSessionOffersDeclaredModels: the new-session form offers exactly
// the operator's models, and a form posted with any other model (a URL of
// the poster's choosing) is refused, naming the allowed ones, with no
// session made and no request sent to that URL.
func TestNewSessionOffersDeclaredModels(t *testing.T) {
	var hits atomic.Int32
	trap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer trap.Close()
	f := start(t, app.Config{Model: "anthropic:claude-sonnet-4-5", Models: []string{"openai:gpt-4.1"}})
	var alice struct {
		Actor desk.Actor
		Token string
	}
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &alice)
	for who, tok := range map[string]string{"alice": alice.Token, "admin": f.e.Token} {
		b := signInWith(t, f.e, tok)
		form, _ := b.get("/w/" + f.ws.ID + "/new")
		for _, m := range []string{`value="anthropic:claude-sonnet-4-5" selected`, `value="openai:gpt-4.1"`, `value="script"`} {
			if !strings.Contains(form, m) {
				t.Errorf("%s: the new-session form lacks %s", who, m)
			}
		}
		models := form[strings.Index(form, `id="ns-model"`):]
		models = models[:strings.Index(models, "</select>")]
		if n := strings.Count(models, "<option"); n != 3 {
			t.Errorf("%s: the new-session form offers %d models, want 3", who, n)
		}
		body, resp := b.post("/w/"+f.ws.ID+"/sessions", url.Values{"title": {"x"}, "model": {"openai-compatible:" + trap.URL + "/v1#m"}})
		if resp.StatusCode != 400 || !strings.Contains(body, "openai:gpt-4.1") || !strings.Contains(body, "anthropic:claude-sonnet-4-5") {
			t.Errorf("%s: posting an undeclared model = %d %s", who, resp.StatusCode, body)
		}
	}
	var out struct{ Sessions []desk.Session }
	f.e.Must(200, "GET", "/v1/workspaces/"+f.ws.ID+"/sessions", nil, &out)
	if len(out.Sessions) != 0 || hits.Load() != 0 {
		t.Fatalf("%d sessions made, %d requests to the undeclared server", len(out.Sessions), hits.Load())
	}
}
