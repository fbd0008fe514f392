// Package storetest is the conformance suite every desk.Store must pass. The
// SQLite and Postgres adapters run the same cases, so behaviour that one
// store has and the other lacks shows up as a failing test, not a surprise in
// production.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// Opener returns a fresh, empty store for one test. It registers its own
// cleanup with t.
type Opener func(t *testing.T) desk.Store

// Run runs the whole suite against stores made by open.
func Run(t *testing.T, open Opener) {
	t.Run("Workspaces", func(t *testing.T) { testWorkspaces(t, open(t)) })
	t.Run("WorkspaceNames", func(t *testing.T) { testWorkspaceNames(t, open(t)) })
	t.Run("WorkspaceNameRace", func(t *testing.T) { testWorkspaceNameRace(t, open(t)) })
	t.Run("Actors", func(t *testing.T) { testActors(t, open(t)) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open(t)) })
	t.Run("SessionDelete", func(t *testing.T) { testSessionDelete(t, open(t)) })
	t.Run("Artifacts", func(t *testing.T) { testArtifacts(t, open(t)) })
	t.Run("ArtifactRevisionRace", func(t *testing.T) { testArtifactRace(t, open(t)) })
	t.Run("CancelledWriters", func(t *testing.T) { testCancelledWriters(t, open(t)) })
	t.Run("Groups", func(t *testing.T) { testGroups(t, open(t)) })
	t.Run("Bindings", func(t *testing.T) { testBindings(t, open(t)) })
	t.Run("Execution", func(t *testing.T) { testExecution(t, open(t)) })
	t.Run("ClaimRace", func(t *testing.T) { testClaimRace(t, open(t)) })
	t.Run("ExecutionRecords", func(t *testing.T) { testExecutionRecords(t, open(t)) })
	t.Run("Agent", func(t *testing.T) { testAgent(t, open(t)) })
	t.Run("TranscriptPages", func(t *testing.T) { testTranscriptPages(t, open(t)) })
	t.Run("Owners", func(t *testing.T) { testOwners(t, open(t)) })
	t.Run("Fence", func(t *testing.T) { testFence(t, open(t)) })
	t.Run("Profiles", func(t *testing.T) { testProfiles(t, open(t)) })
	t.Run("Routines", func(t *testing.T) { testRoutines(t, open(t)) })
	t.Run("Dispatches", func(t *testing.T) { testDispatches(t, open(t)) })
	t.Run("Webhooks", func(t *testing.T) { testWebhooks(t, open(t)) })
	t.Run("Inbox", func(t *testing.T) { testInbox(t, open(t)) })
	t.Run("AppLog", func(t *testing.T) { testAppLog(t, open(t)) })
	t.Run("Files", func(t *testing.T) { testFiles(t, open) })
	t.Run("Lifecycle", func(t *testing.T) { testLifecycle(t, open) })
	t.Run("UI", func(t *testing.T) { testUI(t, open(t)) })
	t.Run("ModelUsage", func(t *testing.T) { testModelUsage(t, open(t)) })
	t.Run("Budget", func(t *testing.T) { testBudget(t, open(t)) })
	t.Run("Waits", func(t *testing.T) { testWaits(t, open(t)) })
	t.Run("Close", func(t *testing.T) { testClose(t, open(t)) })
	t.Run("Extensions", func(t *testing.T) { testExtensions(t, open(t)) })
	t.Run("SandboxLimits", func(t *testing.T) { testSandboxLimits(t, open(t)) })
	t.Run("Runtimes", func(t *testing.T) { testRuntimes(t, open(t)) })
	t.Run("Threads", func(t *testing.T) { testThreads(t, open(t)) })
	t.Run("BrowserSessions", func(t *testing.T) { testBrowserSessions(t, open(t)) })
	t.Run("LoginLinks", func(t *testing.T) { testLoginLinks(t, open(t)) })
	t.Run("Leader", func(t *testing.T) { testLeader(t, open(t)) })
}

var ctx = context.Background()

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := desk.ErrorCode(err); got != code {
		t.Fatalf("error = %v (code %q), want code %q", err, got, code)
	}
}

// fixture creates a workspace with its owner actor and returns both.
func fixture(t *testing.T, s desk.Store, name string) (*desk.Workspace, *desk.Actor) {
	t.Helper()
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: name, State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	must(t, s.CreateWorkspace(ctx, w, a, true))
	return w, a
}

