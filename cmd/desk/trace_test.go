package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

var update = flag.Bool("update", false, "rewrite the golden files of the trace tests")

// traceEvents is one turn as its events carry it: a streamed reply, a
// command that ran and succeeded, one that waited for an approval and
// exited 3, a declined one, and the failure the turn ended with.
func traceEvents(t *testing.T) []*desk.Event {
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	at := func(ms int) *time.Time { x := t0.Add(time.Duration(ms) * time.Millisecond); return &x }
	x := func(phase, reason string) any {
		e := desk.Execution{ID: "exe_1", SessionID: "ses_1", Phase: phase, Reason: reason}
		return e
	}
	cmd := func(id, call, status, args string, start, end int, facts, output string) any {
		c := desk.Command{ID: id, CallID: call, Tool: "exec_command", Status: status, Arguments: json.RawMessage(args), StartedAt: at(start), Output: output}
		if end > 0 {
			c.FinishedAt = at(end)
		}
		if facts != "" {
			c.Facts = json.RawMessage(facts)
		}
		return c
	}
	var es []*desk.Event
	add := func(ms int, typ string, data any) {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, &desk.Event{Seq: int64(len(es) + 1), At: *at(ms), Type: typ, SessionID: "ses_1", ExecutionID: "exe_1", Data: b})
	}
	add(0, "execution.started", x(desk.PhaseStarting, ""))
	add(10, "assistant.delta", map[string]string{"text": "Let me look "})
	add(20, "assistant.delta", map[string]string{"text": "at the tests."})
	add(30, "tool.call_started", map[string]any{"index": 0, "call_id": "call_1", "tool": "exec_command"})
	add(40, "tool.args_delta", map[string]any{"index": 0, "delta": `{"command":"go te`})
	add(50, "tool.args_delta", map[string]any{"index": 0, "delta": `st ./..."}`})
	add(60, "assistant.message", map[string]string{"id": "msg_1"})
	add(70, "command.running", cmd("cmd_1", "call_1", desk.CommandRunning, `{"command":"go test ./..."}`, 70, 0, "", ""))
	add(900, "tool.output", map[string]any{"command_id": "cmd_1", "stream": "stdout", "text": "ok  \tpkg/a\t0.1s\n"})
	add(1270, "command.succeeded", cmd("cmd_1", "call_1", desk.CommandSucceeded, `{"command":"go test ./..."}`, 70, 1270, `{"exit_code":0}`, "ok  \tpkg/a\t0.1s\n"))
	add(1300, "tool.call_started", map[string]any{"index": 0, "call_id": "call_2", "tool": "exec_command"})
	add(1310, "tool.args_delta", map[string]any{"index": 0, "delta": `{"command":"rm -rf build && make"}`})
	add(1320, "approval.requested", desk.Approval{ID: "apr_1", ExecutionID: "exe_1", Tool: "exec_command", Summary: "rm -rf build && make", Status: desk.ApprovalPending})
	add(5000, "approval.resolved", map[string]string{"id": "apr_1", "status": desk.ApprovalApproved, "decided_by": "act_owner"})
	add(5010, "command.running", cmd("cmd_2", "call_2", desk.CommandRunning, `{"command":"rm -rf build && make"}`, 5010, 0, "", ""))
	add(5200, "tool.output", map[string]any{"command_id": "cmd_2", "stream": "stderr", "text": "make: *** [all] Error 2\n"})
	add(5410, "command.succeeded", cmd("cmd_2", "call_2", desk.CommandSucceeded, `{"command":"rm -rf build && make"}`, 5010, 5410, `{"exit_code":3}`,
		"cc -o a a.c\na.c:1: error: expected ';'\nmake: *** [all] Error 2\n"))
	add(5500, "command.declined", cmd("cmd_3", "call_3", desk.CommandDeclined, `{"command":"git push"}`, 5500, 5500, "", ""))
	add(5600, "execution.failed", x(desk.PhaseFailed, "the script has no step left"))
	return es
}

func render(t *testing.T, tty bool) string {
	var b bytes.Buffer
	tr := newTrace(&b, tty)
	clock := time.Date(2026, 12, 5, 10, 0, 2, 0, time.UTC)
	tr.now = func() time.Time { return clock }
	for _, e := range traceEvents(t) {
		tr.event(e)
	}
	return b.String()
}

// The trace written to a pipe or a file: every line once, when settled —
// compared with a golden file (go test ./cmd/desk -run TestTraceGolden -update).
func TestTraceGolden(t *testing.T) {
	t.Parallel()
	got := render(t, false)
	golden := filepath.Join("testdata", "trace.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("trace differs from %s:\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
	// What a person must be able to tell from it.
	for _, s := range []string{
		"✓ exec_command  go test ./...  (1.2s, exit 0)",
		"✗ exec_command  rm -rf build && make  (400ms, exit 3)",
		"│ make: *** [all] Error 2",
		"? waiting for approval apr_1 to run `rm -rf build && make`; answer with desk approve apr_1",
		"apr_1 approved by act_owner",
		"■ exec_command  git push  (0ms, declined)",
		"✗ exe_1 failed: the script has no step left",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("the trace lacks %q", s)
		}
	}
	if strings.Contains(got, "\x1b") || strings.Contains(got, "⋯") {
		t.Fatal("escape codes or a running line in plain output")
	}
}

// On a terminal the running call's line is drawn and redrawn in place; once
// the turn settled, the screen holds exactly the plain trace's lines.
func TestTraceTerminalScreen(t *testing.T) {
	t.Parallel()
	raw := render(t, true)
	if !strings.Contains(raw, "⋯") || !strings.Contains(raw, "\x1b[2K") {
		t.Fatalf("no running line drawn in place:\n%q", raw)
	}
	if got, want := screen(raw), screen(render(t, false)); got != want {
		t.Fatalf("the terminal's screen:\n%s\nthe plain trace:\n%s", got, want)
	}
}

// sgr is a colour or style sequence.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// screen is what a terminal shows after out: carriage returns, line
// feeds and erase-line (the only controls the trace writes) applied, the
// colours dropped.
func screen(out string) string {
	out = sgr.ReplaceAllString(out, "")
	var lines []string
	cur := []rune{}
	col := 0
	for i := 0; i < len(out); {
		switch {
		case strings.HasPrefix(out[i:], "\x1b[2K"):
			cur, i = cur[:0], i+4
			continue
		case out[i] == '\r':
			col, i = 0, i+1
			continue
		case out[i] == '\n':
			lines = append(lines, string(cur))
			cur, col, i = cur[:0], 0, i+1
			continue
		}
		r := []rune(out[i:])[0]
		if col < len(cur) {
			cur[col] = r
		} else {
			cur = append(cur, r)
		}
		col++
		i += len(string(r))
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return strings.Join(lines, "\n")
}
