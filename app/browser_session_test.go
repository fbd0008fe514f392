package app_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// browserClock is a clock the test moves by hand.
type browserClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *browserClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *browserClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// webClient is a browser without redirects followed, so each answer is seen.
type webClient struct {
	t *testing.T
	w *world
	c *http.Client
}

func newWebClient(t *testing.T, w *world) *webClient {
	jar, _ := cookiejar.New(nil)
	return &webClient{t: t, w: w, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *webClient) send(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.w.Server.URL+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

// cookie is the browser's cookie called name, or nil.
func (b *webClient) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.w.Server.URL)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signInForm signs in through the token form with next, and returns the
// answer to the form's POST.
func (b *webClient) signInForm(token, next string) *http.Response {
	b.t.Helper()
	_, page := b.send("GET", "/login", nil)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no login form:\n%s", page)
	}
	resp, _ := b.send("POST", "/login", url.Values{"csrf": {m[1]}, "token": {token}, "next": {next}})
	return resp
}

// signedIn reports whether the browser session id opens the web UI.
func signedIn(t *testing.T, w *world, id string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", w.Server.URL+"/w/"+w.ws.ID, nil)
	req.AddCookie(&http.Cookie{Name: "desk_session", Value: id})
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == 200:
		return true
	case resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/login?next="):
		return false
	}
	t.Fatalf("page with a browser session = %d %s", resp.StatusCode, resp.Header.Get("Location"))
	return false
}

