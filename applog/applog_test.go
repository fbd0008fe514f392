package applog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/applog"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/store/sqlstore"
)

var (
	ctx      = context.Background()
	testTime = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

func openStore(t *testing.T, path string) *sqlstore.DB {
	t.Helper()
	s, err := sqlite.Open(ctx, path)
	must(t, err)
	return s
}

func tempStore(t *testing.T) *sqlstore.DB {
	t.Helper()
	s := openStore(t, filepath.Join(t.TempDir(), "desk.db"))
	t.Cleanup(func() { s.Close() })
	return s
}

// open starts a service and closes it when the test ends.
func open(t *testing.T, store desk.AppLogStore, opts applog.Options) *applog.Service {
	t.Helper()
	svc := applog.New(store, opts)
	must(t, svc.Open(ctx))
	t.Cleanup(func() { svc.Close(ctx) })
	return svc
}

func listAll(t *testing.T, svc *applog.Service) []*desk.LogEntry {
	t.Helper()
	list, err := svc.List(ctx, desk.LogFilter{Limit: desk.LogMaxLimit})
	must(t, err)
	return list
}

func messages(es []*desk.LogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

func seqs(es []*desk.LogEntry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// receive reads n entries from a subscription or fails after a while.
func receive(t *testing.T, sub *applog.Subscription, n int) []*desk.LogEntry {
	t.Helper()
	var out []*desk.LogEntry
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case e, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription ended after %d of %d entries: %v", len(out), n, sub.Err())
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("received %d of %d entries", len(out), n)
		}
	}
	return out
}

// noServiceGoroutines fails if a goroutine of the applog service is still
// running (the repository does not depend on goleak; the stack dump is
// precise enough for one package).
func noServiceGoroutines(t *testing.T) {
	t.Helper()
	var buf []byte
	if !testwait.Poll(5*time.Second, func() bool {
		buf = make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		return !bytes.Contains(buf, []byte("desk/applog."))
	}) {
		t.Fatalf("applog goroutines outlived Close:\n%s", buf)
	}
}

// TestRedactionNeverStoredOrDelivered logs a bearer token, an apiKey field,
// cookies, passwords, a URL password, desk and provider tokens and
// configured secrets, and checks that none reaches the store, a live
// subscriber or the next handler, while an ordinary path stays readable.
func TestRedactionNeverStoredOrDelivered(t *testing.T) {
	t.Parallel()
	var next bytes.Buffer
	var nextMu sync.Mutex
	svc := open(t, tempStore(t), applog.Options{
		Level:   slog.LevelDebug,
		Secrets: []string{"configured-s3cr3t-value"},
		Next:    slog.NewJSONHandler(lockedWriter{&nextMu, &next}, &slog.HandlerOptions{Level: slog.LevelDebug}),
	})
	sub, err := svc.Subscribe(ctx, desk.LogFilter{})
	must(t, err)
	defer sub.Close()

	const path = "/home/me/project/file.go"
	secrets := []string{
		"bearer-tok.en_value", "k3y-value-9f8e7d", "cookie-value-31337", "hunter2-password",
		"configured-s3cr3t-value", "late-added-secret", "url-pass-w0rd", deskToken, anthropic,
		"header-k3y-42", "nested-pw-77",
	}
	log := svc.Logger("httpapi").With("token", deskToken)
	log.Info("request with Authorization: Bearer bearer-tok.en_value for "+path,
		"apiKey", "k3y-value-9f8e7d",
		slog.Group("req", slog.String("Cookie", "sid=cookie-value-31337"), slog.String("path", path)),
		"password", "hunter2-password",
		"note", "configured configured-s3cr3t-value here")
	log.Warn("login", "headers", map[string][]string{"Set-Cookie": {"sid=cookie-value-31337"}, "X-Api-Key": {"header-k3y-42"}},
		"creds", struct {
			User     string
			Password string
		}{"bob", "nested-pw-77"},
		"err", errors.New("dial postgres://desk:url-pass-w0rd@db/desk: refused"))
	log.Debug("provider key " + anthropic)
	svc.AddSecret("late-added-secret")
	log.Error("call failed with late-added-secret", "path", path)
	must(t, svc.Flush(ctx))

	stored := mustJSON(t, listAll(t, svc))
	live := mustJSON(t, receive(t, sub, 4))
	nextMu.Lock()
	forwarded := next.String()
	nextMu.Unlock()
	for name, text := range map[string]string{"store": stored, "live tail": live, "next handler": forwarded} {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds secret %q:\n%s", name, s, text)
			}
		}
		if !strings.Contains(text, path) {
			t.Errorf("%s lost the ordinary path %s:\n%s", name, path, text)
		}
		if !strings.Contains(text, applog.Redacted) {
			t.Errorf("%s shows no %s:\n%s", name, applog.Redacted, text)
		}
	}
	// The structure around the secrets survives.
	for _, want := range []string{`"req.path":"` + path + `"`, `"creds":{"Password":"[REDACTED]","User":"bob"}`, `"apiKey":"[REDACTED]"`} {
		if !strings.Contains(stored, want) {
			t.Errorf("store lacks %s:\n%s", want, stored)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestHandlerShape checks the mapping from slog records to entries: levels,
// flattened groups, lifted ids and component, and value kinds.
func TestHandlerShape(t *testing.T) {
	t.Parallel()
	svc := open(t, tempStore(t), applog.Options{Level: slog.LevelDebug})
	log := svc.Logger("session").With("workspace_id", "ws_1", slog.Group("cfg", "mode", "fast"))
	log.Debug("d")
	log.Log(ctx, slog.LevelInfo+2, "info-ish")
	log.Warn("w", "session_id", "ses_9", "component", "gc")
	log.Log(ctx, slog.LevelError+4, "fatal-ish",
		"n", 42, "big", uint64(1)<<63, "f", 1.5, "ok", true, "d", 1500*time.Millisecond, "at", testTime,
		"err", fmt.Errorf("wrapped: %w", errors.New("inner")), "v", lazy{"resolved"},
		slog.Group("http", slog.String("method", "GET"), slog.Group("resp", slog.Int("status", 200))),
		slog.Group("", slog.String("inlined", "yes")), slog.Group("empty"))
	log.WithGroup("g").Info("grouped", "k", "v", "session_id", "ses_in_group")
	must(t, svc.Flush(ctx))

	list := listAll(t, svc)
	if got := messages(list); !slices.Equal(got, []string{"d", "info-ish", "w", "fatal-ish", "grouped"}) {
		t.Fatalf("messages = %v", got)
	}
	var levels []string
	for _, e := range list {
		levels = append(levels, e.Level)
	}
	if !slices.Equal(levels, []string{"debug", "info", "warn", "error", "info"}) {
		t.Fatalf("levels = %v", levels)
	}
	w := list[2]
	if w.Source != "gc" || w.WorkspaceID != "ws_1" || w.SessionID != "ses_9" {
		t.Fatalf("lifted columns: %+v", w)
	}
	if _, ok := w.Fields["component"]; ok || w.Fields["cfg.mode"] != "fast" {
		t.Fatalf("warn fields = %v", w.Fields)
	}
	if list[0].Source != "session" || list[0].SessionID != "" {
		t.Fatalf("debug entry: %+v", list[0])
	}
	got := mustJSON(t, list[3].Fields)
	want := `{"at":"2025-03-04T05:06:07Z","big":9223372036854775808,"cfg.mode":"fast","d":"1.5s","err":"wrapped: inner",` +
		`"f":1.5,"http.method":"GET","http.resp.status":200,"inlined":"yes","n":42,"ok":true,"v":"resolved"}`
	if got != want {
		t.Fatalf("fields\n got %s\nwant %s", got, want)
	}
	g := list[4]
	if g.SessionID != "" || g.Fields["g.session_id"] != "ses_in_group" || g.Fields["g.k"] != "v" {
		t.Fatalf("grouped entry: %+v", g)
	}
	if !list[0].At.After(time.Now().Add(-time.Minute)) {
		t.Fatalf("at = %v, want the record time", list[0].At)
	}
}

type lazy struct{ v string }

func (l lazy) LogValue() slog.Value { return slog.StringValue(l.v) }

func TestLevelThreshold(t *testing.T) {
	t.Parallel()
	var next bytes.Buffer
	svc := open(t, tempStore(t), applog.Options{Next: slog.NewTextHandler(&next, &slog.HandlerOptions{Level: slog.LevelDebug})})
	log := svc.Logger("x")
	log.Debug("below the default level")
	log.Info("stored")
	must(t, svc.Flush(ctx))
	if got := messages(listAll(t, svc)); !slices.Equal(got, []string{"stored"}) {
		t.Fatalf("stored = %v, want only the info entry", got)
	}
	if !strings.Contains(next.String(), "below the default level") {
		t.Fatalf("next handler missed the debug record: %s", next.String())
	}
}

// TestSeqMonotonicAfterReopen: seqs keep growing across a restart and after
// retention deleted everything.
func TestSeqMonotonicAfterReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "desk.db")
	store := openStore(t, path)
	svc := applog.New(store, applog.Options{})
	must(t, svc.Open(ctx))
	for i := range 3 {
		svc.Logger("a").Info(fmt.Sprint("first ", i))
	}
	must(t, svc.Close(ctx))
	before := listAll(t, svc)
	must(t, store.Close())
	if len(before) != 3 {
		t.Fatalf("stored %d entries before reopening, want 3", len(before))
	}
	high := before[2].Seq

	store = openStore(t, path)
	defer store.Close()
	// Retention removes everything before the restart's first write.
	svc = applog.New(store, applog.Options{MaxAge: time.Nanosecond})
	// The clock must have moved past the last entry's microsecond for a
	// nanosecond's age to cover it.
	testwait.Until(t, 5*time.Second, func() bool { return desk.Now().Truncate(time.Microsecond).After(before[2].At) }, "the clock to pass the last entry")
	must(t, svc.Open(ctx))
	if list := listAll(t, svc); len(list) != 0 {
		t.Fatalf("retention on Open left %v", seqs(list))
	}
	svc.Logger("a").Info("second")
	must(t, svc.Close(ctx))
	after := listAll(t, svc)
	if len(after) != 1 || after[0].Seq <= high {
		t.Fatalf("after reopen and retention: seqs %v, want one seq > %d", seqs(after), high)
	}
}

