package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// Handler threads black-box through HTTP (issue 12): script sessions
// whose orchestrator and handlers answer from their own scripts, read
// back only through the thread routes, the transcript and the queue.

// threadList and episodeList are the thread routes' bodies.
type threadList struct {
	Threads []desk.Thread `json:"threads"`
}
type episodeList struct {
	Episodes []desk.Episode `json:"episodes"`
}

func (w *world) threads(ses string) []desk.Thread {
	w.T.Helper()
	var out threadList
	w.Must(200, "GET", "/v1/sessions/"+ses+"/threads", nil, &out)
	return out.Threads
}

func (w *world) episodes(thr string) []desk.Episode {
	w.T.Helper()
	var out episodeList
	w.Must(200, "GET", "/v1/threads/"+thr+"/episodes", nil, &out)
	return out.Episodes
}

func (w *world) queueAll(ses string) []desk.QueueItem {
	w.T.Helper()
	var q struct{ Items []desk.QueueItem }
	w.Must(200, "GET", "/v1/sessions/"+ses+"/queue?all=true", nil, &q)
	return q.Items
}

// surfaceMessages is one surface's transcript over HTTP.
func (w *world) surfaceMessages(ses, srf string) []desk.Message {
	w.T.Helper()
	var out struct{ Messages []desk.Message }
	w.Must(200, "GET", "/v1/sessions/"+ses+"/messages?limit=500&surface="+srf, nil, &out)
	return out.Messages
}

func joinTexts(ms []desk.Message) string {
	var b strings.Builder
	for _, m := range ms {
		b.WriteString(m.Text)
		b.WriteString("\n")
		for _, c := range m.Commands {
			b.WriteString(string(c.Facts))
			b.WriteString("\n")
		}
	}
	return b.String()
}

func byTitle(ts []desk.Thread, title string) desk.Thread {
	for _, t := range ts {
		if t.Title == title {
			return t
		}
	}
	return desk.Thread{}
}

// notifications counts the thread_report_notification rows of a queue.
func notifications(q []desk.QueueItem) (n, delivered int) {
	for _, it := range q {
		if it.Kind == desk.QueueThreadReport {
			n++
			if it.Status == desk.QueueStatusDelivered {
				delivered++
			}
		}
	}
	return n, delivered
}

// threadFixture is a session with one handler thread that reported one
// update episode, for the OpenAPI contract test.
func (w *world) threadFixture(t *testing.T) (ses, thr string) {
	t.Helper()
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "fx", "objective": "the fixture"}}})),
			says("delegated"), says("noted"),
		},
		"handlers": map[string]any{"fx": []map[string]any{
			calls(tc("thread_report", map[string]any{"title": "fx update", "body": "fixture body"})), says("reported"),
		}},
	}}, &x)
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	eventually(t, "the fixture thread to report", func() bool {
		ts := w.threads(x.ID)
		if len(ts) == 1 && ts[0].LatestEpisode != nil {
			thr = ts[0].ID
		}
		return thr != ""
	})
	return x.ID, thr
}

