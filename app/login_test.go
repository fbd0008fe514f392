package app_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// syncBuffer is a log sink the server writes from its own goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoginLinkSignsABrowserInOnce follows a login link as a browser does:
// the code becomes a browser session as the token form makes, the redirect
// leaves the code behind, and the code works once, only before it expires,
// and never reaches a log.
func TestLoginLinkSignsABrowserInOnce(t *testing.T) {
	apptest.Parallel(t)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	logs := &syncBuffer{}
	w := newWorldOn(t, app.Config{LoginLinkClock: clock,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})

	issue := func() desk.LoginLink {
		t.Helper()
		var l desk.LoginLink
		w.Must(201, "POST", "/v1/admin/login-links", nil, &l)
		if !strings.HasPrefix(l.URL, w.Server.URL+"/login?code=") || !l.ExpiresAt.Equal(now.Add(10*time.Minute)) {
			t.Fatalf("link %+v: want %s/login?code=… expiring at %v", l, w.Server.URL, now.Add(10*time.Minute))
		}
		if strings.Contains(l.URL, w.Token) {
			t.Fatal("the link carries the admin token")
		}
		return l
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	visit := func(u string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Accept", "text/html")
		req.Header.Set("Sec-Fetch-Site", "none") // typed or clicked from a terminal
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// Only the admin issues links.
	var actor struct {
		Token string `json:"token"`
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bot", "kind": "agent"}, &actor)
	if r := w.Req("POST", "/v1/admin/login-links", actor.Token, nil); r.Status != 403 {
		t.Fatalf("an actor token issued a link: %d %s", r.Status, r.Body)
	}

	l := issue()
	code := l.URL[strings.Index(l.URL, "code=")+len("code="):]
	resp, _ := visit(l.URL)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("visit: %d Location %q, want 303 to /", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "desk_session" {
			session = c
		}
	}
	if session == nil || session.Value == "" || strings.Contains(session.Value, w.Token) || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/" || session.MaxAge <= 0 {
		t.Fatalf("session cookie %+v: want a browser session's id, never the token (HttpOnly, SameSite=Strict, Path=/)", session)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", resp.Header.Get("Cache-Control"))
	}
	// Signed in: / opens the workspace instead of sending to the form.
	home, _ := visit(w.Server.URL + "/")
	if loc := home.Header.Get("Location"); home.StatusCode != http.StatusSeeOther || loc != "/w/"+w.ws.ID {
		t.Fatalf("after the link, / answered %d to %q, want the workspace", home.StatusCode, loc)
	}

	// The second visit, a fresh browser: used.
	jar2, _ := cookiejar.New(nil)
	browser.Jar = jar2
	refused := func(what, u string) {
		t.Helper()
		resp, body := visit(u)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "already used, has expired or is unknown") || !strings.Contains(body, `name="token"`) {
			t.Fatalf("%s: %d, want 401 with the message and the sign-in form:\n%s", what, resp.StatusCode, body)
		}
		for _, c := range resp.Cookies() {
			if c.Name == "desk_session" {
				t.Fatalf("%s set the session cookie", what)
			}
		}
	}
	refused("a used code", l.URL)

	expired := issue()
	advance(10*time.Minute + time.Second)
	refused("an expired code", expired.URL)
	refused("an unknown code", w.Server.URL+"/login?code="+url.QueryEscape("desklink_"+strings.Repeat("a", 52)))
	refused("an empty code", w.Server.URL+"/login?code=")

	// A fresh link still works after the others failed.
	resp, _ = visit(issue().URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("a fresh link after refusals: %d", resp.StatusCode)
	}

	// Nothing logged a code, while the sign-in and the refusals were logged.
	if err := w.App.Logs.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored := string(w.Admin("GET", "/v1/logs?limit=1000", nil).Body)
	for name, text := range map[string]string{"the app log": stored, "the server's log output": logs.String()} {
		for _, c := range []string{code, expired.URL[strings.Index(expired.URL, "code=")+5:]} {
			if strings.Contains(text, c) {
				t.Fatalf("%s holds a login code:\n%s", name, text)
			}
		}
		if !strings.Contains(text, "signed in with a login link") {
			t.Fatalf("%s lacks the sign-in:\n%s", name, text)
		}
	}
	if !strings.Contains(logs.String(), "web login link") {
		t.Fatalf("the refused link was not noted:\n%s", logs.String())
	}
}
