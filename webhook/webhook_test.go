package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/store/sqlstore"
	"github.com/desk-runtime/desk/webhook"
)

var adminCtx = desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})

// world is a store with one workspace and session whose turns the test
// settles by hand, the way the execution service does.
type world struct {
	t     *testing.T
	store *sqlstore.DB
	ws    *desk.Workspace
	ses   *desk.Session
}

func newWorld(t *testing.T) *world {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "desk.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newWorldOn(t, st)
}

func newWorldOn(t *testing.T, st *sqlstore.DB) *world {
	t.Helper()
	now := desk.Now()
	ws := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: ws.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	if err := st.CreateWorkspace(context.Background(), ws, a, true); err != nil {
		t.Fatal(err)
	}
	ses := &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: ws.ID, Actor: a.ID,
		Title: "s", Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now,
		Origin: desk.Origin{WorkspaceID: ws.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
	if err := st.CreateSession(context.Background(), ses); err != nil {
		t.Fatal(err)
	}
	return &world{t: t, store: st, ws: ws, ses: ses}
}

// settle runs one turn to its end and returns its execution id.
func (w *world) settle(phase string) string {
	w.t.Helper()
	ctx := context.Background()
	now := desk.Now()
	it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: w.ses.SurfaceID, SessionID: w.ses.ID, WorkspaceID: w.ws.ID,
		Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: "secret prompt text", Channel: "t", ConversationID: w.ses.ID, CreatedAt: now}
	if _, _, err := w.store.Enqueue(ctx, it, desk.EnqueueOptions{}); err != nil {
		w.t.Fatal(err)
	}
	_, x, err := w.store.Claim(ctx, desk.ClaimRequest{SurfaceID: w.ses.SurfaceID, Owner: "own_1", ExecutionID: desk.NewID(desk.PrefixExecution),
		Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || x == nil {
		w.t.Fatalf("claim: %v %v", x, err)
	}
	if _, _, err := w.store.Settle(ctx, desk.SettleRequest{ExecutionID: x.ID, Owner: "own_1", Phase: phase,
		ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		w.t.Fatal(err)
	}
	return x.ID
}

func (w *world) service(o webhook.Options) *webhook.Service {
	w.t.Helper()
	s := webhook.New(w.store, o)
	if err := s.Open(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// receiver records every request after checking its signature with the
// Standard Webhooks library; answer decides each answer by its index.
type receiver struct {
	t      *testing.T
	secret atomic.Pointer[string]
	mu     sync.Mutex
	ids    []string
	bodies []string
	bad    int
	answer func(n int, r *http.Request) int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.ids)
	rc.ids = append(rc.ids, r.Header.Get("webhook-id"))
	rc.bodies = append(rc.bodies, string(body))
	if sec := rc.secret.Load(); sec != nil {
		wh, err := standardwebhooks.NewWebhook(*sec)
		if err != nil || wh.Verify(body, r.Header) != nil || r.Header.Get("Idempotency-Key") != r.Header.Get("webhook-id") {
			rc.bad++
		}
	}
	rc.mu.Unlock()
	w.WriteHeader(rc.answer(n, r))
}

func (rc *receiver) seen() ([]string, []string, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slicesClone(rc.ids), slicesClone(rc.bodies), rc.bad
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func fast() webhook.Options {
	return webhook.Options{AllowPrivate: true, Interval: 10 * time.Millisecond, Backoff: []time.Duration{20 * time.Millisecond, 20 * time.Millisecond},
		Timeout: 5 * time.Second}
}

func waitDelivery(t *testing.T, s *webhook.Service, hook, status string) *desk.WebhookDelivery {
	t.Helper()
	var d *desk.WebhookDelivery
	testwait.Until(t, 20*time.Second, func() bool {
		ds, err := s.Deliveries(adminCtx, hook, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 && ds[0].Status == status {
			d = ds[0]
			return true
		}
		return false
	}, "the delivery to be "+status)
	d, err := s.Delivery(adminCtx, hook, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSignedDeliveryRetriedAfter500: a settled turn reaches an httptest
// receiver that verifies every request with the Standard Webhooks
// library; its first answer is a 500, so the delivery is retried with
// the same id and body, and the attempt log shows both; the payload holds
// ids and the outcome, never the prompt.
func TestSignedDeliveryRetriedAfter500(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rc := &receiver{t: t, answer: func(n int, _ *http.Request) int {
		if n == 0 {
			return 500
		}
		return 204
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := w.service(fast())
	h, err := s.Create(adminCtx, desk.WebhookCreate{URL: srv.URL + "/hook", WorkspaceID: w.ws.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.Secret, "whsec_") || len(h.Events) != 3 {
		t.Fatalf("created %+v", h)
	}
	if got, _ := s.Get(adminCtx, h.ID); got == nil {
		t.Fatal("Get after Create")
	}
	rc.secret.Store(&h.Secret)
	exe := w.settle(desk.PhaseFailed)

	d := waitDelivery(t, s, h.ID, desk.WebhookDeliveryDelivered)
	ids, bodies, bad := rc.seen()
	if bad != 0 || len(ids) != 2 || ids[0] != d.ID || ids[1] != d.ID || bodies[0] != bodies[1] {
		t.Fatalf("receiver saw ids %v (%d unverified); want the delivery id %s twice with one body", ids, bad, d.ID)
	}
	if d.Attempts != 2 || len(d.AttemptLog) != 2 || d.AttemptLog[0].StatusCode != 500 || d.AttemptLog[0].Error == "" ||
		d.AttemptLog[1].StatusCode != 204 || d.Event != desk.WebhookExecutionFailed {
		t.Fatalf("delivery %+v attempts %+v", d, d.AttemptLog)
	}
	var ev struct {
		ID   string                    `json:"id"`
		Type string                    `json:"type"`
		Data desk.WebhookExecutionData `json:"data"`
	}
	if err := json.Unmarshal([]byte(bodies[0]), &ev); err != nil || ev.ID != d.EventID || ev.Type != desk.WebhookExecutionFailed ||
		ev.Data.ExecutionID != exe || ev.Data.Phase != desk.PhaseFailed || ev.Data.SessionID != w.ses.ID {
		t.Fatalf("payload %s: %v", bodies[0], err)
	}
	if strings.Contains(bodies[0], "secret prompt text") || strings.Contains(bodies[0], h.Secret) {
		t.Fatalf("the payload leaks the prompt or the secret: %s", bodies[0])
	}
	// Redelivery sends the same id again.
	if _, err := s.Redeliver(adminCtx, h.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, func() bool { ids, _, _ := rc.seen(); return len(ids) == 3 }, "the redelivery")
	if ids, _, _ := rc.seen(); ids[2] != d.ID {
		t.Fatalf("redelivery id %s, want %s", ids[2], d.ID)
	}
}

// TestFailsForGoodAfterTheLastRetry: a receiver that always fails gets
// 1 + len(Backoff) attempts, and the delivery ends failed with the error.
func TestFailsForGoodAfterTheLastRetry(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rc := &receiver{t: t, answer: func(int, *http.Request) int { return 503 }}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := w.service(fast())
	h, err := s.Create(adminCtx, desk.WebhookCreate{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w.settle(desk.PhaseEnded)
	d := waitDelivery(t, s, h.ID, desk.WebhookDeliveryFailed)
	if d.Attempts != 3 || !strings.Contains(d.LastError, "503") || d.FinishedAt == nil {
		t.Fatalf("failed delivery %+v", d)
	}
	if ids, _, _ := rc.seen(); len(ids) != 3 {
		t.Fatalf("receiver saw %d attempts, want 3", len(ids))
	}
}

// TestRestartMidDeliveryKeepsTheID: desk stops while the receiver is
// holding an attempt; after the restart the lease runs out and the
// delivery is sent again with the same webhook-id and body, and is
// recorded once, delivered.
func TestRestartMidDeliveryKeepsTheID(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	held := make(chan struct{})
	rc := &receiver{t: t}
	rc.answer = func(n int, r *http.Request) int {
		if n == 0 {
			close(held)
			<-r.Context().Done() // desk goes away mid-attempt
			return 200
		}
		return 200
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	o := fast()
	o.Lease = 300 * time.Millisecond
	first := webhook.New(w.store, o)
	if err := first.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	h, err := first.Create(adminCtx, desk.WebhookCreate{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	rc.secret.Store(&h.Secret)
	w.settle(desk.PhaseEnded)
	<-held
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := w.service(o)
	d := waitDelivery(t, second, h.ID, desk.WebhookDeliveryDelivered)
	ids, bodies, bad := rc.seen()
	if len(ids) != 2 || ids[0] != d.ID || ids[1] != d.ID || bodies[0] != bodies[1] || bad != 0 {
		t.Fatalf("receiver saw %v (%d unverified), want %s twice with one body", ids, bad, d.ID)
	}
	if d.Attempts != 1 || len(d.AttemptLog) != 1 {
		t.Fatalf("attempts %+v: the interrupted attempt is not an outcome", d.AttemptLog)
	}
}

// TestSSRFRefused: address literals in refused ranges are refused at
// creation, naming the url; a name that resolves to loopback passes
// creation and is refused at connect time by the dialer, so the receiver
// on loopback never hears from desk and the attempt says why.
func TestSSRFRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	o := fast()
	o.AllowPrivate = false
	s := w.service(o)
	for _, u := range []string{"http://127.0.0.1:8080/x", "http://169.254.169.254/latest/meta-data/", "http://[::1]:7777/",
		"http://[::ffff:127.0.0.1]/", "http://10.1.2.3/", "http://0.0.0.0:7777/", "http://[fd00:ec2::254]/", "ftp://example.com/",
		"file:///etc/passwd", "http://user:pw@example.com/", "not a url", "https://example.com/" + strings.Repeat("a", 3000)} {
		if _, err := s.Create(adminCtx, desk.WebhookCreate{URL: u}); !desk.IsCode(err, desk.EINVALID) || !strings.Contains(err.Error(), "url") {
			t.Errorf("Create(%s) = %v, want EINVALID naming url", u, err)
		}
	}
	if hs, _ := s.List(adminCtx); len(hs) != 0 {
		t.Fatalf("refused creates left %d webhooks", len(hs))
	}
	if _, err := s.Create(context.Background(), desk.WebhookCreate{URL: "https://example.com/"}); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("an actor creating a webhook: %v", err)
	}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	h, err := s.Create(adminCtx, desk.WebhookCreate{URL: "http://localhost:" + port + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	w.settle(desk.PhaseEnded)
	testwait.Until(t, 20*time.Second, func() bool {
		ds, _ := s.Deliveries(adminCtx, h.ID, 10)
		return len(ds) == 1 && ds[0].Attempts >= 1
	}, "a refused attempt")
	ds, _ := s.Deliveries(adminCtx, h.ID, 10)
	if hits.Load() != 0 || !strings.Contains(ds[0].LastError, "refused") || ds[0].Status == desk.WebhookDeliveryDelivered {
		t.Fatalf("loopback by name: %d hits, delivery %+v", hits.Load(), ds[0])
	}
}

// TestFloodWithADeadReceiverStaysBounded: hundreds of completions whose
// receiver accepts connections and never answers hold at most
// Concurrency attempts (and their goroutines) at once; the rest wait in
// the store, not in memory.
func TestFloodWithADeadReceiverStaysBounded(t *testing.T) {
	// Not parallel: it counts the process's goroutines.
	w := newWorld(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var open []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
	}()
	const events, concurrency = 300, 4
	o := fast()
	o.Concurrency, o.Timeout = concurrency, 150*time.Millisecond
	o.Backoff = []time.Duration{time.Hour}
	base := runtime.NumGoroutine()
	s := w.service(o)
	h, err := s.Create(adminCtx, desk.WebhookCreate{URL: "http://" + ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	for range events {
		w.settle(desk.PhaseEnded)
	}
	peak := 0
	testwait.Until(t, 60*time.Second, func() bool {
		if n := runtime.NumGoroutine(); n > peak {
			peak = n
		}
		ds, _ := s.Deliveries(adminCtx, h.ID, 500)
		tried := 0
		for _, d := range ds {
			if d.Attempts > 0 {
				tried++
			}
		}
		return tried >= 40
	}, "40 attempts against the dead receiver")
	// Each attempt in flight is a few goroutines (the attempt, the
	// connection's reader and writer); the loop is one.
	if limit := base + concurrency*4 + 8; peak > limit {
		t.Fatalf("goroutines peaked at %d with %d events queued (base %d): not bounded by concurrency %d", peak, events, base, concurrency)
	}
	t.Logf("goroutines: base %d, peak %d while %d deliveries waited", base, peak, events)
}

// BenchmarkFloodDeadReceiver queues b.N completions for a receiver that
// accepts connections and never answers, lets the dispatcher work
// through them for a while, and reports the peak goroutines above the
// base and the heap growth: both stay flat however many events wait,
// since only Concurrency deliveries are ever loaded.
func BenchmarkFloodDeadReceiver(b *testing.B) {
	dir := b.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "desk.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
	}()
	wb := &benchWorld{b: b, store: st}
	wb.setup()
	o := fast()
	o.Concurrency, o.Timeout, o.Backoff = 8, 100*time.Millisecond, []time.Duration{time.Hour}
	s := webhook.New(st, o)
	if _, err := s.Create(adminCtx, desk.WebhookCreate{URL: "http://" + ln.Addr().String()}); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		wb.settle()
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	base := runtime.NumGoroutine()
	b.ResetTimer()
	if err := s.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	peak := 0
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		peak = max(peak, runtime.NumGoroutine())
		time.Sleep(5 * time.Millisecond) // sampling, not waiting for an event
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.StopTimer()
	s.Close(context.Background())
	b.ReportMetric(float64(peak-base), "peak-goroutines")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/(1<<20), "heap-growth-MiB")
}

// benchWorld is world for benchmarks.
type benchWorld struct {
	b     *testing.B
	store *sqlstore.DB
	ses   *desk.Session
}

func (w *benchWorld) setup() {
	now := desk.Now()
	ws := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: ws.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	if err := w.store.CreateWorkspace(context.Background(), ws, a, true); err != nil {
		w.b.Fatal(err)
	}
	w.ses = &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: ws.ID, Actor: a.ID,
		Title: "s", Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now,
		Origin: desk.Origin{WorkspaceID: ws.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
	if err := w.store.CreateSession(context.Background(), w.ses); err != nil {
		w.b.Fatal(err)
	}
}

func (w *benchWorld) settle() {
	ctx := context.Background()
	now := desk.Now()
	it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: w.ses.SurfaceID, SessionID: w.ses.ID, WorkspaceID: w.ses.WorkspaceID,
		Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: "x", Channel: "t", ConversationID: w.ses.ID, CreatedAt: now}
	if _, _, err := w.store.Enqueue(ctx, it, desk.EnqueueOptions{}); err != nil {
		w.b.Fatal(err)
	}
	_, x, err := w.store.Claim(ctx, desk.ClaimRequest{SurfaceID: w.ses.SurfaceID, Owner: "own_1", ExecutionID: desk.NewID(desk.PrefixExecution),
		Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || x == nil {
		w.b.Fatalf("claim: %v %v", x, err)
	}
	if _, _, err := w.store.Settle(ctx, desk.SettleRequest{ExecutionID: x.ID, Owner: "own_1", Phase: desk.PhaseEnded,
		ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		w.b.Fatal(err)
	}
}

// TestRedirectIsNotFollowed: a receiver that answers with a redirect does
// not get desk to request the redirect's target (which the address check
// never saw by name): the attempt is a failure naming the status.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var targetHits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { targetHits.Add(1) }))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Redirect(rw, r, target.URL+"/latest/meta-data/", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	s := w.service(fast())
	h, err := s.Create(adminCtx, desk.WebhookCreate{URL: redirector.URL})
	if err != nil {
		t.Fatal(err)
	}
	w.settle(desk.PhaseEnded)
	d := waitDelivery(t, s, h.ID, desk.WebhookDeliveryFailed)
	if targetHits.Load() != 0 || d.AttemptLog[0].StatusCode != http.StatusTemporaryRedirect || !strings.Contains(d.LastError, "307") {
		t.Fatalf("redirect: target hit %d times, delivery %+v", targetHits.Load(), d)
	}
}
