package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestForegroundStartWithAddrFromEnv: DESK_FOREGROUND=1 desk start with the
// address in DESK_ADDR (no flag) runs the server; cobra must not fall back
// to os.Args ("start") for the serve command it runs.
func TestForegroundStartWithAddrFromEnv(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	cmd := exec.Command(os.Args[0], "start")
	cmd.Env = cleanEnv("DESK_HOME="+home, "DESK_FOREGROUND=1", "DESK_ADDR=127.0.0.1:0")
	var out safeBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for readRunState(t.Context(), home).State != "running" {
		select {
		case err := <-done:
			t.Fatalf("foreground start exited (%v): %s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("foreground start never answered: %s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := <-done; err != nil {
		t.Fatalf("foreground exit: %v\n%s", err, out.String())
	}
}

// TestSecondServeRefused: a second desk serve on a DESK_HOME whose server
// runs is refused at once, leaves the running server's pid and url files
// as they were, and desk start says "already running".
func TestSecondServeRefused(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	first, url, _ := startServe(t, home)
	pid, _ := os.ReadFile(filepath.Join(home, pidFileName))
	u, _ := os.ReadFile(filepath.Join(home, urlFileName))
	if strings.TrimSpace(string(u)) != url {
		t.Fatalf("url file %q, server at %s", u, url)
	}
	// Bounded: before the lock, a second server just served on.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	second := exec.CommandContext(ctx, os.Args[0], "serve", "--addr", "127.0.0.1:0")
	second.Env = cleanEnv("DESK_HOME=" + home)
	b, err := second.CombinedOutput()
	out, code := string(b), second.ProcessState.ExitCode()
	if ctx.Err() != nil {
		t.Fatalf("second serve was not refused: it ran until killed: %s", out)
	}
	if err != nil && code < 0 {
		t.Fatal(err)
	}
	if code != exitConflict || !strings.Contains(out, "already running") || !strings.Contains(out, strings.TrimSpace(string(pid))) {
		t.Fatalf("second serve = %d %s", code, out)
	}
	pid2, _ := os.ReadFile(filepath.Join(home, pidFileName))
	u2, _ := os.ReadFile(filepath.Join(home, urlFileName))
	if string(pid2) != string(pid) || string(u2) != string(u) {
		t.Fatalf("run files changed by the refused serve: pid %q → %q, url %q → %q", pid, pid2, u, u2)
	}
	if code, _ := get(t, url+"/healthz", ""); code != 200 {
		t.Fatalf("first server after the refusal: healthz = %d", code)
	}
	if out, code := run(t, cleanEnv("DESK_HOME="+home), "start", "--addr", "127.0.0.1:0"); code != exitUsage || !strings.Contains(out, "already running") {
		t.Fatalf("start beside a running serve = %d %s", code, out)
	}
	// The lock goes with the process: once the first server stopped, a new
	// one starts on the same home.
	first.Process.Signal(syscall.SIGTERM)
	first.Wait()
	startServe(t, home)
}

// TestCLIFindsServerInHome: with no --server, DESK_SERVER or DESK_ADDR the
// CLI uses the address the running server wrote to DESK_HOME/desk.url.
func TestCLIFindsServerInHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	startServe(t, home)
	out, code := run(t, cleanEnv("DESK_HOME="+home), "--json", "workspace", "list")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("workspace list with the address from desk.url = %d %s", code, out)
	}
	// The flag still wins over the file.
	if out, code := run(t, cleanEnv("DESK_HOME="+home), "--server", "127.0.0.1:1", "workspace", "list"); code != exitUnavailable {
		t.Fatalf("--server over desk.url = %d %s", code, out)
	}
}

// TestMistypedCommandIsUsage: an unknown command exits 2 (usage), at the
// top level as under a noun, and names the command that was not found.
func TestMistypedCommandIsUsage(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{{"sesion", "list"}, {"bogus"}, {"workspace", "bogus"}} {
		r := c.fail(exitUsage, args...)
		if !strings.Contains(r.e.Error(), `unknown command "`+args[len(args)-1]+`"`) && !strings.Contains(r.e.Error(), `unknown command "`+args[0]+`"`) {
			t.Fatalf("desk %s: %v", strings.Join(args, " "), r.e)
		}
	}
	if r := c.run("sesion"); !strings.Contains(r.e.Error(), "session") {
		t.Fatalf("no suggestion for a near miss: %v", r.e)
	}
}

// TestSharedHomeOptIn: processes that all set DESK_SHARED_HOME=1 may share
// a home; the first keeps the run files. One without it is still refused.
func TestSharedHomeOptIn(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	_, url, _ := startServe(t, home, sharedHomeEnv+"=1")
	_, url2, _ := startServe(t, home, sharedHomeEnv+"=1")
	if code, _ := get(t, url2+"/healthz", ""); code != 200 || url2 == url {
		t.Fatalf("second shared server at %s: healthz %d", url2, code)
	}
	if u, _ := os.ReadFile(filepath.Join(home, urlFileName)); strings.TrimSpace(string(u)) != url {
		t.Fatalf("url file %q; the first server is at %s", u, url)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	lone := exec.CommandContext(ctx, os.Args[0], "serve", "--addr", "127.0.0.1:0")
	lone.Env = cleanEnv("DESK_HOME=" + home)
	b, _ := lone.CombinedOutput()
	if ctx.Err() != nil || lone.ProcessState.ExitCode() != exitConflict || !strings.Contains(string(b), sharedHomeEnv) {
		t.Fatalf("an unshared serve beside shared ones = %d %s", lone.ProcessState.ExitCode(), b)
	}
}
