package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testLifecycle covers the catalog, the workspace leases, the lifecycle
// journals and purging.
func testLifecycle(t *testing.T, open Opener) {
	t.Run("Catalog", func(t *testing.T) { testCatalog(t, open(t)) })
	t.Run("Leases", func(t *testing.T) { testLeases(t, open(t)) })
	t.Run("Journals", func(t *testing.T) { testJournals(t, open(t)) })
	t.Run("Purge", func(t *testing.T) { testPurgeRows(t, open(t)) })
	t.Run("NoClaimOutsideActive", func(t *testing.T) { testNoClaimOutsideActive(t, open(t)) })
}

func testCatalog(t *testing.T, s desk.Store) {
	w, _ := fixture(t, s, "alpha")
	w2, _ := fixture(t, s, "beta")
	e, err := s.GetCatalogEntry(ctx, w.ID)
	must(t, err)
	if e.State != desk.WorkspaceActive || e.Name != "alpha" || e.OffboardedAt != nil || e.Reason != "" || e.Successors != nil || e.RetiredSessions != nil {
		t.Fatalf("fresh catalog row: %+v", e)
	}
	_, err = s.GetCatalogEntry(ctx, "ws_nope")
	wantCode(t, err, desk.ENOTFOUND)

	// A transition from the wrong state is refused and changes nothing.
	reason := "done"
	_, err = s.TransitionWorkspace(ctx, w.ID, desk.WorkspaceDeparted, desk.WorkspaceRestoring, desk.CatalogChange{Reason: &reason}, desk.Now())
	wantCode(t, err, desk.ECONFLICT)
	if e, _ := s.GetCatalogEntry(ctx, w.ID); e.State != desk.WorkspaceActive || e.Reason != "" {
		t.Fatalf("a refused transition changed the row: %+v", e)
	}

	at := desk.Now().Add(time.Second).Truncate(time.Microsecond)
	notes, handoff := "n", "# Handoff"
	e, err = s.TransitionWorkspace(ctx, w.ID, desk.WorkspaceActive, desk.WorkspaceDeparted, desk.CatalogChange{
		Reason: &reason, Notes: &notes, Handoff: &handoff, Successors: map[string]string{"ses_a": "ses_b"},
		RetiredSessions: []string{"ses_a", "ses_c"}, OffboardedAt: &at}, at)
	must(t, err)
	if e.State != desk.WorkspaceDeparted || e.Reason != "done" || e.Notes != "n" || e.Handoff != "# Handoff" ||
		e.Successors["ses_a"] != "ses_b" || len(e.RetiredSessions) != 2 || e.OffboardedAt == nil || !e.OffboardedAt.Equal(at) || !e.UpdatedAt.Equal(at) {
		t.Fatalf("after the transition: %+v", e)
	}
	got, err := s.GetWorkspace(ctx, w.ID)
	must(t, err)
	if got.State != desk.WorkspaceDeparted {
		t.Fatalf("the workspace row says %s", got.State)
	}
	// Nil fields stay; an empty list clears.
	e, err = s.TransitionWorkspace(ctx, w.ID, desk.WorkspaceDeparted, desk.WorkspaceDeparted, desk.CatalogChange{RetiredSessions: []string{}}, at)
	must(t, err)
	if e.Reason != "done" || e.Handoff != "# Handoff" || len(e.RetiredSessions) != 0 {
		t.Fatalf("a partial change: %+v", e)
	}

	must(t, s.MarkAbsorbed(ctx, w.ID, w2.ID, "abc123", at))
	wantCode(t, s.MarkAbsorbed(ctx, "ws_nope", w2.ID, "abc123", at), desk.ENOTFOUND)
	list, err := s.ListCatalog(ctx)
	must(t, err)
	if len(list) != 2 || list[0].WorkspaceID != w.ID || list[1].WorkspaceID != w2.ID {
		t.Fatalf("catalog = %+v", list)
	}
	if list[0].AbsorbedInto != w2.ID || list[0].ImportCommit != "abc123" || list[0].AbsorbedAt == nil || !list[0].AbsorbedAt.Equal(at) {
		t.Fatalf("absorbed: %+v", list[0])
	}
}

