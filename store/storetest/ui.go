package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testUI covers drafts per surface and the open/unread bookkeeping, in
// order on one store; each phase states what the earlier ones left.
func testUI(t *testing.T, s desk.Store) {
	w, a := fixture(t, s, "ui")
	x := newSession(t, s, w, a, "one")
	y := newSession(t, s, w, a, "two")

	// No draft yet: an empty one, not an error.
	d, err := s.GetDraft(ctx, x.ID, x.SurfaceID)
	must(t, err)
	if d.Text != "" || d.SurfaceID != x.SurfaceID || d.SessionID != x.ID || !d.UpdatedAt.IsZero() {
		t.Fatalf("missing draft = %+v", d)
	}

	// Save, read back, overwrite: one draft per surface.
	must(t, s.SaveDraft(ctx, &desk.Draft{SessionID: x.ID, SurfaceID: x.SurfaceID, Text: "hello <b>world</b>\nline two"}))
	d, err = s.GetDraft(ctx, x.ID, x.SurfaceID)
	must(t, err)
	if d.Text != "hello <b>world</b>\nline two" || d.UpdatedAt.IsZero() {
		t.Fatalf("saved draft = %+v", d)
	}
	must(t, s.SaveDraft(ctx, &desk.Draft{SessionID: x.ID, SurfaceID: x.SurfaceID, Text: "second"}))
	d, _ = s.GetDraft(ctx, x.ID, x.SurfaceID)
	if d.Text != "second" {
		t.Fatalf("overwritten draft = %q", d.Text)
	}
	// Another session's surface is refused and changes nothing; so is a
	// surface read through the wrong session.
	err = s.SaveDraft(ctx, &desk.Draft{SessionID: x.ID, SurfaceID: y.SurfaceID, Text: "cross"})
	wantCode(t, err, desk.ENOTFOUND)
	d, _ = s.GetDraft(ctx, y.ID, y.SurfaceID)
	if d.Text != "" {
		t.Fatalf("refused save left %q on the other surface", d.Text)
	}
	d, _ = s.GetDraft(ctx, y.ID, x.SurfaceID)
	if d.Text != "" {
		t.Fatalf("draft of session %s read through session %s: %q", x.ID, y.ID, d.Text)
	}
	// Too large is refused and the old draft stays.
	err = s.SaveDraft(ctx, &desk.Draft{SessionID: x.ID, SurfaceID: x.SurfaceID, Text: strings.Repeat("x", desk.MaxDraftBytes+1)})
	wantCode(t, err, desk.ETOOLARGE)
	d, _ = s.GetDraft(ctx, x.ID, x.SurfaceID)
	if d.Text != "second" {
		t.Fatalf("refused save changed the draft to %d bytes", len(d.Text))
	}
	// Emptying deletes it.
	must(t, s.SaveDraft(ctx, &desk.Draft{SessionID: x.ID, SurfaceID: x.SurfaceID, Text: ""}))
	d, _ = s.GetDraft(ctx, x.ID, x.SurfaceID)
	if d.Text != "" || !d.UpdatedAt.IsZero() {
		t.Fatalf("emptied draft = %+v", d)
	}

	// A pin, an archive or a rename is committed with a session.updated
	// event naming only what changed, so other pages redraw the row; a
	// refused update (no such session) emits nothing.
	pin := true
	_, err = s.UpdateSession(ctx, x.ID, desk.SessionUpdate{Pinned: &pin})
	must(t, err)
	if n := countEvents(t, s, x.ID, "session.updated"); n != 1 {
		t.Fatalf("%d session.updated events after a pin, want 1", n)
	}
	if _, err := s.UpdateSession(ctx, "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV", desk.SessionUpdate{Pinned: &pin}); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("update of a missing session: %v", err)
	}

	// Nobody has x open: a finished turn marks it unread, once, with an
	// event; updated_at (recency) does not move.
	before, _ := s.GetSession(ctx, x.ID)
	now := desk.Now()
	marked, err := s.MarkUnreadIfClosed(ctx, x.ID, now)
	must(t, err)
	if !marked {
		t.Fatal("a closed session was not marked unread")
	}
	got, _ := s.GetSession(ctx, x.ID)
	if !got.Unread || !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("after marking: unread %v, updated_at %v (was %v)", got.Unread, got.UpdatedAt, before.UpdatedAt)
	}
	marked, err = s.MarkUnreadIfClosed(ctx, x.ID, now)
	must(t, err)
	if marked {
		t.Fatal("an unread session was marked again")
	}
	if n := countEvents(t, s, x.ID, "session.unread"); n != 1 {
		t.Fatalf("%d session.unread events, want 1", n)
	}

	// Opening clears unread (with an event) and holds the session open.
	must(t, s.OpenSession(ctx, x.ID, "tab-1", now.Add(30*time.Second)))
	got, _ = s.GetSession(ctx, x.ID)
	if got.Unread || !got.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("after opening: unread %v, updated_at moved %v → %v", got.Unread, before.UpdatedAt, got.UpdatedAt)
	}
	if n := countEvents(t, s, x.ID, "session.read"); n != 1 {
		t.Fatalf("%d session.read events, want 1", n)
	}
	marked, err = s.MarkUnreadIfClosed(ctx, x.ID, now.Add(time.Second))
	must(t, err)
	if marked {
		t.Fatal("a session held open was marked unread")
	}
	// The hold runs out by itself…
	marked, err = s.MarkUnreadIfClosed(ctx, x.ID, now.Add(31*time.Second))
	must(t, err)
	if !marked {
		t.Fatal("a session whose hold ran out was not marked unread")
	}
	// …and closing ends it at once; other viewers' holds stay.
	must(t, s.OpenSession(ctx, x.ID, "tab-1", now.Add(time.Hour)))
	must(t, s.OpenSession(ctx, x.ID, "tab-2", now.Add(time.Hour)))
	must(t, s.CloseSession(ctx, x.ID, "tab-1"))
	marked, _ = s.MarkUnreadIfClosed(ctx, x.ID, now.Add(time.Minute))
	if marked {
		t.Fatal("closing one viewer dropped another viewer's hold")
	}
	must(t, s.CloseSession(ctx, x.ID, "tab-2"))
	marked, _ = s.MarkUnreadIfClosed(ctx, x.ID, now.Add(time.Minute))
	if !marked {
		t.Fatal("a session every viewer closed was not marked unread")
	}
	// Holds are per session.
	got, _ = s.GetSession(ctx, y.ID)
	if got.Unread {
		t.Fatal("marking x touched y")
	}

	// Bad viewers and unknown sessions are refused.
	wantCode(t, s.OpenSession(ctx, x.ID, "", now), desk.EINVALID)
	wantCode(t, s.OpenSession(ctx, x.ID, strings.Repeat("v", 257), now), desk.EINVALID)
	wantCode(t, s.OpenSession(ctx, "ses_nope", "tab", now), desk.ENOTFOUND)
	_, err = s.MarkUnreadIfClosed(ctx, "ses_nope", now)
	wantCode(t, err, desk.ENOTFOUND)

	// Purging a session takes its drafts and holds with it.
	must(t, s.SaveDraft(ctx, &desk.Draft{SessionID: y.ID, SurfaceID: y.SurfaceID, Text: "bye"}))
	must(t, s.OpenSession(ctx, y.ID, "tab", now.Add(time.Hour)))
	must(t, s.MarkSessionDeleting(ctx, y.ID))
	wantCode(t, s.OpenSession(ctx, y.ID, "tab", now.Add(time.Hour)), desk.ENOTFOUND)
	wantCode(t, s.SaveDraft(ctx, &desk.Draft{SessionID: y.ID, SurfaceID: y.SurfaceID, Text: "late"}), desk.ENOTFOUND)
	must(t, s.PurgeSession(ctx, y.ID))
	d, err = s.GetDraft(ctx, y.ID, y.SurfaceID)
	must(t, err)
	if d.Text != "" {
		t.Fatalf("purged session's draft survived: %q", d.Text)
	}
}

func countEvents(t *testing.T, s desk.Store, session, typ string) int {
	t.Helper()
	es, err := s.ListEvents(ctx, desk.EventFilter{SessionID: session, Limit: 1000})
	must(t, err)
	n := 0
	for _, e := range es {
		if e.Type == typ {
			n++
		}
	}
	return n
}
