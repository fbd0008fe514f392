package storetest

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// threadItem is a queue row of kind on surface srf of session x.
func threadItem(x *desk.Session, srf, kind, text string) *desk.QueueItem {
	return &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: srf, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
		Kind: kind, Priority: desk.PriorityNormal, Text: text, Channel: "test", ConversationID: x.ID, CreatedAt: desk.Now(),
		Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: x.SurfaceID, Kind: desk.OriginAgent}}
}

func newThread(x *desk.Session, title, cmd string) desk.ThreadStart {
	now := desk.Now()
	t := &desk.Thread{ID: desk.NewID(desk.PrefixThread), SessionID: x.ID, WorkspaceID: x.WorkspaceID, SurfaceID: desk.NewID(desk.PrefixSurface),
		Title: title, Objective: "do " + title, State: desk.ThreadActive, History: desk.HistoryIsolated, CommandID: cmd, CreatedAt: now, UpdatedAt: now}
	return desk.ThreadStart{Thread: t, Item: threadItem(x, t.SurfaceID, desk.QueueInitialHandler, "objective: do "+title)}
}

// testThreads checks threads, groups and episodes: a start creates the
// group, the handler surfaces and their first rows at once (and only
// once per command); an episode and its notification are one write; an
// activating follow-up reopens a concluded thread.
func testThreads(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "threads")
	x := newSession(t, s, w, owner, "s")
	other := newSession(t, s, w, owner, "o")
	g := &desk.ThreadGroup{ID: desk.NewID(desk.PrefixThreadGroup), SessionID: x.ID, WorkspaceID: x.WorkspaceID, CreatedAt: desk.Now()}
	a, b := newThread(x, "a", "cmd_1"), newThread(x, "b", "cmd_1")
	created, err := s.StartThreads(ctx, g, true, []desk.ThreadStart{a, b})
	if err != nil || !created {
		t.Fatalf("start: %v %v", created, err)
	}
	// The same command again changes nothing.
	again := newThread(x, "a2", "cmd_1")
	if created, err := s.StartThreads(ctx, g, true, []desk.ThreadStart{again}); err != nil || created {
		t.Fatalf("repeated start: %v %v", created, err)
	}
	if _, err := s.GetThread(ctx, again.Thread.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a repeated start made a thread: %v", err)
	}
	// An unknown group, or another session's, is refused with nothing made.
	c := newThread(x, "c", "cmd_2")
	if _, err := s.StartThreads(ctx, &desk.ThreadGroup{ID: "tgr_nope", SessionID: x.ID}, false, []desk.ThreadStart{c}); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("unknown group: %v", err)
	}
	oc := newThread(other, "oc", "cmd_3")
	if _, err := s.StartThreads(ctx, &desk.ThreadGroup{ID: g.ID, SessionID: other.ID}, false, []desk.ThreadStart{oc}); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("another session's group: %v", err)
	}
	if _, err := s.GetSurface(ctx, c.Thread.SurfaceID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a refused start left a surface: %v", err)
	}
	// Appending to the group.
	if created, err := s.StartThreads(ctx, &desk.ThreadGroup{ID: g.ID, SessionID: x.ID}, false, []desk.ThreadStart{c}); err != nil || !created {
		t.Fatalf("append: %v %v", created, err)
	}
	srf, err := s.GetSurface(ctx, a.Thread.SurfaceID)
	if err != nil || srf.Kind != desk.SurfaceHandler || srf.SessionID != x.ID {
		t.Fatalf("handler surface: %+v %v", srf, err)
	}
	q, err := s.GetQueueItem(ctx, a.Item.ID)
	if err != nil || q.Kind != desk.QueueInitialHandler || q.SurfaceID != a.Thread.SurfaceID || q.Status != desk.QueueStatusQueued {
		t.Fatalf("initial row: %+v %v", q, err)
	}
	ts, err := s.ListThreads(ctx, x.ID, "")
	if err != nil || len(ts) != 3 || ts[0].ID != a.Thread.ID || ts[2].ID != c.Thread.ID || ts[0].GroupID != g.ID {
		t.Fatalf("threads: %+v %v", ts, err)
	}
	if ts, err := s.ListThreads(ctx, x.ID, "tgr_other"); err != nil || len(ts) != 0 {
		t.Fatalf("threads of another group: %+v %v", ts, err)
	}
	gs, err := s.ListThreadGroups(ctx, x.ID)
	if err != nil || len(gs) != 1 || len(gs[0].ThreadIDs) != 3 {
		t.Fatalf("groups: %+v %v", gs, err)
	}
	if got, err := s.GetThreadGroup(ctx, g.ID); err != nil || got.SessionID != x.ID || len(got.ThreadIDs) != 3 {
		t.Fatalf("group: %+v %v", got, err)
	}
	if got, err := s.ThreadBySurface(ctx, b.Thread.SurfaceID); err != nil || got.ID != b.Thread.ID {
		t.Fatalf("thread by surface: %+v %v", got, err)
	}
	if _, err := s.ThreadBySurface(ctx, x.SurfaceID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("the orchestrator surface is no thread: %v", err)
	}

	// An update, then a conclusion: each with its notification.
	ep := func(kind, outcome, cmd string) (*desk.Episode, *desk.QueueItem) {
		e := &desk.Episode{ID: desk.NewID(desk.PrefixEpisode), ThreadID: a.Thread.ID, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
			Kind: kind, Outcome: outcome, Title: kind, Body: "body of " + kind, CommandID: cmd, CreatedAt: desk.Now(),
			Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: a.Thread.SurfaceID, Kind: desk.OriginAgent}}
		return e, threadItem(x, x.SurfaceID, desk.QueueThreadReport, "report "+kind)
	}
	e1, n1 := ep(desk.EpisodeUpdate, "", "cmd_r1")
	got, created, err := s.RecordEpisode(ctx, e1, n1)
	if err != nil || !created || got.NotificationID != n1.ID {
		t.Fatalf("record update: %+v %v %v", got, created, err)
	}
	// The same command again is the same episode and no second row.
	e1b, n1b := ep(desk.EpisodeUpdate, "", "cmd_r1")
	if got, created, err := s.RecordEpisode(ctx, e1b, n1b); err != nil || created || got.ID != e1.ID {
		t.Fatalf("repeated record: %+v %v %v", got, created, err)
	}
	if _, err := s.GetQueueItem(ctx, n1b.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a repeated record queued a notification: %v", err)
	}
	if th, err := s.GetThread(ctx, a.Thread.ID); err != nil || th.State != desk.ThreadActive || th.EpisodeCount != 1 || th.LatestEpisode.ID != e1.ID {
		t.Fatalf("after update: %+v %v", th, err)
	}
	e2, n2 := ep(desk.EpisodeConclusion, desk.EpisodeDelivered, "cmd_r2")
	if _, _, err := s.RecordEpisode(ctx, e2, n2); err != nil {
		t.Fatal(err)
	}
	th, err := s.GetThread(ctx, a.Thread.ID)
	if err != nil || th.State != desk.ThreadConcluded || th.LatestEpisode.ID != e2.ID || th.LatestEpisode.Outcome != desk.EpisodeDelivered {
		t.Fatalf("after conclusion: %+v %v", th, err)
	}
	es, err := s.ListEpisodes(ctx, a.Thread.ID)
	if err != nil || len(es) != 2 || es[0].ID != e1.ID || es[1].Body != "body of conclusion" || es[1].Origin.SurfaceID != a.Thread.SurfaceID {
		t.Fatalf("episodes: %+v %v", es, err)
	}
	if got, err := s.GetEpisode(ctx, e2.ID); err != nil || got.Kind != desk.EpisodeConclusion {
		t.Fatalf("episode: %+v %v", got, err)
	}
	q, err = s.GetQueueItem(ctx, n2.ID)
	if err != nil || q.SurfaceID != x.SurfaceID || q.Kind != desk.QueueThreadReport {
		t.Fatalf("notification: %+v %v", q, err)
	}
	// Cancelling the notification keeps the episode.
	if _, err := s.UpdateQueued(ctx, n2.ID, desk.QueueCancel); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetEpisode(ctx, e2.ID); err != nil {
		t.Fatalf("a cancelled notification took its episode: %v", err)
	}

	// Follow-ups: without activate the concluded thread stays concluded;
	// with it, it is active again; active targets keep their state.
	if ts, err := s.FollowupThreads(ctx, []*desk.QueueItem{threadItem(x, a.Thread.SurfaceID, desk.QueueThreadFollowup, "f1")}, false); err != nil || ts[0].State != desk.ThreadConcluded {
		t.Fatalf("follow-up: %+v %v", ts, err)
	}
	ts, err = s.FollowupThreads(ctx, []*desk.QueueItem{threadItem(x, a.Thread.SurfaceID, desk.QueueThreadFollowup, "f2"),
		threadItem(x, b.Thread.SurfaceID, desk.QueueThreadFollowup, "f2")}, true)
	if err != nil || len(ts) != 2 || ts[0].State != desk.ThreadActive || ts[1].State != desk.ThreadActive {
		t.Fatalf("activating follow-up: %+v %v", ts, err)
	}
	// A follow-up naming another session's thread changes nothing.
	bad := threadItem(other, a.Thread.SurfaceID, desk.QueueThreadFollowup, "x")
	good := threadItem(x, b.Thread.SurfaceID, desk.QueueThreadFollowup, "y")
	if _, err := s.FollowupThreads(ctx, []*desk.QueueItem{good, bad}, false); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("foreign follow-up: %v", err)
	}
	if _, err := s.GetQueueItem(ctx, good.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a refused follow-up queued a row: %v", err)
	}

	// The handler's script cursor is its own.
	for want := range 3 {
		if got, err := s.NextThreadScriptStep(ctx, b.Thread.ID); err != nil || got != want {
			t.Fatalf("cursor: %d %v, want %d", got, err, want)
		}
	}
	if got, err := s.NextThreadScriptStep(ctx, a.Thread.ID); err != nil || got != 0 {
		t.Fatalf("another thread's cursor: %d %v", got, err)
	}
	if _, err := s.NextThreadScriptStep(ctx, "thr_nope"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("cursor of no thread: %v", err)
	}

	// Events: started per thread, updated and recorded per episode.
	evs, err := s.ListEvents(ctx, desk.EventFilter{SessionID: x.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Type]++
	}
	if n["thread.started"] != 3 || n["episode.recorded"] != 2 || n["thread.updated"] != 3 {
		t.Fatalf("events: %v", n)
	}

	// Purging the session removes its threads.
	must(t, s.MarkSessionDeleting(ctx, x.ID))
	must(t, s.PurgeSession(ctx, x.ID))
	if _, err := s.GetThread(ctx, a.Thread.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("purged thread: %v", err)
	}
}