func newSession(t *testing.T, s desk.Store, w *desk.Workspace, a *desk.Actor, title string) *desk.Session {
	t.Helper()
	now := desk.Now()
	x := &desk.Session{
		ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: a.ID,
		Title: title, Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now,
		Origin: desk.Origin{WorkspaceID: w.ID, Actor: desk.AdminActor, Kind: desk.OriginUser},
	}
	must(t, s.CreateSession(ctx, x))
	return x
}

func newArtifact(t *testing.T, s desk.Store, x *desk.Session, rel string) *desk.Artifact {
	t.Helper()
	now := desk.Now()
	a := &desk.Artifact{
		ID: desk.NewID(desk.PrefixArtifact), SessionID: x.ID, WorkspaceID: x.WorkspaceID, ActorID: x.Actor,
		Name: rel, RelPath: rel, Kind: "markdown", MediaType: "text/markdown; charset=utf-8", Size: 3,
		SHA256: "abc", Revision: 1, CreatedAt: now, UpdatedAt: now,
		Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: x.Actor, Kind: desk.OriginUser},
	}
	must(t, s.CreateArtifact(ctx, a))
	return a
}

func testWorkspaces(t *testing.T, s desk.Store) {
	w, _ := fixture(t, s, "alpha")
	got, err := s.GetWorkspace(ctx, w.ID)
	must(t, err)
	if got.Name != "alpha" || got.State != desk.WorkspaceActive || !got.CreatedAt.Equal(w.CreatedAt) {
		t.Fatalf("got %+v, want %+v", got, w)
	}
	_, err = s.GetWorkspace(ctx, "ws_nope")
	wantCode(t, err, desk.ENOTFOUND)

	// Reusing an id is refused and changes nothing.
	dup := *w
	dup.Name = "other"
	err = s.CreateWorkspace(ctx, &dup, nil, true)
	wantCode(t, err, desk.ECONFLICT)
	got, _ = s.GetWorkspace(ctx, w.ID)
	if got.Name != "alpha" {
		t.Fatalf("conflicting create changed the name to %q", got.Name)
	}

	w2, _ := fixture(t, s, "beta")
	list, err := s.ListWorkspaces(ctx)
	must(t, err)
	if len(list) != 2 || list[0].ID != w.ID || list[1].ID != w2.ID {
		t.Fatalf("list = %v, want [%s %s] in creation order", ids(list), w.ID, w2.ID)
	}
}

func testActors(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	got, err := s.ActorByName(ctx, w.ID, desk.OwnerActorName)
	must(t, err)
	if got.ID != owner.ID || got.Kind != desk.ActorHuman {
		t.Fatalf("owner = %+v, want %+v", got, owner)
	}
	bot := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: "bot", Kind: desk.ActorAgent, CreatedAt: desk.Now()}
	must(t, s.CreateActor(ctx, bot, "hash-of-bot-token"))
	byTok, err := s.ActorByTokenHash(ctx, "hash-of-bot-token")
	must(t, err)
	if byTok.ID != bot.ID {
		t.Fatalf("token resolves to %s, want %s", byTok.ID, bot.ID)
	}
	_, err = s.ActorByTokenHash(ctx, "unknown")
	wantCode(t, err, desk.ENOTFOUND)

	// Names are unique within a workspace, and a refused actor leaves no token.
	dup := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: "bot", Kind: desk.ActorHuman, CreatedAt: desk.Now()}
	wantCode(t, s.CreateActor(ctx, dup, "second-token"), desk.ECONFLICT)
	_, err = s.ActorByTokenHash(ctx, "second-token")
	wantCode(t, err, desk.ENOTFOUND)

	// The same name in another workspace is fine.
	w2, _ := fixture(t, s, "beta")
	other := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w2.ID, Name: "bot", Kind: desk.ActorAgent, CreatedAt: desk.Now()}
	must(t, s.CreateActor(ctx, other, ""))
	list, err := s.ListActors(ctx, w.ID)
	must(t, err)
	if len(list) != 2 {
		t.Fatalf("actors of %s = %d, want 2", w.ID, len(list))
	}
	_, err = s.GetActor(ctx, "act_nope")
	wantCode(t, err, desk.ENOTFOUND)
}

