package e2e

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
)

var loginLinkRE = regexp.MustCompile(`(http://[0-9.:]+/login\?code=(desklink_[a-z2-7]+))`)

// signIn follows a login link as a browser does and returns the session
// cookie it answered with a redirect to / without the code, or nil.
func signIn(t *testing.T, link string) *http.Cookie {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "desk_session" && ck.Value != "" && resp.StatusCode == http.StatusSeeOther && resp.Header.Get("Location") == "/" {
			return ck
		}
	}
	return nil
}

// webSignIn signs in to the web UI at base with token through the sign-in
// form, as a person does, and returns the browser session's cookie.
func webSignIn(t *testing.T, base, token string) *http.Cookie {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no sign-in form at %s/login", base)
	}
	resp, err = c.PostForm(base+"/login", url.Values{"csrf": {string(m[1])}, "token": {token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "desk_session" && ck.Value != "" {
			return ck
		}
	}
	t.Fatalf("sign-in = %d without a session cookie", resp.StatusCode)
	return nil
}

// opensUI reports whether a browser session cookie opens the web UI at
// base (a page, not the sign-in form).
func opensUI(t *testing.T, base string, ck *http.Cookie) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/logs", nil)
	req.AddCookie(ck)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestServePrintsWhereToSignIn runs the real desk serve: its startup
// output names the UI address, a one-time login link that signs a browser
// in once, and the admin token's file; desk login-link asks the running
// server for a fresh link.
func TestServePrintsWhereToSignIn(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	home := d.Home
	var got []string
	// The three lines follow the log line startDesk waits for.
	testwait.Until(t, 30*time.Second, func() bool {
		got = strings.Split(strings.TrimSuffix(d.Stdout(), "\n"), "\n")
		return len(got) >= 3
	}, "desk serve's three startup lines")
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
	first := signIn(t, m[1])
	if first == nil {
		t.Fatal("the startup link did not sign a browser in")
	}
	if signIn(t, m[1]) != nil {
		t.Fatal("the startup link worked twice")
	}
	if first.Value == strings.TrimSpace(string(tok)) || !opensUI(t, addr[1], first) {
		t.Fatal("the link's session cookie holds the token or opens nothing")
	}

	env := cleanEnv("DESK_HOME="+home, "DESK_SERVER="+addr[1])
	out, code := run(t, env, "login-link")
	fresh := loginLinkRE.FindStringSubmatch(out)
	if code != 0 || fresh == nil || fresh[2] == m[2] {
		t.Fatalf("desk login-link = %d %q: want a fresh link", code, out)
	}
	second := signIn(t, fresh[1])
	if second == nil {
		t.Fatal("the link of desk login-link did not sign a browser in")
	}
	byForm := webSignIn(t, addr[1], strings.TrimSpace(string(tok)))

	// desk logout-all signs every browser out, on the server.
	if !opensUI(t, addr[1], second) || !opensUI(t, addr[1], byForm) {
		t.Fatal("a fresh browser session does not open the UI")
	}
	out, code = run(t, env, "logout-all")
	if code != 0 || !strings.Contains(out, "signed out 3 browser session(s)") {
		t.Fatalf("desk logout-all = %d %q: want 3 sessions signed out", code, out)
	}
	for _, ck := range []*http.Cookie{first, second, byForm} {
		if opensUI(t, addr[1], ck) {
			t.Fatal("a browser session works after desk logout-all")
		}
	}
	if out, code := run(t, cleanEnv("DESK_HOME="+home, "DESK_SERVER="+addr[1], "DESK_TOKEN=desk_wrong"), "login-link"); code != exitAuth {
		t.Fatalf("desk login-link with a wrong token = %d %q, want %d", code, out, exitAuth)
	}
}

// TestStartKeepsTheLinkOutOfDeskLog: desk start sends the server's output
// to desk.log, so the server prints no link there; the starting terminal
// gets a link of its own, which works.
func TestStartKeepsTheLinkOutOfDeskLog(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	reap(t, home)
	env := cleanEnv("DESK_HOME=" + home)
	out, code := run(t, env, "start", "--addr", "127.0.0.1:0")
	m := loginLinkRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("start = %d %q: want a login link", code, out)
	}
	defer run(t, env, "stop")
	if signIn(t, m[1]) == nil {
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
