package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testFence: a write made under an execution's fence commits while its
// owner and lease version hold, and once a peer took the execution over
// (adopted it: a new lease version) or ended it, fails with ErrFenced,
// changes nothing and tells the fence's holder.
func testFence(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	enqueue(t, s, x, "a", desk.PriorityNormal, desk.QueueUserMessage)
	_, exe := claim(t, s, x.SurfaceID, "own_a")
	if exe == nil {
		t.Fatal("nothing claimed")
	}
	if _, err := s.MarkRunning(ctx, exe.ID, "own_a", desk.Now()); err != nil {
		t.Fatal(err)
	}
	var lost atomic.Int32
	fenceA := desk.Fence{ExecutionID: exe.ID, Owner: "own_a", LeaseVersion: exe.LeaseVersion, Lost: func() { lost.Add(1) }}
	fa := desk.WithFence(ctx, fenceA)
	msg := func(text string) *desk.Message {
		return &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe.ID, Role: desk.RoleAssistant, Text: text, CreatedAt: desk.Now()}
	}
	ev := func(typ string) []*desk.Event {
		return []*desk.Event{{At: desk.Now(), Type: typ, WorkspaceID: w.ID, SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe.ID, Data: []byte(`{}`)}}
	}
	// While the claim holds, fenced writes commit.
	must(t, s.AppendMessage(fa, msg("before")))
	must(t, s.AppendEvents(fa, ev("assistant.delta")))
	if lost.Load() != 0 {
		t.Fatal("a write that held its fence reported the fence lost")
	}

	// The same owner with a wrong lease version is fenced off too.
	stale := desk.WithFence(ctx, desk.Fence{ExecutionID: exe.ID, Owner: "own_a", LeaseVersion: exe.LeaseVersion - 1})
	if err := s.AppendEvents(stale, ev("assistant.delta")); !desk.IsFenced(err) || !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("a write under an older lease version = %v, want ErrFenced (conflict)", err)
	}

	// A peer takes the execution over: the lease version moves on.
	adopted, err := s.AdoptExecution(ctx, exe.ID, "own_a", "own_b", desk.Now(), desk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if adopted.LeaseVersion != exe.LeaseVersion+1 || adopted.Owner != "own_b" {
		t.Fatalf("adopted: owner %s lease version %d, want own_b at %d", adopted.Owner, adopted.LeaseVersion, exe.LeaseVersion+1)
	}
	if got, _ := s.GetExecution(ctx, exe.ID); got.LeaseVersion != adopted.LeaseVersion {
		t.Fatalf("stored lease version %d, want %d", got.LeaseVersion, adopted.LeaseVersion)
	}
	msgsBefore, _ := s.ListMessages(ctx, x.SurfaceID, 0, 0)
	evsBefore, _ := s.ListEvents(ctx, desk.EventFilter{ExecutionID: exe.ID, Limit: 1000})

	// Every kind of write of the old holder now fails and changes nothing.
	writes := map[string]error{
		"message": s.AppendMessage(fa, msg("after")),
		"event":   s.AppendEvents(fa, ev("assistant.delta")),
		"usage": s.RecordUsage(fa, &desk.ModelUsage{WorkspaceID: w.ID, SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe.ID,
			ActorID: x.Actor, Purpose: desk.UsageTurn, Model: "m", InputTokens: 7}),
	}
	_, _, err = s.Settle(fa, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_a", Phase: desk.PhaseEnded, Reason: "completed",
		ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()})
	writes["settle"] = err
	for what, err := range writes {
		if !desk.IsFenced(err) {
			t.Errorf("%s written by the old holder after a takeover = %v, want ErrFenced", what, err)
		}
	}
	if lost.Load() < int32(len(writes)) {
		t.Errorf("the fence's Lost hook ran %d times for %d fenced writes", lost.Load(), len(writes))
	}
	msgsAfter, _ := s.ListMessages(ctx, x.SurfaceID, 0, 0)
	evsAfter, _ := s.ListEvents(ctx, desk.EventFilter{ExecutionID: exe.ID, Limit: 1000})
	if len(msgsAfter) != len(msgsBefore) || len(evsAfter) != len(evsBefore) {
		t.Fatalf("fenced writes changed something: messages %d → %d, events %d → %d", len(msgsBefore), len(msgsAfter), len(evsBefore), len(evsAfter))
	}
	if u, err := s.SumUsage(ctx, desk.UsageFilter{ExecutionID: exe.ID}); err != nil || u.Total.InputTokens != 0 {
		t.Fatalf("fenced usage was recorded: %+v %v", u, err)
	}
	if got, _ := s.GetExecution(ctx, exe.ID); got.Phase != desk.PhaseRunning || got.Owner != "own_b" {
		t.Fatalf("a fenced settle changed the execution: %s owner %s", got.Phase, got.Owner)
	}

	// The new holder writes and settles; after the terminal event even it
	// writes nothing more of the execution.
	fb := desk.WithFence(ctx, desk.Fence{ExecutionID: exe.ID, Owner: "own_b", LeaseVersion: adopted.LeaseVersion})
	must(t, s.AppendEvents(fb, ev("assistant.delta")))
	if _, _, err := s.Settle(fb, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_b", Phase: desk.PhaseEnded, Reason: "completed",
		ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(fb, ev("assistant.delta")); !desk.IsFenced(err) {
		t.Fatalf("a write after the execution ended = %v, want ErrFenced", err)
	}
	es, _ := s.ListEvents(ctx, desk.EventFilter{ExecutionID: exe.ID, Limit: 1000})
	ended := false
	for _, e := range es {
		switch {
		case e.Type == "execution.ended":
			ended = true
		case ended && e.Type != "queue.delivered": // the settle's own
			t.Fatalf("event %s of the execution after its terminal event", e.Type)
		}
	}
	if !ended {
		t.Fatal("the execution has no terminal event")
	}

	// Writes without a fence (a person's, a peer's recovery) are not
	// affected by any of it.
	must(t, s.AppendEvents(context.WithoutCancel(ctx), ev("note")))
}
