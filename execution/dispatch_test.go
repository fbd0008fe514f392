package execution

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/store/sqlite"
)

// service opens an execution service on a fresh SQLite store with one
// session whose orchestrator surface has queued work, and an executor
// that finishes at once.
func service(t *testing.T) (*Service, *desk.Session, *atomic.Int64) {
	t.Helper()
	var ran atomic.Int64
	ex := ExecutorFunc(func(ctx context.Context, t *Turn) (*Outcome, error) {
		ran.Add(1)
		return &Outcome{Reply: "ok"}, nil
	})
	s, x := serviceWith(t, nil, ex)
	return s, x, &ran
}

// serviceWith is service with the store wrapped by wrap (fault and race
// injection; nil keeps it as it is) and the given executor.
func serviceWith(t *testing.T, wrap func(desk.Store) desk.Store, ex Executor) (*Service, *desk.Session) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "desk.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	if err := st.CreateWorkspace(ctx, w, a, false); err != nil {
		t.Fatal(err)
	}
	x := &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: a.ID,
		Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now,
		Origin: desk.Origin{WorkspaceID: w.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
	if err := st.CreateSession(ctx, x); err != nil {
		t.Fatal(err)
	}
	var store desk.Store = st
	if wrap != nil {
		store = wrap(st)
	}
	s := New(store, layout.Home{Root: dir}, Options{PollInterval: time.Hour})
	if err := s.Open(ctx, Run{Executor: ex}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, x
}

func enqueue(t *testing.T, s *Service, x *desk.Session, text string) {
	t.Helper()
	it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: x.SurfaceID, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
		Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: text, Channel: "test", ConversationID: x.ID, CreatedAt: desk.Now(),
		Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
	if _, _, err := s.store.Enqueue(context.Background(), it, desk.EnqueueOptions{UserWork: true}); err != nil {
		t.Fatal(err)
	}
}

// TestWakeAsyncHandsOffTheClaim wakes a surface with queued work from many
// goroutines at once, the way startup and the poll loop do. The dispatcher
// claims in its own goroutine; the waker must not read what it claims
// (go test -race reported the shared variables before).
func TestWakeAsyncHandsOffTheClaim(t *testing.T) {
	s, x, ran := service(t)
	const rows = 10
	for i := range rows {
		enqueue(t, s, x, "row")
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if got, _, _ := s.wakeWith(x.SurfaceID, i%2 == 0); got != nil && got.SurfaceID != x.SurfaceID {
					t.Errorf("claimed a row of another surface: %+v", got)
				}
				// No synchronisation with the dispatcher until it has
				// claimed, so the race detector sees any access both make.
				time.Sleep(100 * time.Millisecond)
			})
		}
		wg.Wait()
	}
	testwait.Poll(30*time.Second, func() bool { return ran.Load() >= rows })
	if ran.Load() != rows {
		t.Fatalf("%d of %d rows ran", ran.Load(), rows)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestWakeDuringCloseAddsNoDispatcher wakes surfaces while the service
// closes. A wake that checked the service was open just before Close
// cancelled it used to add a dispatcher to the WaitGroup after Close's
// Wait had returned (go test -race reports that misuse); now no
// dispatcher exists once Close returns.
func TestWakeDuringCloseAddsNoDispatcher(t *testing.T) {
	for range 10 {
		s, x, _ := service(t)
		enqueue(t, s, x, "row")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						s.wakeWith(x.SurfaceID, false)
						s.wakeWith(x.SurfaceID, true)
					}
				}
			})
		}
		// On purpose: Close lands while the wakes above are in flight.
		time.Sleep(time.Millisecond)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		n := len(s.dispatchers)
		s.mu.Unlock()
		close(stop)
		wg.Wait()
		if n != 0 {
			t.Fatalf("%d dispatchers exist after Close returned", n)
		}
		s.mu.Lock()
		n = len(s.dispatchers)
		s.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d dispatchers were started after Close returned", n)
		}
	}
}