func testSessions(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	bot := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: "bot", Kind: desk.ActorAgent, CreatedAt: desk.Now()}
	must(t, s.CreateActor(ctx, bot, ""))
	a := newSession(t, s, w, owner, "first")
	b := newSession(t, s, w, owner, "second")
	c := newSession(t, s, w, bot, "bot's")

	got, err := s.GetSession(ctx, a.ID)
	must(t, err)
	if got.Signature != a.Signature || got.Actor != owner.ID || got.Origin != a.Origin || !got.UpdatedAt.Equal(a.UpdatedAt) {
		t.Fatalf("round trip: got %+v, want %+v", got, a)
	}

	yes, no := true, false
	title := "renamed"
	time.Sleep(2 * time.Millisecond) // updated_at must move past creation
	up, err := s.UpdateSession(ctx, a.ID, desk.SessionUpdate{Pinned: &yes, Title: &title})
	must(t, err)
	if !up.Pinned || up.Title != "renamed" || up.Archived || !up.UpdatedAt.After(a.UpdatedAt) {
		t.Fatalf("update: %+v", up)
	}
	_, err = s.UpdateSession(ctx, b.ID, desk.SessionUpdate{Archived: &yes})
	must(t, err)
	_, err = s.UpdateSession(ctx, "ses_nope", desk.SessionUpdate{Pinned: &yes})
	wantCode(t, err, desk.ENOTFOUND)

	all, err := s.ListSessions(ctx, desk.SessionFilter{WorkspaceID: w.ID})
	must(t, err)
	if len(all) != 3 || all[0].ID != b.ID || all[1].ID != a.ID || all[2].ID != c.ID {
		t.Fatalf("recency order = %v, want [%s %s %s]", sessionIDs(all), b.ID, a.ID, c.ID)
	}
	pinned, _ := s.ListSessions(ctx, desk.SessionFilter{WorkspaceID: w.ID, Pinned: &yes})
	if len(pinned) != 1 || pinned[0].ID != a.ID {
		t.Fatalf("pinned = %v", sessionIDs(pinned))
	}
	active, _ := s.ListSessions(ctx, desk.SessionFilter{WorkspaceID: w.ID, Archived: &no})
	if len(active) != 2 {
		t.Fatalf("not archived = %v", sessionIDs(active))
	}
	mine, _ := s.ListSessions(ctx, desk.SessionFilter{WorkspaceID: w.ID, ActorID: bot.ID})
	if len(mine) != 1 || mine[0].ID != c.ID {
		t.Fatalf("bot's sessions = %v", sessionIDs(mine))
	}
}

func testSessionDelete(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "doomed")
	keep := newSession(t, s, w, owner, "kept")
	newArtifact(t, s, x, "a.md")
	kept := newArtifact(t, s, keep, "a.md")
	g := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: w.ID, Name: "g", CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
	must(t, s.CreateGroup(ctx, g))
	must(t, s.SetBindings(ctx, x.ID, []string{g.ID}))

	must(t, s.MarkSessionDeleting(ctx, x.ID))
	_, err := s.GetSession(ctx, x.ID)
	wantCode(t, err, desk.ENOTFOUND)
	wantCode(t, s.MarkSessionDeleting(ctx, x.ID), desk.ENOTFOUND)
	del, err := s.ListDeletingSessions(ctx)
	must(t, err)
	if len(del) != 1 || del[0].ID != x.ID {
		t.Fatalf("deleting = %v", sessionIDs(del))
	}
	must(t, s.PurgeSession(ctx, x.ID))
	if n, _ := s.CountArtifacts(ctx, x.ID); n != 0 {
		t.Fatalf("%d artifacts survive their session", n)
	}
	if bs, _ := s.ListBindings(ctx, x.ID); len(bs) != 0 {
		t.Fatalf("bindings survive their session: %v", bs)
	}
	if _, err := s.GetGroup(ctx, g.ID); err != nil {
		t.Fatalf("deleting a session deleted its group: %v", err)
	}
	if _, err := s.GetArtifact(ctx, kept.ID); err != nil {
		t.Fatalf("another session's artifact went with it: %v", err)
	}
	if del, _ := s.ListDeletingSessions(ctx); len(del) != 0 {
		t.Fatalf("still deleting: %v", sessionIDs(del))
	}
}