func testLeases(t *testing.T, s desk.Store) {
	now := desk.Now()
	live := func(id string) {
		t.Helper()
		must(t, s.RegisterOwner(ctx, &desk.Owner{ID: id, Host: "h", PID: 1, StartedAt: now, HeartbeatAt: now}))
	}
	live("own_a")
	live("own_b")
	req := func(lease, owner, op string, ws ...string) desk.LeaseRequest {
		return desk.LeaseRequest{LeaseID: lease, Op: op, Owner: owner, WorkspaceIDs: ws, Now: now, StaleBefore: now.Add(-time.Minute)}
	}
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_1", "own_a", "absorb", "ws_2", "ws_1")))
	err := s.AcquireWorkspaceLeases(ctx, req("lse_2", "own_b", "purge", "ws_3", "ws_2"))
	wantCode(t, err, desk.ECONFLICT)
	if desk.ErrorMessage(err) != "workspace ws_2 is busy with absorb" {
		t.Fatalf("busy message: %q", desk.ErrorMessage(err))
	}
	// The same owner's second operation is busy too: one lease per workspace.
	wantCode(t, s.AcquireWorkspaceLeases(ctx, req("lse_3", "own_a", "purge", "ws_1")), desk.ECONFLICT)
	ls, err := s.ListWorkspaceLeases(ctx)
	must(t, err)
	if len(ls) != 2 || ls[0].WorkspaceID != "ws_1" || ls[1].WorkspaceID != "ws_2" || ls[0].LeaseID != "lse_1" || ls[0].Op != "absorb" || ls[0].Owner != "own_a" {
		t.Fatalf("leases after a refused acquire (ws_3 must not be held): %+v", ls)
	}
	must(t, s.ReleaseWorkspaceLeases(ctx, "lse_1"))
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_2", "own_b", "purge", "ws_3", "ws_2")))

	// A lease of a dead owner is taken over: stopped, unregistered, stale,
	// or named dead by the caller.
	must(t, s.StopOwner(ctx, "own_b", now))
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_4", "own_a", "restore", "ws_2")))
	must(t, s.ReleaseWorkspaceLeases(ctx, "lse_2")) // the old holder's release leaves the new lease
	wantCode(t, s.AcquireWorkspaceLeases(ctx, req("lse_5", "own_c", "restore", "ws_2")), desk.ECONFLICT)
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_6", "own_gone", "restore", "ws_9")))
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_7", "own_a", "restore", "ws_9")))
	live("own_stale")
	must(t, s.HeartbeatOwner(ctx, "own_stale", now.Add(-time.Hour)))
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_8", "own_stale", "purge", "ws_8")))
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_9", "own_a", "purge", "ws_8")))
	live("own_d")
	must(t, s.AcquireWorkspaceLeases(ctx, req("lse_10", "own_d", "purge", "ws_7")))
	wantCode(t, s.AcquireWorkspaceLeases(ctx, req("lse_11", "own_a", "purge", "ws_7")), desk.ECONFLICT)
	r := req("lse_11", "own_a", "purge", "ws_7")
	r.DeadOwners = []string{"own_d"}
	must(t, s.AcquireWorkspaceLeases(ctx, r))
	ls, _ = s.ListWorkspaceLeases(ctx)
	for _, l := range ls {
		if l.Owner != "own_a" {
			t.Fatalf("a lease of a dead owner survived: %+v", l)
		}
	}
}

func testJournals(t *testing.T, s desk.Store) {
	js, err := s.ListLifecycleJournals(ctx)
	must(t, err)
	if len(js) != 0 {
		t.Fatalf("journals of a fresh store: %v", js)
	}
	t0 := desk.Now()
	a := &desk.LifecycleJournal{ID: "jrn_a", Op: "offboard", WorkspaceID: "ws_1", Owner: "own_a", Step: "begin", Data: json.RawMessage(`{"x":1}`), CreatedAt: t0}
	b := &desk.LifecycleJournal{ID: "jrn_b", Op: "absorb", WorkspaceID: "ws_2", Owner: "own_a", Step: "begin", CreatedAt: t0.Add(time.Second)}
	must(t, s.PutLifecycleJournal(ctx, b))
	must(t, s.PutLifecycleJournal(ctx, a))
	a.Step, a.Data, a.UpdatedAt = "move", json.RawMessage(`{"x":2}`), t0.Add(2*time.Second)
	must(t, s.PutLifecycleJournal(ctx, a))
	wantCode(t, s.PutLifecycleJournal(ctx, &desk.LifecycleJournal{ID: "jrn_c", Op: "x", WorkspaceID: "ws_1", Data: json.RawMessage(`{`)}), desk.EINVALID)
	wantCode(t, s.PutLifecycleJournal(ctx, &desk.LifecycleJournal{ID: "jrn_d"}), desk.EINVALID)
	js, err = s.ListLifecycleJournals(ctx)
	must(t, err)
	if len(js) != 2 || js[0].ID != "jrn_a" || js[1].ID != "jrn_b" {
		t.Fatalf("journals in creation order: %+v", js)
	}
	if js[0].Step != "move" || string(js[0].Data) != `{"x":2}` || !js[0].UpdatedAt.Equal(a.UpdatedAt.Truncate(time.Microsecond)) || js[0].Owner != "own_a" {
		t.Fatalf("replaced journal: %+v", js[0])
	}
	if string(js[1].Data) != `{}` {
		t.Fatalf("a journal without data: %s", js[1].Data)
	}
	must(t, s.DeleteLifecycleJournal(ctx, "jrn_a"))
	must(t, s.DeleteLifecycleJournal(ctx, "jrn_a"))
	js, _ = s.ListLifecycleJournals(ctx)
	if len(js) != 1 || js[0].ID != "jrn_b" {
		t.Fatalf("after delete: %+v", js)
	}
}

