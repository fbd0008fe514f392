package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/sandbox"
)

// serveLogged starts `desk serve` like startServe and returns the stderr
// lines it wrote up to serving, besides the process and its URL.
func serveLogged(t *testing.T, home string, env ...string) (*deskProc, []string) {
	t.Helper()
	cmd := deskProcess(t, append(env, "DESK_HOME="+home, "DESK_ADMIN_TOKEN="+restartToken), "serve", "--addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := readLines(stderr)
	var before []string
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("desk serve exited before serving:\n%s", strings.Join(before, "\n"))
			}
			before = append(before, l)
			if m := servingURL.FindStringSubmatch(l); m != nil {
				go func() {
					for range lines {
					}
				}()
				return &deskProc{t: t, cmd: cmd, url: m[1], token: restartToken}, before
			}
		case <-deadline:
			t.Fatal("desk serve did not start")
		}
	}
}

// TestSetidKill9 runs the real desk binary: a sandboxed exec_command tries
// chmod u+s and is refused, and while it still runs no file on the host
// carries the bit; desk is then killed with SIGKILL (no post-run strip
// ever runs), setuid and setgid files are planted where sandboxes write
// (as a crashed run from before the filter would have left them), and the
// next start clears them all before it serves, and says so in its log.
func TestSetidKill9(t *testing.T) {
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox: %v", err)
	}
	home := filepath.Join(t.TempDir(), "home")
	d, _ := serveLogged(t, home)
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
	waitUntil(t, "the command's chmod", func() bool { _, err := os.Stat(status); return err == nil })
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

	d.stop(syscall.SIGKILL)
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

	d2, log := serveLogged(t, home)
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
	d2.stop(syscall.SIGTERM)
}
