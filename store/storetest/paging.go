package storetest

import (
	"fmt"
	"testing"

	"github.com/desk-runtime/desk"
)

// testTranscriptPages pages through a long active branch that an edit
// forked half-way: every page is exactly the branch's messages before its
// boundary, newest limit of them, oldest first, and walking the pages
// back to the start yields the whole branch once and nothing of the
// abandoned one. ListMessages stops its walk once the page is full, so a
// bound that stopped early or late shows here.
func testTranscriptPages(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "pages")
	x := newSession(t, s, w, owner, "s")
	add := func(text string, edit *desk.Message) *desk.Message {
		m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: "exe_pages",
			Role: desk.RoleUser, Text: text, CreatedAt: desk.Now()}
		if edit != nil {
			m.EditOf, m.ParentID = edit.ID, edit.ParentID
		}
		must(t, s.AppendMessage(ctx, m))
		return m
	}
	var old []*desk.Message
	for i := range 60 {
		old = append(old, add(fmt.Sprintf("old %d", i), nil))
	}
	// The branch forks at old[40]: the active branch is old[0..39], the
	// edit, then 50 more.
	want := append([]*desk.Message(nil), old[:40]...)
	want = append(want, add("edit", old[40]))
	for i := range 50 {
		want = append(want, add(fmt.Sprintf("new %d", i), nil))
	}
	all, err := s.ListMessages(ctx, x.SurfaceID, 0, 0)
	must(t, err)
	if len(all) != len(want) {
		t.Fatalf("whole branch: %d messages, want %d", len(all), len(want))
	}
	for _, limit := range []int{1, 7, 40, 91, 200} {
		var got []*desk.Message
		before := int64(0)
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			ms, err := s.ListMessages(ctx, x.SurfaceID, before, limit)
			must(t, err)
			if len(ms) == 0 {
				break
			}
			if len(ms) > limit || (len(ms) < limit && len(got)+len(ms) != len(want)) {
				t.Fatalf("limit %d: a page of %d before seq %d (only the oldest page may be short)", limit, len(ms), before)
			}
			for i := 1; i < len(ms); i++ {
				if ms[i].Seq <= ms[i-1].Seq {
					t.Fatalf("limit %d: page not oldest first", limit)
				}
			}
			got = append(ms, got...)
			before = ms[0].Seq
		}
		if len(got) != len(want) {
			t.Fatalf("limit %d: pages hold %d messages, want %d", limit, len(got), len(want))
		}
		for i := range want {
			if got[i].ID != want[i].ID {
				t.Fatalf("limit %d: message %d is %q, want %q", limit, i, got[i].Text, want[i].Text)
			}
		}
	}
	// A boundary inside the branch: the limit messages just before it.
	ms, err := s.ListMessages(ctx, x.SurfaceID, want[45].Seq, 10)
	must(t, err)
	if len(ms) != 10 || ms[0].ID != want[35].ID || ms[9].ID != want[44].ID {
		t.Fatalf("page before %d: %d messages from %q", want[45].Seq, len(ms), ms[0].Text)
	}
}
