package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/testwait"
)

func TestCLISendQueueInterrupt(t *testing.T) {
	t.Parallel()
	ex := apptest.NewExecutor()
	c := newCLIWith(t, app.Config{Executor: ex, Execution: execution.Options{PollInterval: 20 * time.Millisecond}})
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "acme")
	var x desk.Session
	c.json(&x, "session", "create", ws.ID)

	// send prints the streamed text and the settled execution.
	r := c.run("send", x.ID, "emit", "3")
	if r.e != nil || r.out != "part 0 part 1 part 2 \n" || !strings.Contains(r.err, "ended") {
		t.Fatalf("send: out=%q err=%q e=%v", r.out, r.err, r.e)
	}
	// A failed turn is an error with its reason.
	r = c.run("send", x.ID, "fail", "model", "unreachable")
	if r.e == nil || !strings.Contains(r.e.Error(), "model unreachable") || r.code() != exitTurnFailed {
		t.Fatalf("failed send: %v", r.e)
	}
	// --no-wait returns at once; the queue shows the waiting row.
	var first, second desk.SubmitResult
	c.json(&first, "send", "--no-wait", x.ID, "block")
	c.json(&second, "send", "--no-wait", x.ID, "reply", "later")
	// The first row may be claimed a moment after the answer (the
	// dispatcher was still finishing the previous turn).
	testwait.Until(t, 5*time.Second, func() bool {
		var items []desk.QueueItem
		c.json(&items, "queue", "ls", x.ID)
		for _, it := range items {
			if it.ID == first.Item.ID {
				first.ExecutionID = it.ExecutionID
			}
		}
		return first.ExecutionID != ""
	}, "the first row to be claimed")
	if second.Item.Status != desk.QueueStatusQueued {
		t.Fatalf("no-wait: %+v", second.Item)
	}
	out := c.ok("queue", "ls", x.ID)
	if !strings.Contains(out, second.Item.ID) || !strings.Contains(out, "queued") {
		t.Fatalf("queue ls:\n%s", out)
	}
	c.ok("queue", "steer", x.ID, second.Item.ID)
	c.fail(exitUsage, "queue", "move", x.ID, second.Item.ID, "sideways")
	waitRunning(t, c, first.ExecutionID)
	// The execution id alone names the session.
	if out := c.ok("interrupt", first.ExecutionID); !strings.Contains(out, "stopped") {
		t.Fatalf("interrupt EXE: %s", out)
	}
	if out := c.ok("interrupt", x.ID, first.ExecutionID); !strings.Contains(out, "already finished") {
		t.Fatalf("second interrupt: %s", out)
	}
	c.fail(exitNotFound, "interrupt", x.ID, "exe_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	c.fail(exitNotFound, "interrupt", "exe_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	var blocks []desk.Block
	c.json(&blocks, "blocks", "ls", x.ID)
	if len(blocks) != 1 || blocks[0].Kind != desk.BlockUserCooldown {
		t.Fatalf("blocks: %+v", blocks)
	}
	c.ok("blocks", "release", x.ID, blocks[0].ID)
	// The released row's turn runs now; exec show of it needs it ended.
	var xs []desk.Execution
	testwait.Until(t, 5*time.Second, func() bool {
		c.json(&xs, "exec", "ls", x.ID)
		return len(xs) >= 3 && xs[0].Terminal()
	}, "the released row's turn to end")
	if out := c.ok("exec", "show", xs[0].ID); !strings.Contains(out, xs[0].ID) || !strings.Contains(out, "✓ "+xs[0].ID+" ended") {
		t.Fatalf("exec show:\n%s", out)
	}
	if out := c.ok("exec", "show", "--events", xs[0].ID); !strings.Contains(out, "execution.") {
		t.Fatalf("exec show --events:\n%s", out)
	}
	// events --after 0 replays the log from the start.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	root := newRoot()
	var buf safeBuffer
	root.SetOut(&buf)
	root.SetArgs([]string{"--server", c.url, "--token", c.token, "events", "--session", x.ID, "--after", "0"})
	go root.ExecuteContext(ctx)
	if !testwait.Poll(5*time.Second, func() bool { return strings.Contains(buf.String(), "execution.interrupted") }) {
		t.Fatalf("events never showed the interrupt: %q", buf.String())
	}
}

