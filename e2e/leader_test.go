package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

const leaderLease = 3 * time.Second

// elections counts the "leader: elected" lines of d's log.
func elections(d *Desk) int { return strings.Count(d.Log(), "leader: elected") }

// routineRuns lists the routine's runs (newest first).
func routineRuns(t *testing.T, d *Desk, ws, rtn string) []*desk.RoutineRun {
	t.Helper()
	var l desk.RoutineRunList
	if code := d.call("GET", "/v1/workspaces/"+ws+"/routines/"+rtn+"/runs?limit=500", nil, &l); code != 200 {
		t.Fatalf("list runs = %d", code)
	}
	return l.Runs
}

// noDoubleTick fails when two runs of the routine belong to one tick.
func noDoubleTick(t *testing.T, runs []*desk.RoutineRun) {
	t.Helper()
	seen := map[time.Time]string{}
	for _, r := range runs {
		if r.Trigger != desk.RoutineTriggerSchedule {
			continue
		}
		if other, ok := seen[r.ScheduledFor]; ok {
			t.Fatalf("the tick %s ran twice: %s and %s", r.ScheduledFor, other, r.ID)
		}
		seen[r.ScheduledFor] = r.ID
	}
}

// TestLeaderFailover: two nodes on one Postgres database with separate
// homes; the first leads and fires an @every 1s routine. kill -9 the
// leader: the other takes over within the lease (plus one attempt
// interval) and the routine keeps firing. Then the slow leader: SIGSTOP
// the new leader past its lease, a third node takes over; SIGCONT: the
// frozen one steps down, and no tick of the routine ran twice.
func TestLeaderFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-node test: skipped in -short mode")
	}
	env := []string{"DESK_POSTGRES=" + pgtest.DSN(t), "DESK_LEADER_LEASE=" + leaderLease.String()}
	dir := t.TempDir()
	a := startDesk(t, deskOpts{Home: filepath.Join(dir, "a"), Token: "failover-tok", Env: env})
	testwait.Until(t, 30*time.Second, func() bool { return elections(a) == 1 }, "a to lead")
	b := startDesk(t, deskOpts{Home: filepath.Join(dir, "b"), Token: "failover-tok", Env: env})

	var ws, ses, rtn struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "leader"}, &ws)
	a.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "ok"}}}}, &ses)
	if code := a.call("POST", "/v1/workspaces/"+ws.ID+"/routines", map[string]any{"name": "tick", "schedule": "@every 1s",
		"session_id": ses.ID, "prompt": "tick", "overlap": "queue"}, &rtn); code != 201 {
		t.Fatalf("create routine = %d", code)
	}
	testwait.Until(t, 20*time.Second, func() bool { return len(routineRuns(t, b, ws.ID, rtn.ID)) >= 2 }, "the routine to fire on the leader")
	if elections(b) != 0 {
		t.Fatalf("b was elected while a led:\n%s", b.Log())
	}

	a.Kill()
	killed := time.Now()
	before := len(routineRuns(t, b, ws.ID, rtn.ID))
	testwait.Until(t, 3*leaderLease, func() bool { return elections(b) == 1 }, "b to take over from the killed leader")
	took := time.Since(killed)
	t.Logf("takeover after kill -9: %v (lease %v)", took, leaderLease)
	if took > leaderLease+leaderLease/3+time.Second {
		t.Fatalf("b took over %v after the kill; want within the lease (%v) plus one attempt interval", took, leaderLease)
	}
	testwait.Until(t, 10*time.Second, func() bool { return len(routineRuns(t, b, ws.ID, rtn.ID)) >= before+2 }, "the routine to fire on the new leader")

	// The slow leader: b frozen past its lease.
	c := a.Again()
	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			b.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	// Within the lease, or the idle-transaction timeout (5s) when b froze
	// inside a fenced transaction, plus start-up on a loaded machine.
	testwait.Until(t, 30*time.Second, func() bool { return elections(c) == 1 }, "c to take over from the frozen leader")
	fired := len(routineRuns(t, c, ws.ID, rtn.ID))
	if !testwait.Poll(15*time.Second, func() bool { return len(routineRuns(t, c, ws.ID, rtn.ID)) >= fired+2 }) {
		t.Fatalf("the routine did not fire on c; c's log:\n%s", c.Log())
	}
	if err := b.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	testwait.Until(t, 10*time.Second, func() bool { return strings.Contains(b.Log(), "leader: stepped down") }, "the woken leader to step down")
	// Some ticks later: c still leads, b never again, no tick twice.
	fired = len(routineRuns(t, c, ws.ID, rtn.ID))
	testwait.Until(t, 10*time.Second, func() bool { return len(routineRuns(t, c, ws.ID, rtn.ID)) >= fired+3 }, "the routine to keep firing")
	if n := elections(b); n != 1 {
		t.Fatalf("b was elected %d times, want once", n)
	}
	runs := routineRuns(t, c, ws.ID, rtn.ID)
	noDoubleTick(t, runs)
	t.Logf("%d routine runs, none twice", len(runs))
}
