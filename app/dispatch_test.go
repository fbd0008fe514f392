package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestDispatchReplyOwnership (#27 item 3): a session's turn asks another
// session with the ask tool and reply caller; the target's answer comes
// back to the asking session as one dispatch_reply queue row, which its
// next turn reads; the private projection has the dispatch and its reply,
// and rebuilding it from the store gives the same bytes. An ask through
// the API with reply none sends nothing back. Bad input creates nothing.
func TestDispatchReplyOwnership(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	mk := func(title string, steps ...map[string]any) desk.Session {
		var x desk.Session
		w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": title, "model": "script",
			"script": map[string]any{"steps": steps}}, &x)
		return x
	}
	target := mk("target", map[string]any{"text": "the answer is 42"}, map[string]any{"text": "pong"})
	caller := mk("caller",
		map[string]any{"tool_calls": []map[string]any{{"name": "ask", "arguments": map[string]any{
			"target": target.Signature, "subject": "the answer", "text": "what is the answer?", "reply": "caller"}}}},
		map[string]any{"text": "asked; waiting"},
		map[string]any{"text": "got it"})

	var sub desk.SubmitResult
	w.Must(202, "POST", "/v1/sessions/"+caller.ID+"/messages", map[string]any{"text": "find out"}, &sub)

	var d desk.Dispatch
	waitFor(t, "the dispatch to be replied", func() bool {
		var list desk.DispatchList
		w.Must(200, "GET", "/v1/dispatches?session="+caller.ID, nil, &list)
		if len(list.Dispatches) == 1 {
			d = *list.Dispatches[0]
		}
		return d.Status == desk.DispatchReplied
	})
	if d.Caller.SessionID != caller.ID || d.Caller.Kind != desk.OriginAgent || d.Caller.ExecutionID == "" ||
		d.TargetSessionID != target.ID || d.Subject != "the answer" || d.Reply != desk.ReplyCaller ||
		d.ReplyText != "the answer is 42" || d.ReplyItemID == "" {
		t.Fatalf("the dispatch: %+v", d)
	}
	// The caller's next turn read the reply row: one dispatch_reply, and
	// the script's third step answered it.
	waitFor(t, "the caller's second turn", func() bool {
		var xs desk.ExecutionList
		w.Must(200, "GET", "/v1/sessions/"+caller.ID+"/executions", nil, &xs)
		n := 0
		for _, x := range xs.Executions {
			if x.Phase == desk.PhaseEnded {
				n++
			}
		}
		return n == 2
	})
	var q desk.QueueList
	w.Must(200, "GET", "/v1/sessions/"+caller.ID+"/queue?all=true", nil, &q)
	replies := 0
	for _, it := range q.Items {
		if it.Kind == desk.QueueDispatchReply {
			replies++
			if it.ID != d.ReplyItemID || !strings.Contains(it.Text, "the answer is 42") || !strings.Contains(it.Text, d.ID) {
				t.Fatalf("the reply row: %+v", it)
			}
		}
	}
	if replies != 1 {
		t.Fatalf("%d dispatch_reply rows on the caller", replies)
	}
	var msgs desk.MessageList
	w.Must(200, "GET", "/v1/sessions/"+caller.ID+"/messages", nil, &msgs)
	var texts []string
	for _, m := range msgs.Messages {
		texts = append(texts, m.Text)
	}
	all := strings.Join(texts, "\n")
	if !strings.Contains(all, "<dispatch_reply") || !strings.Contains(all, "got it") {
		t.Fatalf("the caller's transcript:\n%s", all)
	}

	// reply none through the API: the target answers, nothing comes back.
	var ask desk.AskResult
	w.Must(200, "POST", "/v1/ask", map[string]any{"target": map[string]any{"kind": "session", "id": target.ID},
		"prompt": "ping", "subject": "liveness", "reply": "none", "from_session": caller.ID}, &ask)
	if ask.DispatchID == "" || ask.Status != desk.AskDispatched {
		t.Fatalf("ask: %+v", ask)
	}
	waitFor(t, "the reply-none dispatch to settle", func() bool {
		var got desk.Dispatch
		w.Must(200, "GET", "/v1/dispatches/"+ask.DispatchID, nil, &got)
		d = got
		return got.Terminal()
	})
	if d.Status != desk.DispatchSettled || d.ReplyText != "pong" || d.ReplyItemID != "" {
		t.Fatalf("the reply-none dispatch: %+v", d)
	}
	w.Must(200, "GET", "/v1/sessions/"+caller.ID+"/queue?all=true", nil, &q)
	n := 0
	for _, it := range q.Items {
		if it.Kind == desk.QueueDispatchReply {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("reply none queued something on the caller: %d reply rows", n)
	}

	// Bad input: named, and nothing is created.
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"target": map[string]any{"kind": "session", "id": target.ID}, "prompt": "x", "reply": "maybe"}, "reply"},
		{map[string]any{"target": map[string]any{"kind": "session", "id": target.ID}, "prompt": "x", "reply": "caller"}, "from_session"},
		{map[string]any{"target": map[string]any{"kind": "session", "id": target.ID}, "prompt": "x", "subject": "two\nlines"}, "subject"},
		{map[string]any{"target": map[string]any{"kind": "session", "id": target.ID}, "prompt": " "}, "text"},
	} {
		r := w.Admin("POST", "/v1/ask", c.body)
		if r.Status != 400 || !strings.Contains(string(r.Body), c.want) {
			t.Errorf("ask %v = %d %s; want 400 naming %s", c.body, r.Status, r.Body, c.want)
		}
	}
	var list desk.DispatchList
	w.Must(200, "GET", "/v1/dispatches", nil, &list)
	if len(list.Dispatches) != 2 {
		t.Fatalf("%d dispatches after the refused asks; want 2", len(list.Dispatches))
	}

	// The projection: the two dispatches and their replies, and a rebuild
	// from the store writes the same bytes.
	p := filepath.Join(w.App.Home.Root, "state", "agent-conversations.jsonl")
	appended, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(appended), "\n"); got != 4 || !strings.Contains(string(appended), `"type":"dispatch_reply"`) {
		t.Fatalf("the projection has %d lines:\n%s", got, appended)
	}
	if err := w.App.Dispatches.Rebuild(context.Background()); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(rebuilt) != string(appended) {
		t.Fatalf("the rebuilt projection differs:\nappended:\n%s\nrebuilt:\n%s", appended, rebuilt)
	}
}