func TestRetentionByCount(t *testing.T) {
	t.Parallel()
	store := tempStore(t)
	svc := open(t, store, applog.Options{MaxEntries: 5})
	log := svc.Logger("a")
	for i := range 12 {
		log.Info(fmt.Sprint("m", i))
		if i%4 == 3 {
			must(t, svc.Flush(ctx))
		}
	}
	must(t, svc.Flush(ctx))
	if got := messages(listAll(t, svc)); !slices.Equal(got, []string{"m7", "m8", "m9", "m10", "m11"}) {
		t.Fatalf("kept %v, want the newest five", got)
	}

	// Open applies retention to what an earlier run left.
	svc2 := open(t, store, applog.Options{MaxEntries: 2})
	if got := messages(listAll(t, svc2)); !slices.Equal(got, []string{"m10", "m11"}) {
		t.Fatalf("after Open with MaxEntries 2: %v", got)
	}
}

func TestRetentionByAge(t *testing.T) {
	t.Parallel()
	store := tempStore(t)
	now := desk.Now()
	must(t, store.AppendLogs(ctx, []*desk.LogEntry{
		{At: now.Add(-48 * time.Hour), Level: desk.LogError, Source: "a", Message: "ancient"},
		{At: now.Add(-time.Minute), Level: desk.LogError, Source: "a", Message: "recent"},
	}))
	var clock atomic.Int64
	clock.Store(now.UnixMicro())
	svc := open(t, store, applog.Options{
		MaxAge: time.Hour, MaxEntries: -1, RetentionInterval: 10 * time.Millisecond,
		Now: func() time.Time { return time.UnixMicro(clock.Load()) },
	})
	if got := messages(listAll(t, svc)); !slices.Equal(got, []string{"recent"}) {
		t.Fatalf("after Open: %v, want only the recent entry", got)
	}
	// Two hours later the background loop removes the rest.
	clock.Add((2 * time.Hour).Microseconds())
	if !testwait.Poll(5*time.Second, func() bool { return len(listAll(t, svc)) == 0 }) {
		t.Fatalf("background retention kept %v", messages(listAll(t, svc)))
	}
}