// TestThreadsHTTP: an orchestrator starts two handlers in one group, each
// answering from its own script; one reports an update, then both
// conclude. The orchestrator's queue gets exactly one notification per
// episode and its next turns see the bodies; an activating follow-up
// reopens a concluded thread, a report request produces an update
// episode, a forked thread's first item carries the orchestrator's
// earlier message and an isolated one's does not, and a user message to a
// handler is answered in that thread. Every read is an HTTP route.
func TestThreadsHTTP(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*agentWait)
	defer cancel()
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			// Turn 1: delegate, and try a handler tool here.
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{
				{"title": "alpha", "objective": "do alpha"},
				{"title": "beta", "objective": "do beta", "history": "forked"},
			}}), tc("thread_report", map[string]any{"title": "t", "body": "b"})),
			says("delegated"),
			// Three notification turns.
			says("noted 1"), says("noted 2"), says("noted 3"),
			// The user's "reopen" turn.
			calls(tc("thread_followup", map[string]any{"thread_ids": []string{"{{thread:alpha}}"}, "text": "alpha-followup-text", "activate": true}),
				tc("thread_request_report", map[string]any{"thread_id": "{{thread:beta}}", "note": "where are you?"})),
			says("followed up"),
			// Two more notification turns.
			says("noted 4"), says("noted 5"),
		},
		"handlers": map[string]any{
			"alpha": []map[string]any{
				calls(tc("thread_report", map[string]any{"title": "progress", "body": "alpha-update-body"}),
					tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "nested", "objective": "no"}}})),
				calls(tc("thread_report", map[string]any{"title": "done", "body": "alpha-done-body", "outcome": "delivered"})),
				says("alpha finished"),
				// The follow-up turn.
				calls(tc("thread_report", map[string]any{"title": "done again", "body": "alpha-second-body", "outcome": "delivered"})),
				says("alpha finished again"),
				// The user's direct message.
				says("alpha-direct-answer"),
			},
			"beta": []map[string]any{
				calls(tc("thread_report", map[string]any{"title": "beta done", "body": "beta-done-body", "outcome": "delivered"})),
				says("beta finished"),
				// The report request's turn.
				calls(tc("thread_report", map[string]any{"title": "beta status", "body": "beta-status-body"})),
				says("beta reported"),
			},
		},
	}}, &x)
	first := w.send(x.ID, "marker-of-the-first-message please delegate")
	evs := make(chan []sseEvent, 1)
	go func() {
		evs <- readSSE(t, ctx, w.Server.URL+"/v1/events?session="+x.ID, w.Token, first.EventsAfter, func(es []sseEvent) bool {
			n := 0
			for _, e := range es {
				if e.typ == "episode.recorded" {
					n++
				}
			}
			return n == 5
		})
	}()

	var ths []desk.Thread
	eventually(t, "both threads to conclude and three notifications to be delivered", func() bool {
		ths = w.threads(x.ID)
		_, d := notifications(w.queueAll(x.ID))
		return len(ths) == 2 && ths[0].State == desk.ThreadConcluded && ths[1].State == desk.ThreadConcluded && d == 3
	})
	alpha, beta := byTitle(ths, "alpha"), byTitle(ths, "beta")
	if alpha.ID == "" || beta.ID == "" || alpha.GroupID != beta.GroupID || beta.History != desk.HistoryForked || alpha.History != desk.HistoryIsolated {
		t.Fatalf("threads: %+v", ths)
	}
	if alpha.SurfaceID == x.SurfaceID || alpha.SessionID != x.ID || alpha.Objective != "do alpha" {
		t.Fatalf("alpha: %+v", alpha)
	}
	if alpha.LatestEpisode == nil || alpha.LatestEpisode.Title != "done" || alpha.LatestEpisode.Kind != desk.EpisodeConclusion {
		t.Fatalf("alpha's latest episode: %+v", alpha.LatestEpisode)
	}
	var one desk.Thread
	w.Must(200, "GET", "/v1/threads/"+alpha.ID, nil, &one)
	if one.ID != alpha.ID || one.SurfaceID != alpha.SurfaceID || one.State != desk.ThreadConcluded {
		t.Fatalf("GET thread: %+v", one)
	}
	var groups struct {
		ThreadGroups []desk.ThreadGroup `json:"thread_groups"`
	}
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/thread-groups", nil, &groups)
	if len(groups.ThreadGroups) != 1 || groups.ThreadGroups[0].ID != alpha.GroupID || len(groups.ThreadGroups[0].ThreadIDs) != 2 {
		t.Fatalf("thread groups: %+v", groups)
	}
	es := w.episodes(alpha.ID)
	if len(es) != 2 || es[0].Kind != desk.EpisodeUpdate || es[0].Outcome != "" || es[0].Body != "alpha-update-body" ||
		es[1].Kind != desk.EpisodeConclusion || es[1].Outcome != desk.EpisodeDelivered || es[1].Origin.SurfaceID != alpha.SurfaceID {
		t.Fatalf("alpha's episodes: %+v", es)
	}
	// Exactly one notification per episode, on the orchestrator surface.
	q := w.queueAll(x.ID)
	if n, _ := notifications(q); n != 3 {
		t.Fatalf("%d notifications, want 3 (one per episode)", n)
	}
	for _, it := range q {
		if it.Kind == desk.QueueThreadReport && it.SurfaceID != x.SurfaceID {
			t.Fatalf("a notification on %s, not the orchestrator", it.SurfaceID)
		}
	}
	// The orchestrator's turns saw the bodies, never a handler's reply.
	var orch string
	eventually(t, "the third notification's turn to answer", func() bool {
		orch = joinTexts(w.surfaceMessages(x.ID, x.SurfaceID))
		return strings.Contains(orch, "noted 3")
	})
	for _, want := range []string{"alpha-update-body", "alpha-done-body", "beta-done-body", "noted 3"} {
		if !strings.Contains(orch, want) {
			t.Errorf("the orchestrator never saw %s", want)
		}
	}
	if strings.Contains(orch, "alpha finished") {
		t.Errorf("a handler's reply reached the orchestrator transcript")
	}
	// Forked vs isolated first items.
	firstOf := func(th desk.Thread) string {
		ms := w.surfaceMessages(x.ID, th.SurfaceID)
		if len(ms) == 0 {
			t.Fatalf("thread %s has no transcript", th.ID)
		}
		return ms[0].Text
	}
	if a, b := firstOf(alpha), firstOf(beta); strings.Contains(a, "marker-of-the-first-message") || !strings.Contains(b, "marker-of-the-first-message") ||
		!strings.Contains(a, "do alpha") || !strings.Contains(b, "do beta") {
		t.Fatalf("first items:\nisolated: %s\nforked: %s", a, b)
	}
	// Wrong-surface calls are tool results naming why.
	refused := func(ses desk.Session, srf, tool, why string) {
		t.Helper()
		ms, err := w.App.Store.ListMessages(context.Background(), srf, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
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
	refused(x, x.SurfaceID, "thread_report", "handler-thread tool")
	refused(x, alpha.SurfaceID, "thread_start", "orchestrator tool")

	// Reopen alpha and ask beta for a report.
	w.send(x.ID, "reopen alpha and ask beta")
	eventually(t, "the follow-up and the report request to be answered with two more episodes", func() bool {
		_, d := notifications(w.queueAll(x.ID))
		return d == 5
	})
	es = w.episodes(alpha.ID)
	if len(es) != 3 || es[2].Body != "alpha-second-body" || es[2].Kind != desk.EpisodeConclusion {
		t.Fatalf("alpha after the follow-up: %+v", es)
	}
	if got := firstOf(alpha); got == "" || !strings.Contains(joinTexts(w.surfaceMessages(x.ID, alpha.SurfaceID)), "alpha-followup-text") {
		t.Fatalf("alpha never saw the follow-up")
	}
	bs := w.episodes(beta.ID)
	if len(bs) != 2 || bs[1].Kind != desk.EpisodeUpdate || bs[1].Body != "beta-status-body" {
		t.Fatalf("beta after the report request: %+v", bs)
	}
	// The report request went in through the execution service, stamped
	// with the orchestrator turn that asked, on beta's surface.
	var rr *desk.QueueItem
	for _, it := range w.queueAll(x.ID) {
		if it.Kind == desk.QueueReportRequest {
			rr = &it
		}
	}
	if rr == nil || rr.SurfaceID != beta.SurfaceID || rr.Origin.Kind != desk.OriginAgent || rr.Origin.ExecutionID == "" ||
		rr.Origin.SurfaceID != x.SurfaceID || rr.Channel != "thread" || !strings.Contains(rr.Text, "where are you?") {
		t.Fatalf("the report request row: %+v", rr)
	}
	var b2 desk.Thread
	w.Must(200, "GET", "/v1/threads/"+beta.ID, nil, &b2)
	if b2.State != desk.ThreadConcluded || b2.EpisodeCount != 2 {
		t.Fatalf("an update episode changed beta's state: %+v", b2)
	}
	eventually(t, "the fifth notification's turn to answer", func() bool {
		orch = joinTexts(w.surfaceMessages(x.ID, x.SurfaceID))
		return strings.Contains(orch, "noted 5")
	})
	for _, want := range []string{"alpha-second-body", "beta-status-body"} {
		if !strings.Contains(orch, want) {
			t.Errorf("the orchestrator never saw %s", want)
		}
	}
	// The reopened thread went active in between: thread.updated says so.
	var got []sseEvent
	select {
	case got = <-evs:
	case <-ctx.Done():
		t.Fatal("the event stream never carried five episode.recorded events")
	}
	started, reopened := 0, false
	for _, e := range got {
		switch e.typ {
		case "thread.started":
			started++
		case "thread.updated":
			var ev struct{ Data desk.Thread }
			if json.Unmarshal([]byte(e.data), &ev) == nil && ev.Data.ID == alpha.ID && ev.Data.State == desk.ThreadActive {
				reopened = true
			}
		}
	}
	if started != 2 || !reopened {
		t.Fatalf("events: %d thread.started, reopened %v", started, reopened)
	}

	// A user message straight to alpha is answered in alpha.
	before, _ := notifications(w.queueAll(x.ID))
	orchBefore := len(w.surfaceMessages(x.ID, x.SurfaceID))
	res := w.submit(x.ID, "hello alpha, directly", "surface", alpha.SurfaceID)
	if res.Item.SurfaceID != alpha.SurfaceID {
		t.Fatalf("the direct message was queued on %s", res.Item.SurfaceID)
	}
	eventually(t, "alpha to answer the direct message", func() bool {
		return strings.Contains(joinTexts(w.surfaceMessages(x.ID, alpha.SurfaceID)), "alpha-direct-answer")
	})
	if n, _ := notifications(w.queueAll(x.ID)); n != before {
		t.Fatalf("a direct reply queued a notification (%d, was %d)", n, before)
	}
	if ms := w.surfaceMessages(x.ID, x.SurfaceID); len(ms) != orchBefore || strings.Contains(joinTexts(ms), "alpha-direct-answer") {
		t.Fatalf("the direct conversation reached the orchestrator transcript")
	}
	// Executions keep their surface in the API.
	var exes struct{ Executions []desk.Execution }
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &exes)
	onAlpha := 0
	for _, e := range exes.Executions {
		if e.SurfaceID == alpha.SurfaceID {
			onAlpha++
		}
	}
	if onAlpha != 3 { // start, follow-up, direct message
		t.Fatalf("%d executions on alpha's surface, want 3", onAlpha)
	}
}

