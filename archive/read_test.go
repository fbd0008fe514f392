package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestReadOrderFiltersAndRaw(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	// Appended out of file order on purpose.
	e.append(&MessageInbound{Envelope: env0(t0.AddDate(0, 0, 1), "slack", "C1"), Text: "d2 slack"})
	e.append(&MessageInbound{Envelope: env0(t0, "slack", "C1"), Text: "d1 slack"})
	e.append(&MessageInbound{Envelope: env0(t0, "feishu", "oc_1"), Text: "d1 feishu 1"})
	e.append(&MessageInbound{Envelope: env0(t0.Add(time.Minute), "feishu", "oc_1"), Text: "d1 feishu 2"})
	e.append(&MessageInbound{Envelope: env0(t0.AddDate(0, 0, 1), "feishu", "oc_2"), Text: "d2 feishu"})
	e.append(&MessageInbound{Envelope: env0(t0.AddDate(0, 0, 5), "feishu", "oc_1"), Text: "d6 feishu"})

	read := func(f Filter) []string {
		t.Helper()
		var got []string
		sum, err := e.a.Read(ctx, testWS, f, func(l *Line) error {
			// Raw is exactly the stored line.
			file := e.readFile(l.File)
			if !bytes.Equal(file[l.Offset:l.Offset+int64(len(l.Raw))], l.Raw) || file[l.Offset+int64(len(l.Raw))] != '\n' {
				t.Fatalf("Raw of %s:%d is not the stored line", l.File, l.Number)
			}
			if l.Day != strings.ReplaceAll(l.File[:10], "/", "-") {
				t.Fatalf("day %s for %s", l.Day, l.File)
			}
			got = append(got, l.Record.(*MessageInbound).Text)
			return nil
		})
		if err != nil || sum.SkippedTotal != 0 || sum.Records != len(got) {
			t.Fatalf("read: %+v %v", sum, err)
		}
		return got
	}
	eq := func(got []string, want ...string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	eq(read(Filter{}), "d1 feishu 1", "d1 feishu 2", "d1 slack", "d2 feishu", "d2 slack", "d6 feishu")
	eq(read(Filter{Channel: "feishu"}), "d1 feishu 1", "d1 feishu 2", "d2 feishu", "d6 feishu")
	eq(read(Filter{Conversation: "oc_1"}), "d1 feishu 1", "d1 feishu 2", "d6 feishu")
	eq(read(Filter{Channel: "feishu", Conversation: "oc_1"}), "d1 feishu 1", "d1 feishu 2", "d6 feishu")
	eq(read(Filter{Channel: "feishu", Conversation: "nope"}))
	eq(read(Filter{From: t0.Add(time.Second), To: t0.AddDate(0, 0, 2)}), "d1 feishu 2", "d2 feishu", "d2 slack")
	eq(read(Filter{From: t0.AddDate(0, 0, 5)}), "d6 feishu")
	eq(read(Filter{To: t0}))

	days, err := e.a.Days(ctx, testWS)
	if err != nil || !reflect.DeepEqual(days, []string{"2026-03-14", "2026-03-15", "2026-03-19"}) {
		t.Fatalf("Days = %v, %v", days, err)
	}
	files, err := e.a.List(ctx, testWS, "2026-03-14")
	if err != nil || len(files) != 2 || files[0].Name != "feishu--oc_1.ndjson" || files[0].Channel != "feishu" ||
		files[0].Conversation != "oc_1" || files[0].File != "2026/03/14/feishu--oc_1.ndjson" || files[0].Size == 0 {
		t.Fatalf("List = %+v, %v", files, err)
	}
	if all, _ := e.a.List(ctx, testWS, ""); len(all) != 5 {
		t.Fatalf("List all = %+v", all)
	}
	if _, err := e.a.List(ctx, testWS, "14/03/2026"); err == nil {
		t.Fatal("bad day accepted")
	}
	// A workspace without an archive has no days and nothing to read.
	if days, err := e.a.Days(ctx, "ws_empty"); err != nil || len(days) != 0 {
		t.Fatalf("empty: %v %v", days, err)
	}
	// Stray entries are ignored.
	os.MkdirAll(filepath.Join(e.a.Dir(testWS), "notes"), 0o755)
	os.WriteFile(filepath.Join(e.a.Dir(testWS), "2026", "03", "14", "README.txt"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(e.a.Dir(testWS), "2026", "02", "31"), 0o755)
	os.WriteFile(filepath.Join(e.a.Dir(testWS), "2026", "02", "31", "a--b.ndjson"), nil, 0o644)
	if days, _ := e.a.Days(ctx, testWS); len(days) != 3 {
		t.Fatalf("stray entries counted: %v", days)
	}
	// The callback's error stops the read.
	stop := errors.New("enough")
	n := 0
	if _, err := e.a.Read(ctx, testWS, Filter{}, func(*Line) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("stop: %v after %d", err, n)
	}
	// A cancelled context stops it too.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.a.Read(cctx, testWS, Filter{}, func(*Line) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestReadSkipsAndReportsBadLines(t *testing.T) {
	e := newEnv(t, Options{})
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "x"), Text: "one"})
	p, _ := e.a.Path(testWS, "ch", "x", t0)
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"schema_version":1,"at":"2026-03` + "\n") // a terminated fragment
	f.WriteString("\n")                                       // a blank line
	f.WriteString(`{"hand":"edited"}` + "\n")                 // not a contract record
	f.Close()
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "x"), Text: "two"})
	// A line longer than the reader's buffer still works.
	big := strings.Repeat("長", 100000)
	e.append(&MessageInbound{Envelope: env0(t0, "ch", "x"), Text: big})
	var got []string
	sum, err := e.a.Read(context.Background(), testWS, Filter{}, func(l *Line) error {
		got = append(got, l.Record.(*MessageInbound).Text)
		return nil
	})
	if err != nil || len(got) != 3 || got[0] != "one" || got[1] != "two" || got[2] != big {
		t.Fatalf("records %d, %v", len(got), err)
	}
	if sum.SkippedTotal != 3 || sum.Files != 1 {
		t.Fatalf("summary %+v", sum)
	}
	for i, wantLine := range []int{2, 3, 4} {
		if s := sum.Skipped[i]; s.Line != wantLine || s.File != "2026/03/14/ch--x.ndjson" || s.Reason == "" {
			t.Fatalf("skipped[%d] = %+v", i, s)
		}
	}
}

