package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

func enqueue(t *testing.T, s desk.Store, x *desk.Session, text string, prio int, kind string) *desk.QueueItem {
	t.Helper()
	it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: x.SurfaceID, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
		Kind: kind, Priority: prio, Text: text, Channel: "test", ConversationID: x.ID, CreatedAt: desk.Now(),
		Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
	out, created, err := s.Enqueue(ctx, it, desk.EnqueueOptions{UserWork: true})
	if err != nil || !created {
		t.Fatalf("enqueue %q: %v (created %v)", text, err, created)
	}
	return out
}

func claim(t *testing.T, s desk.Store, surface, owner string) (*desk.QueueItem, *desk.Execution) {
	t.Helper()
	now := desk.Now()
	it, x, err := s.Claim(ctx, desk.ClaimRequest{SurfaceID: surface, Owner: owner, ExecutionID: desk.NewID(desk.PrefixExecution),
		Now: now, LeaseUntil: now.Add(time.Minute), TakeoverIdle: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return it, x
}

func testExecution(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	if x.SurfaceID == "" {
		t.Fatal("a session was created without its orchestrator surface")
	}
	srf, err := s.GetSurface(ctx, x.SurfaceID)
	if err != nil || srf.Kind != desk.SurfaceOrchestrator || srf.SessionID != x.ID {
		t.Fatalf("orchestrator surface: %+v %v", srf, err)
	}

	a := enqueue(t, s, x, "a", desk.PriorityNormal, desk.QueueUserMessage)
	b := enqueue(t, s, x, "b", desk.PriorityNormal, desk.QueueUserMessage)
	ans := enqueue(t, s, x, "answer", desk.PriorityAnswer, desk.QueueInputAnswer)
	if a.Position >= b.Position || a.Status != desk.QueueStatusQueued {
		t.Fatalf("positions %d %d", a.Position, b.Position)
	}
	// Idempotency: the same key returns the first row, changes nothing.
	k1 := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: x.SurfaceID, SessionID: x.ID, WorkspaceID: w.ID,
		Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: "keyed", IdempotencyKey: "k", Channel: "t", ConversationID: "c", CreatedAt: desk.Now()}
	first, created, err := s.Enqueue(ctx, k1, desk.EnqueueOptions{})
	if err != nil || !created {
		t.Fatal(err)
	}
	k2 := *k1
	k2.ID, k2.Text = desk.NewID(desk.PrefixQueue), "other"
	again, created, err := s.Enqueue(ctx, &k2, desk.EnqueueOptions{})
	if err != nil || created || again.ID != first.ID || again.Text != "keyed" {
		t.Fatalf("repeated key: %+v created=%v err=%v", again, created, err)
	}
	if _, err := s.UpdateQueued(ctx, first.ID, desk.QueueCancel); err != nil {
		t.Fatal(err)
	}

	// The answer row outranks the earlier ordinary rows.
	it, exe := claim(t, s, x.SurfaceID, "own_1")
	if it == nil || it.ID != ans.ID || exe.Phase != desk.PhaseStarting || it.LeaseVersion != 1 || it.ExecutionID != exe.ID {
		t.Fatalf("first claim: %+v %+v", it, exe)
	}
	// Busy surface: no second claim, and reject-if-busy refuses.
	if it2, _ := claim(t, s, x.SurfaceID, "own_2"); it2 != nil {
		t.Fatal("claimed twice on one surface")
	}
	rej := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: x.SurfaceID, SessionID: x.ID, WorkspaceID: w.ID,
		Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: "rej", Channel: "t", ConversationID: "c", CreatedAt: desk.Now()}
	if _, _, err := s.Enqueue(ctx, rej, desk.EnqueueOptions{RejectIfBusy: true}); !desk.IsCode(err, desk.EBUSY) {
		t.Fatalf("reject if busy: %v", err)
	}
	if _, err := s.UpdateQueued(ctx, ans.ID, desk.QueueCancel); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("cancel after claim: %v", err)
	}
	// Phases are fenced by owner.
	if _, err := s.MarkRunning(ctx, exe.ID, "own_other", desk.Now()); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("running by a stranger: %v", err)
	}
	if _, err := s.MarkRunning(ctx, exe.ID, "own_1", desk.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.ActiveExecution(ctx, x.SurfaceID); got == nil || got.ID != exe.ID || got.Phase != desk.PhaseRunning {
		t.Fatalf("active: %+v", got)
	}
	// Stop once, with one cooldown block; a second request shares it.
	until := desk.Now().Add(time.Minute)
	st, blk, err := s.RequestStop(ctx, exe.ID, desk.Interruption{By: "admin", At: desk.Now(), Reason: "user"}, &until)
	if err != nil || st.Phase != desk.PhaseStopping || blk == nil || blk.Kind != desk.BlockUserCooldown {
		t.Fatalf("stop: %+v %+v %v", st, blk, err)
	}
	if _, blk2, _ := s.RequestStop(ctx, exe.ID, desk.Interruption{By: "admin", At: desk.Now()}, &until); blk2 != nil {
		t.Fatal("a second stop created a second block")
	}
	// A stale owner cannot settle; the right one can, once.
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_2", Phase: desk.PhaseEnded, ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("stale settle: %v", err)
	}
	done, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_1", Phase: desk.PhaseInterrupted, Reason: "user", ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()})
	if err != nil || done.Phase != desk.PhaseInterrupted || done.FinishedAt == nil {
		t.Fatalf("settle: %+v %v", done, err)
	}
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_1", Phase: desk.PhaseEnded, ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("second settle: %v", err)
	}
	// A user-cooldown holds back non-user work only.
	agent := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: x.SurfaceID, SessionID: x.ID, WorkspaceID: w.ID,
		Kind: desk.QueueThreadReport, Priority: desk.PrioritySteered, Text: "agent", Channel: "t", ConversationID: "c", CreatedAt: desk.Now(),
		Origin: desk.Origin{WorkspaceID: w.ID, SessionID: x.ID, Actor: "act_bot", Kind: desk.OriginAgent}}
	if _, _, err := s.Enqueue(ctx, agent, desk.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	it, exe2 := claim(t, s, x.SurfaceID, "own_1")
	if it == nil || it.ID != a.ID {
		t.Fatalf("under cooldown the next claim is %+v, want the user row a", it)
	}
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe2.ID, Owner: "own_1", Phase: desk.PhaseEnded, ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}
	// Requeue puts a row back at the very front.
	it, exe3 := claim(t, s, x.SurfaceID, "own_1")
	if it == nil || it.ID != b.ID {
		t.Fatalf("claim = %+v, want b", it)
	}
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe3.ID, Owner: "own_1", Phase: desk.PhaseInterrupted, Reason: "owner-restarted", Requeue: true, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}
	q, _ := s.ListQueue(ctx, x.ID, true)
	if len(q) != 2 || q[0].ID != b.ID || q[0].Status != desk.QueueStatusQueued || q[0].Priority != desk.PrioritySteered {
		t.Fatalf("after requeue: %+v", q)
	}
	// Blocks: list, release (holds the surface), resume.
	bs, err := s.ListBlocks(ctx, x.ID, desk.Now())
	if err != nil || len(bs) != 1 || !bs[0].Active {
		t.Fatalf("blocks: %+v %v", bs, err)
	}
	rel, err := s.ReleaseBlock(ctx, bs[0].ID, "admin", desk.Now())
	if err != nil || rel.Active || rel.ReleasedBy != "admin" {
		t.Fatalf("release: %+v %v", rel, err)
	}
	if it, _ := claim(t, s, x.SurfaceID, "own_1"); it != nil {
		t.Fatal("a held surface admitted work")
	}
	if srf, err := s.ResumeSurface(ctx, x.SurfaceID); err != nil || srf.Held {
		t.Fatalf("resume: %+v %v", srf, err)
	}
	if it, _ := claim(t, s, x.SurfaceID, "own_1"); it == nil || it.ID != b.ID {
		t.Fatalf("after resume: %+v", it)
	}

	// Events: every change above wrote events with increasing seqs.
	es, err := s.ListEvents(ctx, desk.EventFilter{SessionID: x.ID, Limit: 1000})
	if err != nil || len(es) < 10 {
		t.Fatalf("events: %d %v", len(es), err)
	}
	for i := 1; i < len(es); i++ {
		if es[i].Seq <= es[i-1].Seq {
			t.Fatalf("event seqs not increasing: %d then %d", es[i-1].Seq, es[i].Seq)
		}
	}
	if es[0].ActorID != owner.ID {
		t.Fatalf("event actor %q, want the session's owner %q", es[0].ActorID, owner.ID)
	}
	min, max, err := s.EventBounds(ctx)
	if err != nil || min > es[0].Seq || max < es[len(es)-1].Seq {
		t.Fatalf("bounds %d %d %v", min, max, err)
	}
}