func testArtifacts(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	a := newArtifact(t, s, x, "report.md")
	time.Sleep(time.Millisecond)
	b := newArtifact(t, s, x, "immutable/b.png")
	if a.Path != "/artifacts/report.md" || b.Path != "/artifacts/immutable/b.png" {
		t.Fatalf("guest paths %q %q", a.Path, b.Path)
	}

	// One file, one row: the same path twice is a conflict.
	dup := *a
	dup.ID = desk.NewID(desk.PrefixArtifact)
	wantCode(t, s.CreateArtifact(ctx, &dup), desk.ECONFLICT)

	got, err := s.ArtifactByPath(ctx, x.ID, "report.md")
	must(t, err)
	if got.ID != a.ID || got.Origin != a.Origin || got.Prev != nil || got.Path != a.Path {
		t.Fatalf("by path: %+v", got)
	}
	list, err := s.ListArtifacts(ctx, x.ID)
	must(t, err)
	if len(list) != 2 || list[0].ID != a.ID || list[1].ID != b.ID {
		t.Fatalf("list order: %v", artifactIDs(list))
	}

	// Update with the right revision keeps the previous one's facts.
	up := *got
	up.Prev = &desk.ArtifactRevision{Revision: 1, Kind: got.Kind, MediaType: got.MediaType, Size: got.Size, SHA256: got.SHA256}
	up.Revision, up.SHA256, up.Size, up.UpdatedAt = 2, "def", 9, desk.Now()
	up.Pending = "tmp-file"
	must(t, s.UpdateArtifact(ctx, &up, 1))
	got, _ = s.GetArtifact(ctx, a.ID)
	if got.Revision != 2 || got.SHA256 != "def" || got.Prev == nil || *got.Prev != *up.Prev || got.Pending != "tmp-file" {
		t.Fatalf("after update: %+v prev %+v", got, got.Prev)
	}
	pend, err := s.ListPendingArtifacts(ctx)
	must(t, err)
	if len(pend) != 1 || pend[0].ID != a.ID {
		t.Fatalf("pending = %v", artifactIDs(pend))
	}
	must(t, s.SetArtifactPending(ctx, a.ID, ""))
	if pend, _ := s.ListPendingArtifacts(ctx); len(pend) != 0 {
		t.Fatalf("pending after clear = %v", artifactIDs(pend))
	}
	// A stale revision is refused and changes nothing.
	stale := up
	stale.SHA256 = "zzz"
	wantCode(t, s.UpdateArtifact(ctx, &stale, 1), desk.ECONFLICT)
	got, _ = s.GetArtifact(ctx, a.ID)
	if got.SHA256 != "def" {
		t.Fatalf("stale update wrote %q", got.SHA256)
	}
	missing := up
	missing.ID = "art_nope"
	wantCode(t, s.UpdateArtifact(ctx, &missing, 2), desk.ENOTFOUND)

	// Deleting hides the row from everything but recovery.
	must(t, s.MarkArtifactDeleting(ctx, b.ID))
	if _, err := s.GetArtifact(ctx, b.ID); desk.ErrorCode(err) != desk.ENOTFOUND {
		t.Fatalf("deleting artifact still visible: %v", err)
	}
	if n, _ := s.CountArtifacts(ctx, x.ID); n != 1 {
		t.Fatalf("count = %d, want 1", n)
	}
	// The count is a counter kept with the rows: a second mark, a refused
	// duplicate and the final delete leave it as it is.
	wantCode(t, s.MarkArtifactDeleting(ctx, b.ID), desk.ENOTFOUND)
	dup2 := *a
	dup2.ID = desk.NewID(desk.PrefixArtifact)
	wantCode(t, s.CreateArtifact(ctx, &dup2), desk.ECONFLICT)
	del, _ := s.ListDeletingArtifacts(ctx)
	if len(del) != 1 || del[0].ID != b.ID {
		t.Fatalf("deleting = %v", artifactIDs(del))
	}
	must(t, s.DeleteArtifact(ctx, b.ID))
	wantCode(t, s.DeleteArtifact(ctx, b.ID), desk.ENOTFOUND)
	if n, _ := s.CountArtifacts(ctx, x.ID); n != 1 {
		t.Fatalf("count after delete = %d, want 1", n)
	}
}

func testArtifactRace(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	a := newArtifact(t, s, x, "race.md")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			up := *a
			up.Revision, up.SHA256, up.UpdatedAt = 2, string(rune('a'+i)), desk.Now()
			errs[i] = s.UpdateArtifact(ctx, &up, 1)
		}()
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case desk.IsCode(err, desk.ECONFLICT):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d concurrent updates of one revision won, want exactly 1", wins)
	}
}