func TestViewsIncrementalEqualsFullRebuild(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	wsDir := e.home.Workspace(testWS)
	viewsDir := filepath.Join(wsDir, ViewsDir)
	rebuild := func(full bool) {
		t.Helper()
		if err := e.a.RebuildViews(ctx, testWS, full); err != nil {
			t.Fatal(err)
		}
	}
	readViews := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		ents, err := os.ReadDir(viewsDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range ents {
			if strings.HasSuffix(en.Name(), ".md") {
				b, _ := os.ReadFile(filepath.Join(viewsDir, en.Name()))
				out[en.Name()] = string(b)
			}
		}
		return out
	}
	// Incremental path: append in rounds, rebuilding in between, across
	// days, conversations and every record type.
	for d := 0; d < 3; d++ {
		for i, r := range everyType(t0.AddDate(0, 0, d).Add(time.Duration(d)*time.Hour), "feishu", "oc_1") {
			e.append(r)
			if i%4 == 0 {
				rebuild(false)
			}
		}
		e.append(&MessageInbound{Envelope: env0(t0.AddDate(0, 0, d), "slack", "C1"), SenderID: "U1", Text: fmt.Sprint("day ", d)})
		rebuild(false)
	}
	// A late record for a day the view has passed.
	e.append(&MessageInbound{Envelope: env0(t0, "slack", "C1"), SenderName: "Late", Text: "back-dated"})
	// A half-written line (a write in progress) is not rendered yet.
	p, _ := e.a.Path(testWS, "slack", "C1", t0.AddDate(0, 0, 2))
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"schema_version":1,`)
	f.Close()
	rebuild(false)
	rebuild(false) // nothing new: no change
	incremental := readViews()
	if len(incremental) != 2 {
		t.Fatalf("views: %v", keys(incremental))
	}
	slack := incremental["slack--C1.md"]
	for _, want := range []string{"# slack · C1", "## 2026-03-14", "**U1** · 09:30:00", "day 0", "back-dated", "## 2026-03-16"} {
		if !strings.Contains(slack, want) {
			t.Fatalf("slack view lacks %q:\n%s", want, slack)
		}
	}
	if strings.Index(slack, "back-dated") > strings.Index(slack, "## 2026-03-15") {
		t.Fatalf("the late record is not under its day:\n%s", slack)
	}
	feishu := incremental["feishu--oc_1.md"]
	for _, want := range []string{"hello <world>", "**assistant**", "approval requested for shell", "turn failed: model unavailable"} {
		if !strings.Contains(feishu, want) {
			t.Fatalf("feishu view lacks %q", want)
		}
	}

	// Delete the views directory and rebuild: the same bytes.
	archiveBefore := e.snapshot()
	if err := os.RemoveAll(viewsDir); err != nil {
		t.Fatal(err)
	}
	rebuild(false)
	if got := readViews(); !reflect.DeepEqual(got, incremental) {
		t.Fatalf("rebuilt after delete differs:\n%s\n----\n%s", got["slack--C1.md"], slack)
	}
	rebuild(true)
	if got := readViews(); !reflect.DeepEqual(got, incremental) {
		t.Fatal("full rebuild differs")
	}
	// One view deleted, one edited by hand: both come back as they were.
	os.Remove(filepath.Join(viewsDir, "slack--C1.md"))
	os.WriteFile(filepath.Join(viewsDir, "feishu--oc_1.md"), []byte("my notes"), 0o644)
	rebuild(false)
	if got := readViews(); !reflect.DeepEqual(got, incremental) {
		t.Fatal("views not restored")
	}
	// A corrupt state file means a full rebuild, with the same result.
	os.WriteFile(filepath.Join(viewsDir, viewsState), []byte("{nope"), 0o644)
	rebuild(false)
	if got := readViews(); !reflect.DeepEqual(got, incremental) {
		t.Fatal("views after a corrupt state differ")
	}
	// The archive never changed.
	if !reflect.DeepEqual(e.snapshot(), archiveBefore) {
		t.Fatal("rebuilding views touched the archive")
	}
	// New records after all that: incremental still equals full.
	e.append(&MessageInbound{Envelope: env0(t0.AddDate(0, 0, 2), "feishu", "oc_1"), Text: "more"})
	rebuild(false)
	inc := readViews()
	os.RemoveAll(viewsDir)
	rebuild(false)
	if !reflect.DeepEqual(readViews(), inc) || !strings.Contains(inc["feishu--oc_1.md"], "more") {
		t.Fatal("incremental after recovery differs from a fresh build")
	}
	if err := e.a.RebuildViews(ctx, "ws_missing", false); err == nil {
		t.Fatal("views of a missing workspace")
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
