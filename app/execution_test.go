package app_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/testwait"
)

type execWorld struct {
	*world
	ex *apptest.Executor
}

func newExecWorld(t *testing.T, mod ...func(*app.Config)) *execWorld {
	ex := apptest.NewExecutor()
	cfg := app.Config{Executor: ex, Execution: execution.Options{PollInterval: 50 * time.Millisecond, StopTimeout: 3 * time.Second}}
	for _, m := range mod {
		m(&cfg)
	}
	return &execWorld{world: newWorldOn(t, cfg), ex: ex}
}

func (w *execWorld) submit(ses, text string, extra ...string) desk.SubmitResult {
	w.T.Helper()
	return w.submitAs(w.Token, ses, text, extra...)
}

// submitAs is submit with another caller's token.
func (w *execWorld) submitAs(token, ses, text string, extra ...string) desk.SubmitResult {
	w.T.Helper()
	body := map[string]string{"text": text}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = extra[i+1]
	}
	var res desk.SubmitResult
	r := w.Req("POST", "/v1/sessions/"+ses+"/messages", token, body)
	if r.Status != 202 && r.Status != 200 {
		w.T.Fatalf("submit %q = %d %s", text, r.Status, r.Body)
	}
	r.Decode(w.T, &res)
	// The answer names the execution whenever the message started at once
	// (whichever dispatcher of this desk claimed it); it is empty only for
	// a row that waits behind running work or a block.
	return res
}

func (w *execWorld) exe(id string) desk.Execution {
	w.T.Helper()
	var x desk.Execution
	w.Must(200, "GET", "/v1/executions/"+id, nil, &x)
	return x
}

// waitFor is testwait.Until with app's tests' timeout and argument order:
// cond must hold within 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, cond, what)
}

func (w *execWorld) waitPhase(id, phase string) desk.Execution {
	w.T.Helper()
	var x desk.Execution
	waitFor(w.T.(*testing.T), "execution "+id+" to be "+phase, func() bool { x = w.exe(id); return x.Phase == phase })
	return x
}

func (w *execWorld) item(ses, id string) desk.QueueItem {
	w.T.Helper()
	var q struct{ Items []desk.QueueItem }
	w.Must(200, "GET", "/v1/sessions/"+ses+"/queue?all=true", nil, &q)
	for _, it := range q.Items {
		if it.ID == id {
			return it
		}
	}
	w.T.Fatalf("queue item %s not in %s", id, ses)
	return desk.QueueItem{}
}

// TestStartingRecordedBeforeExecutorStarts: the queue row and the starting
// execution are committed before the executor is called.
func TestStartingRecordedBeforeExecutorStarts(t *testing.T) {
	apptest.Parallel(t)
	seen := make(chan desk.Execution, 1)
	ex := execution.ExecutorFunc(func(ctx context.Context, tr *execution.Turn) (*execution.Outcome, error) {
		return nil, nil
	})
	var w *execWorld
	w = newExecWorld(t, func(c *app.Config) {
		c.Executor = execution.ExecutorFunc(func(ctx context.Context, tr *execution.Turn) (*execution.Outcome, error) {
			x, err := w.App.Store.GetExecution(ctx, tr.Execution.ID)
			if err != nil {
				return nil, err
			}
			q, err := w.App.Store.GetQueueItem(ctx, tr.Item.ID)
			if err != nil || q.Status != desk.QueueStatusDispatching || q.ExecutionID != x.ID {
				t.Errorf("row when the executor starts: %+v %v", q, err)
			}
			seen <- *x
			return ex.Execute(ctx, tr)
		})
	})
	res := w.submit(w.a.ID, "hello")
	if res.ExecutionID == "" {
		t.Fatalf("submit to an idle surface started nothing: %+v", res)
	}
	x := <-seen
	if it := w.item(w.a.ID, res.Item.ID); it.ExecutionID != res.ExecutionID || it.Status == desk.QueueStatusQueued {
		t.Fatalf("row after the claim: %+v", it)
	}
	if x.Phase != desk.PhaseStarting || x.ID != res.ExecutionID {
		t.Fatalf("execution seen by the executor: %+v", x)
	}
	done := w.waitPhase(res.ExecutionID, desk.PhaseEnded)
	if done.StartedAt == nil || done.FinishedAt == nil || done.Origin.ExecutionID != done.ID || done.Origin.Kind != desk.OriginUser {
		t.Fatalf("ended execution: %+v", done)
	}
	if it := w.item(w.a.ID, res.Item.ID); it.Status != desk.QueueStatusDelivered || it.LeaseVersion != 1 || it.Attempts != 1 {
		t.Fatalf("delivered row: %+v", it)
	}
}

