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

// sessionExecutions lists a session's executions, newest first.
func sessionExecutions(t *testing.T, d *Desk, ses string) []*desk.Execution {
	t.Helper()
	var l desk.ExecutionList
	if code := d.call("GET", "/v1/sessions/"+ses+"/executions", nil, &l); code != 200 {
		t.Fatalf("list executions = %d", code)
	}
	return l.Executions
}

// scriptSessionAPI makes a script session with steps through the API.
func scriptSessionAPI(t *testing.T, d *Desk, ws string, steps ...map[string]any) string {
	t.Helper()
	var ses struct{ ID string }
	if code := d.call("POST", "/v1/workspaces/"+ws+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": steps}}, &ses); code != 201 {
		t.Fatalf("create session = %d", code)
	}
	return ses.ID
}

// TestSIGTERMDrain: SIGTERM to a node during a slow turn. The turn
// completes there (ended, not interrupted) and the node exits cleanly;
// a prompt queued behind it meanwhile is run by the other node.
func TestSIGTERMDrain(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-node test: skipped in -short mode")
	}
	env := []string{"DESK_POSTGRES=" + pgtest.DSN(t)}
	dir := t.TempDir()
	a := startDesk(t, deskOpts{Home: filepath.Join(dir, "a"), Token: "drain-tok", Env: env})
	b := startDesk(t, deskOpts{Home: filepath.Join(dir, "b"), Token: "drain-tok", Env: env})
	var ws struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "drain"}, &ws)
	ses := scriptSessionAPI(t, a, ws.ID, map[string]any{"text": "slow answer", "delay_ms": 4000}, map[string]any{"text": "second answer"})

	var first desk.SubmitResult
	a.call("POST", "/v1/sessions/"+ses+"/messages", map[string]string{"text": "one"}, &first)
	if first.ExecutionID == "" {
		t.Fatal("the first prompt did not start on A")
	}
	testwait.Until(t, restartWait, func() bool { return a.execution(first.ExecutionID).Phase == desk.PhaseRunning }, "the slow turn to run")
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, restartWait, func() bool { return strings.Contains(a.Log(), "draining") }, "A to start draining")
	// Queued while A drains: A claims nothing more, B takes it once the
	// slow turn ended.
	var second desk.SubmitResult
	b.call("POST", "/v1/sessions/"+ses+"/messages", map[string]string{"text": "two"}, &second)
	select {
	case <-a.done:
	case <-time.After(restartWait):
		t.Fatal("A did not exit within the drain")
	}
	if a.waitErr != nil {
		t.Fatalf("A's exit: %v\n%s", a.waitErr, a.stderr.tail(50))
	}
	x := b.settled(first.ExecutionID)
	if x.Phase != desk.PhaseEnded {
		t.Fatalf("the turn running at SIGTERM is %s (%s), want ended", x.Phase, x.Reason)
	}
	if !strings.Contains(a.Log(), "drained") {
		t.Fatalf("A did not log its drain:\n%s", a.stderr.tail(30))
	}
	var later *desk.Execution
	testwait.Until(t, restartWait, func() bool {
		xs := sessionExecutions(t, b, ses)
		if len(xs) < 2 || !xs[0].Terminal() {
			return false
		}
		later = xs[0]
		return true
	}, "the prompt queued during the drain to run on B")
	if later.Phase != desk.PhaseEnded || later.Owner == x.Owner {
		t.Fatalf("the queued prompt's execution: phase %s, owner %s (the drained node was %s); want ended on B", later.Phase, later.Owner, x.Owner)
	}
}

// TestMaxExecutions: node A runs at most DESK_MAX_EXECUTIONS=1 at once;
// with one slow turn running there, a second session's prompt submitted
// on A is left queued and node B runs it.
func TestMaxExecutions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("multi-node test: skipped in -short mode")
	}
	pg := pgtest.DSN(t)
	dir := t.TempDir()
	a := startDesk(t, deskOpts{Home: filepath.Join(dir, "a"), Token: "cap-tok", Env: []string{"DESK_POSTGRES=" + pg, "DESK_MAX_EXECUTIONS=1"}})
	b := startDesk(t, deskOpts{Home: filepath.Join(dir, "b"), Token: "cap-tok", Env: []string{"DESK_POSTGRES=" + pg}})
	var ws struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "cap"}, &ws)
	s1 := scriptSessionAPI(t, a, ws.ID, map[string]any{"text": "slow", "delay_ms": 5000})
	s2 := scriptSessionAPI(t, a, ws.ID, map[string]any{"text": "quick"})
	var r1, r2 desk.SubmitResult
	a.call("POST", "/v1/sessions/"+s1+"/messages", map[string]string{"text": "one"}, &r1)
	if r1.ExecutionID == "" {
		t.Fatal("the first prompt did not start on A")
	}
	a.call("POST", "/v1/sessions/"+s2+"/messages", map[string]string{"text": "two"}, &r2)
	if r2.ExecutionID != "" {
		t.Fatalf("A at its cap started a second execution %s", r2.ExecutionID)
	}
	var x2 *desk.Execution
	testwait.Until(t, restartWait, func() bool {
		xs := sessionExecutions(t, a, s2)
		if len(xs) == 0 {
			return false
		}
		x2 = xs[0]
		return true
	}, "the second session's prompt to be taken")
	x1 := a.execution(r1.ExecutionID)
	if x2.Owner == x1.Owner {
		t.Fatalf("the second session ran on A (%s), at its cap of 1", x2.Owner)
	}
	if x := b.settled(x2.ID); x.Phase != desk.PhaseEnded {
		t.Fatalf("B's execution is %s (%s)", x.Phase, x.Reason)
	}
	if x := a.settled(r1.ExecutionID); x.Phase != desk.PhaseEnded {
		t.Fatalf("A's execution is %s (%s)", x.Phase, x.Reason)
	}
}