func TestUnread(t *testing.T) {
	t.Parallel()
	svc := open(t, tempStore(t), applog.Options{Level: slog.LevelDebug})
	log := svc.Logger("a")
	wantUnread := func(viewer string, warn, errs int) *desk.LogUnread {
		t.Helper()
		must(t, svc.Flush(ctx))
		u, err := svc.Unread(ctx, viewer)
		must(t, err)
		if u.Counts[desk.LogWarn] != warn || u.Counts[desk.LogError] != errs || len(u.Counts) != 2 {
			t.Fatalf("unread(%s) = %+v, want warn %d error %d", viewer, u, warn, errs)
		}
		return u
	}
	log.Debug("d")
	log.Info("i")
	log.Warn("w")
	log.Error("e1")
	log.Error("e2")
	u := wantUnread("op", 1, 2)
	mark, err := svc.MarkSeen(ctx, "op", u.LastSeq)
	must(t, err)
	if mark != u.LastSeq {
		t.Fatalf("mark = %d, want %d", mark, u.LastSeq)
	}
	wantUnread("op", 0, 0)
	log.Info("more info")
	log.Debug("more debug")
	wantUnread("op", 0, 0) // info and debug never count
	log.Warn("new warning")
	wantUnread("op", 1, 0)
	if m, err := svc.MarkSeen(ctx, "op", 1); err != nil || m != mark {
		t.Fatalf("MarkSeen backwards = %d, %v; want the mark to stay %d", m, err, mark)
	}
	wantUnread("op", 1, 0)
	wantUnread("someone-else", 2, 2)
	if _, err := svc.MarkSeen(ctx, "", 1); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("MarkSeen without a viewer: %v", err)
	}
}