// TestThreadsHTTPScoping: an actor token sees its own session's threads
// and gets, for another actor's session's threads, exactly the answer it
// gets for that session; unknown ids are 404s that name them.
func TestThreadsHTTPScoping(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	ses, thr := w.threadFixture(t)
	_, bob := w.newActor("bob")
	want := w.Req("GET", "/v1/sessions/"+ses, bob, nil)
	if want.Status != 404 {
		t.Fatalf("bob reading the owner's session = %d %s", want.Status, want.Body)
	}
	for _, p := range []string{"/v1/sessions/" + ses + "/threads", "/v1/sessions/" + ses + "/thread-groups"} {
		r := w.Req("GET", p, bob, nil)
		if r.Status != want.Status || r.ErrorMessage() != want.ErrorMessage() {
			t.Errorf("bob GET %s = %d %s; the session answers %d %s", p, r.Status, r.Body, want.Status, want.Body)
		}
	}
	for _, p := range []string{"/v1/threads/" + thr, "/v1/threads/" + thr + "/episodes"} {
		r := w.Req("GET", p, bob, nil)
		if r.Status != 404 || !strings.Contains(r.ErrorMessage(), thr) || strings.Contains(string(r.Body), "fixture body") {
			t.Errorf("bob GET %s = %d %s", p, r.Status, r.Body)
		}
	}
	// Bob's own session: an empty list, not an error.
	var mine desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"actor": "bob"}, &mine)
	var out threadList
	if r := w.Req("GET", "/v1/sessions/"+mine.ID+"/threads", bob, nil); r.Status != 200 {
		t.Fatalf("bob's own threads = %d %s", r.Status, r.Body)
	} else if r.Decode(t, &out); len(out.Threads) != 0 {
		t.Fatalf("bob's session has threads: %+v", out)
	}
	// Unknown ids name themselves.
	for p, name := range map[string]string{
		"/v1/threads/thr_01JZZZZZZZZZZZZZZZZZZZZZZZ":          "thr_01JZZZZZZZZZZZZZZZZZZZZZZZ",
		"/v1/threads/thr_01JZZZZZZZZZZZZZZZZZZZZZZZ/episodes": "thr_01JZZZZZZZZZZZZZZZZZZZZZZZ",
		"/v1/threads/nope": "nope",
		"/v1/sessions/" + ses + "/threads?thread_group_id=tgr_nope": "tgr_nope",
		"/v1/sessions/ses_01JZZZZZZZZZZZZZZZZZZZZZZZ/threads":       "ses_01JZZZZZZZZZZZZZZZZZZZZZZZ",
		"/v1/sessions/ses_01JZZZZZZZZZZZZZZZZZZZZZZZ/thread-groups": "ses_01JZZZZZZZZZZZZZZZZZZZZZZZ",
	} {
		r := w.Admin("GET", p, nil)
		if r.Status != 404 || !strings.Contains(r.ErrorMessage(), name) {
			t.Errorf("GET %s = %d %s; want 404 naming %s", p, r.Status, r.Body, name)
		}
	}
	// The group filter.
	var gs struct {
		ThreadGroups []desk.ThreadGroup `json:"thread_groups"`
	}
	w.Must(200, "GET", "/v1/sessions/"+ses+"/thread-groups", nil, &gs)
	w.Must(200, "GET", "/v1/sessions/"+ses+"/threads?thread_group_id="+gs.ThreadGroups[0].ID, nil, &out)
	if len(out.Threads) != 1 || out.Threads[0].ID != thr {
		t.Fatalf("threads of the group: %+v", out)
	}
}

