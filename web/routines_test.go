package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestRoutinesPage: the Routines page creates a routine from its form (a
// bad schedule is a toast naming the field and creates nothing), runs it
// now, pauses and resumes it and deletes it; its name is escaped; an actor
// neither sees nor runs the admin's routine.
func TestRoutinesPage(t *testing.T) {
	f := start(t, app.Config{})
	b := signIn(t, f.e)
	ses := f.script(t, "digests", map[string]any{"text": "the digest"})
	base := "/w/" + f.ws.ID + "/routines"
	page, resp := b.get(base)
	if resp.StatusCode != 200 || !strings.Contains(page, `id="routines"`) || !strings.Contains(page, "No routines yet") {
		t.Fatalf("routines page = %d:\n%s", resp.StatusCode, page)
	}
	form := url.Values{"name": {"<b>digest</b>"}, "schedule": {"*/5 * * *"}, "prompt": {"summarise"}, "session_id": {ses.ID}, "overlap": {"skip"}}
	page, resp = b.post(base, form)
	if resp.StatusCode != 400 || resp.Header.Get("HX-Retarget") != "#toast" || !strings.Contains(page, "schedule") {
		t.Fatalf("bad schedule = %d %v: %s", resp.StatusCode, resp.Header, page)
	}
	var list desk.RoutineList
	f.e.Must(200, "GET", "/v1/workspaces/"+f.ws.ID+"/routines", nil, &list)
	if len(list.Routines) != 0 {
		t.Fatalf("a refused form created %d routines", len(list.Routines))
	}
	form.Set("schedule", "@daily")
	page, resp = b.post(base, form)
	if resp.StatusCode != 200 || !strings.Contains(page, "&lt;b&gt;digest&lt;/b&gt;") || strings.Contains(page, "<b>digest</b>") {
		t.Fatalf("create = %d:\n%s", resp.StatusCode, page)
	}
	f.e.Must(200, "GET", "/v1/workspaces/"+f.ws.ID+"/routines", nil, &list)
	if len(list.Routines) != 1 || list.Routines[0].SessionID != ses.ID {
		t.Fatalf("created %+v", list.Routines)
	}
	rt := list.Routines[0]
	page, resp = b.post(base+"/"+rt.ID+"/run", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `data-run="`) {
		t.Fatalf("run now = %d:\n%s", resp.StatusCode, page)
	}
	waitFor(t, "the run to succeed on the page", func() bool {
		page, _ = b.get(base)
		return strings.Contains(page, `data-status="succeeded"`)
	})
	page, _ = b.post(base+"/"+rt.ID+"/pause", nil)
	if !strings.Contains(page, `data-routine="`+rt.ID+`" data-enabled="false"`) {
		t.Fatalf("after pause:\n%s", page)
	}
	page, _ = b.post(base+"/"+rt.ID+"/resume", nil)
	if !strings.Contains(page, `data-routine="`+rt.ID+`" data-enabled="true"`) {
		t.Fatalf("after resume:\n%s", page)
	}

	// An actor of the workspace sees none of the admin's routines and
	// cannot run one.
	var actor struct {
		Token string `json:"token"`
	}
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &actor)
	a := signInWith(t, f.e, actor.Token)
	page, _ = a.get(base)
	if strings.Contains(page, rt.ID) || !strings.Contains(page, "No routines yet") {
		t.Fatalf("the actor's page shows the admin's routine:\n%s", page)
	}
	if _, resp = a.post(base+"/"+rt.ID+"/run", nil); resp.StatusCode == http.StatusOK {
		t.Fatal("the actor ran the admin's routine")
	}

	page, _ = b.post(base+"/"+rt.ID+"/delete", nil)
	if strings.Contains(page, rt.ID) {
		t.Fatalf("after delete:\n%s", page)
	}
}
