package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/sandbox"
)

// TestSetidKill9 runs the real desk binary: a sandboxed exec_command tries
// chmod u+s and is refused, and while it still runs no file on the host
// carries the bit; desk is then killed with SIGKILL (no post-run strip
// ever runs), setuid and setgid files are planted where sandboxes write
// (as a crashed run from before the filter would have left them), and the
// next start clears them all before it serves, and says so in its log.
func TestSetidKill9(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox: %v", err)
	}
	d := startDesk(t, deskOpts{Token: restartToken})
	home := d.Home
	var ws desk.Workspace
	d.call("POST", "/v1/workspaces", map[string]string{"name": "setid"}, &ws)
	d.call("PATCH", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"approval_mode": "auto-review"}, nil)
	cmd := `echo x > /workspace/made; chmod u+s /workspace/made 2>/workspace/chmod.err; echo "$?" > /workspace/chmod.status.tmp; ` +
		`mv /workspace/chmod.status.tmp /workspace/chmod.status; exec sleep 600`
	script := map[string]any{"steps": []map[string]any{
		{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": cmd, "timeout_seconds": 900}}}},
		{"text": "done"},
	}}
	var x desk.Session
	d.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": script}, &x)
	d.call("POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, &struct{}{})

	checkout := filepath.Join(home, "workspaces", ws.ID, "checkout")
	status := filepath.Join(checkout, "chmod.status")
	testwait.Until(t, restartWait, func() bool { _, err := os.Stat(status); return err == nil }, "the command's chmod")
	b, _ := os.ReadFile(status)
	msg, _ := os.ReadFile(filepath.Join(checkout, "chmod.err"))
	if strings.TrimSpace(string(b)) == "0" || !strings.Contains(string(msg), "Operation not permitted") {
		t.Errorf("chmod u+s inside exec_command: status %q, stderr %q; want EPERM", b, msg)
	}
	// The command still runs (sleep 600): the host sees no bit now.
	fi, err := os.Stat(filepath.Join(checkout, "made"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Errorf("while the command runs, the host file has mode %v", fi.Mode())
	}

	d.Kill()
	planted := map[string]fs.FileMode{
		filepath.Join(checkout, "left-suid"):                                  0o755 | fs.ModeSetuid,
		filepath.Join(checkout, "sub/left-sgid"):                              0o750 | fs.ModeSetgid,
		filepath.Join(home, "workspaces", ws.ID, "workspace/actor/left-both"): 0o700 | fs.ModeSetuid | fs.ModeSetgid,
		filepath.Join(home, "runtime-state", ws.ID, "rt/left-suid"):           0o755 | fs.ModeSetuid,
	}
	for p, m := range planted {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\ncat admin.token\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}

	d2 := d.Again()
	log := d2.StartLog()
	for p, m := range planted {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != m&^(fs.ModeSetuid|fs.ModeSetgid) {
			t.Errorf("%s: mode %v after the restart", p, fi.Mode())
		}
	}
	found := false
	for _, l := range log {
		if strings.Contains(l, "setuid/setgid sweep") && strings.Contains(l, "cleared=4") {
			found = true
		}
	}
	if !found {
		t.Errorf("no log line of the sweep clearing 4 files before serving:\n%s", strings.Join(log, "\n"))
	}
	d2.Stop()
}