// TestThreadsDirectConversation: a person talks to a handler thread
// directly, and request_user_input, approvals and interrupts work there as
// on the orchestrator; the answer row, the approval and the interrupted
// execution all belong to the handler surface, and the orchestrator's
// transcript, queue and executions are untouched by them.
func TestThreadsDirectConversation(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "user"})
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "helper", "objective": "help the user"}}})),
			says("delegated"),
		},
		"handlers": map[string]any{"helper": []map[string]any{
			says("helper ready"),
			// "ask me": a question, answered later as its own turn.
			calls(tc("request_user_input", colorQuestion())), says("red for now"),
			says("helper-got-the-answer"),
			// "run it": a gated command.
			calls(sh("echo helper-ran")), says("helper ran it"),
			// "go slow": a turn to interrupt.
			{"text": "slow slow slow slow slow slow", "delay_ms": 60000},
		}},
	}}, &x)
	w.settled(w.send(x.ID, "delegate").ExecutionID)
	var th desk.Thread
	eventually(t, "the helper to be ready", func() bool {
		ts := w.threads(x.ID)
		if len(ts) != 1 {
			return false
		}
		th = ts[0]
		return strings.Contains(joinTexts(w.surfaceMessages(x.ID, th.SurfaceID)), "helper ready")
	})
	orchMsgs := len(w.surfaceMessages(x.ID, x.SurfaceID))
	onSurface := func(srf string) int {
		var exes struct{ Executions []desk.Execution }
		w.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &exes)
		n := 0
		for _, e := range exes.Executions {
			if e.SurfaceID == srf {
				n++
			}
		}
		return n
	}
	orchExes := onSurface(x.SurfaceID)

	// A question on the handler, answered later.
	ask := w.submit(x.ID, "ask me", "surface", th.SurfaceID)
	eventually(t, "the helper's question", func() bool { return len(w.inputRequests(x.ID)) == 1 })
	req := w.inputRequests(x.ID)[0]
	if req.SurfaceID != th.SurfaceID || req.Status != desk.InputPending {
		t.Fatalf("the helper's question: %+v", req)
	}
	if it := w.item(x.ID, ask.Item.ID); it.SurfaceID != th.SurfaceID {
		t.Fatalf("the direct message was queued on %s", it.SurfaceID)
	}
	// The session's sidebar row shows its orchestrator: the handler's
	// pending question does not make it look waiting.
	if cls := w.sidebarRow(x.ID); strings.Contains(cls, "tone-waiting") || !strings.Contains(cls, "row") {
		t.Fatalf("the session row's classes while the handler asks: %q", cls)
	}
	var ans struct {
		QueuedItem *desk.QueueItem `json:"queued_item"`
	}
	w.Must(200, "POST", "/v1/input-requests/"+req.ID+"/answer", map[string]any{"answers": map[string]string{"color": "blue"}}, &ans)
	if ans.QueuedItem == nil || ans.QueuedItem.SurfaceID != th.SurfaceID {
		t.Fatalf("the answer row: %+v", ans.QueuedItem)
	}
	eventually(t, "the helper to take the answer", func() bool {
		return strings.Contains(joinTexts(w.surfaceMessages(x.ID, th.SurfaceID)), "helper-got-the-answer")
	})

	// A gated command on the handler waits for approval, then runs.
	w.submit(x.ID, "run it", "surface", th.SurfaceID)
	eventually(t, "the helper's approval request", func() bool { return len(w.approvals(x.ID, true)) == 1 })
	ap := w.approvals(x.ID, true)[0]
	if e := w.exe(ap.ExecutionID); e.SurfaceID != th.SurfaceID || e.Phase != desk.PhaseRunning {
		t.Fatalf("the approval's execution: %+v", e)
	}
	w.Must(200, "POST", "/v1/approvals/"+ap.ID, map[string]string{"decision": "approve"}, nil)
	eventually(t, "the approved command to run", func() bool {
		return strings.Contains(joinTexts(w.surfaceMessages(x.ID, th.SurfaceID)), "helper ran it")
	})

	// An interrupt stops exactly the handler's execution.
	slow := w.submit(x.ID, "go slow", "surface", th.SurfaceID)
	exe := slow.ExecutionID
	eventually(t, "the slow turn to run", func() bool {
		if exe == "" {
			exe = w.item(x.ID, slow.Item.ID).ExecutionID
		}
		return exe != "" && w.exe(exe).Phase == desk.PhaseRunning
	})
	var ir desk.InterruptResult
	w.Must(200, "POST", "/v1/sessions/"+x.ID+"/executions/"+exe+"/interrupt", nil, &ir)
	if !ir.Stopped {
		t.Fatalf("interrupt: %+v", ir)
	}
	if e := w.settled(exe); e.Phase != desk.PhaseInterrupted || e.SurfaceID != th.SurfaceID {
		t.Fatalf("the interrupted execution: %+v", e)
	}

	// The interrupt's cooldown holds the thread, and the orchestrator's
	// page does not show it as its own.
	var bs struct{ Blocks []desk.Block }
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/blocks", nil, &bs)
	if len(bs.Blocks) == 0 || bs.Blocks[0].SurfaceID != th.SurfaceID || !bs.Blocks[0].Active {
		t.Fatalf("blocks after the handler's interrupt: %+v", bs.Blocks)
	}
	if page := w.webPage("/w/" + w.ws.ID + "/s/" + x.ID); strings.Contains(page, "data-block=") {
		t.Fatalf("the orchestrator's page shows the handler's block")
	}

	// None of it reached the orchestrator.
	if n := len(w.surfaceMessages(x.ID, x.SurfaceID)); n != orchMsgs {
		t.Fatalf("the orchestrator transcript grew from %d to %d messages", orchMsgs, n)
	}
	if n := onSurface(x.SurfaceID); n != orchExes {
		t.Fatalf("the orchestrator ran %d executions, was %d", n, orchExes)
	}
	if n, _ := notifications(w.queueAll(x.ID)); n != 0 {
		t.Fatalf("%d notifications without a report", n)
	}
}

