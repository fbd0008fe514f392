package routine_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/routine"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/store/sqlstore"
)

// clock is a shared, hand-moved clock: the scheduler reads it, the test
// moves it, so no test waits on real time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// world is the store rows a run reaches, plus a Submitter that queues a
// row (and settles it when asked) the way the execution service would.
type world struct {
	store   *sqlstore.DB
	mu      sync.Mutex
	submits []string // session ids, one per submit
	origins []desk.Origin
	keys    map[string]bool
	items   map[string]*desk.QueueItem
	// finish controls whether a submitted turn ends at once.
	finish atomic.Bool
}

func (w *world) Submit(ctx context.Context, sessionID string, in desk.SubmitInput) (*desk.SubmitResult, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys[in.IdempotencyKey] {
		panic("a run was submitted twice")
	}
	w.keys[in.IdempotencyKey] = true
	o, _ := desk.OriginFrom(ctx)
	w.submits = append(w.submits, sessionID)
	w.origins = append(w.origins, o)
	it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SessionID: sessionID, Status: desk.QueueStatusDelivered,
		ExecutionID: desk.NewID(desk.PrefixExecution), Text: in.Text}
	w.items[it.ID] = it
	return &desk.SubmitResult{Item: it, ExecutionID: it.ExecutionID, Created: true}, nil
}

func (w *world) count() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.submits) }

// store wraps the real store: queue items and executions come from the
// fake submitter, everything else from the database.
type store struct {
	*sqlstore.DB
	w *world
}

func (s store) GetQueueItem(ctx context.Context, id string) (*desk.QueueItem, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	it, ok := s.w.items[id]
	if !ok {
		return nil, desk.Errorf(desk.ENOTFOUND, "queue item %s not found", id)
	}
	c := *it
	return &c, nil
}

func (s store) GetExecution(ctx context.Context, id string) (*desk.Execution, error) {
	phase := desk.PhaseRunning
	if s.w.finish.Load() {
		phase = desk.PhaseEnded
	}
	return &desk.Execution{ID: id, Phase: phase}, nil
}

// records collects archive records.
type records struct {
	mu   sync.Mutex
	recs []archive.Record
}

func (r *records) Append(ctx context.Context, ws string, rec archive.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return nil
}

func (r *records) types() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := map[string]int{}
	for _, rec := range r.recs {
		m[rec.SystemType()]++
	}
	return m
}

type sessions struct{ desk.SessionService }

func (sessions) Get(ctx context.Context, id string) (*desk.Session, error) {
	return nil, desk.Errorf(desk.ENOTFOUND, "session %s not found", id)
}

