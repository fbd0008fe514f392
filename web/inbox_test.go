package web_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestInboxPage: the Inbox page lists an approval waiting in an actor's
// session for the admin and for that actor, not for another actor; it is
// denied from the page and leaves it. Summaries are escaped.
func TestInboxPage(t *testing.T) {
	f := start(t, app.Config{})
	var alice, bob struct{ Token string }
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &alice)
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/actors", map[string]string{"name": "bob", "kind": "human"}, &bob)
	var x desk.Session
	r := f.e.Req("POST", "/v1/workspaces/"+f.ws.ID+"/sessions", alice.Token, map[string]any{"title": "alice's", "model": "script",
		"script": map[string]any{"steps": []map[string]any{{"tool_calls": []any{map[string]any{"name": "exec_command",
			"arguments": map[string]any{"command": "echo '<b>hi</b>'"}}}}, {"text": "done"}}}})
	if r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	r.Decode(t, &x)
	if r := f.e.Req("POST", "/v1/sessions/"+x.ID+"/messages", alice.Token, map[string]string{"text": "go"}); r.Status != 202 {
		t.Fatalf("send: %d", r.Status)
	}
	admin := signIn(t, f.e)
	var page string
	waitFor(t, "the approval on the admin's inbox page", func() bool {
		page, _ = admin.get("/inbox")
		return strings.Contains(page, `data-kind="approval"`)
	})
	if !strings.Contains(page, "alice&#39;s") || strings.Contains(page, "<b>hi</b>") || !strings.Contains(page, "&lt;b&gt;hi&lt;/b&gt;") {
		t.Fatalf("admin inbox page:\n%s", page)
	}
	if c, _ := admin.get("/inbox/count"); !strings.Contains(c, `aria-label="1 waiting on you"`) {
		t.Fatalf("inbox count = %s", c)
	}
	if c, _ := signInWith(t, f.e, bob.Token).get("/inbox/count"); strings.Contains(c, "waiting") {
		t.Fatalf("bob's inbox count = %s", c)
	}
	if p, _ := signInWith(t, f.e, alice.Token).get("/inbox"); !strings.Contains(p, `data-kind="approval"`) {
		t.Fatalf("alice's inbox page has no approval:\n%s", p)
	}
	if p, _ := signInWith(t, f.e, bob.Token).get("/inbox"); strings.Contains(p, `data-kind="approval"`) || !strings.Contains(p, "Nothing waits on you") {
		t.Fatalf("bob's inbox page shows alice's approval:\n%s", p)
	}
	var in desk.Inbox
	f.e.Must(200, "GET", "/v1/inbox", nil, &in)
	page, resp := admin.post("/inbox/approvals/"+in.Items[0].ID, url.Values{"decision": {"deny"}})
	if resp.StatusCode != 200 || strings.Contains(page, `data-kind="approval"`) {
		t.Fatalf("deny from the inbox = %d:\n%s", resp.StatusCode, page)
	}
}