// testClaimRace: many claimants on one surface; exactly one wins each row
// and no two executions are ever active together.
func testClaimRace(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "race")
	for i := range 5 {
		enqueue(t, s, x, string(rune('a'+i)), desk.PriorityNormal, desk.QueueUserMessage)
	}
	var mu sync.Mutex
	wins := 0
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			it, exe := claim(t, s, x.SurfaceID, "own_"+string(rune('a'+i)))
			if it != nil {
				mu.Lock()
				wins++
				mu.Unlock()
				_ = exe
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d claimants won one surface, want exactly 1", wins)
	}
}

func testOwners(t *testing.T, s desk.Store) {
	now := desk.Now()
	o := &desk.Owner{ID: desk.NewID("own"), Host: "h", PID: 42, StartedAt: now, HeartbeatAt: now}
	if err := s.RegisterOwner(ctx, o); err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Second)
	must(t, s.HeartbeatOwner(ctx, o.ID, later))
	must(t, s.StopOwner(ctx, o.ID, later))
	os, err := s.ListOwners(ctx)
	if err != nil || len(os) != 1 || !os[0].HeartbeatAt.Equal(later) || os[0].StoppedAt.IsZero() || os[0].PID != 42 {
		t.Fatalf("owners: %+v %v", os, err)
	}
	wantCode(t, s.HeartbeatOwner(ctx, "own_nope", later), desk.ENOTFOUND)
}
