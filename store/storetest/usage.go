package storetest

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// record stores one call's usage for a session.
func record(t *testing.T, s desk.Store, x *desk.Session, exe, purpose, model string, in, out, cached int64) *desk.ModelUsage {
	t.Helper()
	u := &desk.ModelUsage{WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe, ActorID: x.Actor,
		Purpose: purpose, Model: model, InputTokens: in, OutputTokens: out, CachedTokens: cached}
	must(t, s.RecordUsage(ctx, u))
	if u.ID == "" || u.CreatedAt.IsZero() {
		t.Fatalf("recorded usage has no id or time: %+v", u)
	}
	return u
}

func sum(t *testing.T, s desk.Store, f desk.UsageFilter) *desk.UsageSum {
	t.Helper()
	out, err := s.SumUsage(ctx, f)
	must(t, err)
	return out
}

func testModelUsage(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	other, otherOwner := fixture(t, s, "beta")
	bob := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: "bob", Kind: desk.ActorAgent, CreatedAt: desk.Now()}
	must(t, s.CreateActor(ctx, bob, "hash-bob"))
	x := newSession(t, s, w, owner, "mine")
	y := newSession(t, s, w, bob, "bob's")
	z := newSession(t, s, other, otherOwner, "elsewhere")

	if got := sum(t, s, desk.UsageFilter{WorkspaceID: w.ID}); got.Total != (desk.UsageTotals{}) || got.Models == nil || len(got.Models) != 0 {
		t.Fatalf("empty workspace sums %+v", got)
	}
	if u, err := s.LastTurnUsage(ctx, x.SurfaceID); err != nil || u != nil {
		t.Fatalf("last usage of a surface without calls: %+v %v", u, err)
	}
	record(t, s, x, "exe_a", desk.UsageTurn, "openai:gpt-4.1", 1000, 50, 800)
	last := record(t, s, x, "exe_a", desk.UsageTurn, "openai:gpt-4.1", 1100, 20, 1000)
	record(t, s, x, "exe_a", desk.UsageReview, "openai:gpt-4.1", 90, 5, 0)
	record(t, s, x, "", desk.UsageTitle, "anthropic:claude", 30, 7, 0)
	record(t, s, y, "exe_b", desk.UsageTurn, "script", 10, 3, 0)
	record(t, s, z, "exe_c", desk.UsageTurn, "script", 500, 500, 0)

	// Per session, with a breakdown per model in model order.
	ses := sum(t, s, desk.UsageFilter{SessionID: x.ID})
	want := desk.UsageTotals{Calls: 4, InputTokens: 2220, OutputTokens: 82, CachedTokens: 1800, TotalTokens: 2302}
	if ses.Total != want {
		t.Fatalf("session totals %+v, want %+v", ses.Total, want)
	}
	if len(ses.Models) != 2 || ses.Models[0].Model != "anthropic:claude" || ses.Models[0].Calls != 1 || ses.Models[0].TotalTokens != 37 ||
		ses.Models[1].Model != "openai:gpt-4.1" || ses.Models[1].Calls != 3 || ses.Models[1].CachedTokens != 1800 || ses.Models[1].InputTokens != 2190 {
		t.Fatalf("session models %+v", ses.Models)
	}
	// Per execution: the turn's steps and its review, not the title.
	if e := sum(t, s, desk.UsageFilter{ExecutionID: "exe_a"}); e.Total.Calls != 3 || e.Total.TotalTokens != 2265 {
		t.Fatalf("execution totals %+v", e.Total)
	}
	// Per workspace, and per workspace for one actor; other workspaces
	// never count.
	if ws := sum(t, s, desk.UsageFilter{WorkspaceID: w.ID}); ws.Total.Calls != 5 || ws.Total.TotalTokens != 2315 || len(ws.Models) != 3 {
		t.Fatalf("workspace totals %+v", ws)
	}
	if b := sum(t, s, desk.UsageFilter{WorkspaceID: w.ID, ActorID: bob.ID}); b.Total.Calls != 1 || b.Total.TotalTokens != 13 || len(b.Models) != 1 || b.Models[0].Model != "script" {
		t.Fatalf("bob's totals %+v", b)
	}
	// The newest turn call of the surface: reviews and titles are not the
	// conversation's context.
	u, err := s.LastTurnUsage(ctx, x.SurfaceID)
	must(t, err)
	if u == nil || u.ID != last.ID || u.InputTokens != 1100 || u.OutputTokens != 20 || u.CachedTokens != 1000 || u.ExecutionID != "exe_a" || u.Model != "openai:gpt-4.1" || !u.Reported() {
		t.Fatalf("last turn usage %+v", u)
	}
	// Bad counts are refused and store nothing.
	bad := &desk.ModelUsage{WorkspaceID: w.ID, SessionID: x.ID, SurfaceID: x.SurfaceID, Purpose: desk.UsageTurn, Model: "m", InputTokens: -1}
	wantCode(t, s.RecordUsage(ctx, bad), desk.EINVALID)
	if ses := sum(t, s, desk.UsageFilter{SessionID: x.ID}); ses.Total.Calls != 4 {
		t.Fatalf("a refused record was stored: %+v", ses.Total)
	}
}

