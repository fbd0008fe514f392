package web_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestThreadPageOlderAndBudget: a thread page opens on its thread's newest
// 50 messages, pages back through the thread's own transcript (never the
// orchestrator's), and shows the thread's context budget; paging a
// surface of another session is refused.
func TestThreadPageOlderAndBudget(t *testing.T) {
	f := start(t, app.Config{})
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	var x desk.Session
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/sessions", map[string]any{"title": "orchestrator", "model": "script", "script": map[string]any{
		"steps":    []any{call("thread_start", map[string]any{"threads": []any{map[string]any{"title": "long", "objective": "talk a lot"}}}), map[string]any{"text": "started"}, map[string]any{"text": "noted"}},
		"handlers": map[string]any{"long": []any{map[string]any{"text": "on it"}}},
	}}, &x)
	f.e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	var th desk.Thread
	deadline := time.Now().Add(20 * time.Second)
	for th.ID == "" && time.Now().Before(deadline) {
		var out struct{ Threads []desk.Thread }
		f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/threads", nil, &out)
		if len(out.Threads) == 1 {
			th = out.Threads[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	if th.ID == "" {
		t.Fatal("the thread did not start")
	}
	// 120 messages on the thread's surface, 60 on the orchestrator's.
	st := f.e.App.Store
	for i := range 180 {
		srf, label := th.SurfaceID, "thread"
		if i >= 120 {
			srf, label = x.SurfaceID, "orchestrator"
		}
		role := desk.RoleUser
		if i%2 == 1 {
			role = desk.RoleAssistant
		}
		m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: srf, Role: role,
			Text: fmt.Sprintf("%s message %03d", label, i), CreatedAt: desk.Now()}
		if err := st.AppendMessage(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	b := signIn(t, f.e)
	page, resp := b.get("/w/" + f.ws.ID + "/s/" + x.ID + "/t/" + th.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("thread page = %d", resp.StatusCode)
	}
	threadMsg := regexp.MustCompile(`thread message \d{3}`)
	if n := len(threadMsg.FindAllString(page, -1)); n != 50 || strings.Contains(page, "orchestrator message") {
		t.Fatalf("the thread page shows %d thread messages (want the newest 50) or the orchestrator's", n)
	}
	if !strings.Contains(page, `id="budget"`) {
		t.Fatal("the thread page has no context budget")
	}
	older := regexp.MustCompile(`hx-get="(/s/[^"]+/older\?before=\d+&amp;surface=[^"]+)"`).FindStringSubmatch(page)
	if older == nil || !strings.Contains(older[1], "surface="+th.SurfaceID) {
		t.Fatalf("no link to the thread's older messages: %v", older)
	}
	link := strings.ReplaceAll(older[1], "&amp;", "&")
	more, resp := b.get(link)
	if n := len(threadMsg.FindAllString(more, -1)); resp.StatusCode != 200 || n != 50 || strings.Contains(more, "orchestrator message") ||
		!strings.Contains(more, "surface="+th.SurfaceID) {
		t.Fatalf("older thread page = %d with %d thread messages", resp.StatusCode, n)
	}
	// A surface that is not one of this session's conversations.
	var y desk.Session
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/sessions", map[string]any{"title": "other"}, &y)
	bad := strings.Replace(link, "surface="+th.SurfaceID, "surface="+y.SurfaceID, 1)
	if _, resp := b.get(bad); resp.StatusCode != 404 {
		t.Fatalf("older of a foreign surface = %d", resp.StatusCode)
	}
}
