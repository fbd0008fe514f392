package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// Handler threads survive kill -9 of the real binary: the thread start,
// the handler's first item, a report's episode and its notification are
// ordinary durable rows, so a crash neither loses nor doubles one.

// threadCrash is one desk home with a script session whose orchestrator
// and handler are slow where the test kills desk.
type threadCrash struct {
	t    *testing.T
	home string
	env  []string
	ses  desk.Session
}

func (c *threadCrash) start() *Desk {
	return startDesk(c.t, deskOpts{Home: c.home, Token: restartToken, Env: c.env})
}

func (c *threadCrash) threads(d *Desk) []desk.Thread {
	var v struct{ Threads []desk.Thread }
	d.call("GET", "/v1/sessions/"+c.ses.ID+"/threads", nil, &v)
	return v.Threads
}

func (c *threadCrash) queue(d *Desk) []desk.QueueItem {
	var v struct{ Items []desk.QueueItem }
	d.call("GET", "/v1/sessions/"+c.ses.ID+"/queue?all=true", nil, &v)
	return v.Items
}

func (c *threadCrash) executions(d *Desk) []desk.Execution {
	var v struct{ Executions []desk.Execution }
	d.call("GET", "/v1/sessions/"+c.ses.ID+"/executions", nil, &v)
	return v.Executions
}

func (c *threadCrash) episodes(d *Desk, thr string) []desk.Episode {
	var v struct{ Episodes []desk.Episode }
	d.call("GET", "/v1/threads/"+thr+"/episodes", nil, &v)
	return v.Episodes
}

func (c *threadCrash) send(d *Desk, text, surface string) *desk.QueueItem {
	var res desk.SubmitResult
	d.call("POST", "/v1/sessions/"+c.ses.ID+"/messages", map[string]string{"text": text, "surface": surface}, &res)
	return res.Item
}

func kinds(q []desk.QueueItem, kind string) []desk.QueueItem {
	var out []desk.QueueItem
	for _, it := range q {
		if it.Kind == kind {
			out = append(out, it)
		}
	}
	return out
}

// once checks that no queue row ran twice: at most one execution of
// each row started its turn. (A claim the crash cut off before its turn
// started is settled and the row goes back to the queue, by design: that
// execution never started.)
func (c *threadCrash) once(d *Desk) {
	c.t.Helper()
	per := map[string][]string{}
	for _, x := range c.executions(d) {
		if x.StartedAt != nil {
			per[x.QueueItemID] = append(per[x.QueueItemID], x.ID+" "+x.Phase+" ("+x.Reason+")")
		}
	}
	for _, it := range c.queue(d) {
		if len(per[it.ID]) > 1 {
			c.t.Fatalf("queue row %s (%s on %s) ran %d times: %v", it.ID, it.Kind, it.SurfaceID, len(per[it.ID]), per[it.ID])
		}
	}
}

// streaming reports whether a surface's running execution is streaming
// its model's answer.
func (c *threadCrash) streaming(d *Desk, srf string) bool {
	x := c.running(d, srf)
	if x == nil {
		return false
	}
	for _, e := range d.execution(x.ID).Events {
		if e.Type == "assistant.delta" {
			return true
		}
	}
	return false
}

// waitDump is testwait.Until that shows the session's rows when it times
// out.
func (c *threadCrash) waitDump(d *Desk, what string, cond func() bool) {
	c.t.Helper()
	if !testwait.Poll(restartWait, cond) {
		for _, it := range c.queue(d) {
			c.t.Logf("row %s %s on %s: %s exe %s", it.ID, it.Kind, it.SurfaceID, it.Status, it.ExecutionID)
		}
		for _, x := range c.executions(d) {
			c.t.Logf("exe %s on %s for %s: %s (%s)", x.ID, x.SurfaceID, x.QueueItemID, x.Phase, x.Reason)
		}
		srfs := map[string]bool{}
		for _, it := range c.queue(d) {
			srfs[it.SurfaceID] = true
		}
		for srf := range srfs {
			var v struct{ Messages []desk.Message }
			d.call("GET", "/v1/sessions/"+c.ses.ID+"/messages?limit=500&surface="+srf, nil, &v)
			for _, m := range v.Messages {
				c.t.Logf("%s msg %s %s: %.80q", srf, m.ExecutionID, m.Role, m.Text)
			}
		}
		var bs struct{ Blocks []desk.Block }
		d.call("GET", "/v1/sessions/"+c.ses.ID+"/blocks", nil, &bs)
		for _, b := range bs.Blocks {
			c.t.Logf("block %s on %s: %s active %v (%s)", b.ID, b.SurfaceID, b.Kind, b.Active, b.Reason)
		}
		c.t.Fatalf("timed out waiting for %s", what)
	}
}

// idle reports whether the session has nothing queued and nothing
// running.
func (c *threadCrash) idle(d *Desk) bool {
	for _, it := range c.queue(d) {
		if it.Status == desk.QueueStatusQueued || it.Status == desk.QueueStatusDispatching {
			return false
		}
	}
	for _, x := range c.executions(d) {
		if !x.Terminal() {
			return false
		}
	}
	return true
}