func openStores(t *testing.T, name string) (a, b *sqlstore.DB) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch name {
	case "postgres":
		dsn := pgtest.DSN(t)
		if a, err = postgres.Open(ctx, dsn); err != nil {
			t.Fatal(err)
		}
		if b, err = postgres.Open(ctx, dsn); err != nil {
			t.Fatal(err)
		}
	default:
		path := filepath.Join(t.TempDir(), "desk.db")
		if a, err = sqlite.Open(ctx, path); err != nil {
			t.Fatal(err)
		}
		b = a
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// TestEveryTickFiresOnceAcrossNodesAndRestart: two schedulers on one
// database tick concurrently at every fake second; an @every 2s routine
// fires exactly once per tick, with started, progress and finished
// records; after a restart that missed five ticks it fires once, then
// resumes its schedule.
func TestEveryTickFiresOnceAcrossNodesAndRestart(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dbA, dbB := openStores(t, name)
			w := &world{store: dbA, keys: map[string]bool{}, items: map[string]*desk.QueueItem{}}
			w.finish.Store(true)
			clk := &clock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
			ws := seedWorkspace(t, dbA, clk.Now())
			sid := "ses_target"
			recs := &records{}
			mk := func(db *sqlstore.DB) *routine.Service {
				return routine.New(store{db, w}, routine.Options{Submitter: w, Sessions: sessions{}, Archive: recs, Now: clk.Now, Manual: true})
			}
			nodeA, nodeB := mk(dbA), mk(dbB)
			admin := desk.WithPrincipal(ctx, desk.Principal{Admin: true})
			// The target session is checked through Sessions.Get; insert
			// the routine row directly to target a session the fake
			// session service does not know.
			r := &desk.Routine{ID: desk.NewID(desk.PrefixRoutine), WorkspaceID: ws, Name: "tick", Schedule: "@every 2s",
				SessionID: sid, Prompt: "check", Overlap: desk.RoutineOverlapQueue, Enabled: true, Actor: desk.AdminActor,
				NextRunAt: clk.Now().Add(2 * time.Second), CreatedAt: clk.Now(), UpdatedAt: clk.Now()}
			if err := dbA.CreateRoutine(ctx, r); err != nil {
				t.Fatal(err)
			}
			tickBoth := func() {
				var wg sync.WaitGroup
				for _, n := range []*routine.Service{nodeA, nodeB} {
					wg.Go(func() {
						if err := n.Tick(admin); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			}
			for i := 0; i < 10; i++ {
				clk.Add(time.Second)
				tickBoth()
				tickBoth() // a second look at the same instant fires nothing
			}
			if got := w.count(); got != 5 {
				t.Fatalf("10s of @every 2s on two nodes submitted %d runs, want 5", got)
			}
			// The restart: both nodes gone for 11s, then a new one.
			clk.Add(11 * time.Second)
			nodeC := mk(dbB)
			if err := nodeC.Tick(admin); err != nil {
				t.Fatal(err)
			}
			if got := w.count(); got != 6 {
				t.Fatalf("after a restart that missed 5 ticks: %d runs, want 6 (the missed ticks fire once)", got)
			}
			clk.Add(time.Second)
			if err := nodeC.Tick(admin); err != nil {
				t.Fatal(err)
			}
			if got := w.count(); got != 6 {
				t.Fatalf("1s after the catch-up run: %d runs, want still 6", got)
			}
			clk.Add(time.Second)
			if err := nodeC.Tick(admin); err != nil {
				t.Fatal(err)
			}
			if got := w.count(); got != 7 {
				t.Fatalf("2s after the catch-up run: %d runs, want 7 (the schedule resumed)", got)
			}
			// The next look follows the last run to its end.
			if err := nodeA.Tick(admin); err != nil {
				t.Fatal(err)
			}
			types := recs.types()
			for _, st := range []string{archive.SysRoutineStarted, archive.SysRoutineProgress, archive.SysRoutineFinished} {
				if types[st] != 7 {
					t.Errorf("%s records: %d, want 7 (one per run): %v", st, types[st], types)
				}
			}
			for _, o := range w.origins {
				if o.Kind != desk.OriginRoutine {
					t.Fatalf("a run submitted with origin %+v, want kind routine", o)
				}
			}
			runs, err := nodeC.Runs(admin, ws, r.ID, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 7 {
				t.Fatalf("runs listed %d, want 7", len(runs))
			}
			for _, run := range runs {
				if run.Status != desk.RoutineRunSucceeded || run.ExecutionID == "" || run.SessionID != sid {
					t.Fatalf("run %+v: want succeeded with its execution on %s", run, sid)
				}
			}
		})
	}
}

// TestOverlapSkip: while a run's turn is going, an overlap skip routine's
// ticks are recorded as skipped and submit nothing; once the turn ended,
// the next tick runs again.
func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openStores(t, "sqlite")
	w := &world{store: db, keys: map[string]bool{}, items: map[string]*desk.QueueItem{}}
	clk := &clock{now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	ws := seedWorkspace(t, db, clk.Now())
	recs := &records{}
	svc := routine.New(store{db, w}, routine.Options{Submitter: w, Sessions: sessions{}, Archive: recs, Now: clk.Now, Manual: true})
	admin := desk.WithPrincipal(ctx, desk.Principal{Admin: true})
	r := &desk.Routine{ID: desk.NewID(desk.PrefixRoutine), WorkspaceID: ws, Name: "slow", Schedule: "@every 2s",
		SessionID: "ses_x", Prompt: "long job", Overlap: desk.RoutineOverlapSkip, Enabled: true, Actor: desk.AdminActor,
		NextRunAt: clk.Now().Add(2 * time.Second), CreatedAt: clk.Now(), UpdatedAt: clk.Now()}
	if err := db.CreateRoutine(ctx, r); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		clk.Add(2 * time.Second)
		if err := svc.Tick(admin); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.count(); got != 1 {
		t.Fatalf("three ticks while the first run is going submitted %d, want 1", got)
	}
	// A run by hand obeys the policy too.
	run, err := svc.RunNow(admin, ws, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != desk.RoutineRunSkipped || w.count() != 1 {
		t.Fatalf("run now during a run: %+v (submits %d), want skipped", run, w.count())
	}
	w.finish.Store(true)
	clk.Add(2 * time.Second)
	if err := svc.Tick(admin); err != nil { // settles the first run, then runs again
		t.Fatal(err)
	}
	if got := w.count(); got != 2 {
		t.Fatalf("after the run ended: %d submits, want 2", got)
	}
	runs, err := svc.Runs(admin, ws, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, run := range runs {
		if run.Status == desk.RoutineRunSkipped {
			skipped++
		}
	}
	if skipped != 3 {
		t.Fatalf("runs %d with %d skipped, want 3 skipped (2 ticks and one by hand)", len(runs), skipped)
	}
}

// TestBadInputCreatesNothing: a schedule that does not parse, an unknown
// zone, a bad overlap and a missing prompt are refused naming the field,
// and no routine exists afterwards.
func TestBadInputCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := openStores(t, "sqlite")
	clk := &clock{now: time.Now()}
	ws := seedWorkspace(t, db, clk.Now())
	svc := routine.New(db, routine.Options{Sessions: sessions{}, Now: clk.Now, Manual: true})
	admin := desk.WithPrincipal(ctx, desk.Principal{Admin: true})
	for _, c := range []struct {
		in    desk.RoutineCreate
		field string
	}{
		{desk.RoutineCreate{Name: "n", Schedule: "61 * * * *", Prompt: "p"}, "schedule"},
		{desk.RoutineCreate{Name: "n", Schedule: "every day", Prompt: "p"}, "schedule"},
		{desk.RoutineCreate{Name: "n", Schedule: "@every 10ms", Prompt: "p"}, "schedule"},
		{desk.RoutineCreate{Name: "n", Schedule: "0 9 * * *", TimeZone: "Mars/Olympus", Prompt: "p"}, "time_zone"},
		{desk.RoutineCreate{Name: "n", Schedule: "0 9 * * *", Prompt: "p", Overlap: "pile"}, "overlap"},
		{desk.RoutineCreate{Name: "n", Schedule: "0 9 * * *"}, "prompt"},
		{desk.RoutineCreate{Schedule: "0 9 * * *", Prompt: "p"}, "name"},
		{desk.RoutineCreate{Name: "n", Schedule: "0 9 * * *", Prompt: "p", SessionID: "ses_nope"}, "session_id"},
	} {
		_, err := svc.Create(admin, ws, c.in)
		if desk.ErrorCode(err) != desk.EINVALID || !strings.Contains(err.Error(), c.field) {
			t.Errorf("create %+v: %v, want invalid naming %s", c.in, err, c.field)
		}
	}
	if rs, err := db.ListRoutines(ctx, ws); err != nil || len(rs) != 0 {
		t.Fatalf("after refused creates: %d routines (%v), want none", len(rs), err)
	}
	r, err := svc.Create(admin, ws, desk.RoutineCreate{Name: "daily", Schedule: "0 9 * * *", TimeZone: "Europe/Paris", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if h := r.NextRunAt.In(mustZone(t, "Europe/Paris")).Hour(); h != 9 {
		t.Fatalf("next run %v is at %d o'clock in Paris, want 9", r.NextRunAt, h)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func seedWorkspace(t *testing.T, db *sqlstore.DB, now time.Time) string {
	t.Helper()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w-" + desk.NewID(""), State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	if err := db.CreateWorkspace(context.Background(), w, nil, true); err != nil {
		t.Fatal(err)
	}
	return w.ID
}