func TestFilters(t *testing.T) {
	t.Parallel()
	svc := open(t, tempStore(t), applog.Options{Level: slog.LevelDebug})
	svc.Logger("httpapi").Info("GET /v1/sessions 200", "workspace_id", "ws_a", "session_id", "ses_1")
	svc.Logger("session").Warn("Slow Disk", "workspace_id", "ws_a", "session_id", "ses_2", "detail", "Needle")
	svc.Logger("gc").Error("sweep failed", "workspace_id", "ws_b")
	svc.Logger("gc").Debug("swept")
	must(t, svc.Flush(ctx))
	all := listAll(t, svc)
	if len(all) != 4 {
		t.Fatalf("stored %d", len(all))
	}
	s := seqs(all)
	for _, c := range []struct {
		query string
		want  []int64
	}{
		{"", s},
		{"level=warn&level=error", s[1:3]},
		{"min_level=warn", s[1:3]},
		{"level=debug,warn&min_level=info", s[1:2]},
		{"source=gc", s[2:4]},
		{"source=httpapi,session", s[0:2]},
		{"q=slow+disk", s[1:2]},
		{"q=NEEDLE", s[1:2]},
		{"session=ses_1", s[0:1]},
		{"workspace_id=ws_a&level=warn", s[1:2]},
		{fmt.Sprintf("after_seq=%d", s[1]), s[2:4]},
		{fmt.Sprintf("before_seq=%d", s[2]), s[0:2]},
		{"limit=2", s[2:4]}, // without after_seq: the newest page, oldest first
		{fmt.Sprintf("after_seq=%d&limit=2", s[0]), s[1:3]},
		{fmt.Sprintf("before_seq=%d&limit=1", s[3]), s[2:3]},
	} {
		v, err := url.ParseQuery(c.query)
		must(t, err)
		f, err := applog.ParseQuery(v)
		must(t, err)
		list, err := svc.List(ctx, f)
		must(t, err)
		if !slices.Equal(seqs(list), c.want) {
			t.Errorf("%q: seqs %v, want %v", c.query, seqs(list), c.want)
		}
	}
	for _, bad := range []string{"level=loud", "min_level=x", "after_seq=-1", "before_seq=x", "limit=0", "limit=x",
		"level=debug&min_level=warn"} {
		v, _ := url.ParseQuery(bad)
		if _, err := applog.ParseQuery(v); !desk.IsCode(err, desk.EINVALID) {
			t.Errorf("ParseQuery(%q) err = %v, want invalid", bad, err)
		}
	}
	if _, err := svc.List(ctx, desk.LogFilter{Levels: []string{"trace"}}); !desk.IsCode(err, desk.EINVALID) {
		t.Fatalf("List with an unknown level: %v", err)
	}
	f, err := applog.ParseQuery(url.Values{"limit": {"5000"}})
	must(t, err)
	if f.Limit != desk.LogMaxLimit || !f.Newest {
		t.Fatalf("limit 5000 parsed as %+v", f)
	}
}