// progress counts what the current session's sequence made so far: queue
// rows, executions, threads and episodes.
func (c *threadCrash) progress(d *Desk) int {
	n := len(c.queue(d)) + len(c.executions(d))
	for _, th := range c.threads(d) {
		n += 1 + len(c.episodes(d, th.ID))
	}
	return n
}

// running is the running execution of a surface, or nil.
func (c *threadCrash) running(d *Desk, srf string) *desk.Execution {
	for _, x := range c.executions(d) {
		if x.SurfaceID == srf && x.Phase == desk.PhaseRunning {
			return &x
		}
	}
	return nil
}

func TestThreadsKill9(t *testing.T) { t.Parallel(); threadsKill9(t) }

func TestThreadsKill9Postgres(t *testing.T) {
	t.Parallel()
	threadsKill9(t, "DESK_POSTGRES="+pgtest.DSN(t))
}

func threadsKill9(t *testing.T, env ...string) {
	// A slow step streams 600 pieces over a minute, so its first delta
	// arrives soon and proves the model call (and the script cursor's
	// step) is under way when desk is killed.
	slow := func(text string) map[string]any {
		return map[string]any{"text": text + strings.Repeat(" .", 600), "delay_ms": 60000}
	}
	c := &threadCrash{t: t, home: t.TempDir(), env: env}
	d := c.start()
	var ws desk.Workspace
	d.call("POST", "/v1/workspaces", map[string]string{"name": "thread-crash"}, &ws)
	d.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
		"steps": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_start", "arguments": map[string]any{
				"threads": []any{map[string]any{"title": "worker", "objective": "survive crashes"}}}}}},
			slow("orchestrator still going after the start"),
			slow("orchestrator busy when the report lands"),
			map[string]any{"text": "noted the episode"},
			map[string]any{"text": "spare"},
		},
		"handlers": map[string]any{"worker": []any{
			slow("worker starting slowly"),
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_report", "arguments": map[string]any{
				"title": "survived", "body": "crash-episode-body", "outcome": "delivered"}}}},
			slow("worker still going after the report"),
			map[string]any{"text": "spare"},
		}},
	}}, &c.ses)

	// 1. kill -9 during the thread start's turn and the handler's first
	// turn: the thread is committed, both turns are mid-model-call.
	c.send(d, "delegate", "")
	var th desk.Thread
	testwait.Until(t, restartWait, func() bool {
		ts := c.threads(d)
		if len(ts) != 1 {
			return false
		}
		th = ts[0]
		return c.streaming(d, c.ses.SurfaceID) && c.streaming(d, th.SurfaceID)
	}, "the thread to start and both turns to run")
	d.Kill()
	d = c.start()
	testwait.Until(t, restartWait, func() bool {
		return c.running(d, c.ses.SurfaceID) == nil && c.running(d, th.SurfaceID) == nil
	}, "recovery to settle both turns")
	// Watched for as long as running a row again would take.
	n0 := len(c.executions(d))
	testwait.Never(t, 2*time.Second, func() bool { return len(c.executions(d)) != n0 }, "a row ran again after the recovery")
	if ts := c.threads(d); len(ts) != 1 || ts[0].ID != th.ID || ts[0].State != desk.ThreadActive {
		t.Fatalf("threads after the crash: %+v", ts)
	}
	var gs struct {
		ThreadGroups []desk.ThreadGroup `json:"thread_groups"`
	}
	d.call("GET", "/v1/sessions/"+c.ses.ID+"/thread-groups", nil, &gs)
	if len(gs.ThreadGroups) != 1 || len(gs.ThreadGroups[0].ThreadIDs) != 1 {
		t.Fatalf("groups after the crash: %+v", gs)
	}
	starts := kinds(c.queue(d), desk.QueueInitialHandler)
	if len(starts) != 1 || starts[0].SurfaceID != th.SurfaceID || starts[0].Status != desk.QueueStatusDelivered {
		t.Fatalf("initial handler starts after the crash: %+v", starts)
	}
	for _, x := range c.executions(d) {
		if x.Phase != desk.PhaseInterrupted || x.Reason != "owner-restarted" {
			t.Fatalf("a turn in flight at the crash: %s (%s)", x.Phase, x.Reason)
		}
	}
	c.once(d)

	// 2. kill -9 right after thread_report: the orchestrator is busy, so
	// the notification waits in its queue; the handler is mid-turn.
	c.send(d, "be busy", "")
	testwait.Until(t, restartWait, func() bool { return c.streaming(d, c.ses.SurfaceID) }, "the orchestrator to be busy")
	c.send(d, "report now", th.SurfaceID)
	c.waitDump(d, "the episode and its queued notification", func() bool {
		q := kinds(c.queue(d), desk.QueueThreadReport)
		return len(c.episodes(d, th.ID)) == 1 && len(q) == 1 && c.streaming(d, th.SurfaceID)
	})
	d.Kill()
	d = c.start()
	var note desk.QueueItem
	testwait.Until(t, restartWait, func() bool {
		q := kinds(c.queue(d), desk.QueueThreadReport)
		if len(q) != 1 {
			t.Fatalf("notifications after the crash: %+v", q)
		}
		note = q[0]
		if note.Status != desk.QueueStatusDelivered || note.ExecutionID == "" {
			return false
		}
		return d.execution(note.ExecutionID).Terminal()
	}, "the notification to be reconciled after the crash")
	n0 = len(c.executions(d))
	testwait.Never(t, 2*time.Second, func() bool {
		return len(c.executions(d)) != n0 || len(kinds(c.queue(d), desk.QueueThreadReport)) != 1
	}, "a row ran again, or a second notification came, after the reconciliation")
	if x := d.execution(note.ExecutionID); x.Phase != desk.PhaseEnded {
		t.Fatalf("the notification's turn: %s (%s)", x.Phase, x.Reason)
	}
	es := c.episodes(d, th.ID)
	if len(es) != 1 || es[0].Body != "crash-episode-body" || es[0].NotificationID != note.ID {
		t.Fatalf("episodes after the crash: %+v", es)
	}
	var ts []desk.Thread
	if ts = c.threads(d); len(ts) != 1 || ts[0].State != desk.ThreadConcluded || ts[0].EpisodeCount != 1 {
		t.Fatalf("the thread after the crash: %+v", ts)
	}
	if n := len(kinds(c.queue(d), desk.QueueThreadReport)); n != 1 {
		t.Fatalf("%d notifications for one episode", n)
	}
	c.once(d)
	// The orchestrator saw the body once.
	var v struct{ Messages []desk.Message }
	d.call("GET", "/v1/sessions/"+c.ses.ID+"/messages?limit=500", nil, &v)
	n := 0
	for _, m := range v.Messages {
		n += strings.Count(m.Text, "crash-episode-body")
	}
	if n != 1 {
		t.Fatalf("the orchestrator saw the episode body %d times", n)
	}
	d.Stop()
}

