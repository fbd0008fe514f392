package app_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// failingStore fails execution-journal writes while broken is set.
type failingStore struct {
	desk.Store
	broken *atomic.Bool
}

var errDisk = errors.New("disk I/O error (injected)")

func (f failingStore) Settle(ctx context.Context, r desk.SettleRequest) (*desk.Execution, *desk.Block, error) {
	if f.broken.Load() {
		return nil, nil, errDisk
	}
	return f.Store.Settle(ctx, r)
}

func (f failingStore) HeartbeatOwner(ctx context.Context, id string, at time.Time) error {
	if f.broken.Load() {
		return errDisk
	}
	return f.Store.HeartbeatOwner(ctx, id, at)
}

// TestJournalFailureRefusesAdmission: when the execution journal cannot be
// written, new work is refused with 503 rather than run unrecorded; once
// writes succeed again, work is admitted.
func TestJournalFailureRefusesAdmission(t *testing.T) {
	apptest.Parallel(t)
	var broken atomic.Bool
	w := newExecWorld(t, func(c *app.Config) {
		c.WrapStore = func(s desk.Store) desk.Store { return failingStore{Store: s, broken: &broken} }
	})
	// The turn starts while the journal works, then finishes into a broken
	// one: its settle cannot be written.
	res := w.submit(w.a.ID, "gate settle")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	broken.Store(true)
	w.ex.Open("settle")
	waitFor(t, "the journal failure to be noticed", func() bool {
		r := w.Admin("POST", "/v1/sessions/"+w.b.ID+"/messages", map[string]string{"text": "probe"})
		return r.Status == 503 && r.ErrorCode() == desk.EUNAVAILABLE
	})
	broken.Store(false)
	w.waitPhase(res.ExecutionID, desk.PhaseEnded) // the settle is retried, never lost
	waitFor(t, "admission to reopen", func() bool {
		r := w.Admin("POST", "/v1/sessions/"+w.b.ID+"/messages", map[string]string{"text": "reply again"})
		return r.Status == 202
	})
}

// twoServers runs the single-writer check with two desk servers on one
// database: both dispatch the same surfaces, and no surface ever runs two
// executions at once; every message runs exactly once.
func twoServers(t *testing.T, cfgA, cfgB app.Config) {
	// One executor serves both servers, so it sees every execution of a
	// surface whichever server runs it.
	ex := apptest.NewExecutor()
	for _, c := range []*app.Config{&cfgA, &cfgB} {
		c.AdminToken = "shared-admin-token"
		c.Executor, c.Execution = ex, execution.Options{PollInterval: 20 * time.Millisecond}
	}
	a := apptest.Start(t, cfgA)
	b := apptest.Start(t, cfgB)
	var ws desk.Workspace
	a.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "shared"}, &ws)
	var sessions []desk.Session
	for range 3 {
		var x desk.Session
		a.Must(201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]string{}, &x)
		sessions = append(sessions, x)
	}
	const per = 12
	var wg sync.WaitGroup
	for i, x := range sessions {
		for j := range per {
			wg.Go(func() {
				srv := a
				if (i+j)%2 == 1 {
					srv = b
				}
				r := srv.Admin("POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": fmt.Sprintf("sleep %d", 5+j%3)})
				if r.Status != 202 {
					t.Errorf("submit = %d %s", r.Status, r.Body)
				}
			})
		}
	}
	wg.Wait()
	waitFor(t, "every message to run", func() bool { return len(ex.Calls()) == len(sessions)*per })
	seen := map[string]int{}
	owners := map[string]bool{}
	for _, c := range ex.Calls() {
		seen[c.ItemID]++
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("queue item %s ran %d times", id, n)
		}
	}
	// Across both servers, no surface ever had two executions at once.
	for _, x := range sessions {
		if m := ex.MaxConcurrent(x.SurfaceID); m != 1 {
			t.Fatalf("surface %s ran %d executions at once", x.SurfaceID, m)
		}
		var list struct{ Executions []desk.Execution }
		waitFor(t, "the executions to settle", func() bool {
			a.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &list)
			for _, e := range list.Executions {
				if desk.PhaseActive(e.Phase) {
					return false
				}
			}
			return true
		})
		if len(list.Executions) != per {
			t.Fatalf("session %s has %d executions, want %d", x.ID, len(list.Executions), per)
		}
		for _, e := range list.Executions {
			owners[e.Owner] = true
			if e.Phase != desk.PhaseEnded {
				t.Fatalf("execution %s is %s", e.ID, e.Phase)
			}
		}
	}
	if len(owners) != 2 {
		t.Logf("only %d server(s) ran executions", len(owners))
	}
}

func TestTwoServersOneSQLiteDatabase(t *testing.T) {
	apptest.Parallel(t)
	home := t.TempDir()
	twoServers(t, app.Config{Home: home}, app.Config{Home: home})
}

func TestTwoServersOnePostgres(t *testing.T) {
	apptest.Parallel(t)
	dsn := pgtest.DSN(t)
	twoServers(t, app.Config{Postgres: dsn}, app.Config{Postgres: dsn})
}
