package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestCLILifecycle: catalog, offboard, restore, purge and ask through the
// CLI, with their refusals as exit statuses.
func TestCLILifecycle(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	if err := json.Unmarshal([]byte(c.ok("--json", "workspace", "create", "acme")), &ws); err != nil {
		t.Fatal(err)
	}
	var x desk.Session
	if err := json.Unmarshal([]byte(c.ok("--json", "session", "create", ws.ID, "--title", "A")), &x); err != nil {
		t.Fatal(err)
	}
	if r := c.run("workspace", "offboard", ws.ID); r.code() != exitUsage {
		t.Fatalf("offboard without --reason: exit %d (%v)", r.code(), r.e)
	}
	if r := c.run("workspace", "offboard", ws.ID, "--reason", "x", "--successor", "nope"); r.code() != exitUsage {
		t.Fatalf("a bad --successor: exit %d (%v)", r.code(), r.e)
	}
	o := c.ok("workspace", "offboard", ws.ID, "--reason", "wrapped up", "--notes", "see the plan")
	if !strings.Contains(o, "offboarded workspace "+ws.ID) || !strings.Contains(o, "1 sessions retired") {
		t.Fatalf("offboard output: %q", o)
	}
	if o := c.ok("workspace", "offboard", ws.ID, "--reason", "again"); !strings.Contains(o, "already departed") {
		t.Fatalf("second offboard: %q", o)
	}
	o = c.ok("workspace", "catalog")
	if !strings.Contains(o, ws.ID) || !strings.Contains(o, "departed") || !strings.Contains(o, "wrapped up") {
		t.Fatalf("catalog: %q", o)
	}
	if o := c.ok("workspace", "catalog", ws.ID); !strings.Contains(o, "# Handoff") || !strings.Contains(o, "see the plan") {
		t.Fatalf("catalog entry: %q", o)
	}
	o = c.ok("ask", "--session", x.ID, "are you there?")
	if !strings.Contains(o, "unavailable (departed-workspace)") {
		t.Fatalf("ask a departed session: %q", o)
	}
	if r := c.run("ask", "--session", x.ID, "--workspace", ws.ID, "two targets"); r.code() != exitUsage {
		t.Fatalf("ask with two targets: exit %d", r.code())
	}
	if r := c.run("workspace", "purge", ws.ID); r.code() != exitUsage {
		t.Fatalf("purge without --confirm: exit %d", r.code())
	}
	if o := c.ok("workspace", "restore", ws.ID); !strings.Contains(o, "restored workspace "+ws.ID) {
		t.Fatalf("restore: %q", o)
	}
	if r := c.run("workspace", "purge", ws.ID, "--confirm", ws.ID); r.code() != exitConflict {
		t.Fatalf("purge of an active workspace: exit %d (%v)", r.code(), r.e)
	}
	c.ok("workspace", "offboard", ws.ID, "--reason", "for good")
	if o := c.ok("workspace", "purge", ws.ID, "--confirm", ws.ID); !strings.Contains(o, "purged workspace "+ws.ID) {
		t.Fatalf("purge: %q", o)
	}
	var es []desk.CatalogEntry
	if err := json.Unmarshal([]byte(c.ok("--json", "workspace", "catalog")), &es); err != nil || len(es) != 1 || es[0].State != desk.WorkspacePurged {
		t.Fatalf("catalog after purge: %+v %v", es, err)
	}
	// An ask is a dispatch: listed and shown with its subject.
	// In a workspace of its own (ws is purged).
	var ws2 desk.Workspace
	if err := json.Unmarshal([]byte(c.ok("--json", "workspace", "create", "dispatches")), &ws2); err != nil {
		t.Fatal(err)
	}
	var y, z desk.Session
	if err := json.Unmarshal([]byte(c.ok("--json", "session", "create", ws2.ID, "--title", "B")), &y); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"text":"half way"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(c.ok("--json", "session", "create", ws2.ID, "--title", "C", "--model", "script", "--script", script)), &z); err != nil {
		t.Fatal(err)
	}
	o = c.ok("ask", "--session", z.ID, "--subject", "status", "--reply", "caller", "--from", y.ID, "how far along?")
	m := regexp.MustCompile(`dispatch (dsp_\w+)`).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("ask with a reply owed: %q", o)
	}
	if o := c.ok("dispatch", "ls", "--session", y.ID); !strings.Contains(o, m[1]) || !strings.Contains(o, "reply caller") || !strings.Contains(o, "status") {
		t.Fatalf("dispatch ls: %q", o)
	}
	if o := c.ok("dispatch", "show", m[1]); !strings.Contains(o, "how far along?") || !strings.Contains(o, y.ID) {
		t.Fatalf("dispatch show: %q", o)
	}
	if r := c.run("ask", "--session", z.ID, "--reply", "caller", "no from"); r.code() != exitInvalid || !strings.Contains(r.e.Error(), "from_session") {
		t.Fatalf("a caller reply without --from: exit %d (%v)", r.code(), r.e)
	}
}