// TestBrowserSessionIsNoToken is the acceptance of "browser sessions are
// not tokens": after a sign-in by login link or by token, the cookie holds
// a browser session's id that is no bearer token, opens the web UI only,
// and stops working on logout (in every browser holding it), on
// revocation of all sessions, after 12 idle hours and after 24 hours; the
// old token cookie is no longer accepted; and a hostile next never leaves
// desk.
func TestBrowserSessionIsNoToken(t *testing.T) {
	apptest.Parallel(t)
	clock := &browserClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	w := newWorldOn(t, app.Config{BrowserSessionClock: clock.Now})
	var actor struct {
		Token string `json:"token"`
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &actor)
	tokens := []string{w.Token, actor.Token}

	// notAToken checks a session id against every token and the API.
	notAToken := func(what, id string) {
		t.Helper()
		for _, tok := range tokens {
			if id == tok || strings.Contains(id, tok) || strings.Contains(tok, id) {
				t.Fatalf("%s: the cookie holds a token", what)
			}
		}
		if r := w.Req("GET", "/v1/workspaces", id, nil); r.Status != http.StatusUnauthorized {
			t.Fatalf("%s: the cookie's value as a bearer token = %d, want 401", what, r.Status)
		}
		// Nor does the cookie open the API (it wants the bearer header).
		if r := w.Req("GET", "/v1/workspaces", "", nil, "Cookie", "desk_session="+id); r.Status != http.StatusUnauthorized {
			t.Fatalf("%s: the cookie opened the API: %d", what, r.Status)
		}
		if !signedIn(t, w, id) {
			t.Fatalf("%s: the session does not open the web UI", what)
		}
	}

	// 1. A login link (the admin).
	var l desk.LoginLink
	w.Must(201, "POST", "/v1/admin/login-links", nil, &l)
	byLink := newWebClient(t, w)
	resp, _ := byLink.send("GET", strings.TrimPrefix(l.URL, w.Server.URL), nil, "Sec-Fetch-Site", "none")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login link = %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	var set *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "desk_session" {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteStrictMode || set.Path != "/" || set.Secure ||
		set.MaxAge <= 0 || set.MaxAge > int(desk.BrowserSessionMax/time.Second) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, at most %v", set, desk.BrowserSessionMax)
	}
	adminLink := set.Value
	notAToken("login link", adminLink)

	// 2. The token form, with an actor's token and with the admin's.
	byForm := newWebClient(t, w)
	if resp := byForm.signInForm(actor.Token, "/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in = %d", resp.StatusCode)
	}
	actorForm := byForm.cookie("desk_session").Value
	notAToken("actor token form", actorForm)
	adminForm := newWebClient(t, w)
	adminForm.signInForm(w.Token, "/")
	notAToken("admin token form", adminForm.cookie("desk_session").Value)
	if actorForm == adminLink || adminForm.cookie("desk_session").Value == adminLink {
		t.Fatal("two sign-ins share one browser session")
	}

	// 3. The old cookie, holding the token itself, opens nothing and is
	// cleared.
	old, _ := newWebClient(t, w).send("GET", "/w/"+w.ws.ID, nil, "Cookie", "desk_token="+w.Token)
	if old.StatusCode != http.StatusSeeOther || !strings.HasPrefix(old.Header.Get("Location"), "/login") {
		t.Fatalf("the old token cookie = %d %s, want the sign-in form", old.StatusCode, old.Header.Get("Location"))
	}
	if sc := strings.Join(old.Header.Values("Set-Cookie"), "\n"); !regexp.MustCompile(`desk_token=;.*Max-Age=0`).MatchString(sc) {
		t.Fatalf("the old token cookie was not cleared: %q", sc)
	}

	// 4. Logout ends the session on the server: a copy of the cookie in
	// another browser stops working too.
	_, page := adminForm.send("GET", "/w/"+w.ws.ID, nil)
	csrf := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no csrf token on the page")
	}
	copied := adminForm.cookie("desk_session").Value
	resp, _ = adminForm.send("POST", "/logout", url.Values{"csrf": {csrf[1]}}, "Origin", w.Server.URL)
	if resp.StatusCode != http.StatusSeeOther || adminForm.cookie("desk_session") != nil {
		t.Fatalf("logout = %d, cookie %v", resp.StatusCode, adminForm.cookie("desk_session"))
	}
	if signedIn(t, w, copied) {
		t.Fatal("a copy of the cookie works after logout")
	}
	if !signedIn(t, w, adminLink) || !signedIn(t, w, actorForm) {
		t.Fatal("logout ended other browser sessions")
	}

	// 5. Revoking all: an actor ends its own only; the admin every one.
	var rv desk.BrowserSessionsRevoked
	if r := w.Req("DELETE", "/v1/browser-sessions", actor.Token, nil); r.Status != 200 {
		t.Fatalf("actor revoke = %d %s", r.Status, r.Body)
	} else {
		r.Decode(t, &rv)
	}
	if rv.Revoked != 1 || signedIn(t, w, actorForm) || !signedIn(t, w, adminLink) {
		t.Fatalf("an actor's revocation ended %d sessions; its own must end, the admin's stay", rv.Revoked)
	}
	second := newWebClient(t, w)
	second.signInForm(actor.Token, "/")
	w.Must(200, "DELETE", "/v1/browser-sessions", nil, &rv)
	if rv.Revoked != 2 || signedIn(t, w, adminLink) || signedIn(t, w, second.cookie("desk_session").Value) {
		t.Fatalf("the admin's revocation ended %d sessions, want 2, all of them", rv.Revoked)
	}
	if r := w.Req("DELETE", "/v1/browser-sessions", "", nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("revoke without a token = %d", r.Status)
	}

	// 6. Idle expiry: 12 hours without a request end it; use keeps it
	// alive, but never past 24 hours after sign-in.
	idle := newWebClient(t, w)
	idle.signInForm(w.Token, "/")
	idleID := idle.cookie("desk_session").Value
	clock.Advance(desk.BrowserSessionIdle - time.Minute)
	if !signedIn(t, w, idleID) {
		t.Fatal("a session used within 12 hours ended")
	}
	clock.Advance(desk.BrowserSessionIdle - time.Minute) // 11:59 after the last use
	if !signedIn(t, w, idleID) {
		t.Fatal("a request did not keep the session alive")
	}
	clock.Advance(desk.BrowserSessionIdle)
	if signedIn(t, w, idleID) {
		t.Fatal("a session idle for 12 hours still works")
	}
	long := newWebClient(t, w)
	long.signInForm(w.Token, "/")
	longID := long.cookie("desk_session").Value
	for range 2 {
		clock.Advance(11 * time.Hour)
		if !signedIn(t, w, longID) {
			t.Fatal("a session in use ended before 24 hours")
		}
	}
	clock.Advance(2 * time.Hour) // 24 hours after sign-in, used an hour ago
	if signedIn(t, w, longID) {
		t.Fatal("a session in use still works 24 hours after sign-in")
	}

	// 7. A hostile next goes to /, after a sign-in and on the form.
	for _, next := range []string{"/%09/evil.example", "//evil.example", "/\\evil.example", "/%2F%2Fevil.example",
		"\t/evil.example", "https://evil.example", "/%5C/evil.example", "/%252F%252Fevil.example", "/a/../\\evil.example"} {
		b := newWebClient(t, w)
		resp := b.signInForm(w.Token, next)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
			t.Errorf("next %q: %d to %q, want 303 to /", next, resp.StatusCode, resp.Header.Get("Location"))
		}
		_, form := b.send("GET", "/login?next="+url.QueryEscape(next), nil)
		if !strings.Contains(form, `name="next" value="/"`) {
			t.Errorf("next %q reached the form", next)
		}
	}
	// A page of desk survives the round trip.
	b := newWebClient(t, w)
	if resp := b.signInForm(w.Token, "/w/"+w.ws.ID+"?x=1#f"); resp.Header.Get("Location") != "/w/"+w.ws.ID+"?x=1#f" {
		t.Fatalf("a desk page as next: %q", resp.Header.Get("Location"))
	}
}
