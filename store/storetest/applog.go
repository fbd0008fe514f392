package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testAppLog runs the app log cases in order on one store; each phase states
// what the earlier ones left behind.
func testAppLog(t *testing.T, s desk.Store) {
	// An empty log: no seqs, nothing unread, no mark.
	last, err := s.LastLogSeq(ctx)
	must(t, err)
	if last != 0 {
		t.Fatalf("LastLogSeq of an empty store = %d, want 0", last)
	}
	list, err := s.ListLogs(ctx, desk.LogFilter{})
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("empty store lists %d entries", len(list))
	}
	u, err := s.LogUnread(ctx, "op")
	must(t, err)
	if u.Seen != 0 || u.LastSeq != 0 || u.Counts[desk.LogWarn] != 0 || u.Counts[desk.LogError] != 0 || len(u.Counts) != 2 {
		t.Fatalf("unread of an empty store = %+v", u)
	}
	must(t, s.AppendLogs(ctx, nil))

	// Append a batch: seqs are assigned in order, and every column and
	// field survives the round trip.
	at := desk.Now().Add(-time.Minute)
	batch := []*desk.LogEntry{
		{At: at, Level: desk.LogInfo, Source: "httpapi", Message: "GET /v1/workspaces 200",
			Fields: map[string]any{"status": 200, "path": "/v1/workspaces", "big": int64(1) << 60}},
		{At: at, Level: desk.LogWarn, Source: "session", Message: "slow Disk", WorkspaceID: "ws_a", SessionID: "ses_1",
			Fields: map[string]any{"took": "1.5s", "nested": map[string]any{"note": "Needle in fields"}}},
		{At: at, Level: desk.LogError, Source: "session", Message: "artifact write failed", WorkspaceID: "ws_a", SessionID: "ses_2"},
		{At: at, Level: desk.LogDebug, Source: "gc", Message: "swept 100%_done", WorkspaceID: "ws_b"},
		{At: at, Level: desk.LogError, Source: "gc", Message: "sweep 100 abc done", WorkspaceID: "ws_b"},
	}
	must(t, s.AppendLogs(ctx, batch))
	for i, e := range batch {
		if e.Seq <= 0 || (i > 0 && e.Seq <= batch[i-1].Seq) {
			t.Fatalf("seqs %v are not strictly increasing from 1", logSeqs(batch))
		}
	}
	list, err = s.ListLogs(ctx, desk.LogFilter{})
	must(t, err)
	if !slices.Equal(logSeqs(list), logSeqs(batch)) {
		t.Fatalf("list seqs = %v, want %v oldest first", logSeqs(list), logSeqs(batch))
	}
	got := list[1]
	if !got.At.Equal(at) || got.Level != desk.LogWarn || got.Source != "session" || got.Message != "slow Disk" ||
		got.WorkspaceID != "ws_a" || got.SessionID != "ses_1" {
		t.Fatalf("round trip: got %+v, want %+v", got, batch[1])
	}
	if nested, _ := got.Fields["nested"].(map[string]any); nested["note"] != "Needle in fields" || got.Fields["took"] != "1.5s" {
		t.Fatalf("fields round trip: %#v", got.Fields)
	}
	if n, _ := list[0].Fields["big"].(json.Number); n.String() != "1152921504606846976" {
		t.Fatalf("a large integer field came back as %#v, want it exact", list[0].Fields["big"])
	}
	if list[2].Fields == nil || len(list[2].Fields) != 0 {
		t.Fatalf("entry without fields lists fields %#v, want an empty object", list[2].Fields)
	}
	last, err = s.LastLogSeq(ctx)
	must(t, err)
	if last != batch[4].Seq {
		t.Fatalf("LastLogSeq = %d, want %d", last, batch[4].Seq)
	}
	if err := s.AppendLogs(ctx, []*desk.LogEntry{{At: at, Level: "fatal", Source: "x", Message: "y"}}); desk.ErrorCode(err) != desk.EINVALID {
		t.Fatalf("unknown level: err = %v, want invalid", err)
	}

	// Filters.
	seq := func(i int) int64 { return batch[i].Seq }
	for _, c := range []struct {
		name string
		f    desk.LogFilter
		want []int64
	}{
		{"levels", desk.LogFilter{Levels: []string{desk.LogError, desk.LogWarn}}, []int64{seq(1), seq(2), seq(4)}},
		{"sources", desk.LogFilter{Sources: []string{"gc", "httpapi"}}, []int64{seq(0), seq(3), seq(4)}},
		{"text is case-insensitive", desk.LogFilter{Text: "DISK"}, []int64{seq(1)}},
		{"text searches fields", desk.LogFilter{Text: "needle"}, []int64{seq(1)}},
		{"text keeps wildcards literal", desk.LogFilter{Text: "100%_"}, []int64{seq(3)}},
		{"after", desk.LogFilter{AfterSeq: seq(2)}, []int64{seq(3), seq(4)}},
		{"before", desk.LogFilter{BeforeSeq: seq(2)}, []int64{seq(0), seq(1)}},
		{"between", desk.LogFilter{AfterSeq: seq(0), BeforeSeq: seq(3)}, []int64{seq(1), seq(2)}},
		{"session", desk.LogFilter{SessionID: "ses_2"}, []int64{seq(2)}},
		{"workspace", desk.LogFilter{WorkspaceID: "ws_b"}, []int64{seq(3), seq(4)}},
		{"combined", desk.LogFilter{WorkspaceID: "ws_a", Levels: []string{desk.LogError}}, []int64{seq(2)}},
		{"oldest page", desk.LogFilter{Limit: 2}, []int64{seq(0), seq(1)}},
		{"newest page, oldest first", desk.LogFilter{Limit: 2, Newest: true}, []int64{seq(3), seq(4)}},
		{"newest page before", desk.LogFilter{Limit: 2, Newest: true, BeforeSeq: seq(3)}, []int64{seq(1), seq(2)}},
		{"no match", desk.LogFilter{Sources: []string{"nope"}}, nil},
	} {
		list, err := s.ListLogs(ctx, c.f)
		must(t, err)
		if !slices.Equal(logSeqs(list), c.want) {
			t.Errorf("%s: seqs = %v, want %v", c.name, logSeqs(list), c.want)
		}
	}
	if _, err := s.ListLogs(ctx, desk.LogFilter{Levels: []string{"loud"}}); desk.ErrorCode(err) != desk.EINVALID {
		t.Fatalf("filter on an unknown level: err = %v, want invalid", err)
	}

	// Unread counts: warn and error only, per viewer, after the seen mark,
	// and the mark never moves backwards or past the end.
	wantUnread(t, s, "op", 0, 1, 2)
	mark, err := s.SetLogSeen(ctx, "op", seq(2))
	must(t, err)
	if mark != seq(2) {
		t.Fatalf("mark = %d, want %d", mark, seq(2))
	}
	wantUnread(t, s, "op", seq(2), 0, 1)
	mark, err = s.SetLogSeen(ctx, "op", seq(0))
	must(t, err)
	if mark != seq(2) {
		t.Fatalf("mark moved backwards to %d, want it to stay %d", mark, seq(2))
	}
	wantUnread(t, s, "op", seq(2), 0, 1)
	wantUnread(t, s, "other", 0, 1, 2)
	mark, err = s.SetLogSeen(ctx, "other", last+1000)
	must(t, err)
	if mark != last {
		t.Fatalf("a mark past the end = %d, want it clamped to %d", mark, last)
	}
	wantUnread(t, s, "other", last, 0, 0)
	_, err = s.SetLogSeen(ctx, "", 1)
	wantCode(t, err, desk.EINVALID)
	_, err = s.SetLogSeen(ctx, "op", -1)
	wantCode(t, err, desk.EINVALID)
	_, err = s.LogUnread(ctx, "")
	wantCode(t, err, desk.EINVALID)

	// Retention by count keeps the newest entries.
	n, err := s.PruneLogs(ctx, 2, time.Time{})
	must(t, err)
	if n != 3 {
		t.Fatalf("prune to 2 deleted %d, want 3", n)
	}
	list, err = s.ListLogs(ctx, desk.LogFilter{})
	must(t, err)
	if !slices.Equal(logSeqs(list), []int64{seq(3), seq(4)}) {
		t.Fatalf("after prune to 2: %v, want %v", logSeqs(list), []int64{seq(3), seq(4)})
	}
	n, err = s.PruneLogs(ctx, 5, time.Time{})
	must(t, err)
	if n != 0 {
		t.Fatalf("prune to 5 of 2 deleted %d", n)
	}
	wantUnread(t, s, "op", seq(2), 0, 1)

	// Retention by age deletes what is older than the bound, whatever its seq.
	old := []*desk.LogEntry{
		{At: at.Add(-48 * time.Hour), Level: desk.LogInfo, Source: "old", Message: "old"},
		{At: at.Add(time.Second), Level: desk.LogInfo, Source: "new", Message: "new"},
	}
	must(t, s.AppendLogs(ctx, old))
	n, err = s.PruneLogs(ctx, 0, at.Add(-time.Hour))
	must(t, err)
	if n != 1 {
		t.Fatalf("age prune deleted %d, want 1", n)
	}
	list, err = s.ListLogs(ctx, desk.LogFilter{})
	must(t, err)
	if !slices.Equal(logSeqs(list), []int64{seq(3), seq(4), old[1].Seq}) {
		t.Fatalf("after age prune: %v", logSeqs(list))
	}

	// Pruning everything lowers nothing: the next seq is larger than any
	// seq ever handed out.
	high := old[1].Seq
	_, err = s.PruneLogs(ctx, 0, at.Add(time.Hour))
	must(t, err)
	list, err = s.ListLogs(ctx, desk.LogFilter{})
	must(t, err)
	if len(list) != 0 {
		t.Fatalf("prune all left %v", logSeqs(list))
	}
	if last, err := s.LastLogSeq(ctx); err != nil || last != high {
		t.Fatalf("LastLogSeq after prune = %d, %v; want %d", last, err, high)
	}
	after := &desk.LogEntry{At: desk.Now(), Level: desk.LogWarn, Source: "x", Message: "after prune"}
	must(t, s.AppendLogs(ctx, []*desk.LogEntry{after}))
	if after.Seq <= high {
		t.Fatalf("seq after pruning everything = %d, want > %d", after.Seq, high)
	}

	// Concurrent appenders get unique seqs, increasing within each batch,
	// and the log lists them all in seq order.
	const writers, batches, per = 12, 8, 3
	var mu sync.Mutex
	var all []int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				es := make([]*desk.LogEntry, per)
				for i := range es {
					es[i] = &desk.LogEntry{At: desk.Now(), Level: desk.LogInfo, Source: "race",
						Message: fmt.Sprintf("w%d b%d i%d", w, b, i)}
				}
				if err := s.AppendLogs(ctx, es); err != nil {
					errs <- err
					return
				}
				for i := 1; i < per; i++ {
					if es[i].Seq <= es[i-1].Seq {
						errs <- fmt.Errorf("batch seqs %v not increasing", logSeqs(es))
						return
					}
				}
				mu.Lock()
				all = append(all, logSeqs(es)...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if unique := len(slices.Compact(slices.Clone(all))); len(all) != writers*batches*per || unique != len(all) {
		t.Fatalf("concurrent appends: %d seqs, %d unique; want %d unique", len(all), unique, writers*batches*per)
	}
	if all[0] <= after.Seq {
		t.Fatalf("concurrent seqs start at %d, want > %d", all[0], after.Seq)
	}
	list, err = s.ListLogs(ctx, desk.LogFilter{Sources: []string{"race"}, Limit: desk.LogMaxLimit})
	must(t, err)
	if !slices.Equal(logSeqs(list), all) {
		t.Fatalf("listed race seqs differ from the assigned ones")
	}
	if last, err := s.LastLogSeq(ctx); err != nil || last != all[len(all)-1] {
		t.Fatalf("LastLogSeq = %d, %v; want %d", last, err, all[len(all)-1])
	}

	// Limits: the default page and the cap.
	list, err = s.ListLogs(ctx, desk.LogFilter{Sources: []string{"race"}, Limit: 5})
	must(t, err)
	if len(list) != 5 || list[0].Seq != all[0] {
		t.Fatalf("limit 5: %v", logSeqs(list))
	}
}

func wantUnread(t *testing.T, s desk.Store, viewer string, seen int64, warn, errs int) {
	t.Helper()
	u, err := s.LogUnread(ctx, viewer)
	must(t, err)
	if u.Viewer != viewer || u.Seen != seen || u.Counts[desk.LogWarn] != warn || u.Counts[desk.LogError] != errs || len(u.Counts) != 2 {
		t.Fatalf("unread(%s) = %+v, want seen %d, warn %d, error %d", viewer, u, seen, warn, errs)
	}
}

func logSeqs(es []*desk.LogEntry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}
