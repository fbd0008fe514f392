package web_test

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestAdminOnlyHints: on a desk without a default model, the admin is
// told about DESK_MODEL (on the new-session form and in a session's
// composer); an actor is told to ask the person who runs the desk, and
// never sees the variable. Both see the one legend of the status dots.
func TestAdminOnlyHints(t *testing.T) {
	f := start(t, app.Config{})
	var alice struct {
		Actor desk.Actor
		Token string
	}
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &alice)
	var x desk.Session
	if r := f.e.Req("POST", "/v1/workspaces/"+f.ws.ID+"/sessions", alice.Token, map[string]string{"title": "Alice's"}); r.Status != 201 {
		t.Fatalf("alice creates a session = %d %s", r.Status, r.Body)
	} else {
		r.Decode(t, &x)
	}
	pages := []string{"/w/" + f.ws.ID + "/new", "/w/" + f.ws.ID + "/s/" + x.ID}
	for _, who := range []struct {
		name  string
		b     *browser
		admin bool
	}{{"admin", signIn(t, f.e), true}, {"actor", signInWith(t, f.e, alice.Token), false}} {
		for _, p := range pages {
			body, resp := who.b.get(p)
			if resp.StatusCode != 200 {
				t.Fatalf("%s GET %s = %d", who.name, p, resp.StatusCode)
			}
			if got := strings.Contains(body, "DESK_MODEL"); got != who.admin {
				t.Errorf("%s on %s: mentions DESK_MODEL = %v, want %v", who.name, p, got, who.admin)
			}
			if !who.admin && !strings.Contains(body, "ask the person who runs") {
				t.Errorf("the actor is not told whom to ask on %s", p)
			}
			for _, want := range []string{`id="legend"`, "What the dots mean", "Waiting for you: an approval, an answer or a plan decision", "The last turn failed"} {
				if !strings.Contains(body, want) {
					t.Errorf("%s on %s: no %q", who.name, p, want)
				}
			}
		}
	}
}
