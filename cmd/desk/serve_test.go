package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets tests run this test binary as the desk binary: with
// DESK_TEST_AS_MAIN=1 it behaves exactly like `desk`.
func TestMain(m *testing.M) {
	if os.Getenv("DESK_TEST_AS_MAIN") == "1" {
		os.Args = append([]string{"desk"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// deskProcess runs the desk command line as a child process.
func deskProcess(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "DESK_TEST_AS_MAIN=1")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

var servingURL = regexp.MustCompile(`url=(http://[0-9.:]+)`)

// startServe starts `desk serve` on a free port and returns its URL and a
// channel that yields every stderr line after the start.
func startServe(t *testing.T, home string, env ...string) (*exec.Cmd, string, <-chan string) {
	t.Helper()
	cmd := deskProcess(t, append(env, "DESK_HOME="+home), "serve", "--addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := readLines(stderr)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("desk serve exited before serving")
			}
			if m := servingURL.FindStringSubmatch(l); m != nil {
				return cmd, m[1], lines
			}
		case <-deadline:
			t.Fatal("desk serve did not start")
		}
	}
}

// readLines sends each line of a child's output on the channel it
// returns, which closes when the output ends.
func readLines(r io.Reader) <-chan string {
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeLifecycle starts the real command, checks health without a
// token, the generated admin token file, and a clean exit on SIGTERM and
// SIGINT, and that the token is reused by the next start.
func TestServeLifecycle(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	for i, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		cmd, url, lines := startServe(t, home)
		if code, body := get(t, url+"/healthz", ""); code != 200 || !strings.Contains(body, `"ok"`) {
			t.Fatalf("healthz = %d %s", code, body)
		}
		if code, _ := get(t, url+"/v1/workspaces", ""); code != 401 {
			t.Fatalf("no token = %d", code)
		}
		tok, err := os.ReadFile(filepath.Join(home, "admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(filepath.Join(home, "admin.token")); st.Mode().Perm() != 0o600 {
			t.Fatalf("admin.token mode %v", st.Mode().Perm())
		}
		if code, _ := get(t, url+"/v1/workspaces", strings.TrimSpace(string(tok))); code != 200 {
			t.Fatalf("start %d: admin token from the file = %d", i, code)
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("exit after %v: %v", sig, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("desk did not stop on %v", sig)
		}
		stopped := false
		for l := range lines {
			stopped = stopped || strings.Contains(l, "desk stopped")
		}
		if !stopped {
			t.Fatalf("no 'desk stopped' line after %v", sig)
		}
	}
}

// TestServeAdminTokenFromEnv: DESK_ADMIN_TOKEN wins and no file is written.
func TestServeAdminTokenFromEnv(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	_, url, _ := startServe(t, home, "DESK_ADMIN_TOKEN=from-the-environment")
	if code, _ := get(t, url+"/v1/workspaces", "from-the-environment"); code != 200 {
		t.Fatalf("env token = %d", code)
	}
	if _, err := os.Stat(filepath.Join(home, "admin.token")); !os.IsNotExist(err) {
		t.Fatalf("admin.token written although DESK_ADMIN_TOKEN is set: %v", err)
	}
}

func TestServeRefusesBadPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := deskProcess(t, []string{"DESK_HOME=" + t.TempDir()}, "serve", "--addr", "127.0.0.1:0",
		"--postgres", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(os.Environ(), "DESK_TEST_AS_MAIN=1", "DESK_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "postgres") {
		t.Fatalf("bad DSN: err=%v out=%s", err, out)
	}
}

func TestAgentOptionsFromEnv(t *testing.T) {
	t.Setenv("DESK_MAX_STEPS", "7")
	t.Setenv("DESK_SEARCH_URL", "http://127.0.0.1:8888")
	t.Setenv("DESK_INPUT_WAIT", "90s")
	o, err := agentOptions()
	if err != nil || o.MaxSteps != 7 || o.Search == nil || o.InputWait != 90*time.Second {
		t.Fatalf("agentOptions = %+v, %v", o, err)
	}
	for env, bad := range map[string]string{"DESK_MAX_STEPS": "0", "DESK_SEARCH_URL": "ftp://x", "DESK_INPUT_WAIT": "soon"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("DESK_MAX_STEPS", "")
			t.Setenv("DESK_SEARCH_URL", "")
			t.Setenv("DESK_INPUT_WAIT", "")
			t.Setenv(env, bad)
			if _, err := agentOptions(); err == nil || !strings.Contains(err.Error(), env) {
				t.Fatalf("%s=%s: err = %v, want one naming %s", env, bad, err, env)
			}
		})
	}
}
