package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var loginLinkRE = regexp.MustCompile(`(http://[0-9.:]+/login\?code=(desklink_[a-z2-7]+))`)

// signIn follows a login link as a browser does and reports whether it
// answered the session cookie and a redirect to / without the code.
func signIn(t *testing.T, link string) bool {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "desk_token" && ck.Value != "" {
			return resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") == "/"
		}
	}
	return false
}

// TestServePrintsWhereToSignIn runs the real desk serve: its startup
// output names the UI address, a one-time login link that signs a browser
// in once, and the admin token's file; desk login-link asks the running
// server for a fresh link.
func TestServePrintsWhereToSignIn(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	cmd := exec.Command(os.Args[0], "serve", "--addr", "127.0.0.1:0")
	cmd.Env = cleanEnv("DESK_HOME=" + home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := readLines(stdout)
	var got []string
	deadline := time.After(60 * time.Second)
	for len(got) < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("desk serve ended its output after %q", got)
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("desk serve printed only %q", got)
		}
	}
	addr := regexp.MustCompile(`^desk is serving the web UI at (http://127\.0\.0\.1:[0-9]+)$`).FindStringSubmatch(got[0])
	if addr == nil {
		t.Fatalf("first line %q: want the UI address", got[0])
	}
	m := loginLinkRE.FindStringSubmatch(got[1])
	if !strings.HasPrefix(got[1], "sign in (one-time link") || m == nil || !strings.HasPrefix(m[1], addr[1]+"/login?code=") {
		t.Fatalf("second line %q: want the login link on %s", got[1], addr[1])
	}
	if want := "admin token: " + filepath.Join(home, "admin.token"); got[2] != want {
		t.Fatalf("third line %q, want %q", got[2], want)
	}
	tok, _ := os.ReadFile(filepath.Join(home, "admin.token"))
	if strings.Contains(strings.Join(got, "\n"), strings.TrimSpace(string(tok))) {
		t.Fatal("the startup output shows the admin token itself")
	}
	if !signIn(t, m[1]) {
		t.Fatal("the startup link did not sign a browser in")
	}
	if signIn(t, m[1]) {
		t.Fatal("the startup link worked twice")
	}

	env := cleanEnv("DESK_HOME="+home, "DESK_SERVER="+addr[1])
	out, code := run(t, env, "login-link")
	fresh := loginLinkRE.FindStringSubmatch(out)
	if code != 0 || fresh == nil || fresh[2] == m[2] {
		t.Fatalf("desk login-link = %d %q: want a fresh link", code, out)
	}
	if !signIn(t, fresh[1]) {
		t.Fatal("the link of desk login-link did not sign a browser in")
	}
	if out, code := run(t, cleanEnv("DESK_HOME="+home, "DESK_SERVER="+addr[1], "DESK_TOKEN=desk_wrong"), "login-link"); code != exitAuth {
		t.Fatalf("desk login-link with a wrong token = %d %q, want %d", code, out, exitAuth)
	}
}

// TestStartKeepsTheLinkOutOfDeskLog: desk start sends the server's output
// to desk.log, so the server prints no link there; the starting terminal
// gets a link of its own, which works.
func TestStartKeepsTheLinkOutOfDeskLog(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	env := cleanEnv("DESK_HOME=" + home)
	out, code := run(t, env, "start", "--addr", "127.0.0.1:0")
	m := loginLinkRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("start = %d %q: want a login link", code, out)
	}
	defer run(t, env, "stop")
	if !signIn(t, m[1]) {
		t.Fatal("desk start's link did not sign a browser in")
	}
	log, err := os.ReadFile(filepath.Join(home, logFileName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), m[2]) || strings.Contains(string(log), "desklink_") {
		t.Fatalf("desk.log holds a login code:\n%s", log)
	}
	if !strings.Contains(string(log), "desk is serving the web UI at") || !strings.Contains(string(log), "admin token: ") {
		t.Fatalf("desk.log lacks the address and the token path:\n%s", log)
	}
}