// webPage is a page of the web UI, signed in with the admin token.
func (w *world) webPage(path string) string {
	w.T.Helper()
	req, _ := http.NewRequest("GET", w.Server.URL+path, nil)
	req.AddCookie(w.WebCookie(w.Token))
	resp, err := w.Server.Client().Do(req)
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		w.T.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	return string(b)
}

// sidebarRow is the class attribute of a session's row in the web UI's
// sidebar, read as a signed-in browser would.
func (w *world) sidebarRow(ses string) string {
	w.T.Helper()
	req, _ := http.NewRequest("GET", w.Server.URL+"/w/"+w.ws.ID+"/sidebar", nil)
	req.AddCookie(w.WebCookie(w.Token))
	resp, err := w.Server.Client().Do(req)
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`<li class="([^"]*)" id="row-` + ses + `"`).FindSubmatch(b)
	if resp.StatusCode != 200 || m == nil {
		w.T.Fatalf("sidebar = %d, no row for %s:\n%s", resp.StatusCode, ses, b)
	}
	return string(m[1])
}

// toolTexts are the tool results of a surface in call order: name, text
// and whether it is an error.
func (w *world) toolTexts(srf string) []desk.Message {
	w.T.Helper()
	ms, err := w.App.Store.ListMessages(context.Background(), srf, 0, 0)
	if err != nil {
		w.T.Fatal(err)
	}
	var out []desk.Message
	for _, m := range ms {
		if m.Role == desk.RoleTool {
			out = append(out, *m)
		}
	}
	return out
}

