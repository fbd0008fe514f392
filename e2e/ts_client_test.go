package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestTypeScriptClient: the generated TypeScript client (clients/typescript,
// compiled here with its pinned tsc) drives a real desk from Node: it
// creates a session, sends a message, follows the event stream to the
// approval its command waits for, approves it, follows on to the end of
// the turn and reads the reply; a call naming an unknown session comes
// back as a typed DeskError with desk's status and code.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	pkg, err := filepath.Abs(filepath.Join("..", "clients", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	tsc := filepath.Join(pkg, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		t.Skip("clients/typescript/node_modules is missing: run npm ci in clients/typescript (.ci/run does)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	// The program runs from a directory of its own beside the compiled
	// client; the client's node_modules resolves openapi-fetch.
	dir := t.TempDir()
	if out, err := exec.Command(tsc, "-p", pkg, "--outDir", filepath.Join(dir, "dist")).CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	for name, body := range map[string]string{"package.json": `{"type":"module"}`} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(pkg, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile(filepath.Join("testdata", "ts_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.mjs"), prog, 0o644); err != nil {
		t.Fatal(err)
	}

	d := startDesk(t, deskOpts{})
	ws := d.workspace("typescript", false)
	cmd := exec.Command(node, "main.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DESK_URL="+d.URL, "DESK_TOKEN="+d.Token, "DESK_WS="+ws)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node main.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var r struct {
		Session, Execution, ApprovalStatus, Reply, BadSession string
		Pending                                               int
		Events                                                []string
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("the program's report %q: %v", stdout.String(), err)
	}
	if !strings.HasPrefix(r.Session, "ses_") || r.Pending != 1 || r.ApprovalStatus != desk.ApprovalApproved {
		t.Fatalf("session %q, %d pending approvals, approval %q", r.Session, r.Pending, r.ApprovalStatus)
	}
	if len(r.Events) == 0 || r.Events[len(r.Events)-1] != "approval.requested" {
		t.Fatalf("events before the approval: %v", r.Events)
	}
	if r.Reply != "It ran, said the script." {
		t.Fatalf("reply %q", r.Reply)
	}
	if r.BadSession != "404 not_found" {
		t.Fatalf("a message to an unknown session: %q", r.BadSession)
	}
	// desk ran the approved command.
	out := d.ok("message", "ls", r.Session)
	if !strings.Contains(out, "from-typescript") {
		t.Fatalf("the approved command's output is not in the transcript:\n%s", out)
	}
}