// TestLiveTailOrder: subscribers get stored entries in seq order, filtered,
// and only after they are in the store.
func TestLiveTailOrder(t *testing.T) {
	t.Parallel()
	store := tempStore(t)
	svc := open(t, store, applog.Options{Level: slog.LevelDebug})
	all, err := svc.Subscribe(ctx, desk.LogFilter{})
	must(t, err)
	errs, err := svc.Subscribe(ctx, desk.LogFilter{Levels: []string{desk.LogError}, Text: "BOOM"})
	must(t, err)
	const n = 200
	done := make(chan []*desk.LogEntry, 1)
	go func() {
		// Read while the writer writes; receive (t.Fatal) must stay on the
		// test goroutine.
		var got []*desk.LogEntry
		for e := range all.C {
			if got = append(got, e); len(got) == n {
				break
			}
		}
		done <- got
	}()
	log := svc.Logger("a")
	for i := range n {
		if i%10 == 0 {
			log.Error("boom", "i", i)
		} else {
			log.Info("tick", "i", i)
		}
	}
	var got []*desk.LogEntry
	select {
	case got = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("live subscriber did not get every entry")
	}
	if len(got) != n {
		t.Fatalf("live subscriber got %d of %d entries: %v", len(got), n, all.Err())
	}
	for i, e := range got {
		if i > 0 && e.Seq <= got[i-1].Seq {
			t.Fatalf("live seqs out of order at %d: %d after %d", i, e.Seq, got[i-1].Seq)
		}
		if want := int64(i); e.Fields["i"] != want {
			t.Fatalf("entry %d carries i=%v", i, e.Fields["i"])
		}
	}
	// Delivered means stored.
	last := got[n-1]
	stored, err := store.ListLogs(ctx, desk.LogFilter{AfterSeq: last.Seq - 1, Limit: 1})
	must(t, err)
	if len(stored) != 1 || stored[0].Seq != last.Seq {
		t.Fatalf("live entry %d is not in the store", last.Seq)
	}
	boom := receive(t, errs, n/10)
	for i, e := range boom {
		if e.Level != desk.LogError || e.Fields["i"] != int64(10*i) {
			t.Fatalf("filtered subscriber got %+v at %d", e, i)
		}
	}
	select {
	case e := <-errs.C:
		t.Fatalf("filtered subscriber got an extra entry %+v", e)
	case <-time.After(50 * time.Millisecond):
	}
	all.Close()
	if _, ok := <-all.C; ok || all.Err() != nil {
		t.Fatalf("closed subscription: open channel or err %v", all.Err())
	}
}