// TestThreadsBadInput: thread_start with no threads, with a blank title,
// with an unknown group and with another session's group; a follow-up and
// a report request to another session's thread; an empty report — each a
// tool result that names the problem, with nothing created: no thread, no
// group, no queue row, no episode, no notification.
func TestThreadsBadInput(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	// Session A: one thread whose first report is empty.
	var a desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "gamma", "objective": "g"}}})),
			says("delegated"), says("noted"),
		},
		"handlers": map[string]any{"gamma": []map[string]any{
			calls(tc("thread_report", map[string]any{"title": " ", "body": ""})),
			calls(tc("thread_report", map[string]any{"title": "real", "body": "the real body", "outcome": "closed"})),
			says("gamma done"),
		}},
	}}, &a)
	w.send(a.ID, "go")
	var gamma desk.Thread
	eventually(t, "gamma to conclude and the orchestrator to reconcile it", func() bool {
		ts := w.threads(a.ID)
		_, d := notifications(w.queueAll(a.ID))
		if len(ts) == 1 {
			gamma = ts[0]
		}
		return gamma.State == desk.ThreadConcluded && d == 1
	})
	if es := w.episodes(gamma.ID); len(es) != 1 || es[0].Title != "real" {
		t.Fatalf("the empty report made an episode: %+v", es)
	}
	if n, _ := notifications(w.queueAll(a.ID)); n != 1 {
		t.Fatalf("%d notifications for one episode", n)
	}
	empty := w.toolTexts(gamma.SurfaceID)
	if len(empty) < 1 || !empty[0].IsError || !strings.Contains(empty[0].Text, "title and a body") {
		t.Fatalf("the empty report's result: %+v", empty)
	}
	aQueue := len(w.queueAll(a.ID))

	// Session B: every bad call, knowing A's ids.
	var b desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(
				tc("thread_start", map[string]any{"threads": []map[string]any{}}),
				tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "  ", "objective": "y"}}}),
				tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "x", "objective": "y", "thread_group_id": "tgr_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}}),
				tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "x", "objective": "y", "thread_group_id": gamma.GroupID}}}),
				tc("thread_followup", map[string]any{"thread_ids": []string{gamma.ID}, "text": "hi", "activate": true}),
				tc("thread_request_report", map[string]any{"thread_id": gamma.ID}),
				tc("thread_episodes", map[string]any{"thread_id": gamma.ID}),
			),
			says("all refused"),
		},
	}}, &b)
	w.settled(w.send(b.ID, "try everything").ExecutionID)
	want := []struct{ tool, why string }{
		{"thread_start", "threads"},
		{"thread_start", "title and objective must not be blank"},
		{"thread_start", "tgr_01JZZZZZZZZZZZZZZZZZZZZZZZ is not a thread group of this session"},
		{"thread_start", gamma.GroupID + " is not a thread group of this session"},
		{"thread_followup", gamma.ID + " is not a thread of this session"},
		{"thread_request_report", gamma.ID + " is not a thread of this session"},
		{"thread_episodes", gamma.ID + " is not a thread of this session"},
	}
	got := w.toolTexts(b.SurfaceID)
	if len(got) != len(want) {
		t.Fatalf("%d tool results, want %d: %+v", len(got), len(want), got)
	}
	for i, wt := range want {
		if got[i].ToolName != wt.tool || !got[i].IsError || !strings.Contains(got[i].Text, wt.why) {
			t.Errorf("result %d (%s): %s; want an error naming %q", i, got[i].ToolName, got[i].Text, wt.why)
		}
		if strings.Contains(got[i].Text, "the real body") {
			t.Errorf("result %d leaked A's episode: %s", i, got[i].Text)
		}
	}
	// Nothing was created, in B or in A.
	if ts := w.threads(b.ID); len(ts) != 0 {
		t.Fatalf("B has threads: %+v", ts)
	}
	var gs struct {
		ThreadGroups []desk.ThreadGroup `json:"thread_groups"`
	}
	w.Must(200, "GET", "/v1/sessions/"+b.ID+"/thread-groups", nil, &gs)
	if len(gs.ThreadGroups) != 0 {
		t.Fatalf("B has thread groups: %+v", gs)
	}
	if q := w.queueAll(b.ID); len(q) != 1 {
		t.Fatalf("B's queue has %d rows, want only the user's message: %+v", len(q), q)
	}
	if n := len(w.queueAll(a.ID)); n != aQueue {
		t.Fatalf("A's queue went from %d to %d rows", aQueue, n)
	}
	var g2 desk.Thread
	w.Must(200, "GET", "/v1/threads/"+gamma.ID, nil, &g2)
	if g2.State != desk.ThreadConcluded || g2.EpisodeCount != 1 {
		t.Fatalf("B's calls changed gamma: %+v", g2)
	}
	if ts := w.threads(a.ID); len(ts) != 1 {
		t.Fatalf("A has %d threads", len(ts))
	}
}