// TestSecondStartIsBusy: a surface runs one execution at a time; a second
// message queues, multitask reject answers busy, and the store refuses a
// second claim outright.
func TestSecondStartIsBusy(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	first := w.submit(w.a.ID, "gate one")
	w.waitPhase(first.ExecutionID, desk.PhaseRunning)
	second := w.submit(w.a.ID, "reply two")
	if second.ExecutionID != "" || second.Item.Status != desk.QueueStatusQueued {
		t.Fatalf("second submit started: %+v", second)
	}
	r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/messages", map[string]string{"text": "third", "multitask": "reject"})
	if r.Status != 409 || r.ErrorCode() != desk.EBUSY {
		t.Fatalf("reject while busy = %d %s", r.Status, r.Body)
	}
	// Nothing was queued by the refused submit.
	var q struct{ Items []desk.QueueItem }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/queue", nil, &q)
	if len(q.Items) != 2 {
		t.Fatalf("queue after reject: %d rows", len(q.Items))
	}
	now := desk.Now()
	it, x, err := w.App.Store.Claim(t.Context(), desk.ClaimRequest{SurfaceID: w.a.SurfaceID, Owner: "own_other", ExecutionID: desk.NewID("exe"), Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || it != nil || x != nil {
		t.Fatalf("a second claim on a busy surface: %v %v %v", it, x, err)
	}
	// A different surface of another session runs at the same time.
	other := w.submit(w.b.ID, "gate two")
	w.waitPhase(other.ExecutionID, desk.PhaseRunning)
	w.ex.Open("one")
	w.ex.Open("two")
	w.waitPhase(first.ExecutionID, desk.PhaseEnded)
	waitFor(t, "second row to be delivered", func() bool { return w.item(w.a.ID, second.Item.ID).Status == desk.QueueStatusDelivered })
	if m := w.ex.MaxConcurrent(w.a.SurfaceID); m != 1 {
		t.Fatalf("surface ran %d executions at once", m)
	}
}

func TestIdempotencyKey(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	a := w.submit(w.a.ID, "reply once", "idempotency_key", "k-1")
	r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/messages", map[string]string{"text": "something else", "idempotency_key": "k-1"})
	var b desk.SubmitResult
	r.Decode(t, &b)
	if r.Status != 200 || b.Created || b.Item.ID != a.Item.ID || b.Item.Text != "reply once" {
		t.Fatalf("repeat = %d %+v", r.Status, b)
	}
	w.waitPhase(a.ExecutionID, desk.PhaseEnded)
	// A second start would follow the first within a dispatcher poll.
	testwait.Never(t, 200*time.Millisecond, func() bool { return len(w.ex.Calls()) != 1 }, "a second execution for one idempotency key")
}

// TestQueueOrderAndControls: steered first, then answers FIFO, then the
// rest FIFO; cancel and move work only before a claim.
func TestQueueOrderAndControls(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	hold := w.submit(w.a.ID, "gate hold")
	w.waitPhase(hold.ExecutionID, desk.PhaseRunning)
	m1 := w.submit(w.a.ID, "reply m1")
	m2 := w.submit(w.a.ID, "reply m2")
	m3 := w.submit(w.a.ID, "reply m3")
	m4 := w.submit(w.a.ID, "reply m4")
	// An answer row outranks ordinary messages.
	ans := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: w.a.SurfaceID, SessionID: w.a.ID, WorkspaceID: w.ws.ID,
		Kind: desk.QueueInputAnswer, Priority: desk.PriorityAnswer, Text: "reply answer", Channel: "http", ConversationID: w.a.ID,
		Origin: desk.Origin{WorkspaceID: w.ws.ID, SessionID: w.a.ID, Actor: "admin", Kind: desk.OriginUser}, CreatedAt: desk.Now()}
	if _, _, err := w.App.Store.Enqueue(t.Context(), ans, desk.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/queue/"+m3.Item.ID+"/steer", nil, nil)
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/queue/"+m1.Item.ID+"/move", map[string]string{"to": "back"}, nil)
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/queue/"+m4.Item.ID+"/cancel", nil, nil)
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/queue/"+hold.Item.ID+"/cancel", nil); r.Status != 409 {
		t.Fatalf("cancel after claim = %d", r.Status)
	}
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/queue/"+m2.Item.ID+"/move", map[string]string{"to": "sideways"}); r.Status != 400 {
		t.Fatalf("bad move = %d", r.Status)
	}
	var q struct{ Items []desk.QueueItem }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/queue", nil, &q)
	var order []string
	for _, it := range q.Items {
		order = append(order, it.Text)
	}
	want := "gate hold,reply m3,reply answer,reply m2,reply m1"
	if strings.Join(order, ",") != want {
		t.Fatalf("queue order %v, want %s", order, want)
	}
	w.ex.Open("hold")
	waitFor(t, "queue to drain", func() bool { return w.item(w.a.ID, m1.Item.ID).Status == desk.QueueStatusDelivered })
	var ran []string
	for _, c := range w.ex.Calls() {
		ran = append(ran, c.Text)
	}
	if strings.Join(ran, ",") != want {
		t.Fatalf("ran %v, want %s", ran, want)
	}
	if it := w.item(w.a.ID, m4.Item.ID); it.Status != desk.QueueStatusCancelled {
		t.Fatalf("cancelled row: %+v", it)
	}
}