// TestSlowSubscriber: a subscriber that does not read is cut off with
// ErrLagged instead of holding up the writer, and Tail hides such lags.
func TestSlowSubscriber(t *testing.T) {
	t.Parallel()
	svc := open(t, tempStore(t), applog.Options{SubscriberBuffer: 4})
	sub, err := svc.Subscribe(ctx, desk.LogFilter{})
	must(t, err)
	for i := range 50 {
		svc.Logger("a").Info(fmt.Sprint(i))
	}
	must(t, svc.Flush(ctx)) // returns although nobody reads
	var got int
	for range sub.C {
		got++
	}
	if got != 4 || !errors.Is(sub.Err(), applog.ErrLagged) {
		t.Fatalf("slow subscriber got %d entries and err %v; want 4 and ErrLagged", got, sub.Err())
	}

	// Tail from a seq replays the store, then follows live entries, without
	// gaps or duplicates even though its reader is slow.
	list := listAll(t, svc)
	from := list[len(list)-3].Seq
	tctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var tailed []int64
	tailErr := make(chan error, 1)
	go func() {
		tailErr <- svc.Tail(tctx, desk.LogFilter{AfterSeq: from}, func(e *desk.LogEntry) error {
			// A slow reader on purpose: the writer must outrun it so
			// the tail lags and resumes.
			time.Sleep(200 * time.Microsecond)
			mu.Lock()
			tailed = append(tailed, e.Seq)
			mu.Unlock()
			return nil
		})
	}()
	// Write while the tail runs, in bursts larger than its buffer, so it
	// lags, resumes and overlaps the live stream repeatedly.
	const more = 300
	for i := range more {
		svc.Logger("a").Info(fmt.Sprint("more ", i))
		if i%10 == 9 {
			must(t, svc.Flush(ctx))
			// Pacing on purpose: a pause between bursts lets the slow
			// tail catch up partly, so it overlaps the live stream again.
			time.Sleep(time.Millisecond)
		}
	}
	must(t, svc.Flush(ctx))
	last, err := svc.LastSeq(ctx)
	must(t, err)
	tailedN := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(tailed)
	}
	if !testwait.Poll(20*time.Second, func() bool { return tailedN() >= more+2 }) {
		t.Fatalf("tail received %d of %d entries", tailedN(), more+2)
	}
	cancel()
	if err := <-tailErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Tail returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tailed) != more+2 || tailed[0] != from+1 || tailed[len(tailed)-1] != last {
		t.Fatalf("tail got %d entries %d…%d; want %d from %d to %d", len(tailed), tailed[0], tailed[len(tailed)-1], more+2, from+1, last)
	}
	for i := 1; i < len(tailed); i++ {
		if tailed[i] != tailed[i-1]+1 {
			t.Fatalf("tail gap or duplicate: %d after %d", tailed[i], tailed[i-1])
		}
	}
}

// TestQueueOverflow: a full queue sheds the oldest debug and info entries,
// keeps warn and error ones, and records how many it dropped.
func TestQueueOverflow(t *testing.T) {
	t.Parallel()
	store := tempStore(t)
	svc := applog.New(store, applog.Options{Level: slog.LevelDebug, QueueSize: 10})
	defer svc.Close(ctx)
	log := svc.Logger("a")
	for i := range 5 {
		log.Warn(fmt.Sprint("w", i))
	}
	for i := range 20 {
		log.Info(fmt.Sprint("i", i))
	}
	must(t, svc.Flush(ctx))
	list := listAll(t, svc)
	want := []string{"w0", "w1", "w2", "w3", "w4", "i15", "i16", "i17", "i18", "i19", "app log queue was full: dropped 15 entries"}
	if got := messages(list); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	notice := list[len(list)-1]
	if notice.Level != desk.LogWarn || notice.Source != applog.Source ||
		fmt.Sprint(notice.Fields["dropped_debug_info"]) != "15" || fmt.Sprint(notice.Fields["dropped_warn_error"]) != "0" {
		t.Fatalf("drop notice = %+v", notice)
	}

	// Warn and error overflow the queue up to twice its size; beyond that
	// they are dropped too, and counted.
	svc2 := applog.New(store, applog.Options{QueueSize: 4})
	defer svc2.Close(ctx)
	for i := range 10 {
		svc2.Logger("b").Error(fmt.Sprint("e", i))
	}
	must(t, svc2.Flush(ctx))
	list, err := svc2.List(ctx, desk.LogFilter{Sources: []string{"b", applog.Source}, AfterSeq: notice.Seq})
	must(t, err)
	want = []string{"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7", "app log queue was full: dropped 2 entries"}
	if got := messages(list); !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if n := list[len(list)-1].Fields["dropped_warn_error"]; fmt.Sprint(n) != "2" {
		t.Fatalf("dropped_warn_error = %v, want 2", n)
	}
}

// gatedStore blocks AppendLogs until the gate opens, and can fail writes.
type gatedStore struct {
	desk.AppLogStore
	gate    chan struct{}
	entered chan struct{}
	fail    atomic.Int32
	once    sync.Once
}

func (g *gatedStore) AppendLogs(ctx context.Context, es []*desk.LogEntry) error {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.fail.Add(-1) >= 0 {
		return errors.New("disk on fire")
	}
	return g.AppLogStore.AppendLogs(ctx, es)
}

