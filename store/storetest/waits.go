package storetest

import (
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testWaits checks what a turn waiting on a person needs to survive a
// restart: adoption of a dead owner's execution, the results kept on
// command records, the deadline of a blocking question, an execution's
// plan cards, and durable title jobs.
func testWaits(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "waits")
	x := newSession(t, s, w, owner, "s")
	it := enqueue(t, s, x, "a", desk.PriorityNormal, desk.QueueUserMessage)
	_, exe := claim(t, s, x.SurfaceID, "own_dead")

	// Only a running execution is adopted, and only from its owner.
	wantCode(t, adopt(s, exe.ID, "own_dead", "own_new"), desk.ECONFLICT)
	if _, err := s.MarkRunning(ctx, exe.ID, "own_dead", desk.Now()); err != nil {
		t.Fatal(err)
	}
	wantCode(t, adopt(s, exe.ID, "own_other", "own_new"), desk.ECONFLICT)
	must(t, adopt(s, exe.ID, "own_dead", "own_new"))
	got, err := s.GetExecution(ctx, exe.ID)
	if err != nil || got.Owner != "own_new" || got.Phase != desk.PhaseRunning {
		t.Fatalf("adopted execution: %+v %v", got, err)
	}
	q, err := s.GetQueueItem(ctx, it.ID)
	if err != nil || q.ClaimedBy != "own_new" || q.Status != desk.QueueStatusDispatching {
		t.Fatalf("adopted row: %+v %v", q, err)
	}
	wantCode(t, adopt(s, exe.ID, "own_dead", "own_third"), desk.ECONFLICT) // adopted once
	// The new owner settles it; the dead one cannot.
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_dead", Phase: desk.PhaseEnded, Reason: "completed",
		ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("settle by the dead owner: %v", err)
	}

	// A command's result round-trips; no result reads back as nil.
	c := &desk.Command{ID: desk.NewID("cmd"), ExecutionID: exe.ID, SessionID: x.ID, SurfaceID: x.SurfaceID, CallID: "call_1",
		Tool: "exec_command", Arguments: []byte(`{}`), Status: desk.CommandRequested, CreatedAt: desk.Now()}
	must(t, s.CreateCommand(ctx, c))
	cs, err := s.ListCommands(ctx, []string{exe.ID})
	if err != nil || len(cs) != 1 || cs[0].Result != nil {
		t.Fatalf("new command: %+v %v", cs, err)
	}
	c.Status = desk.CommandDeclined
	c.Result = &desk.CommandResult{Text: `{"error":"declined"}`, IsError: true, Stop: "the user declined the plan"}
	must(t, s.UpdateCommand(ctx, c))
	cs, _ = s.ListCommands(ctx, []string{exe.ID})
	if r := cs[0].Result; r == nil || *r != *c.Result || cs[0].Status != desk.CommandDeclined {
		t.Fatalf("result after update: %+v", cs[0].Result)
	}

	// A blocking question keeps its deadline; a non-blocking one has none.
	dl := desk.Now().Add(5 * time.Minute)
	r := &desk.InputRequest{ID: desk.NewID("inp"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe.ID, CommandID: c.ID,
		Questions: []desk.InputQuestion{{ID: "q1", Question: "?", Default: "yes"}}, Blocking: true, Status: desk.InputPending,
		Deadline: &dl, CreatedAt: desk.Now()}
	must(t, s.CreateInputRequest(ctx, r))
	nb := *r
	nb.ID, nb.Blocking, nb.Deadline = desk.NewID("inp"), false, nil
	must(t, s.CreateInputRequest(ctx, &nb))
	gr, err := s.GetInputRequest(ctx, r.ID)
	if err != nil || gr.Deadline == nil || !gr.Deadline.Equal(dl) {
		t.Fatalf("deadline: %+v %v", gr, err)
	}
	if gn, _ := s.GetInputRequest(ctx, nb.ID); gn.Deadline != nil {
		t.Fatalf("a non-blocking request has a deadline: %v", gn.Deadline)
	}

	// An execution's plan cards, oldest first, and no one else's.
	p1 := &desk.Plan{ID: desk.NewID("pln"), SessionID: x.ID, ExecutionID: exe.ID, CommandID: c.ID, Card: []byte(`{"title":"a"}`),
		Status: desk.PlanProposed, CreatedAt: desk.Now()}
	p2 := *p1
	p2.ID, p2.CreatedAt = desk.NewID("pln"), p1.CreatedAt.Add(time.Millisecond)
	other := *p1
	other.ID, other.ExecutionID = desk.NewID("pln"), "exe_other"
	for _, p := range []*desk.Plan{p1, &p2, &other} {
		must(t, s.CreatePlan(ctx, p))
	}
	ps, err := s.ListPlans(ctx, exe.ID)
	if err != nil || len(ps) != 2 || ps[0].ID != p1.ID || ps[1].ID != p2.ID {
		t.Fatalf("plans of the execution: %+v %v", ps, err)
	}

	// Title jobs count their tries and end once.
	for want := 1; want <= 2; want++ {
		n, err := s.BeginTitleJob(ctx, x.ID, "first words", desk.Now())
		if err != nil || n != want {
			t.Fatalf("try %d of the title job: %d %v", want, n, err)
		}
	}
	js, err := s.ListTitleJobs(ctx)
	if err != nil || len(js) != 1 || js[0].SessionID != x.ID || js[0].FirstMessage != "first words" || js[0].Attempts != 2 {
		t.Fatalf("title jobs: %+v %v", js, err)
	}
	must(t, s.EndTitleJob(ctx, x.ID))
	must(t, s.EndTitleJob(ctx, x.ID)) // ending twice is no error
	if js, _ := s.ListTitleJobs(ctx); len(js) != 0 {
		t.Fatalf("title jobs after the end: %+v", js)
	}
	// A purged session takes its job with it.
	if _, err := s.BeginTitleJob(ctx, x.ID, "again", desk.Now()); err != nil {
		t.Fatal(err)
	}
	must(t, s.PurgeSession(ctx, x.ID))
	if js, _ := s.ListTitleJobs(ctx); len(js) != 0 {
		t.Fatalf("title jobs after the purge: %+v", js)
	}
}

func adopt(s desk.Store, exe, from, to string) error {
	now := desk.Now()
	_, err := s.AdoptExecution(ctx, exe, from, to, now, now.Add(time.Minute))
	return err
}