// TestInterruptWaitsForExecutor: the answer comes after the executor
// returned, and the execution is interrupted with the caller as actor.
func TestInterruptWaitsForExecutor(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "slowstop 300")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	began := time.Now()
	var ir desk.InterruptResult
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/executions/"+res.ExecutionID+"/interrupt", nil, &ir)
	if time.Since(began) < 250*time.Millisecond {
		t.Fatalf("interrupt answered before the executor stopped (%v)", time.Since(began))
	}
	x := ir.Execution
	if !ir.Stopped || x.Phase != desk.PhaseInterrupted || x.Interruption == nil || x.Interruption.By != desk.AdminActor || x.Reason != "user-interrupt" {
		t.Fatalf("interrupt: %+v %+v", ir, x.Interruption)
	}
	// An old execution's interrupt answers stopped:false.
	var again desk.InterruptResult
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/executions/"+res.ExecutionID+"/interrupt", nil, &again)
	if again.Stopped || again.Execution.Phase != desk.PhaseInterrupted {
		t.Fatalf("second interrupt: %+v", again)
	}
}

func TestFailedHandshakeEndsFailed(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "failstart no model session")
	x := w.waitPhase(res.ExecutionID, desk.PhaseFailed)
	if !strings.Contains(x.Reason, "start failed") || x.StartedAt != nil {
		t.Fatalf("failed start: %+v", x)
	}
	if it := w.item(w.a.ID, res.Item.ID); it.Status != desk.QueueStatusFailed || it.Error == "" {
		t.Fatalf("row of a failed start: %+v", it)
	}
}

func TestInterruptStalledStart(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "stall")
	waitFor(t, "the stalled start", func() bool { return len(w.ex.Calls()) == 1 })
	if x := w.exe(res.ExecutionID); x.Phase != desk.PhaseStarting {
		t.Fatalf("stalled execution is %s", x.Phase)
	}
	var ir desk.InterruptResult
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/executions/"+res.ExecutionID+"/interrupt", nil, &ir)
	if !ir.Stopped || ir.Execution.Phase != desk.PhaseInterrupted {
		t.Fatalf("interrupt of a stalled start: %+v", ir)
	}
	if it := w.item(w.a.ID, res.Item.ID); it.Status != desk.QueueStatusCancelled {
		t.Fatalf("row interrupted before it started: %+v", it)
	}
}

