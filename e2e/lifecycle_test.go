package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestStartInOwnTerminal: acceptance 1 — background start works, reports
// success only once the server answers, and status/stop follow it.
func TestStartInOwnTerminal(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	env := cleanEnv("DESK_HOME=" + home)
	out, code := run(t, env, "start", "--addr", "127.0.0.1:0")
	if code != 0 || !strings.Contains(out, "desk started (pid") {
		t.Fatalf("start = %d %s", code, out)
	}
	st := readRunState(home)
	if st.State != "running" || !healthy(st.URL) {
		t.Fatalf("after start: %+v", st)
	}
	if _, err := os.Stat(filepath.Join(home, logFileName)); err != nil {
		t.Fatalf("no log file: %v", err)
	}
	if out, code := run(t, env, "status"); code != statusRunning || !strings.Contains(out, "running") {
		t.Fatalf("status = %d %s", code, out)
	}
	if out, code := run(t, env, "start", "--addr", "127.0.0.1:0"); code != exitUsage || !strings.Contains(out, "already running") {
		t.Fatalf("second start = %d %s", code, out)
	}
	if out, code := run(t, env, "stop"); code != 0 || !strings.Contains(out, "desk stopped") {
		t.Fatalf("stop = %d %s", code, out)
	}
	if alive(st.PID) {
		t.Fatal("server still alive after stop")
	}
	if out, code := run(t, env, "status"); code != statusStopped || !strings.Contains(out, "stopped") {
		t.Fatalf("status after stop = %d %s", code, out)
	}
}

// TestStartRefusedInManagedEnvironment: acceptance 2 and 3 — each marker
// makes background start fail at once with a message that says to use
// one's own terminal, and nothing is started.
func TestStartRefusedInManagedEnvironment(t *testing.T) {
	t.Parallel()
	for _, marker := range []string{"CODEX_THREAD_ID=thread-123", "CODEX_CI=1", "CLAUDECODE=1", "DESK_MANAGED_ENV=1"} {
		home := filepath.Join(t.TempDir(), "home")
		reap(t, home)
		began := time.Now()
		out, code := run(t, cleanEnv("DESK_HOME="+home, marker), "start", "--addr", "127.0.0.1:0")
		if code != exitRefused {
			t.Fatalf("%s: start = %d %s", marker, code, out)
		}
		name, _, _ := strings.Cut(marker, "=")
		for _, want := range []string{"your own terminal", "desk serve", name, "DESK_FOREGROUND=1"} {
			if !strings.Contains(out, want) {
				t.Fatalf("%s: message lacks %q: %s", marker, want, out)
			}
		}
		if time.Since(began) > 5*time.Second {
			t.Fatalf("%s: refusal took %v; it must be immediate", marker, time.Since(began))
		}
		if _, err := os.Stat(filepath.Join(home, pidFileName)); !os.IsNotExist(err) {
			t.Fatalf("%s: a pid file exists after the refusal", marker)
		}
	}
}

// TestForegroundStartInManagedEnvironment: acceptance 4 — DESK_FOREGROUND=1
// runs the server in the foreground even where background start is refused.
func TestForegroundStartInManagedEnvironment(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	fg := startForeground(t, cleanEnv("DESK_HOME="+home, "CODEX_THREAD_ID=t-1", "DESK_FOREGROUND=1"), "start", "--addr", "127.0.0.1:0")
	fg.running(t, home)
	fg.cmd.Process.Signal(syscall.SIGTERM)
	if err := fg.wait(t); err != nil {
		t.Fatalf("foreground exit: %v\n%s", err, fg.out.String())
	}
	if _, err := os.Stat(filepath.Join(home, pidFileName)); !os.IsNotExist(err) {
		t.Fatal("pid file left after a clean foreground stop")
	}
}

// TestRestartRefusedBeforeStopping: restart inherits the protection, and
// refuses before it stops the running server.
func TestRestartRefusedBeforeStopping(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	if out, code := run(t, cleanEnv("DESK_HOME="+home), "start", "--addr", "127.0.0.1:0"); code != 0 {
		t.Fatalf("start = %d %s", code, out)
	}
	before := readRunState(home)
	out, code := run(t, cleanEnv("DESK_HOME="+home, "CLAUDECODE=1"), "restart", "--addr", "127.0.0.1:0")
	if code != exitRefused || !strings.Contains(out, "your own terminal") {
		t.Fatalf("restart in a managed environment = %d %s", code, out)
	}
	if after := readRunState(home); after.State != "running" || after.PID != before.PID {
		t.Fatalf("refused restart touched the server: %+v → %+v", before, after)
	}
	// In one's own terminal restart gives a new, answering server.
	if out, code := run(t, cleanEnv("DESK_HOME="+home), "restart", "--addr", "127.0.0.1:0"); code != 0 {
		t.Fatalf("restart = %d %s", code, out)
	}
	after := readRunState(home)
	if after.State != "running" || after.PID == before.PID || alive(before.PID) {
		t.Fatalf("restart: %+v (old pid %d alive=%v)", after, before.PID, alive(before.PID))
	}
	run(t, cleanEnv("DESK_HOME="+home), "stop")
}

