package storetest

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// testDispatches: a dispatch round-trips with its snapshot; it is marked
// dispatched once; of two settles exactly one wins, and the winner's reply
// row is queued on the caller's surface in the same transaction; open and
// listed dispatches are what they should be.
func testDispatches(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	caller := newSession(t, s, w, owner, "caller")
	target := newSession(t, s, w, owner, "target")
	now := desk.Now()
	d := &desk.Dispatch{ID: desk.NewID(desk.PrefixDispatch), CreatedAt: now,
		Caller: desk.Origin{WorkspaceID: w.ID, SessionID: caller.ID, SurfaceID: caller.SurfaceID, Kind: desk.OriginAgent, Actor: owner.ID},
		Target: desk.ResolveTarget{Kind: "session", ID: target.Signature}, TargetSessionID: target.ID, TargetWorkspaceID: w.ID,
		Subject: "numbers", Text: "add them", Reply: desk.ReplyCaller, ReplySurfaceID: caller.SurfaceID, Status: desk.DispatchPending}
	if x, err := s.SessionBySignature(ctx, target.Signature); err != nil || x.ID != target.ID {
		t.Fatalf("SessionBySignature: %+v %v", x, err)
	}
	if _, err := s.SessionBySignature(ctx, "@no-such-sig"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("an unknown signature: %v", err)
	}
	must(t, s.CreateDispatch(ctx, d))
	got, err := s.GetDispatch(ctx, d.ID)
	if err != nil || got.Caller.SessionID != caller.ID || got.Target.ID != target.Signature || got.Subject != "numbers" ||
		got.Reply != desk.ReplyCaller || got.Status != desk.DispatchPending || !got.CreatedAt.Equal(d.CreatedAt.Truncate(1000)) {
		t.Fatalf("GetDispatch: %+v %v", got, err)
	}
	if _, err := s.GetDispatch(ctx, "dsp_nothere"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("an unknown dispatch: %v", err)
	}
	// A refused prompt's dispatch goes; one that went stays.
	gone := *d
	gone.ID = desk.NewID(desk.PrefixDispatch)
	must(t, s.CreateDispatch(ctx, &gone))
	must(t, s.DeletePendingDispatch(ctx, gone.ID))
	if _, err := s.GetDispatch(ctx, gone.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a deleted pending dispatch: %v", err)
	}
	if ok, err := s.MarkDispatched(ctx, d.ID, target.ID, w.ID, "q_1"); !ok || err != nil {
		t.Fatalf("MarkDispatched: %v %v", ok, err)
	}
	if ok, err := s.MarkDispatched(ctx, d.ID, target.ID, w.ID, "q_2"); ok || err != nil {
		t.Fatalf("MarkDispatched twice: %v %v", ok, err)
	}
	must(t, s.DeletePendingDispatch(ctx, d.ID))
	if open, err := s.OpenDispatches(ctx, 10); err != nil || len(open) != 1 || open[0].QueueItemID != "q_1" || open[0].Status != desk.DispatchDispatched {
		t.Fatalf("OpenDispatches: %+v %v", open, err)
	}
	settle := func(text string) (bool, error) {
		at := desk.Now()
		next := *got
		next.Status, next.ExecutionID, next.ReplyText, next.SettledAt = desk.DispatchReplied, "exe_1", text, &at
		row := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: caller.SurfaceID, SessionID: caller.ID, WorkspaceID: w.ID,
			Kind: desk.QueueDispatchReply, Priority: desk.PriorityNormal, Text: text, Channel: "dispatch", ConversationID: caller.ID,
			IdempotencyKey: "dispatch-reply:" + d.ID + ":" + text, CreatedAt: at, Origin: desk.Origin{WorkspaceID: w.ID, SessionID: target.ID, Kind: desk.OriginAgent}}
		next.ReplyItemID = row.ID
		return s.SettleDispatch(ctx, &next, row)
	}
	if ok, err := settle("first"); !ok || err != nil {
		t.Fatalf("SettleDispatch: %v %v", ok, err)
	}
	if ok, err := settle("second"); ok || err != nil {
		t.Fatalf("a second SettleDispatch: %v %v", ok, err)
	}
	q, err := s.ListQueue(ctx, caller.ID, true)
	if err != nil || len(q) != 1 || q[0].Kind != desk.QueueDispatchReply || q[0].Text != "first" {
		t.Fatalf("the caller's queue: %+v %v", q, err)
	}
	got, _ = s.GetDispatch(ctx, d.ID)
	if got.Status != desk.DispatchReplied || got.ReplyText != "first" || got.ReplyItemID != q[0].ID || got.SettledAt == nil {
		t.Fatalf("the settled dispatch: %+v", got)
	}
	if open, err := s.OpenDispatches(ctx, 10); err != nil || len(open) != 0 {
		t.Fatalf("OpenDispatches after settling: %+v %v", open, err)
	}
	for _, f := range []desk.DispatchFilter{{SessionID: caller.ID}, {SessionID: target.ID}, {WorkspaceID: w.ID}, {}} {
		if ds, err := s.ListDispatches(ctx, f); err != nil || len(ds) != 1 || ds[0].ID != d.ID {
			t.Fatalf("ListDispatches %+v: %+v %v", f, ds, err)
		}
	}
	if ds, err := s.ListDispatches(ctx, desk.DispatchFilter{SessionID: "ses_other"}); err != nil || len(ds) != 0 {
		t.Fatalf("ListDispatches of another session: %+v %v", ds, err)
	}
}