func TestInterruptWrongExecution(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "block")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/executions/exe_01ARZ3NDEKTSV4RRFFQ69G5FAV/interrupt", nil); r.Status != 404 {
		t.Fatalf("unknown execution = %d", r.Status)
	}
	if r := w.Admin("POST", "/v1/sessions/"+w.b.ID+"/executions/"+res.ExecutionID+"/interrupt", nil); r.Status != 404 {
		t.Fatalf("execution through another session = %d", r.Status)
	}
	r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/executions/"+res.ExecutionID+"/interrupt", map[string]string{"actor": "act_someone"})
	if r.Status != 400 || !strings.Contains(r.ErrorMessage(), "token") {
		t.Fatalf("body naming an actor = %d %s", r.Status, r.Body)
	}
	if x := w.exe(res.ExecutionID); x.Phase != desk.PhaseRunning {
		t.Fatalf("refused interrupts changed the execution: %s", x.Phase)
	}
}

func TestConcurrentInterruptsShareOneStop(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "slowstop 200")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	var wg sync.WaitGroup
	results := make([]desk.InterruptResult, 6)
	for i := range results {
		wg.Go(func() {
			r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/executions/"+res.ExecutionID+"/interrupt", nil)
			r.Decode(t, &results[i])
		})
	}
	wg.Wait()
	stopped := 0
	for _, r := range results {
		if r.Execution == nil || r.Execution.Phase != desk.PhaseInterrupted {
			t.Fatalf("an interrupt answered %+v", r)
		}
		if r.Stopped {
			stopped++
		}
	}
	if stopped == 0 {
		t.Fatal("no interrupt reported the stop")
	}
	var bs struct{ Blocks []desk.Block }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/blocks", nil, &bs)
	if len(bs.Blocks) != 1 || bs.Blocks[0].Kind != desk.BlockUserCooldown {
		t.Fatalf("blocks after concurrent interrupts: %+v", bs.Blocks)
	}
	x := w.exe(res.ExecutionID)
	n := 0
	for _, e := range x.Events {
		if e.Type == "execution.stopping" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d stopping transitions, want one shared stop", n)
	}
}

// TestBlockedStartUntilRelease: consecutive failures create an
// execution-fault block; nothing starts until it is released and the
// queue resumed.
func TestBlockedStartUntilRelease(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	for i := range 3 {
		res := w.submit(w.a.ID, "fail boom")
		w.waitPhase(res.ExecutionID, desk.PhaseFailed)
		_ = i
	}
	var bs struct{ Blocks []desk.Block }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/blocks", nil, &bs)
	if len(bs.Blocks) != 1 || bs.Blocks[0].Kind != desk.BlockExecutionFault || !bs.Blocks[0].Active {
		t.Fatalf("blocks after 3 failures: %+v", bs.Blocks)
	}
	next := w.submit(w.a.ID, "reply after the fault")
	if next.ExecutionID != "" {
		t.Fatalf("blocked surface started work: %+v", next)
	}
	// The dispatcher polls every 50ms: watch a few of its rounds.
	testwait.Never(t, 200*time.Millisecond, func() bool { return w.item(w.a.ID, next.Item.ID).Status != desk.QueueStatusQueued }, "the blocked surface to start work")
	// Release starts nothing.
	var b desk.Block
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/blocks/"+bs.Blocks[0].ID+"/release", nil, &b)
	if b.Active || b.ReleasedBy != desk.AdminActor {
		t.Fatalf("released block: %+v", b)
	}
	testwait.Never(t, 200*time.Millisecond, func() bool { return w.item(w.a.ID, next.Item.ID).Status != desk.QueueStatusQueued }, "the release to start work")
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/queue/resume", map[string]string{}, nil)
	waitFor(t, "the queue to resume", func() bool { return w.item(w.a.ID, next.Item.ID).Status == desk.QueueStatusDelivered })
}