func testPurgeRows(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	keep, keepOwner := fixture(t, s, "beta")
	x := newSession(t, s, w, owner, "s")
	y := newSession(t, s, keep, keepOwner, "t")
	art := newArtifact(t, s, x, "a.md")
	other := newArtifact(t, s, y, "b.md")
	enqueue(t, s, x, "queued", desk.PriorityNormal, desk.QueueUserMessage)
	enqueue(t, s, y, "queued", desk.PriorityNormal, desk.QueueUserMessage)
	it, exe := claim(t, s, x.SurfaceID, "own_a")
	if it == nil {
		t.Fatal("nothing claimed")
	}
	for _, ses := range []*desk.Session{x, y} {
		must(t, s.AppendMessage(ctx, &desk.Message{ID: desk.NewID("msg"), SessionID: ses.ID, SurfaceID: ses.SurfaceID, Seq: 1, Role: "user", Text: "hi", CreatedAt: desk.Now()}))
	}
	g := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: w.ID, Name: "g", CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
	must(t, s.CreateGroup(ctx, g))
	must(t, s.SetBindings(ctx, x.ID, []string{g.ID}))

	at := desk.Now().Truncate(time.Microsecond)
	must(t, s.PurgeWorkspaceRows(ctx, w.ID, at))
	must(t, s.PurgeWorkspaceRows(ctx, w.ID, at.Add(time.Hour))) // again: nothing more
	wantCode(t, s.PurgeWorkspaceRows(ctx, "ws_nope", at), desk.ENOTFOUND)

	// Gone: artifacts, queue rows, transcripts, groups and bindings.
	_, err := s.GetArtifact(ctx, art.ID)
	wantCode(t, err, desk.ENOTFOUND)
	if q, _ := s.ListQueue(ctx, x.ID, false); len(q) != 0 {
		t.Fatalf("queue rows survived: %d", len(q))
	}
	if ms, _ := s.ListMessages(ctx, x.SurfaceID, 0, 10); len(ms) != 0 {
		t.Fatalf("messages survived: %d", len(ms))
	}
	if gs, _ := s.ListGroups(ctx, w.ID); len(gs) != 0 {
		t.Fatalf("groups survived: %d", len(gs))
	}
	// Kept: the tombstone, the session identity, the execution.
	tb, err := s.GetArtifactTombstone(ctx, art.ID)
	must(t, err)
	if tb.SessionID != x.ID || tb.WorkspaceID != w.ID || tb.Name != "a.md" || tb.Origin.SessionID != x.ID || !tb.PurgedAt.Equal(at) {
		t.Fatalf("tombstone: %+v", tb)
	}
	_, err = s.GetArtifactTombstone(ctx, other.ID)
	wantCode(t, err, desk.ENOTFOUND)
	got, err := s.GetSession(ctx, x.ID)
	must(t, err)
	if got.Signature != x.Signature || got.WorkspaceID != w.ID {
		t.Fatalf("session identity: %+v", got)
	}
	if _, err := s.GetExecution(ctx, exe.ID); err != nil {
		t.Fatalf("the execution record went: %v", err)
	}
	if _, err := s.GetWorkspace(ctx, w.ID); err != nil {
		t.Fatalf("the catalog row went: %v", err)
	}
	// The other workspace is untouched.
	if _, err := s.GetArtifact(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if q, _ := s.ListQueue(ctx, y.ID, false); len(q) != 1 {
		t.Fatalf("the other workspace's queue: %d rows", len(q))
	}
	if ms, _ := s.ListMessages(ctx, y.SurfaceID, 0, 10); len(ms) != 1 {
		t.Fatalf("the other workspace's messages: %d", len(ms))
	}
	// The id stays reserved.
	now := desk.Now()
	err = s.CreateWorkspace(ctx, &desk.Workspace{ID: w.ID, Name: "again", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}, nil, true)
	wantCode(t, err, desk.ECONFLICT)
}

// testNoClaimOutsideActive: nothing is admitted in a workspace that is not
// active, and work waits (it is not lost) until the workspace is back.
func testNoClaimOutsideActive(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	enqueue(t, s, x, "later", desk.PriorityNormal, desk.QueueUserMessage)
	_, err := s.TransitionWorkspace(ctx, w.ID, desk.WorkspaceActive, desk.WorkspaceOffboarding, desk.CatalogChange{}, desk.Now())
	must(t, err)
	if it, _ := claim(t, s, x.SurfaceID, "own_a"); it != nil {
		t.Fatalf("claimed %s in an offboarding workspace", it.ID)
	}
	_, err = s.TransitionWorkspace(ctx, w.ID, desk.WorkspaceOffboarding, desk.WorkspaceActive, desk.CatalogChange{}, desk.Now())
	must(t, err)
	if it, _ := claim(t, s, x.SurfaceID, "own_a"); it == nil || it.Text != "later" {
		t.Fatalf("the waiting work was not claimed once active: %+v", it)
	}
}