// TestStatusStale: a server that died without cleaning up is reported as
// stale, and stop clears it.
func TestStatusStale(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	env := cleanEnv("DESK_HOME=" + home)
	if out, code := run(t, env, "start", "--addr", "127.0.0.1:0"); code != 0 {
		t.Fatalf("start = %d %s", code, out)
	}
	st := readRunState(home)
	syscall.Kill(st.PID, syscall.SIGKILL)
	testwait.Until(t, 30*time.Second, func() bool { return !alive(st.PID) }, "the killed server to be gone")
	if out, code := run(t, env, "status"); code != statusStale || !strings.Contains(out, "stale") {
		t.Fatalf("status = %d %s", code, out)
	}
	if out, code := run(t, env, "stop"); code != 0 || !strings.Contains(out, "stale") {
		t.Fatalf("stop = %d %s", code, out)
	}
	if out, code := run(t, env, "status"); code != statusStopped {
		t.Fatalf("status after clearing = %d %s", code, out)
	}
}

// TestStartReportsFailure: a server that cannot start is not reported as
// started; the output carries the log's explanation.
func TestStartReportsFailure(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	out, code := run(t, cleanEnv("DESK_HOME="+home), "start", "--addr", "256.0.0.1:99999")
	if code == 0 || strings.Contains(out, "desk started") || !strings.Contains(out, "listen") {
		t.Fatalf("bad address start = %d %s", code, out)
	}
}

// desk restart brings back the server as it ran: a desk started with its
// address in DESK_ADDR and its store in DESK_POSTGRES (and a limit in
// DESK_MAX_ARTIFACT_BYTES) comes back on the same address, the same
// Postgres store and the same limit when restarted from a shell that has
// none of them (issue 28 item 4); desk status shows the configuration
// without the DSN's password; a flag given to restart wins.
func TestRestartKeepsTheServersConfiguration(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	addr := freeAddr(t)
	tok := "restart-config-admin-token-0123456789"
	started := cleanEnv("DESK_HOME="+home, "DESK_ADDR="+addr, "DESK_POSTGRES="+dsn, "DESK_MAX_ARTIFACT_BYTES=4096", "DESK_ADMIN_TOKEN="+tok)
	if out, code := run(t, started, "start"); code != 0 {
		t.Fatalf("start = %d %s", code, out)
	}
	st := readRunState(home)
	if st.URL != "http://"+addr {
		t.Fatalf("started at %s, want %s", st.URL, addr)
	}
	admin := api{t: t, url: st.URL, token: tok}
	admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "kept"}, nil)

	// Another shell: no address, no store, no limit in its environment.
	plain := cleanEnv("DESK_HOME="+home, "DESK_ADMIN_TOKEN="+tok, "DESK_POSTGRES=", "DESK_MAX_ARTIFACT_BYTES=")
	out, code := run(t, plain, "status")
	if code != statusRunning || !strings.Contains(out, "store: postgres") || !strings.Contains(out, "--max-artifact-bytes=4096") {
		t.Fatalf("status = %d %s", code, out)
	}
	if out, code := run(t, plain, "restart"); code != 0 {
		t.Fatalf("restart = %d %s", code, out)
	}
	after := readRunState(home)
	if after.State != "running" || after.PID == st.PID || after.URL != st.URL {
		t.Fatalf("after restart %+v, before %+v", after, st)
	}
	if _, body := get(t, after.URL+"/v1/workspaces", tok); !strings.Contains(body, `"kept"`) {
		t.Fatalf("the restarted server is not on the Postgres store: %s", body)
	}
	// The new server took the limit from the recorded flags (this shell
	// has none) and recorded it again.
	if out, _ := run(t, plain, "status"); !strings.Contains(out, "--max-artifact-bytes=4096") || strings.Contains(out, "DESK_") {
		t.Fatalf("status after restart: %s", out)
	}
	// A flag given to restart replaces the recorded one.
	addr2 := freeAddr(t)
	if out, code := run(t, plain, "restart", "--addr", addr2); code != 0 {
		t.Fatalf("restart --addr = %d %s", code, out)
	}
	if got := readRunState(home).URL; got != "http://"+addr2 {
		t.Fatalf("restart --addr %s came back at %s", addr2, got)
	}
	run(t, plain, "stop")
}