// TestStopNotConfirmed: an executor that ignores the stop leaves the
// execution stopping with stop_error and the surface occupied; it settles
// when the executor finally returns.
func TestStopNotConfirmed(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t, func(c *app.Config) { c.Execution.StopTimeout = 200 * time.Millisecond })
	res := w.submit(w.a.ID, "ignorestop 1500")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	var ir desk.InterruptResult
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/executions/"+res.ExecutionID+"/interrupt", nil, &ir)
	if ir.Stopped || !ir.Pending || ir.Execution.Phase != desk.PhaseStopping || ir.Execution.StopError == "" {
		t.Fatalf("unconfirmed stop: %+v", ir)
	}
	next := w.submit(w.a.ID, "reply next")
	if next.ExecutionID != "" {
		t.Fatal("a stopping surface admitted new work")
	}
	x := w.waitPhase(res.ExecutionID, desk.PhaseInterrupted)
	if x.StopError == "" {
		t.Fatalf("stop_error lost: %+v", x)
	}
	waitFor(t, "next to run", func() bool { return w.item(w.a.ID, next.Item.ID).Status == desk.QueueStatusDelivered })
}

// TestUserCooldownAndTakeover: after a user interrupt, work from other
// origins waits; the user's next submit clears the block. While a composer
// is attached, agent work waits for approval or idleness.
func TestUserCooldownAndTakeover(t *testing.T) {
	apptest.Parallel(t)
	// Idleness is 2 s: long enough that an attach and the next submit fall
	// within it on a loaded machine under -race (at 400 ms the held row
	// sometimes started at once), short enough to wait for the takeover.
	w := newExecWorld(t, func(c *app.Config) { c.Execution.TakeoverIdle = 2 * time.Second })
	var bot struct {
		Actor desk.Actor
		Token string
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bot", "kind": "agent"}, &bot)
	var bs desk.Session
	r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", bot.Token, map[string]string{})
	r.Decode(t, &bs)

	// The first claim may be a dispatcher's that the poll woke a moment
	// before the submit's own wake (seen under -race): wait for it.
	first := w.submitAs(bot.Token, bs.ID, "block")
	if first.Item.Origin.Kind != desk.OriginAgent {
		t.Fatalf("agent token made origin %+v", first.Item.Origin)
	}
	w.waitPhase(first.ExecutionID, desk.PhaseRunning)
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/executions/"+first.ExecutionID+"/interrupt", nil, nil)
	var agentWork desk.SubmitResult
	w.Req("POST", "/v1/sessions/"+bs.ID+"/messages", bot.Token, map[string]string{"text": "reply from the agent"}).Decode(t, &agentWork)
	testwait.Never(t, 200*time.Millisecond, func() bool { return w.item(bs.ID, agentWork.Item.ID).Status != desk.QueueStatusQueued }, "agent work to run during the user cooldown")
	// Approval never overrides a block.
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/queue/"+agentWork.Item.ID+"/approve", nil, nil)
	testwait.Never(t, 200*time.Millisecond, func() bool { return w.item(bs.ID, agentWork.Item.ID).Status != desk.QueueStatusQueued }, "approval to override the cooldown")
	// The user's next submit clears the cooldown; both run.
	user := w.submit(bs.ID, "reply from the user")
	waitFor(t, "both rows to run", func() bool {
		return w.item(bs.ID, user.Item.ID).Status == desk.QueueStatusDelivered && w.item(bs.ID, agentWork.Item.ID).Status == desk.QueueStatusDelivered
	})

	// Takeover: an attached composer holds agent work until it is approved
	// or the surface is idle.
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/surfaces/"+bs.SurfaceID+"/attach", nil, nil)
	var held desk.SubmitResult
	w.Req("POST", "/v1/sessions/"+bs.ID+"/messages", bot.Token, map[string]string{"text": "reply held"}).Decode(t, &held)
	if held.ExecutionID != "" {
		t.Fatal("agent work started on an attached, busy-looking surface")
	}
	waitFor(t, "idle takeover", func() bool { return w.item(bs.ID, held.Item.ID).Status == desk.QueueStatusDelivered })
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/surfaces/"+bs.SurfaceID+"/attach", nil, nil)
	w.submit(bs.ID, "reply keep busy") // user activity resets idleness
	var approved desk.SubmitResult
	w.Req("POST", "/v1/sessions/"+bs.ID+"/messages", bot.Token, map[string]string{"text": "reply approved"}).Decode(t, &approved)
	testwait.Never(t, 150*time.Millisecond, func() bool { return w.item(bs.ID, approved.Item.ID).Status != desk.QueueStatusQueued }, "agent work to run while attached and active")
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/queue/"+approved.Item.ID+"/approve", nil, nil)
	waitFor(t, "approved row", func() bool { return w.item(bs.ID, approved.Item.ID).Status == desk.QueueStatusDelivered })
}

// TestS_H_ScratchRemovedAfterSettle: scratch exists during the execution
// and is gone once it settles.
func TestS_H_ScratchRemovedAfterSettle(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "scratch")
	w.waitPhase(res.ExecutionID, desk.PhaseEnded)
	calls := w.ex.Calls()
	if len(calls) != 1 || calls[0].Scratch == "" {
		t.Fatalf("calls: %+v", calls)
	}
	if _, err := os.Stat(calls[0].Scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch survives the settle: %v", err)
	}
	// Also when the execution fails or is interrupted.
	f := w.submit(w.a.ID, "fail x")
	w.waitPhase(f.ExecutionID, desk.PhaseFailed)
	b := w.submit(w.a.ID, "block")
	w.waitPhase(b.ExecutionID, desk.PhaseRunning)
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/executions/"+b.ExecutionID+"/interrupt", nil, nil)
	for _, c := range w.ex.Calls() {
		if _, err := os.Stat(c.Scratch); !os.IsNotExist(err) {
			t.Fatalf("scratch of %s survives: %v", c.Text, err)
		}
	}
}