// testBudget: a claim in a workspace at or past its token budget admits
// nothing and leaves one budget block per surface naming the budget and the
// usage; changing the budget releases the blocks in the same transaction,
// and a claim under the new budget runs the waiting row without a hold.
func testBudget(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	y := newSession(t, s, w, owner, "t")
	st, err := s.GetAgentSettings(ctx, w.ID)
	must(t, err)
	if st.TokenBudget != 0 {
		t.Fatalf("a new workspace has budget %d", st.TokenBudget)
	}
	st.TokenBudget = 100
	must(t, s.SetAgentSettings(ctx, w.ID, st))
	if got, _ := s.GetAgentSettings(ctx, w.ID); got.TokenBudget != 100 || got.ApprovalMode != st.ApprovalMode {
		t.Fatalf("settings after set: %+v", got)
	}
	neg := *st
	neg.TokenBudget = -5
	wantCode(t, s.SetAgentSettings(ctx, w.ID, &neg), desk.EINVALID)
	if got, _ := s.GetAgentSettings(ctx, w.ID); got.TokenBudget != 100 {
		t.Fatalf("a refused budget changed it to %d", got.TokenBudget)
	}

	// Under budget: work runs.
	enqueue(t, s, x, "first", desk.PriorityNormal, desk.QueueUserMessage)
	it, exe := claim(t, s, x.SurfaceID, "own_1")
	if it == nil {
		t.Fatal("nothing claimed under budget")
	}
	record(t, s, x, exe.ID, desk.UsageTurn, "script", 90, 10, 0) // exactly the budget
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_1", Phase: desk.PhaseEnded, ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}

	// At the budget: nothing is admitted; one block per surface that had
	// work, even after repeated claims; a surface without work gets none.
	second := enqueue(t, s, x, "second", desk.PriorityNormal, desk.QueueUserMessage)
	for range 2 {
		if it, _ := claim(t, s, x.SurfaceID, "own_1"); it != nil {
			t.Fatalf("claimed %s past the budget", it.ID)
		}
	}
	if it, _ := claim(t, s, y.SurfaceID, "own_1"); it != nil {
		t.Fatal("claimed from an empty queue")
	}
	bs, err := s.ListBlocks(ctx, x.ID, desk.Now())
	must(t, err)
	if len(bs) != 1 || bs[0].Kind != desk.BlockBudget || !bs[0].Active || bs[0].Budget != 100 || bs[0].Used != 100 || bs[0].SurfaceID != x.SurfaceID {
		t.Fatalf("budget blocks %+v", bs)
	}
	if ys, _ := s.ListBlocks(ctx, y.ID, desk.Now()); len(ys) != 0 {
		t.Fatalf("a surface without work was blocked: %+v", ys)
	}
	if n := countEvents(t, s, x.ID, "block.created"); n != 1 {
		t.Fatalf("%d block.created events", n)
	}
	if q, _ := s.GetQueueItem(ctx, second.ID); q.Status != desk.QueueStatusQueued {
		t.Fatalf("the held-back row is %s", q.Status)
	}

	// Raising the budget releases the block at once; the next claim runs
	// the row (no hold, unlike a manual release).
	st.TokenBudget = 1000
	must(t, s.SetAgentSettings(ctx, w.ID, st))
	b, err := s.GetBlock(ctx, bs[0].ID, desk.Now())
	must(t, err)
	if b.Active || b.ReleasedBy != "budget" || b.ReleasedAt == nil {
		t.Fatalf("block after raising the budget: %+v", b)
	}
	if n := countEvents(t, s, x.ID, "block.released"); n != 1 {
		t.Fatalf("%d block.released events", n)
	}
	it, exe = claim(t, s, x.SurfaceID, "own_1")
	if it == nil || it.ID != second.ID {
		t.Fatalf("claim after raising the budget: %+v", it)
	}
	record(t, s, x, exe.ID, desk.UsageTurn, "script", 1000, 0, 0)
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_1", Phase: desk.PhaseEnded, ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}

	// Past the new budget: blocked again, naming the new figures; a budget
	// change that is still too low releases and the next claim re-blocks
	// with the newest budget.
	enqueue(t, s, x, "third", desk.PriorityNormal, desk.QueueUserMessage)
	if it, _ := claim(t, s, x.SurfaceID, "own_1"); it != nil {
		t.Fatal("claimed past the raised budget")
	}
	st.TokenBudget = 1050
	must(t, s.SetAgentSettings(ctx, w.ID, st))
	if it, _ := claim(t, s, x.SurfaceID, "own_1"); it != nil {
		t.Fatal("claimed past a budget still too low")
	}
	bs, _ = s.ListBlocks(ctx, x.ID, desk.Now())
	var active []*desk.Block
	for _, b := range bs {
		if b.Active {
			active = append(active, b)
		}
	}
	if len(active) != 1 || active[0].Budget != 1050 || active[0].Used != 1100 {
		t.Fatalf("active blocks after a too-low raise: %+v", active)
	}
	// Clearing the budget lets everything run.
	st.TokenBudget = 0
	must(t, s.SetAgentSettings(ctx, w.ID, st))
	if it, _ := claim(t, s, x.SurfaceID, "own_1"); it == nil {
		t.Fatal("nothing claimed with the budget cleared")
	}
	// The budget is the workspace's: another workspace's usage never
	// counts.
	other, otherOwner := fixture(t, s, "beta")
	ost, _ := s.GetAgentSettings(ctx, other.ID)
	ost.TokenBudget = 50
	must(t, s.SetAgentSettings(ctx, other.ID, ost))
	z := newSession(t, s, other, otherOwner, "z")
	enqueue(t, s, z, "elsewhere", desk.PriorityNormal, desk.QueueUserMessage)
	if it, _ := claim(t, s, z.SurfaceID, "own_1"); it == nil {
		t.Fatal("another workspace's usage blocked this one")
	}
}
