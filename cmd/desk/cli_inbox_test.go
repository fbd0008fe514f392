package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
)

// TestCLIInbox: a gated tool call shows in desk inbox with the command
// that answers it; answering it from there empties the inbox.
func TestCLIInbox(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	if out := c.ok("inbox"); !strings.Contains(out, "nothing waits on you") {
		t.Fatalf("empty inbox = %q", out)
	}
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "inbox")
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"tool_calls":[{"name":"exec_command","arguments":{"command":"echo hi"}}]},{"text":"done"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var ses desk.Session
	c.json(&ses, "session", "create", ws.ID, "--title", "gated", "--model", "script", "--script", script)
	c.ok("send", "--no-wait", ses.ID, "go")
	var in desk.Inbox
	testwait.Until(t, 30*time.Second, func() bool {
		c.json(&in, "inbox")
		return len(in.Items) == 1
	}, "the approval in the inbox")
	it := in.Items[0]
	if it.Kind != desk.InboxApproval || it.SessionID != ses.ID || it.SessionTitle != "gated" {
		t.Fatalf("inbox item %+v", it)
	}
	out := c.ok("inbox")
	if !strings.Contains(out, "desk approve|deny "+it.ID) || !strings.Contains(out, "exec_command: echo hi") {
		t.Fatalf("desk inbox = %q", out)
	}
	c.ok("deny", it.ID)
	if out := c.ok("inbox"); !strings.Contains(out, "nothing waits on you") {
		t.Fatalf("after deny, desk inbox = %q", out)
	}
}