func waitRunning(t *testing.T, c *cli, exe string) {
	t.Helper()
	var x desk.Execution
	if !testwait.Poll(5*time.Second, func() bool {
		c.json(&x, "exec", "show", exe)
		return x.Phase == desk.PhaseRunning
	}) {
		t.Fatalf("execution %s is %s", exe, x.Phase)
	}
}

// TestCLIScriptSession: the README's tour — a script session made from a
// file, a send that streams the reply and names the tool call it settled.
func TestCLIScriptSession(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "acme")
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"tool_calls":[{"name":"write_file","arguments":{"path":"/artifacts/hello.md","content":"# Hello\n"}}]},{"text":"I wrote it."}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var x desk.Session
	c.json(&x, "session", "create", ws.ID, "--title", "demo", "--model", "script", "--script", script)
	if x.Model != "script" {
		t.Fatalf("session model = %q", x.Model)
	}
	r := c.run("send", x.ID, "write me a hello file")
	if r.e != nil || r.out != "I wrote it.\n" || !strings.Contains(r.err, "[✓ write_file") || !strings.Contains(r.err, "ended") {
		t.Fatalf("send: out=%q err=%q e=%v", r.out, r.err, r.e)
	}
	if out := c.ok("artifact", "ls", x.ID); !strings.Contains(out, "hello.md") {
		t.Fatalf("artifacts after the turn:\n%s", out)
	}
	// A script that is not JSON is refused before anything is created.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte("steps:"), 0o644)
	if r := c.run("session", "create", ws.ID, "--model", "script", "--script", bad); r.e == nil || !strings.Contains(r.e.Error(), "not JSON") {
		t.Fatalf("bad script: %v", r.e)
	}
}

// TestCLIPlanLs: a plan card waiting in a running turn is listed with the
// commands that decide it; once approved it is listed only with --all.
func TestCLIPlanLs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "acme")
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"tool_calls":[{"name":"clarify","arguments":{"plan":{"title":"Tidy the reports","steps":["list them","merge them"]}}}]},{"text":"Tidied."}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var x desk.Session
	c.json(&x, "session", "create", ws.ID, "--model", "script", "--script", script)
	if out := c.ok("plan", "ls", x.ID); !strings.Contains(out, "no plan is waiting") {
		t.Fatalf("plan ls before any turn:\n%s", out)
	}
	c.ok("send", "--no-wait", x.ID, "tidy up")
	var plans []desk.Plan
	testwait.Until(t, 10*time.Second, func() bool {
		c.json(&plans, "plan", "ls", x.ID)
		return len(plans) == 1
	}, "the waiting plan")
	if plans[0].Status != desk.PlanProposed || plans[0].SessionID != x.ID {
		t.Fatalf("waiting plan: %+v", plans[0])
	}
	out := c.ok("plan", "ls", x.ID)
	for _, want := range []string{plans[0].ID, "Tidy the reports", "desk plan approve " + plans[0].ID} {
		if !strings.Contains(out, want) {
			t.Fatalf("plan ls lacks %q:\n%s", want, out)
		}
	}
	c.ok("plan", "approve", plans[0].ID)
	testwait.Until(t, 10*time.Second, func() bool {
		c.json(&plans, "plan", "ls", x.ID)
		return len(plans) == 0
	}, "no plan waiting after the approval")
	var every []desk.Plan
	c.json(&every, "plan", "ls", x.ID, "--all")
	if len(every) != 1 || every[0].Status != desk.PlanApproved {
		t.Fatalf("plan ls --all: %+v", every)
	}
	c.fail(exitNotFound, "plan", "ls", ws.ID)
}
