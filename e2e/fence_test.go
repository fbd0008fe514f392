package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// fenceExecution is what GET /v1/executions/{exe} answers, in part.
type fenceExecution struct {
	ID     string `json:"id"`
	Phase  string `json:"phase"`
	Reason string `json:"reason"`
	Owner  string `json:"owner"`
	Events []struct {
		Seq  int64  `json:"seq"`
		Type string `json:"type"`
	} `json:"events"`
}

type fenceMessage struct {
	ID          string `json:"id"`
	ExecutionID string `json:"execution_id"`
	ParentID    string `json:"parent_id"`
	Role        string `json:"role"`
	Text        string `json:"text"`
	Seq         int64  `json:"seq"`
}

// TestFrozenNodeIsFencedOff is acceptance round (b) of issue 25: two real
// `desk serve` processes on one Postgres database. A runs a slow turn and
// is frozen (SIGSTOP) past its lease; B takes the turn over (it settles
// it interrupted, owner-restarted) and runs the next turn of the session;
// then A thaws (SIGCONT) in the middle of streaming. A's late writes are
// fenced off: no event of the turn after its terminal event, no message
// of it after B's reply, exactly one terminal outcome, and A stops the
// turn without settling it.
func TestFrozenNodeIsFencedOff(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two-node test: skipped in -short mode")
	}
	pg := pgtest.DSN(t)
	home := t.TempDir() + "/home"
	opts := deskOpts{Home: home, Token: "fence", Env: []string{"DESK_POSTGRES=" + pg, "DESK_SHARED_HOME=1",
		// A short lease keeps the test short; the watchdog margin holds.
		"DESK_OWNER_TTL=3s", "DESK_HEARTBEAT_TIMEOUT=2s"}}
	a := startDesk(t, opts)
	b := startDesk(t, opts)

	var ws, ses struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "fence"}, &ws)
	// Step 1 streams for 30 s: A is frozen in the middle of it. Step 2 is
	// the next turn's quick reply.
	words := strings.Repeat("slow ", 300)
	script := map[string]any{"steps": []map[string]any{{"text": words, "delay_ms": 30000}, {"text": "peer reply"}}}
	a.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": script}, &ses)

	var sub struct {
		ExecutionID string `json:"execution_id"`
	}
	a.call("POST", "/v1/sessions/"+ses.ID+"/messages", map[string]any{"text": "first"}, &sub)
	exe1 := sub.ExecutionID
	if exe1 == "" {
		t.Fatal("the first message did not start an execution on A")
	}
	var x fenceExecution
	testwait.Until(t, 30*time.Second, func() bool {
		a.call("GET", "/v1/executions/"+exe1, nil, &x)
		return countType(x, "assistant.delta") >= 3
	}, "A to stream the first turn")

	// Freeze A past its lease; B takes the turn over.
	if err := syscall.Kill(a.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			syscall.Kill(a.Pid(), syscall.SIGCONT)
		}
	}
	defer thaw()
	testwait.Until(t, 60*time.Second, func() bool {
		b.call("GET", "/v1/executions/"+exe1, nil, &x)
		return x.Phase != "running" && x.Phase != "starting" && x.Phase != "stopping"
	}, "B to take over the frozen node's turn")
	if x.Phase != "interrupted" || x.Reason != "owner-restarted" {
		t.Fatalf("B settled the turn %s (%s), want interrupted (owner-restarted)", x.Phase, x.Reason)
	}
	// The next turn runs on B while A is still frozen.
	b.call("POST", "/v1/sessions/"+ses.ID+"/messages", map[string]any{"text": "second"}, &sub)
	exe2 := sub.ExecutionID
	if exe2 == "" {
		t.Fatal("the second message did not start an execution on B")
	}
	var x2 fenceExecution
	testwait.Until(t, 60*time.Second, func() bool {
		b.call("GET", "/v1/executions/"+exe2, nil, &x2)
		return x2.Phase == "ended"
	}, "B to run the next turn")
	t.Logf("A frozen for %s; B took its turn over and ran the next one", time.Since(frozen).Round(100*time.Millisecond))

	// Thaw A in the middle of its stream. Its watchdog sees the missed
	// heartbeat deadline and its stream goroutine its next delta, in
	// either order: the first fenced write, or the watchdog's fenced
	// settle, tells it it lost the turn, and it stops without settling.
	thaw()
	fenced := func() bool {
		l := a.Log()
		return strings.Contains(l, "stopped an execution this desk process no longer holds") || strings.Contains(l, "settle execution: fenced off")
	}
	testwait.Until(t, 60*time.Second, fenced, "A to thaw and be refused by the fence")
	testwait.Until(t, 30*time.Second, func() bool { return healthy(a.URL) }, "A to answer again")

	b.call("GET", "/v1/executions/"+exe1, nil, &x)
	terminal, after := 0, []string{}
	for _, e := range x.Events {
		switch {
		case e.Type == "execution.ended" || e.Type == "execution.failed" || e.Type == "execution.interrupted":
			terminal++
		case terminal > 0 && !strings.HasPrefix(e.Type, "queue."):
			after = append(after, fmt.Sprintf("%d:%s", e.Seq, e.Type))
		}
	}
	if terminal != 1 {
		t.Errorf("the frozen turn has %d terminal events, want exactly 1", terminal)
	}
	if len(after) > 0 {
		t.Errorf("events of the frozen turn after its terminal event: %v", after)
	}
	if x.Phase != "interrupted" || x.Reason != "owner-restarted" {
		t.Errorf("the frozen turn is now %s (%s): the thawed node changed its outcome", x.Phase, x.Reason)
	}

	var ml struct {
		Messages []fenceMessage `json:"messages"`
	}
	b.call("GET", "/v1/sessions/"+ses.ID+"/messages?branches=true", nil, &ml)
	var reply *fenceMessage
	for i, m := range ml.Messages {
		if m.ExecutionID == exe2 && m.Role == "assistant" {
			reply = &ml.Messages[i]
		}
	}
	if reply == nil || !strings.Contains(reply.Text, "peer reply") {
		t.Fatalf("no reply of B's turn in the transcript: %+v", ml.Messages)
	}
	for _, m := range ml.Messages {
		if m.ParentID == reply.ID || (m.Seq > reply.Seq) {
			t.Errorf("message %s (%s, execution %s) was written after the peer's reply", m.ID, m.Role, m.ExecutionID)
		}
		if m.ExecutionID == exe1 && m.Role == "assistant" {
			t.Errorf("the frozen turn's assistant message %s was written after its takeover", m.ID)
		}
	}
}

func countType(x fenceExecution, typ string) int {
	n := 0
	for _, e := range x.Events {
		if e.Type == typ {
			n++
		}
	}
	return n
}