// TestHandleNeverBlocks: while the store is stuck, logging stays fast and
// the queue sheds info entries; once the store recovers, everything kept is
// stored with a drop notice.
func TestHandleNeverBlocks(t *testing.T) {
	g := &gatedStore{AppLogStore: tempStore(t), gate: make(chan struct{}), entered: make(chan struct{})}
	svc := applog.New(g, applog.Options{QueueSize: 100})
	must(t, svc.Open(ctx))
	log := svc.Logger("a")
	log.Info("first")
	<-g.entered // the writer is now stuck in the store
	start := time.Now()
	for i := range 10_000 {
		log.Info("flood", "i", i)
	}
	log.Error("must survive")
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("10000 log calls took %v with the store stuck", d)
	}
	close(g.gate)
	must(t, svc.Close(ctx))
	list := listAll(t, svc)
	msgs := messages(list)
	if !slices.Contains(msgs, "first") || !slices.Contains(msgs, "must survive") {
		t.Fatalf("lost entries: %v", msgs)
	}
	if last := list[len(list)-1]; last.Source != applog.Source || !strings.HasPrefix(last.Message, "app log queue was full") {
		t.Fatalf("no drop notice at the end: %+v", last)
	}
	if len(list) > 100+2 {
		t.Fatalf("stored %d entries from a queue of 100", len(list))
	}
	noServiceGoroutines(t)
}

// TestWriteFailureRetries: a failed write is retried with the same entries
// and reported to the next handler.
func TestWriteFailureRetries(t *testing.T) {
	t.Parallel()
	g := &gatedStore{AppLogStore: tempStore(t), gate: make(chan struct{}), entered: make(chan struct{})}
	close(g.gate)
	g.fail.Store(2)
	var next bytes.Buffer
	var mu sync.Mutex
	svc := applog.New(g, applog.Options{Next: slog.NewTextHandler(lockedWriter{&mu, &next}, nil)})
	must(t, svc.Open(ctx))
	svc.Logger("a").Warn("eventually stored")
	var list []*desk.LogEntry
	if !testwait.Poll(10*time.Second, func() bool {
		list = listAll(t, svc)
		return len(list) == 1 && list[0].Message == "eventually stored"
	}) {
		t.Fatalf("stored %v", messages(list))
	}
	must(t, svc.Close(ctx))
	mu.Lock()
	defer mu.Unlock()
	if strings.Count(next.String(), "disk on fire") != 2 {
		t.Fatalf("next handler saw: %s", next.String())
	}
}

// TestCloseFlushes: Close stores everything logged before it, ends live
// subscriptions, and leaves no goroutine behind.
func TestCloseFlushes(t *testing.T) {
	store := tempStore(t)
	svc := applog.New(store, applog.Options{})
	must(t, svc.Open(ctx))
	sub, err := svc.Subscribe(ctx, desk.LogFilter{Levels: []string{desk.LogError}})
	must(t, err)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				svc.Logger(fmt.Sprint("w", w)).Info("entry", "i", i)
			}
		}()
	}
	wg.Wait()
	must(t, svc.Close(ctx))
	must(t, svc.Close(ctx)) // idempotent
	last, err := store.LastLogSeq(ctx)
	must(t, err)
	list := listAll(t, svc)
	if last != 1000 || len(list) != 1000 {
		t.Fatalf("after Close: last seq %d, %d entries; want 1000", last, len(list))
	}
	if _, ok := <-sub.C; ok || !errors.Is(sub.Err(), applog.ErrClosed) {
		t.Fatalf("subscription after Close: err %v", sub.Err())
	}
	if _, err := svc.Subscribe(ctx, desk.LogFilter{}); !errors.Is(err, applog.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}
	svc.Logger("late").Error("after close") // must not panic or store
	if n, _ := store.LastLogSeq(ctx); n != 1000 {
		t.Fatalf("an entry logged after Close was stored")
	}
	noServiceGoroutines(t)
}

// TestSubscriptionContext: a subscription ends with its context.
func TestSubscriptionContext(t *testing.T) {
	t.Parallel()
	svc := open(t, tempStore(t), applog.Options{})
	sctx, cancel := context.WithCancel(ctx)
	sub, err := svc.Subscribe(sctx, desk.LogFilter{})
	must(t, err)
	cancel()
	select {
	case _, ok := <-sub.C:
		if ok {
			t.Fatal("entry on a cancelled subscription")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription outlived its context")
	}
	if sub.Err() != nil {
		t.Fatalf("err = %v, want nil for a cancelled context", sub.Err())
	}
}
