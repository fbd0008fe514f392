package app_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/tools"
)

// Long-running commands through HTTP with script sessions:
// exec_command with yield_time_ms, write_stdin, the session cap, and the
// kill of every session's process tree when the turn settles or is
// interrupted.

// echoer reads lines from stdin and answers each until "quit".
const echoer = `python3 -u -c 'import sys
print("ready")
for line in sys.stdin:
    line = line.strip()
    if line == "quit":
        print("bye")
        break
    print("got", line.upper())
'`

func startCmd(command string, yieldMS int) map[string]any {
	return tc("exec_command", map[string]any{"command": command, "yield_time_ms": yieldMS})
}

func writeIn(session int, chars string, yieldMS int) map[string]any {
	return tc("write_stdin", map[string]any{"session_id": session, "chars": chars, "yield_time_ms": yieldMS})
}

// TestAgentCommandSession: a python3 reading stdin is started with
// yield_time_ms and driven through three write_stdin calls, each its own
// command record with the output that came since the last; the last
// sees it exit.
func TestAgentCommandSession(t *testing.T) { inModes(t, testAgentCommandSession) }

func testAgentCommandSession(t *testing.T, mode string) {
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": mode})
	x := w.script(calls(startCmd(echoer, 20000)), calls(writeIn(1, "alpha\n", 20000)), calls(writeIn(1, "beta\n", 20000)),
		calls(writeIn(1, "quit\n", 20000)), says("done"))
	xe := w.settled(w.send(x.ID, "go").ExecutionID)
	oneTerminal(t, xe, desk.PhaseEnded)
	cs := w.commands(x.ID)
	if len(cs) != 4 {
		t.Fatalf("%d commands", len(cs))
	}
	want := []struct {
		tool, stdout string
		running      bool
	}{{"exec_command", "ready\n", true}, {"write_stdin", "got ALPHA\n", true}, {"write_stdin", "got BETA\n", true}, {"write_stdin", "bye\n", false}}
	for i, c := range cs {
		v := w.resultOf(x, c)
		if c.Tool != want[i].tool || c.Status != desk.CommandSucceeded || v["session_id"] != float64(1) ||
			v["stdout"] != want[i].stdout || v["running"] != want[i].running {
			t.Fatalf("call %d (%s, %s): %v", i, c.Tool, c.Status, v)
		}
		var f map[string]any
		json.Unmarshal(c.Facts, &f)
		if f["session_id"] != float64(1) || f["running"] != want[i].running || !strings.HasPrefix(f["command"].(string), "python3 -u") {
			t.Fatalf("facts of call %d: %s", i, c.Facts)
		}
		if c.Output != want[i].stdout {
			t.Fatalf("record output of call %d: %q", i, c.Output)
		}
	}
	if v := w.resultOf(x, cs[3]); v["exit_code"] != float64(0) {
		t.Fatalf("the end: %v", v)
	}
	// The output streamed as tool.output events labelled by stream.
	var streamed strings.Builder
	for _, e := range eventsOf(xe, "tool.output") {
		var d map[string]any
		json.Unmarshal(e.Data, &d)
		if d["stream"] != "stdout" && d["stream"] != "stderr" {
			t.Fatalf("tool.output without a stream label: %s", e.Data)
		}
		if d["stream"] == "stdout" {
			streamed.WriteString(d["text"].(string))
		}
	}
	// Everything the records hold streamed too, including output that
	// arrived between calls.
	if s := streamed.String(); s != "ready\ngot ALPHA\ngot BETA\nbye\n" {
		t.Fatalf("streamed stdout %q", s)
	}
	// A session that ended is gone.
	_, cs2 := w.run(calls(writeIn(1, "again\n", 100)))
	if cs2[0].Status != desk.CommandFailed || !strings.Contains(cs2[0].Error, "no command session 1") {
		t.Fatalf("write_stdin to a session of another turn: %s %q", cs2[0].Status, cs2[0].Error)
	}
}

// TestAgentCommandSessionInterrupt: an interrupt while write_stdin waits
// kills the session's whole process tree (a background child included).
func TestAgentCommandSessionInterrupt(t *testing.T) { inModes(t, testAgentCommandSessionInterrupt) }

func testAgentCommandSessionInterrupt(t *testing.T, mode string) {
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": mode})
	secs := strconv.Itoa(3000 + int(time.Now().UnixNano()%5000))
	reader := `import sys; print("ready"); sys.stdin.read()`
	x := w.script(calls(startCmd("sleep "+secs+" & python3 -u -c '"+reader+"'", 20000)), calls(writeIn(1, "", 30000)), says("never"))
	res := w.send(x.ID, "go")
	w.waitCommand(x.ID, "write_stdin to wait", statusIs("write_stdin", desk.CommandRunning))
	eventually(t, "the session's processes", func() bool {
		return len(procsWith("sleep", secs)) == 1 && len(procsWith("python3", "-u", "-c", reader)) == 1
	})
	w.interrupt(x.ID, res.ExecutionID)
	xe := w.settled(res.ExecutionID)
	oneTerminal(t, xe, desk.PhaseInterrupted)
	cs := w.commands(x.ID)
	if cs[0].Status != desk.CommandSucceeded || cs[1].Status != desk.CommandCancelled {
		t.Fatalf("records: %s %s", cs[0].Status, cs[1].Status)
	}
	if left := append(procsWith("sleep", secs), procsWith("python3", "-u", "-c", reader)...); len(left) != 0 {
		t.Fatalf("processes left after the interrupt: %v", left)
	}
}

// TestAgentCommandSessionCap: one execution runs at most
// MaxCommandSessions sessions; the one past the cap is refused, the
// others are numbered 1..N, and all die when the turn settles.
func TestAgentCommandSessionCap(t *testing.T) { inModes(t, testAgentCommandSessionCap) }

func testAgentCommandSessionCap(t *testing.T, mode string) {
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": mode})
	secs := strconv.Itoa(3000 + int(time.Now().UnixNano()%5000))
	var step []map[string]any
	for range tools.MaxCommandSessions + 1 {
		step = append(step, startCmd("sleep "+secs, 200))
	}
	x, cs := w.run(calls(step...))
	ids := map[float64]bool{}
	refused := 0
	for _, c := range cs {
		v := w.resultOf(x, c)
		switch errCode(v) {
		case tools.CodeTooMany:
			refused++
		case "":
			if v["running"] != true {
				t.Fatalf("a session ended early: %v", v)
			}
			ids[v["session_id"].(float64)] = true
		default:
			t.Fatalf("unexpected result %v", v)
		}
	}
	if refused != 1 || len(ids) != tools.MaxCommandSessions {
		t.Fatalf("refused %d, sessions %v", refused, ids)
	}
	for i := 1; i <= tools.MaxCommandSessions; i++ {
		if !ids[float64(i)] {
			t.Fatalf("session ids %v: want 1..%d", ids, tools.MaxCommandSessions)
		}
	}
	// The turn settled, and it settles only after its sessions are gone.
	if left := procsWith("sleep", secs); len(left) != 0 {
		t.Fatalf("sessions outlived the turn: %v", left)
	}
}

// inModes runs a session test in the sandbox (auto-review) and on the
// host (full-access), which needs no bubblewrap.
func inModes(t *testing.T, f func(*testing.T, string)) {
	for _, mode := range []string{"auto-review", "full-access"} {
		t.Run(mode, func(t *testing.T) {
			if mode != "full-access" {
				needSandbox(t)
			}
			f(t, mode)
		})
	}
}
