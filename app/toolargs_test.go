package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestAgentBadToolArguments: through the whole loop, a model call whose
// arguments break the tool's schema — a wrong type, a missing required
// field, a value out of range, an unknown field — is not run and comes
// back to the model as a BAD_INPUT tool result naming the field; nobody
// is asked to approve it, nothing is written, and the turn goes on.
func TestAgentBadToolArguments(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	x := w.script(
		calls(
			tc("write_file", map[string]any{"path": "/artifacts/typed.md", "content": 42}),
			tc("write_file", map[string]any{"path": "/artifacts/missing.md"}),
			tc("exec_command", map[string]any{"command": "touch /artifacts/ran", "timeout_seconds": 3600}),
			tc("read_file", map[string]any{"path": "/artifacts/x.md", "encoding": "utf-8"}),
			tc("inspect", map[string]any{"view": "artifacts", "offset": "2"}),
		),
		says("let me fix that"))
	res := w.send(x.ID, "go")
	oneTerminal(t, w.settled(res.ExecutionID), desk.PhaseEnded)
	want := []string{
		"arguments: /content: got number, want string",
		"arguments: /content: required, missing",
		"arguments: /timeout_seconds: got 3600, want at most 1800",
		"arguments: /encoding: unknown field; the fields are limit, offset, path",
		"arguments: /offset: got string, want integer",
	}
	cs := w.commands(x.ID)
	if len(cs) != len(want) {
		t.Fatalf("%d commands, want %d", len(cs), len(want))
	}
	results := w.toolResults(x)
	for i, c := range cs {
		v := w.resultOf(x, c)
		msg, _ := v["error"].(map[string]any)["message"].(string)
		if c.Status != desk.CommandFailed || errCode(v) != "BAD_INPUT" || !strings.Contains(msg, want[i]) ||
			!strings.Contains(c.Error, want[i]) || !results[c.CallID].IsError {
			t.Fatalf("%s %s: status %s error %q result %v; want BAD_INPUT %q", c.Tool, c.Arguments, c.Status, c.Error, v, want[i])
		}
	}
	if as := w.approvals(x.ID, false); len(as) != 0 {
		t.Fatalf("invalid calls asked for approval: %+v", as)
	}
	for _, name := range []string{"typed.md", "missing.md", "ran"} {
		if _, err := os.Stat(filepath.Join(w.sessionDir(x), name)); !os.IsNotExist(err) {
			t.Fatalf("%s exists after a refused call: %v", name, err)
		}
	}
}
