package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testInbox: pending approvals, questions and proposed plans are listed
// across sessions, oldest first, and only the filter's actor's with a
// filter; decided ones and those of a session being deleted are not; a
// routine is listed while its latest finished run failed, and leaves once
// a later run succeeded.
func testInbox(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	bot := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: "bot", Kind: desk.ActorAgent, CreatedAt: desk.Now()}
	must(t, s.CreateActor(ctx, bot, ""))
	mine, theirs, gone := newSession(t, s, w, owner, "mine"), newSession(t, s, w, bot, "theirs"), newSession(t, s, w, owner, "gone")
	t0 := desk.Now().Add(-time.Hour)
	approval := func(x *desk.Session, at time.Time, status string) *desk.Approval {
		a := &desk.Approval{ID: desk.NewID("apr"), SessionID: x.ID, ExecutionID: "exe_x", CommandID: desk.NewID("cmd"), Tool: "exec_command",
			Summary: "ls", Status: status, CreatedAt: at}
		must(t, s.CreateApproval(ctx, a))
		return a
	}
	a2 := approval(theirs, t0.Add(2*time.Second), desk.ApprovalPending)
	a1 := approval(mine, t0.Add(time.Second), desk.ApprovalPending)
	approval(mine, t0, desk.ApprovalApproved)
	approval(gone, t0, desk.ApprovalPending)
	must(t, s.MarkSessionDeleting(ctx, gone.ID))
	in := &desk.InputRequest{ID: desk.NewID("inp"), SessionID: theirs.ID, SurfaceID: theirs.SurfaceID, ExecutionID: "exe_x", CommandID: desk.NewID("cmd"),
		Questions: []desk.InputQuestion{{ID: "q1", Question: "which?"}}, Status: desk.InputPending, CreatedAt: t0}
	must(t, s.CreateInputRequest(ctx, in))
	p := &desk.Plan{ID: desk.NewID("pln"), SessionID: mine.ID, ExecutionID: "exe_x", CommandID: desk.NewID("cmd"),
		Card: json.RawMessage(`{"title":"t","steps":["a"]}`), Status: desk.PlanProposed, CreatedAt: t0}
	must(t, s.CreatePlan(ctx, p))

	all := desk.InboxFilter{}
	owned := desk.InboxFilter{WorkspaceID: w.ID, ActorID: owner.ID}
	if as, err := s.PendingApprovals(ctx, all, 10); err != nil || len(as) != 2 || as[0].ID != a1.ID || as[1].ID != a2.ID {
		t.Fatalf("PendingApprovals(all) = %v %v, want %s then %s", approvalIDs(as), err, a1.ID, a2.ID)
	}
	if as, err := s.PendingApprovals(ctx, owned, 10); err != nil || len(as) != 1 || as[0].ID != a1.ID {
		t.Fatalf("PendingApprovals(owner) = %v %v", approvalIDs(as), err)
	}
	if as, _ := s.PendingApprovals(ctx, all, 1); len(as) != 1 {
		t.Fatalf("PendingApprovals with limit 1: %d", len(as))
	}
	if rs, err := s.PendingInputRequests(ctx, all, 10); err != nil || len(rs) != 1 || rs[0].ID != in.ID {
		t.Fatalf("PendingInputRequests(all) = %+v %v", rs, err)
	}
	if rs, _ := s.PendingInputRequests(ctx, owned, 10); len(rs) != 0 {
		t.Fatalf("PendingInputRequests(owner) shows the bot's question")
	}
	if ps, err := s.ProposedPlans(ctx, owned, 10); err != nil || len(ps) != 1 || ps[0].ID != p.ID {
		t.Fatalf("ProposedPlans(owner) = %+v %v", ps, err)
	}
	if _, err := s.DecidePlan(ctx, p.ID, desk.PlanApproved, "", desk.Now()); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.ProposedPlans(ctx, all, 10); len(ps) != 0 {
		t.Fatalf("a decided plan is still proposed")
	}

	r := &desk.Routine{ID: desk.NewID(desk.PrefixRoutine), WorkspaceID: w.ID, Name: "n", Schedule: "@hourly", Prompt: "p",
		Overlap: desk.RoutineOverlapSkip, Enabled: true, Actor: owner.ID, NextRunAt: t0, CreatedAt: t0, UpdatedAt: t0}
	must(t, s.CreateRoutine(ctx, r))
	run := func(status string) *desk.RoutineRun {
		x := &desk.RoutineRun{ID: desk.NewID(desk.PrefixRoutineRun), RoutineID: r.ID, WorkspaceID: w.ID, Trigger: desk.RoutineTriggerManual,
			ScheduledFor: t0, Status: status, StartedAt: desk.Now()}
		if ok, err := s.ClaimRoutineRun(ctx, r.ID, nil, t0, x); err != nil || !ok {
			t.Fatalf("ClaimRoutineRun: %v %v", ok, err)
		}
		return x
	}
	failed := run(desk.RoutineRunFailed)
	run(desk.RoutineRunSkipped) // a skipped tick neither fails nor clears it
	if rs, err := s.FailedRoutineRuns(ctx, owned, 10); err != nil || len(rs) != 1 || rs[0].ID != failed.ID {
		t.Fatalf("FailedRoutineRuns(owner) = %+v %v, want %s", rs, err, failed.ID)
	}
	if rs, _ := s.FailedRoutineRuns(ctx, desk.InboxFilter{WorkspaceID: w.ID, ActorID: bot.ID}, 10); len(rs) != 0 {
		t.Fatalf("the bot sees the owner's failed routine")
	}
	run(desk.RoutineRunSucceeded)
	if rs, _ := s.FailedRoutineRuns(ctx, all, 10); len(rs) != 0 {
		t.Fatalf("a routine whose latest run succeeded is still failed: %+v", rs)
	}
}

func approvalIDs(as []*desk.Approval) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}
