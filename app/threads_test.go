package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestThreadsEndToEnd: an orchestrator starts two handlers in one group
// (one isolated, one forked); each answers from its own script; one
// reports an update and both conclude; the orchestrator's queue gets one
// notification per episode and its turns see the episode bodies; wrong-
// surface calls are refused as tool results.
func TestThreadsEndToEnd(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{
				{"title": "alpha", "objective": "do alpha"},
				{"title": "beta", "objective": "do beta", "history": "forked"},
			}}), tc("thread_current", map[string]any{})),
			says("delegated"), says("noted 1"), says("noted 2"), says("noted 3"),
		},
		"handlers": map[string]any{
			"alpha": []map[string]any{
				calls(tc("thread_report", map[string]any{"title": "progress", "body": "alpha-update-body"}),
					tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "nested", "objective": "no"}}})),
				calls(tc("thread_report", map[string]any{"title": "done", "body": "alpha-done-body", "outcome": "delivered"})),
				says("alpha finished"),
			},
			"beta": []map[string]any{
				calls(tc("thread_report", map[string]any{"title": "beta done", "body": "beta-done-body", "outcome": "delivered"})),
				says("beta finished"),
			},
		},
	}}, &x)
	w.send(x.ID, "marker-of-the-first-message please delegate")
	ctx := context.Background()
	st := w.App.Store
	var ths []*desk.Thread
	eventually(t, "both threads to conclude and three notifications to be delivered", func() bool {
		var err error
		if ths, err = st.ListThreads(ctx, x.ID, ""); err != nil || len(ths) != 2 {
			return false
		}
		q, _ := st.ListQueue(ctx, x.ID, false)
		n := 0
		for _, it := range q {
			if it.Kind == desk.QueueThreadReport && it.Status == desk.QueueStatusDelivered {
				n++
			}
		}
		return ths[0].State == desk.ThreadConcluded && ths[1].State == desk.ThreadConcluded && n == 3
	})
	if ths[0].GroupID != ths[1].GroupID || ths[0].Title != "alpha" || ths[1].History != desk.HistoryForked {
		t.Fatalf("threads: %+v %+v", ths[0], ths[1])
	}
	q, _ := st.ListQueue(ctx, x.ID, false)
	notes := 0
	for _, it := range q {
		if it.Kind == desk.QueueThreadReport {
			notes++
			if it.SurfaceID != x.SurfaceID {
				t.Fatalf("a notification on %s", it.SurfaceID)
			}
		}
	}
	if notes != 3 {
		t.Fatalf("%d notifications, want 3 (one per episode)", notes)
	}
	es, _ := st.ListEpisodes(ctx, ths[0].ID)
	if len(es) != 2 || es[0].Kind != desk.EpisodeUpdate || es[1].Outcome != desk.EpisodeDelivered || es[1].Origin.SurfaceID != ths[0].SurfaceID {
		t.Fatalf("alpha's episodes: %+v", es)
	}
	// The orchestrator's turns saw the bodies, never a handler transcript.
	all := ""
	for _, m := range w.transcript(x.ID) {
		all += m.Text + "\n"
	}
	for _, want := range []string{"alpha-update-body", "alpha-done-body", "beta-done-body"} {
		if !strings.Contains(all, want) {
			t.Errorf("the orchestrator never saw %s", want)
		}
	}
	if strings.Contains(all, "alpha finished") {
		t.Errorf("a handler's reply reached the orchestrator transcript")
	}
	// Forked: the first handler message carries the orchestrator's earlier
	// message; isolated does not.
	first := func(th *desk.Thread) string {
		var out struct{ Messages []desk.Message }
		w.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages?limit=500&surface="+th.SurfaceID, nil, &out)
		if len(out.Messages) == 0 {
			t.Fatalf("thread %s has no transcript", th.ID)
		}
		return out.Messages[0].Text
	}
	if a, b := first(ths[0]), first(ths[1]); strings.Contains(a, "marker-of-the-first-message") || !strings.Contains(b, "marker-of-the-first-message") || !strings.Contains(a, "do alpha") {
		t.Fatalf("first items:\nisolated: %s\nforked: %s", a, b)
	}
	// Wrong-surface calls are tool results naming why.
	ms, _ := st.ListMessages(ctx, x.SurfaceID, 0, 0)
	hs, _ := st.ListMessages(ctx, ths[0].SurfaceID, 0, 0)
	refused := func(ms []*desk.Message, tool, why string) {
		for _, m := range ms {
			if m.Role == desk.RoleTool && m.ToolName == tool {
				if !m.IsError || !strings.Contains(m.Text, why) {
					t.Errorf("%s: %s", tool, m.Text)
				}
				return
			}
		}
		t.Errorf("no result of %s", tool)
	}
	refused(ms, "thread_current", "handler-thread tool")
	refused(hs, "thread_start", "orchestrator tool")
	// The orchestrator surface's last execution is its own.
	exes, _ := st.ListExecutions(ctx, x.ID, 100)
	handler := 0
	for _, e := range exes {
		if e.SurfaceID != x.SurfaceID {
			handler++
		}
	}
	if handler != 2 { // one turn per handler
		t.Fatalf("%d handler executions", handler)
	}
}