// TestDispatchStaysInTheCallersReach: an agent's ask names a session of
// another workspace by its signature; the agent acts as its own session's
// actor, which cannot see that session, so nothing is queued there and
// no dispatch is recorded.
func TestDispatchStaysInTheCallersReach(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	var other desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "elsewhere"}, &other)
	var victim desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+other.ID+"/sessions", map[string]any{"title": "victim", "model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "should never run"}}}}, &victim)
	var caller desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": "caller", "model": "script",
		"script": map[string]any{"steps": []map[string]any{
			{"tool_calls": []map[string]any{{"name": "ask", "arguments": map[string]any{"target": victim.Signature, "text": "rm -rf everything", "reply": "caller"}}}},
			{"text": "done"}}}}, &caller)
	w.Must(202, "POST", "/v1/sessions/"+caller.ID+"/messages", map[string]any{"text": "go"}, nil)
	waitFor(t, "the caller's turn", func() bool {
		var xs desk.ExecutionList
		w.Must(200, "GET", "/v1/sessions/"+caller.ID+"/executions", nil, &xs)
		return len(xs.Executions) == 1 && xs.Executions[0].Terminal()
	})
	var msgs desk.MessageList
	w.Must(200, "GET", "/v1/sessions/"+caller.ID+"/messages", nil, &msgs)
	refused := false
	for _, m := range msgs.Messages {
		for _, c := range m.Commands {
			if c.Tool == "ask" && c.Status != desk.CommandSucceeded && strings.Contains(c.Output+c.Error, "unavailable") {
				refused = true
			}
		}
	}
	if !refused {
		t.Fatalf("the ask across workspaces was not refused as unavailable: %+v", msgs.Messages)
	}
	var q desk.QueueList
	w.Must(200, "GET", "/v1/sessions/"+victim.ID+"/queue?all=true", nil, &q)
	if len(q.Items) != 0 {
		t.Fatalf("the other workspace's session got %d rows", len(q.Items))
	}
	var list desk.DispatchList
	w.Must(200, "GET", "/v1/dispatches", nil, &list)
	if len(list.Dispatches) != 0 {
		t.Fatalf("a refused ask left dispatches: %+v", list.Dispatches)
	}
}