// TestReopenMarksInterrupted: executions a dead owner left behind become
// interrupted (owner-restarted) and are not re-run; a claim that never
// started goes back to the front of its queue and runs once.
func TestReopenMarksInterrupted(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	ctx := t.Context()
	st := w.App.Store
	dead := &desk.Owner{ID: "own_dead", Host: "elsewhere/boot", PID: 1, StartedAt: desk.Now().Add(-time.Hour), HeartbeatAt: desk.Now().Add(-time.Hour)}
	if err := st.RegisterOwner(ctx, dead); err != nil {
		t.Fatal(err)
	}
	enq := func(x desk.Session, text string) *desk.QueueItem {
		it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: x.SurfaceID, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
			Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: text, Channel: "http", ConversationID: x.ID,
			Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: "admin", Kind: desk.OriginUser}, CreatedAt: desk.Now()}
		if _, _, err := st.Enqueue(ctx, it, desk.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
		return it
	}
	// Session A: the dead owner was running a turn. Session B: it had
	// only claimed one.
	ra := enq(w.a, "reply ran before the crash")
	rb := enq(w.b, "reply never started")
	w.App.Exec.Close(ctx) // keep this process from dispatching while we stage
	now := desk.Now()
	_, xa, err := st.Claim(ctx, desk.ClaimRequest{SurfaceID: w.a.SurfaceID, Owner: dead.ID, ExecutionID: desk.NewID("exe"), Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || xa == nil {
		t.Fatalf("claim A: %v", err)
	}
	if _, err := st.MarkRunning(ctx, xa.ID, dead.ID, now); err != nil {
		t.Fatal(err)
	}
	_, xb, err := st.Claim(ctx, desk.ClaimRequest{SurfaceID: w.b.SurfaceID, Owner: dead.ID, ExecutionID: desk.NewID("exe"), Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || xb == nil {
		t.Fatalf("claim B: %v", err)
	}
	w.Restart()
	a := w.waitPhase(xa.ID, desk.PhaseInterrupted)
	if a.Reason != "owner-restarted" || a.Origin.Actor != "admin" {
		t.Fatalf("running execution after reopen: %+v", a)
	}
	if it := w.item(w.a.ID, ra.ID); it.Status != desk.QueueStatusDelivered {
		t.Fatalf("row of an interrupted turn: %+v", it)
	}
	b := w.exe(xb.ID)
	if b.Phase != desk.PhaseInterrupted || b.Reason != "owner-restarted" {
		t.Fatalf("claimed-but-not-started execution: %+v", b)
	}
	waitFor(t, "the requeued row to run", func() bool { return w.item(w.b.ID, rb.ID).Status == desk.QueueStatusDelivered })
	for _, c := range w.ex.Calls() {
		if c.ItemID == ra.ID {
			t.Fatal("a turn that may have started was run again")
		}
	}
	// Recovery is idempotent.
	w.Restart()
	if again := w.exe(xa.ID); again.Phase != desk.PhaseInterrupted || again.FinishedAt == nil || !again.FinishedAt.Equal(*a.FinishedAt) {
		t.Fatalf("second recovery changed the execution: %+v", again)
	}
}

func TestRetireRecallResolve(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	var r desk.Resolution
	w.Must(200, "POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "session", "id": w.a.ID}}, &r)
	if r.Resolution != desk.ResolveExact || r.SessionID != w.a.ID || r.Origin == nil {
		t.Fatalf("usable session: %+v", r)
	}
	art := w.put(w.a.ID, "x.md", []byte("x"))
	w.Must(200, "POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "artifact", "id": art.ID}}, &r)
	if r.Resolution != desk.ResolveExact || r.SessionID != w.a.ID {
		t.Fatalf("artifact resolution: %+v", r)
	}
	// A running session cannot be retired; an idle one can.
	run := w.submit(w.a.ID, "block")
	w.waitPhase(run.ExecutionID, desk.PhaseRunning)
	if rr := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/retire", nil); rr.Status != 409 {
		t.Fatalf("retire while running = %d", rr.Status)
	}
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/executions/"+run.ExecutionID+"/interrupt", nil, nil)
	var x desk.Session
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/retire", nil, &x)
	if x.Lifecycle != desk.SessionRetired {
		t.Fatalf("retired: %+v", x)
	}
	if rr := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/messages", map[string]string{"text": "hi"}); rr.Status != 409 {
		t.Fatalf("submit to a retired session = %d", rr.Status)
	}
	w.Must(200, "POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "session", "id": w.a.ID}}, &r)
	if r.Resolution != desk.ResolveUnavailable || r.Reason != "retired-session" || r.Origin == nil || r.Origin.Actor != desk.AdminActor {
		t.Fatalf("retired session: %+v", r)
	}
	w.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/recall", nil, &x)
	if x.Lifecycle != desk.SessionActive {
		t.Fatalf("recalled: %+v", x)
	}
	// An unknown target in a known workspace is reconstructed, never
	// presented as the original.
	w.Must(200, "POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "session", "id": "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_id": w.ws.ID}}, &r)
	if r.Resolution != desk.ResolveReconstructed || r.SessionID == "" {
		t.Fatalf("unknown target: %+v", r)
	}
	var rec desk.Session
	w.Must(200, "GET", "/v1/sessions/"+r.SessionID, nil, &rec)
	if rec.ReconstructedFrom != "session:ses_01ARZ3NDEKTSV4RRFFQ69G5FAV" || rec.ID == "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV" {
		t.Fatalf("reconstructed session: %+v", rec)
	}
	w.Must(200, "POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "session", "id": "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_id": "ws_01ARZ3NDEKTSV4RRFFQ69G5FAV"}}, &r)
	if r.Resolution != desk.ResolveUnavailable || r.Reason != "unknown-workspace" {
		t.Fatalf("unknown workspace: %+v", r)
	}
	if rr := w.Admin("POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "planet", "id": "x"}}); rr.Status != 400 {
		t.Fatalf("bad kind = %d", rr.Status)
	}
}

// TestDeleteSessionStopsItsExecutions: deleting a session interrupts what
// runs in it and removes its queue, executions and scratch with it (S-K).
func TestDeleteSessionStopsItsExecutions(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	run := w.submit(w.a.ID, "block")
	w.waitPhase(run.ExecutionID, desk.PhaseRunning)
	w.submit(w.a.ID, "reply queued behind")
	scratch := w.ex.Calls()[0].Scratch
	w.Must(204, "DELETE", "/v1/sessions/"+w.a.ID, nil, nil)
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch of the deleted session's execution survives: %v", err)
	}
	if r := w.Admin("GET", "/v1/executions/"+run.ExecutionID, nil); r.Status != 404 {
		t.Fatalf("execution of a deleted session = %d", r.Status)
	}
	if act, _ := w.App.Store.ListActiveExecutions(t.Context()); len(act) != 0 {
		t.Fatalf("active executions after delete: %d", len(act))
	}
	testwait.Never(t, 150*time.Millisecond, func() bool { return len(w.ex.Calls()) != 1 }, "the queued row of a deleted session to run")
}