func testGroups(t *testing.T, s desk.Store) {
	w, _ := fixture(t, s, "alpha")
	now := desk.Now()
	g := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: w.ID, Name: "research", CreatedAt: now, UpdatedAt: now}
	must(t, s.CreateGroup(ctx, g))
	g2 := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: w.ID, Name: "other", CreatedAt: now, UpdatedAt: now}
	must(t, s.CreateGroup(ctx, g2))

	item := func(name string) *desk.Item {
		return &desk.Item{ID: desk.NewID(desk.PrefixItem), WorkspaceID: w.ID, Kind: desk.ItemText, Name: name,
			MediaType: "text/plain", Size: 1, SHA256: "x", CreatedAt: desk.Now()}
	}
	i1, i2, i3 := item("one"), item("two"), item("three")
	must(t, s.AddItem(ctx, g.ID, i1))
	must(t, s.AddItem(ctx, g.ID, i2))
	must(t, s.AddItem(ctx, g2.ID, i3))
	wantCode(t, s.AddItem(ctx, "grp_nope", item("orphan")), desk.ENOTFOUND)

	got, err := s.GetGroup(ctx, g.ID)
	must(t, err)
	if got.ItemCount != 2 || got.Name != "research" {
		t.Fatalf("group = %+v", got)
	}
	items, err := s.ListGroupItems(ctx, g.ID)
	must(t, err)
	if len(items) != 2 || items[0].ID != i1.ID || items[1].ID != i2.ID {
		t.Fatalf("items = %v", items)
	}
	if un, _ := s.ListUnreachableItems(ctx, w.ID); len(un) != 0 {
		t.Fatalf("unreachable before removal: %d", len(un))
	}

	// Removing a membership leaves the item, now unreachable, for collection.
	must(t, s.RemoveGroupItem(ctx, g.ID, i1.ID))
	wantCode(t, s.RemoveGroupItem(ctx, g.ID, i1.ID), desk.ENOTFOUND)
	un, err := s.ListUnreachableItems(ctx, w.ID)
	must(t, err)
	if len(un) != 1 || un[0].ID != i1.ID {
		t.Fatalf("unreachable = %v", un)
	}
	if ok, err := s.DeleteItemIfUnreachable(ctx, i2.ID); err != nil || ok {
		t.Fatalf("a referenced item was collected (ok=%v err=%v)", ok, err)
	}
	if ok, err := s.DeleteItemIfUnreachable(ctx, i1.ID); err != nil || !ok {
		t.Fatalf("unreachable item not collected (ok=%v err=%v)", ok, err)
	}
	_, err = s.GetItem(ctx, i1.ID)
	wantCode(t, err, desk.ENOTFOUND)

	// Deleting a group drops its memberships; its items become unreachable.
	must(t, s.DeleteGroup(ctx, g.ID))
	wantCode(t, s.DeleteGroup(ctx, g.ID), desk.ENOTFOUND)
	un, _ = s.ListUnreachableItems(ctx, w.ID)
	if len(un) != 1 || un[0].ID != i2.ID {
		t.Fatalf("unreachable after group delete = %v", un)
	}
	list, _ := s.ListGroups(ctx, w.ID)
	if len(list) != 1 || list[0].ID != g2.ID || list[0].ItemCount != 1 {
		t.Fatalf("groups = %v", list)
	}
}

func testBindings(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	var gs []string
	for _, n := range []string{"c", "a", "b"} {
		g := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: w.ID, Name: n, CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
		must(t, s.CreateGroup(ctx, g))
		gs = append(gs, g.ID)
	}
	must(t, s.SetBindings(ctx, x.ID, []string{gs[2], gs[0]}))
	got, err := s.ListBindings(ctx, x.ID)
	must(t, err)
	if len(got) != 2 || got[0].ID != gs[2] || got[1].ID != gs[0] {
		t.Fatalf("bindings keep the given order: %v", got)
	}
	// A duplicate is refused and the old bindings stay.
	err = s.SetBindings(ctx, x.ID, []string{gs[1], gs[1]})
	wantCode(t, err, desk.ECONFLICT)
	got, _ = s.ListBindings(ctx, x.ID)
	if len(got) != 2 || got[0].ID != gs[2] {
		t.Fatalf("refused rebind changed bindings: %v", got)
	}
	must(t, s.SetBindings(ctx, x.ID, nil))
	if got, _ := s.ListBindings(ctx, x.ID); len(got) != 0 {
		t.Fatalf("cleared bindings = %v", got)
	}
}

func ids(ws []*desk.Workspace) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

func sessionIDs(xs []*desk.Session) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x.ID)
	}
	return out
}

func artifactIDs(as []*desk.Artifact) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}
