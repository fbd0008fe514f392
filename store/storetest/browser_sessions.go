package storetest

import (
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testBrowserSessions covers the web UI's browser sessions: create, read
// back, touch, end one, end an actor's, end all, and expire by idle and by
// age, in order on one store.
func testBrowserSessions(t *testing.T, s desk.Store) {
	w, a := fixture(t, s, "browser")
	t0 := desk.Now()
	mk := func(id, actor string, created, seen time.Time) *desk.BrowserSession {
		t.Helper()
		b := &desk.BrowserSession{IDHash: id, TokenHash: "tok-" + actor, Actor: actor, CreatedAt: created, LastSeen: seen}
		if actor != desk.AdminActor {
			b.WorkspaceID = w.ID
		}
		must(t, s.CreateBrowserSession(ctx, b))
		return b
	}
	count := func(ids ...string) (n int) {
		t.Helper()
		for _, id := range ids {
			if _, err := s.GetBrowserSession(ctx, id); err == nil {
				n++
			} else {
				wantCode(t, err, desk.ENOTFOUND)
			}
		}
		return n
	}

	admin := mk("h-admin", desk.AdminActor, t0, t0)
	mk("h-actor-1", a.ID, t0, t0)
	mk("h-actor-2", a.ID, t0, t0)
	got, err := s.GetBrowserSession(ctx, "h-admin")
	must(t, err)
	if *got != *admin {
		t.Fatalf("read back %+v, want %+v", got, admin)
	}
	got, _ = s.GetBrowserSession(ctx, "h-actor-1")
	if got.Actor != a.ID || got.WorkspaceID != w.ID || got.TokenHash != "tok-"+a.ID {
		t.Fatalf("actor session %+v", got)
	}
	// A second row with the same id hash is refused; a bad row too.
	wantCode(t, s.CreateBrowserSession(ctx, &desk.BrowserSession{IDHash: "h-admin", TokenHash: "x", Actor: desk.AdminActor, CreatedAt: t0, LastSeen: t0}), desk.ECONFLICT)
	wantCode(t, s.CreateBrowserSession(ctx, &desk.BrowserSession{IDHash: "h-bad", Actor: desk.AdminActor}), desk.EINVALID)
	_, err = s.GetBrowserSession(ctx, "h-unknown")
	wantCode(t, err, desk.ENOTFOUND)

	// Touch moves last_seen only.
	t1 := t0.Add(time.Hour)
	must(t, s.TouchBrowserSession(ctx, "h-admin", t1))
	got, _ = s.GetBrowserSession(ctx, "h-admin")
	if !got.LastSeen.Equal(t1) || !got.CreatedAt.Equal(t0) {
		t.Fatalf("touched: %+v", got)
	}
	wantCode(t, s.TouchBrowserSession(ctx, "h-unknown", t1), desk.ENOTFOUND)

	// End one; ending it again or an unknown one is no error.
	must(t, s.DeleteBrowserSession(ctx, "h-actor-1"))
	must(t, s.DeleteBrowserSession(ctx, "h-actor-1"))
	if n := count("h-admin", "h-actor-1", "h-actor-2"); n != 2 {
		t.Fatalf("%d sessions after ending one, want 2", n)
	}
	// End an actor's: the admin's stays.
	n, err := s.DeleteBrowserSessions(ctx, a.ID)
	must(t, err)
	if n != 1 || count("h-admin", "h-actor-2") != 1 {
		t.Fatalf("ended %d of the actor's, want 1; admin's must stay", n)
	}
	// End all.
	mk("h-actor-3", a.ID, t0, t0)
	n, err = s.DeleteBrowserSessions(ctx, "")
	must(t, err)
	if n != 2 || count("h-admin", "h-actor-3") != 0 {
		t.Fatalf("ended %d of all, want 2", n)
	}

	// Expiry: idle (last seen before the cut) or old (created before it).
	mk("h-fresh", a.ID, t0, t1)
	mk("h-idle", a.ID, t0, t0)
	mk("h-old", desk.AdminActor, t0.Add(-48*time.Hour), t1)
	n, err = s.DeleteExpiredBrowserSessions(ctx, t0.Add(time.Minute), t0.Add(-24*time.Hour))
	must(t, err)
	if n != 2 || count("h-fresh") != 1 || count("h-idle", "h-old") != 0 {
		t.Fatalf("expired %d, want 2 (idle and old), the fresh one kept", n)
	}
}
