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

// TestServeLifecycle starts the real command, checks health without a
// token, the generated admin token file, and a clean exit on SIGTERM and
// SIGINT, and that the token is reused by the next start.
func TestServeLifecycle(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	for i, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		d := startDesk(t, deskOpts{Home: home})
		if code, body := get(t, d.URL+"/healthz", ""); code != 200 || !strings.Contains(body, `"ok"`) {
			t.Fatalf("healthz = %d %s", code, body)
		}
		if code, _ := get(t, d.URL+"/v1/workspaces", ""); code != 401 {
			t.Fatalf("no token = %d", code)
		}
		tok, err := os.ReadFile(filepath.Join(home, "admin.token"))
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(filepath.Join(home, "admin.token")); st.Mode().Perm() != 0o600 {
			t.Fatalf("admin.token mode %v", st.Mode().Perm())
		}
		if code, _ := get(t, d.URL+"/v1/workspaces", strings.TrimSpace(string(tok))); code != 200 {
			t.Fatalf("start %d: admin token from the file = %d", i, code)
		}
		if err := d.Exit(sig); err != nil {
			t.Fatalf("exit after %v: %v", sig, err)
		}
		if !strings.Contains(d.Log(), "desk stopped") {
			t.Fatalf("no 'desk stopped' line after %v", sig)
		}
	}
}

// TestServeAdminTokenFromEnv: DESK_ADMIN_TOKEN wins and no file is written.
func TestServeAdminTokenFromEnv(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{Token: "from-the-environment"})
	if code, _ := get(t, d.URL+"/v1/workspaces", "from-the-environment"); code != 200 {
		t.Fatalf("env token = %d", code)
	}
	if _, err := os.Stat(filepath.Join(d.Home, "admin.token")); !os.IsNotExist(err) {
		t.Fatalf("admin.token written although DESK_ADMIN_TOKEN is set: %v", err)
	}
}

func TestServeRefusesBadPostgres(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := deskCmd(ctx, cleanEnv("DESK_HOME="+t.TempDir()), "serve", "--addr", "127.0.0.1:0",
		"--postgres", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "postgres") {
		t.Fatalf("bad DSN: err=%v out=%s", err, out)
	}
}