// TestThreadsExportImport: an exported workspace imports with its
// threads, groups and episodes, and the imported handler thread goes on
// answering from its script where it left off.
func TestThreadsExportImport(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []map[string]any{
			calls(tc("thread_start", map[string]any{"threads": []map[string]any{{"title": "mover", "objective": "move"}}})),
			says("delegated"), says("noted"),
		},
		"handlers": map[string]any{"mover": []map[string]any{
			calls(tc("thread_report", map[string]any{"title": "moved", "body": "moved-body", "outcome": "delivered"})),
			says("mover done"),
			says("mover-after-import"),
		}},
	}}, &x)
	w.send(x.ID, "go")
	eventually(t, "the episode to be reconciled", func() bool {
		_, d := notifications(w.queueAll(x.ID))
		return d == 1 && strings.Contains(joinTexts(w.surfaceMessages(x.ID, x.SurfaceID)), "noted")
	})
	ths := w.threads(x.ID)
	eps := w.episodes(ths[0].ID)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body

	e2 := newAgentWorld(t)
	r := e2.Admin("POST", "/v1/workspaces/import", exported)
	if r.Status != 201 {
		t.Fatalf("import = %d %s", r.Status, r.Body)
	}
	var res desk.ImportResult
	r.Decode(t, &res)
	if res.Rows["threads"] != 1 || res.Rows["thread_groups"] != 1 || res.Rows["episodes"] != 1 {
		t.Fatalf("import rows = %v", res.Rows)
	}
	got := e2.threads(x.ID)
	if len(got) != 1 || got[0].ID != ths[0].ID || got[0].SurfaceID != ths[0].SurfaceID || got[0].State != desk.ThreadConcluded ||
		got[0].GroupID != ths[0].GroupID || got[0].LatestEpisode == nil || got[0].LatestEpisode.ID != eps[0].ID {
		t.Fatalf("threads after import: %+v, before %+v", got, ths)
	}
	ge := e2.episodes(ths[0].ID)
	if len(ge) != 1 || ge[0].ID != eps[0].ID || ge[0].Body != "moved-body" || ge[0].NotificationID != eps[0].NotificationID || ge[0].Origin != eps[0].Origin {
		t.Fatalf("episodes after import: %+v, before %+v", ge, eps)
	}
	var gs struct {
		ThreadGroups []desk.ThreadGroup `json:"thread_groups"`
	}
	e2.Must(200, "GET", "/v1/sessions/"+x.ID+"/thread-groups", nil, &gs)
	if len(gs.ThreadGroups) != 1 || gs.ThreadGroups[0].ID != ths[0].GroupID {
		t.Fatalf("groups after import: %+v", gs)
	}
	// The imported thread answers a direct message from its next step.
	e2.submit(x.ID, "still there?", "surface", ths[0].SurfaceID)
	eventually(t, "the imported thread to answer", func() bool {
		return strings.Contains(joinTexts(e2.surfaceMessages(x.ID, ths[0].SurfaceID)), "mover-after-import")
	})
}