// TestThreadsKill9Random kills desk at a random moment of a quick
// delegate → handler report → notification sequence, several times, and
// checks after each restart that every row is accounted for: at most one
// thread per thread_start, with exactly one group and one initial start
// row; one notification per episode; no queue row run twice; nothing left
// queued once the session is idle.
func TestThreadsKill9Random(t *testing.T) { t.Parallel(); threadsKill9Random(t) }

func TestThreadsKill9RandomPostgres(t *testing.T) {
	t.Parallel()
	threadsKill9Random(t, "DESK_POSTGRES="+pgtest.DSN(t))
}

func threadsKill9Random(t *testing.T, env ...string) {
	c := &threadCrash{t: t, home: t.TempDir(), env: env}
	d := c.start()
	var ws desk.Workspace
	d.call("POST", "/v1/workspaces", map[string]string{"name": "thread-crash-random"}, &ws)
	for i := range 6 {
		d.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{
			"steps": []any{
				map[string]any{"tool_calls": []any{map[string]any{"name": "thread_start", "arguments": map[string]any{
					"threads": []any{map[string]any{"title": "quick", "objective": "report at once"}}}}}},
				map[string]any{"text": "delegated"}, map[string]any{"text": "noted"}, map[string]any{"text": "spare"},
			},
			"handlers": map[string]any{"quick": []any{
				map[string]any{"tool_calls": []any{map[string]any{"name": "thread_report", "arguments": map[string]any{
					"title": "quick", "body": "quick body", "outcome": "delivered"}}}},
				map[string]any{"text": "done"}, map[string]any{"text": "spare"},
			}},
		}}, &c.ses)
		c.send(d, "delegate", "")
		// Each round crashes at a later point of the sequence: after i
		// of its rows, executions, threads and episodes exist (or once
		// it is over).
		testwait.Until(t, restartWait, func() bool { return c.progress(d) >= i || c.idle(d) }, fmt.Sprintf("%d steps of the sequence", i))
		d.Kill()
		d = c.start()
		testwait.Until(t, restartWait, func() bool { return c.idle(d) }, "the session to be idle after the restart")
		testwait.Never(t, 500*time.Millisecond, func() bool { return !c.idle(d) }, "the idle session started work again")
		ts := c.threads(d)
		var gs struct {
			ThreadGroups []desk.ThreadGroup `json:"thread_groups"`
		}
		d.call("GET", "/v1/sessions/"+c.ses.ID+"/thread-groups", nil, &gs)
		q := c.queue(d)
		eps := 0
		for _, th := range ts {
			eps += len(c.episodes(d, th.ID))
		}
		if len(ts) > 1 || len(gs.ThreadGroups) != len(ts) || len(kinds(q, desk.QueueInitialHandler)) != len(ts) ||
			eps > len(ts) || len(kinds(q, desk.QueueThreadReport)) != eps {
			t.Fatalf("kill after %d steps: %d threads, %d groups, %d starts, %d episodes, %d notifications",
				i, len(ts), len(gs.ThreadGroups), len(kinds(q, desk.QueueInitialHandler)), eps, len(kinds(q, desk.QueueThreadReport)))
		}
		c.once(d)
		t.Logf("kill after %d steps: %d threads, %d episodes", i, len(ts), eps)
	}
	d.Stop()
}
