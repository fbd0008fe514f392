package e2e

import (
	"context"
	"os"
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
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	fg := startForeground(t, cleanEnv("DESK_HOME="+home, "DESK_FOREGROUND=1", "DESK_ADDR=127.0.0.1:0"), "start")
	fg.running(t, home)
	fg.cmd.Process.Signal(syscall.SIGTERM)
	if err := fg.wait(t); err != nil {
		t.Fatalf("foreground exit: %v\n%s", err, fg.out.String())
	}
}

// TestSecondServeRefused: a second desk serve on a DESK_HOME whose server
// runs is refused at once, leaves the running server's pid and url files
// as they were, and desk start says "already running".
func TestSecondServeRefused(t *testing.T) {
	t.Parallel()
	first := startDesk(t, deskOpts{})
	home, url := first.Home, first.URL
	pid, _ := os.ReadFile(filepath.Join(home, pidFileName))
	u, _ := os.ReadFile(filepath.Join(home, urlFileName))
	if strings.TrimSpace(string(u)) != url {
		t.Fatalf("url file %q, server at %s", u, url)
	}
	// Bounded: before the lock, a second server just served on.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	second := deskCmd(ctx, cleanEnv("DESK_HOME="+home), "serve", "--addr", "127.0.0.1:0")
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
	first.Restart(syscall.SIGTERM)
}

// TestCLIFindsServerInHome: with no --server, DESK_SERVER or DESK_ADDR the
// CLI uses the address the running server wrote to DESK_HOME/desk.url.
func TestCLIFindsServerInHome(t *testing.T) {
	t.Parallel()
	home := startDesk(t, deskOpts{}).Home
	out, code := run(t, cleanEnv("DESK_HOME="+home), "--json", "workspace", "list")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("workspace list with the address from desk.url = %d %s", code, out)
	}
	// The flag still wins over the file.
	if out, code := run(t, cleanEnv("DESK_HOME="+home), "--server", "127.0.0.1:1", "workspace", "list"); code != exitUnavailable {
		t.Fatalf("--server over desk.url = %d %s", code, out)
	}
}

// TestSharedHomeOptIn: processes that all set DESK_SHARED_HOME=1 may share
// a home; the first keeps the run files. One without it is still refused.
func TestSharedHomeOptIn(t *testing.T) {
	t.Parallel()
	first := startDesk(t, deskOpts{Env: []string{sharedHomeEnv + "=1"}})
	home, url, url2 := first.Home, first.URL, first.Again().URL
	if code, _ := get(t, url2+"/healthz", ""); code != 200 || url2 == url {
		t.Fatalf("second shared server at %s: healthz %d", url2, code)
	}
	if u, _ := os.ReadFile(filepath.Join(home, urlFileName)); strings.TrimSpace(string(u)) != url {
		t.Fatalf("url file %q; the first server is at %s", u, url)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	lone := deskCmd(ctx, cleanEnv("DESK_HOME="+home), "serve", "--addr", "127.0.0.1:0")
	b, _ := lone.CombinedOutput()
	if ctx.Err() != nil || lone.ProcessState.ExitCode() != exitConflict || !strings.Contains(string(b), sharedHomeEnv) {
		t.Fatalf("an unshared serve beside shared ones = %d %s", lone.ProcessState.ExitCode(), b)
	}
}
