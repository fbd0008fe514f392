package web_test

import (
	"context"
	"fmt"
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
	"github.com/desk-runtime/desk/sandbox"
)

// browser is an HTTP client with a cookie jar, signed in to the UI.
type browser struct {
	t    *testing.T
	e    *apptest.Env
	c    *http.Client
	csrf string
}

// signIn logs in through the real login form.
func signIn(t *testing.T, e *apptest.Env) *browser {
	t.Helper()
	return signInWith(t, e, e.Token)
}

// signInWith logs in with token (an actor's, say).
func signInWith(t *testing.T, e *apptest.Env, token string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, e: e, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
	body, resp := b.get("/login")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /login = %d", resp.StatusCode)
	}
	if !strings.Contains(body, "<code>desk login-link</code>") {
		t.Fatal("the login page does not mention desk login-link")
	}
	field := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if field == nil {
		t.Fatalf("login form has no csrf field:\n%s", body)
	}
	resp = b.do("POST", "/login", "application/x-www-form-urlencoded",
		url.Values{"csrf": {field[1]}, "token": {token}, "next": {"/"}}.Encode(), nil)
	if resp.StatusCode != 200 { // followed to the workspace or home page
		t.Fatalf("POST /login = %d", resp.StatusCode)
	}
	home, _ := b.get("/")
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(home)
	if m == nil {
		t.Fatalf("no csrf meta on the home page:\n%s", home)
	}
	b.csrf = m[1]
	return b
}

func (b *browser) do(method, path, ctype, body string, hdr map[string]string) *http.Response {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.e.Server.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func (b *browser) get(path string) (string, *http.Response) {
	b.t.Helper()
	resp := b.do("GET", path, "", "", nil)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out), resp
}

// post sends a form the way htmx does: with the CSRF header.
func (b *browser) post(path string, form url.Values) (string, *http.Response) {
	b.t.Helper()
	resp := b.do("POST", path, "application/x-www-form-urlencoded", form.Encode(),
		map[string]string{"X-CSRF-Token": b.csrf, "HX-Request": "true"})
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out), resp
}

type fixture struct {
	e  *apptest.Env
	ws desk.Workspace
}

func start(t *testing.T, cfg app.Config) *fixture {
	e := apptest.Start(t, cfg)
	f := &fixture{e: e}
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "web"}, &f.ws)
	return f
}

func (f *fixture) script(t *testing.T, title string, steps ...map[string]any) desk.Session {
	var x desk.Session
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/sessions", map[string]any{"title": title, "model": "script",
		"script": map[string]any{"steps": steps}}, &x)
	return x
}

// TestSecurityHeaders checks the page CSP (no inline or eval script), the
// framing refusals, and that a page answers only after sign-in.
func TestSecurityHeaders(t *testing.T) {
	f := start(t, app.Config{})
	resp, err := http.Get(f.e.Server.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("page CSP allows inline or eval: %q", csp)
	}
	if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("framing/sniffing headers: %v", resp.Header)
	}
	// Not signed in: pages redirect to the login form, htmx gets
	// HX-Redirect, and the API still answers JSON.
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = cl.Get(f.e.Server.URL + "/w/" + f.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
		t.Fatalf("unauthenticated page = %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	r := f.e.Req("GET", "/v1/nope", "", nil)
	if r.Status != 401 && r.Status != 404 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("unknown API path = %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	// The static assets are served with the same policy.
	resp, err = http.Get(f.e.Server.URL + "/static/vendor/htmx.min.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("htmx asset = %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}

// TestLoginCookie checks the cookie flags and that a wrong token or a
// login form from another site is refused.
func TestLoginCookie(t *testing.T) {
	f := start(t, app.Config{})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(f.e.Server.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	secret := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(body))[1]
	post := func(form url.Values, hdr ...string) *http.Response {
		req, _ := http.NewRequest("POST", f.e.Server.URL+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	// Wrong token: back to the form with an error, no cookie.
	resp = post(url.Values{"csrf": {secret}, "token": {"wrong"}})
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "error=1") {
		t.Fatalf("wrong token = %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Without the form's secret (a login CSRF from another site): refused.
	resp = post(url.Values{"csrf": {"forged"}, "token": {f.e.Token}})
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("forged login = %d, want 403", resp.StatusCode)
	}
	resp = post(url.Values{"csrf": {secret}, "token": {f.e.Token}}, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site login = %d, want 403", resp.StatusCode)
	}
	resp = post(url.Values{"csrf": {secret}, "token": {f.e.Token}, "next": {"//evil.example/"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login = %d to %q, want 303 to / (never off-site)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var tok *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "desk_session" {
			tok = ck
		}
	}
	if tok == nil {
		t.Fatal("no desk_session cookie set")
	}
	if !tok.HttpOnly || tok.SameSite != http.SameSiteStrictMode || tok.Path != "/" || tok.MaxAge <= 0 || tok.MaxAge > 24*3600 {
		t.Fatalf("cookie flags: %+v", tok)
	}
	if strings.Contains(tok.Value, f.e.Token) {
		t.Fatal("the session cookie holds the token")
	}
	// The cookie opens the UI but never the API (which wants the bearer
	// header), so a page of another site can use neither.
	resp, err = c.Get(f.e.Server.URL + "/w/" + f.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("signed-in page = %d", resp.StatusCode)
	}
	resp, err = c.Get(f.e.Server.URL + "/v1/workspaces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API with only the cookie = %d, want 401", resp.StatusCode)
	}
}

// TestCSRFRefused checks that every kind of state-changing request without
// the right CSRF token is refused and changes nothing.
func TestCSRFRefused(t *testing.T) {
	f := start(t, app.Config{})
	x := f.script(t, "keep me", map[string]any{"text": "hi"})
	b := signIn(t, f.e)
	form := url.Values{"pinned": {"true"}}
	cases := []struct {
		name string
		hdr  map[string]string
	}{
		{"no token", map[string]string{"HX-Request": "true"}},
		{"wrong token", map[string]string{"X-CSRF-Token": "nope", "HX-Request": "true"}},
		{"another site's token", map[string]string{"X-CSRF-Token": b.csrf + "x"}},
		{"cross-site fetch", map[string]string{"X-CSRF-Token": b.csrf, "Sec-Fetch-Site": "cross-site"}},
		{"foreign origin", map[string]string{"X-CSRF-Token": b.csrf, "Origin": "https://evil.example"}},
	}
	for _, c := range cases {
		resp := b.do("POST", "/s/"+x.ID+"/update", "application/x-www-form-urlencoded", form.Encode(), c.hdr)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", c.name, resp.StatusCode)
		}
	}
	for _, p := range []string{"/s/" + x.ID + "/send", "/s/" + x.ID + "/delete"} {
		resp := b.do("POST", p, "application/x-www-form-urlencoded", "text=hello", nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST %s without a token = %d, want 403", p, resp.StatusCode)
		}
	}
	resp := b.do("PUT", "/s/"+x.ID+"/draft", "application/x-www-form-urlencoded", "text=sneaky", nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("draft without a token = %d, want 403", resp.StatusCode)
	}
	var got desk.Session
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
	if got.Pinned {
		t.Fatal("a refused request pinned the session")
	}
	var d desk.Draft
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/draft", nil, &d)
	if d.Text != "" {
		t.Fatalf("a refused request saved the draft %q", d.Text)
	}
	var q struct{ Items []desk.QueueItem }
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue?all=true", nil, &q)
	if len(q.Items) != 0 {
		t.Fatalf("a refused send queued %d rows", len(q.Items))
	}
	// With the token, the same request works.
	_, resp = b.post("/s/"+x.ID+"/update", form)
	if resp.StatusCode != 200 {
		t.Fatalf("update with the token = %d", resp.StatusCode)
	}
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
	if !got.Pinned {
		t.Fatal("the update with the token did not pin")
	}
}

// TestEscaping checks that a <script> in a user message, an assistant's
// Markdown, a title and an artifact name is shown as text, never run.
func TestEscaping(t *testing.T) {
	f := start(t, app.Config{})
	evil := `<script>alert("x")</script><img src=x onerror=alert(1)>`
	x := f.script(t, evil, map[string]any{"text": "Here: " + evil + "\n\n[click](javascript:alert(1))\n\n| a | b |\n|---|---|\n| 1 | 2 |"})
	f.e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": evil}, nil)
	waitFor(t, "the turn to finish", func() bool {
		var ex struct{ Executions []desk.Execution }
		f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
		return len(ex.Executions) == 1 && ex.Executions[0].Terminal()
	})
	f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name="+url.QueryEscape("<b>bold</b>.md"), []byte("# hi <script>alert(2)</script>\n"), nil)
	b := signIn(t, f.e)
	page, resp := b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("session page = %d", resp.StatusCode)
	}
	if strings.Contains(page, "<script>alert") || regexp.MustCompile(`<img[^>]*onerror`).MatchString(page) || strings.Contains(page, `href="javascript:`) {
		t.Fatalf("model or user text reached the page unescaped:\n%s", page)
	}
	if !strings.Contains(page, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Fatalf("the user's text is not shown escaped")
	}
	if !strings.Contains(page, "<table>") {
		t.Fatal("GFM table not rendered")
	}
	// Every script the page loads is desk's own file.
	for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(m, `src="/static/`) {
			t.Fatalf("inline or foreign script tag %s", m)
		}
	}
	// The Markdown artifact preview drops the raw HTML.
	var arts struct{ Artifacts []desk.Artifact }
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts", nil, &arts)
	pv, _ := b.get("/s/" + x.ID + "/a/" + arts.Artifacts[0].ID)
	if strings.Contains(pv, "<script>alert(2)") || !strings.Contains(pv, "&lt;b&gt;bold") {
		t.Fatalf("preview not escaped:\n%s", pv)
	}
}

// TestArtifactRawIsolated checks that an HTML artifact is served with its
// own sandboxing CSP (an opaque origin even when opened directly) and that
// downloads are attachments.
func TestArtifactRawIsolated(t *testing.T) {
	f := start(t, app.Config{})
	x := f.script(t, "html", map[string]any{"text": "hi"})
	var a desk.Artifact
	f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=page.html", []byte("<!doctype html><html><body><script>document.title=document.cookie</script></body></html>"), &a)
	b := signIn(t, f.e)
	pv, _ := b.get("/s/" + x.ID + "/a/" + a.ID)
	frame := regexp.MustCompile(`<iframe[^>]*>`).FindString(pv)
	if !strings.Contains(frame, `sandbox="allow-scripts"`) || strings.Contains(frame, "allow-same-origin") ||
		strings.Contains(frame, "allow-top-navigation") || strings.Contains(frame, "allow-popups") || strings.Contains(frame, "allow-forms") {
		t.Fatalf("preview frame %s", frame)
	}
	_, resp := b.get("/s/" + x.ID + "/a/" + a.ID + "/raw")
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.HasPrefix(csp, "sandbox allow-scripts;") || strings.Contains(csp, "allow-same-origin") || !strings.Contains(csp, "frame-ancestors 'self'") {
		t.Fatalf("raw HTML CSP = %q", csp)
	}
	if resp.Header.Get("X-Frame-Options") != "SAMEORIGIN" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "inline") {
		t.Fatalf("raw HTML headers: %v", resp.Header)
	}
	_, resp = b.get("/s/" + x.ID + "/a/" + a.ID + "/raw?download=1")
	if !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") || !strings.HasPrefix(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("download headers: %v", resp.Header)
	}
	// A ZIP is never shown as text: a file card.
	zip := []byte("PK\x03\x04\x14\x00\x00\x00\x00\x00" + strings.Repeat("\x00", 40))
	var z desk.Artifact
	f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=a.zip", zip, &z)
	pv, _ = b.get("/s/" + x.ID + "/a/" + z.ID)
	if !strings.Contains(pv, `data-mode="card"`) || strings.Contains(pv, "PK") {
		t.Fatalf("zip preview (kind %s):\n%s", z.Kind, pv)
	}
}

// TestInitialPageBound opens a session of 5,000 messages: the page holds
// the newest 50 and stays under 200 KB; the older ones come page by page.
func TestInitialPageBound(t *testing.T) {
	f := start(t, app.Config{SQLiteSynchronous: "normal"})
	x := f.script(t, "long", map[string]any{"text": "hi"})
	st := f.e.App.Store
	const n = 5000
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				role := desk.RoleUser
				if i%2 == 1 {
					role = desk.RoleAssistant
				}
				m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, Role: role,
					Text: fmt.Sprintf("message %04d: %s", i, strings.Repeat("lorem ipsum ", 8)), CreatedAt: desk.Now()}
				if err := st.AppendMessage(context.Background(), m); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	b := signIn(t, f.e)
	page, resp := b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	if resp.StatusCode != 200 {
		t.Fatalf("session page = %d", resp.StatusCode)
	}
	if len(page) >= 200_000 {
		t.Fatalf("the initial page is %d bytes; want < 200 KB", len(page))
	}
	// Consecutive assistant messages share one turn block, so the
	// messages are counted by their text, not by their blocks.
	msgText := regexp.MustCompile(`message \d{4}: `)
	if got := len(msgText.FindAllString(page, -1)); got != 50 {
		t.Fatalf("the page shows %d messages, want the newest 50", got)
	}
	older := regexp.MustCompile(`hx-get="(/s/[^"]+/older\?before=\d+[^"]*)"`).FindStringSubmatch(page)
	if older == nil {
		t.Fatal("no link to older messages")
	}
	more, resp := b.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	if n := len(msgText.FindAllString(more, -1)); resp.StatusCode != 200 || n != 50 || !strings.Contains(more, "/older?before=") {
		t.Fatalf("older page = %d with %d messages", resp.StatusCode, n)
	}
	t.Logf("initial page: %d bytes", len(page))
}

// TestUnreadAndDraftRoutes covers the API routes the UI relies on: a turn
// that finishes while nobody holds the session open marks it unread,
// opening clears it, and drafts round-trip per surface.
func TestUnreadAndDraftRoutes(t *testing.T) {
	f := start(t, app.Config{})
	x := f.script(t, "unread", map[string]any{"text": "one"}, map[string]any{"text": "two"}, map[string]any{"text": "three"})
	turns := 0
	turn := func() {
		f.e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
		turns++
		waitFor(t, "the turn to finish", func() bool {
			var ex struct{ Executions []desk.Execution }
			f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
			return len(ex.Executions) == turns && ex.Executions[0].Terminal()
		})
	}
	unread := func() bool {
		var s desk.Session
		f.e.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &s)
		return s.Unread
	}
	turn()
	waitFor(t, "the session to turn unread", unread)
	var s desk.Session
	f.e.Must(200, "POST", "/v1/sessions/"+x.ID+"/open", map[string]string{"viewer": "tab"}, &s)
	if s.Unread {
		t.Fatal("opening did not clear unread")
	}
	// While it is held open, a finished turn leaves it read; once closed,
	// the next one marks it again. The watcher takes events in order, so
	// when the third turn's mark shows, the second turn's was decided.
	turn()
	f.e.Must(204, "POST", "/v1/sessions/"+x.ID+"/close", map[string]string{"viewer": "tab"}, nil)
	turn()
	waitFor(t, "the session to turn unread again", unread)
	es, err := f.e.App.Store.ListEvents(context.Background(), desk.EventFilter{SessionID: x.ID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	marks := 0
	for _, e := range es {
		if e.Type == "session.unread" {
			marks++
		}
	}
	if marks != 2 {
		t.Fatalf("%d unread marks, want 2 (the turn finished while the session was open left it read)", marks)
	}

	var d desk.Draft
	f.e.Must(200, "PUT", "/v1/sessions/"+x.ID+"/draft", map[string]string{"text": "half a thought"}, &d)
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/draft", nil, &d)
	if d.Text != "half a thought" || d.SurfaceID != x.SurfaceID {
		t.Fatalf("draft = %+v", d)
	}
	r := f.e.Admin("PUT", "/v1/sessions/"+x.ID+"/draft", map[string]any{})
	if r.Status != 400 {
		t.Fatalf("draft without text = %d", r.Status)
	}
	r = f.e.Admin("PUT", "/v1/sessions/"+x.ID+"/draft?surface=srf_01ARZ3NDEKTSV4RRFFQ69G5FAV", map[string]string{"text": "x"})
	if r.Status != 404 {
		t.Fatalf("draft on a foreign surface = %d", r.Status)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFilesPage browses an actor's file area: the listing, the usage, an
// upload into a folder, a download, and deletes (one file, then by
// prefix).
func TestFilesPage(t *testing.T) {
	f := start(t, app.Config{ActorQuotaBytes: 1 << 20})
	b := signIn(t, f.e)
	base := "/w/" + f.ws.ID + "/files"
	page, resp := b.get(base)
	if resp.StatusCode != 200 || !strings.Contains(page, `id="files"`) || !strings.Contains(page, "quota 1.0 MiB") {
		t.Fatalf("files page = %d:\n%s", resp.StatusCode, page)
	}
	up := func(p, body string) *http.Response {
		resp := b.do("POST", base+"/upload?path="+url.QueryEscape(p), "text/plain", body,
			map[string]string{"X-CSRF-Token": b.csrf, "HX-Request": "true"})
		resp.Body.Close()
		return resp
	}
	if r := up("/notes/todo.txt", "buy <milk>"); r.StatusCode != 200 {
		t.Fatalf("upload = %d", r.StatusCode)
	}
	up("/notes/done.txt", "done")
	up("/temp/a.txt", "a")
	page, _ = b.get(base + "?path=/notes")
	if !strings.Contains(page, "todo.txt") || !strings.Contains(page, "done.txt") || strings.Contains(page, "a.txt") {
		t.Fatalf("/notes listing:\n%s", page)
	}
	if !regexp.MustCompile(`<progress id="quota-bar"[^>]*max="1048576"`).MatchString(page) {
		t.Fatal("no quota usage bar")
	}
	body, resp := b.get(base + "/raw?path=/notes/todo.txt")
	if body != "buy <milk>" || !strings.HasPrefix(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download = %q %v", body, resp.Header)
	}
	// Without the CSRF token nothing is deleted.
	r := b.do("POST", base+"/delete?path=/notes/todo.txt", "", "", map[string]string{"HX-Request": "true"})
	r.Body.Close()
	if r.StatusCode != http.StatusForbidden {
		t.Fatalf("delete without a token = %d", r.StatusCode)
	}
	page, resp = b.post(base+"/delete?path=/notes/todo.txt", nil)
	if resp.StatusCode != 200 || strings.Contains(page, "todo.txt") || !strings.Contains(page, "done.txt") {
		t.Fatalf("after delete = %d:\n%s", resp.StatusCode, page)
	}
	page, resp = b.post(base+"/delete-prefix", url.Values{"prefix": {"/temp/"}})
	if resp.StatusCode != 200 {
		t.Fatalf("delete by prefix = %d: %s", resp.StatusCode, page)
	}
	var list struct {
		Entries []desk.FileEntry `json:"entries"`
	}
	f.e.Must(200, "GET", "/v1/workspaces/"+f.ws.ID+"/files?depth=0", nil, &list)
	for _, e := range list.Entries {
		if strings.HasPrefix(e.Path, "/temp/") || e.Path == "/notes/todo.txt" {
			t.Fatalf("%s survived its delete", e.Path)
		}
	}
	// The root prefix is refused by the file service, and the error is a
	// toast, not a replaced listing.
	page, resp = b.post(base+"/delete-prefix", url.Values{"prefix": {"/"}})
	if resp.StatusCode != 400 || resp.Header.Get("HX-Retarget") != "#toast" {
		t.Fatalf("delete of / = %d %v: %s", resp.StatusCode, resp.Header, page)
	}
}

// TestCatalogPage lists workspaces with their state and offboards one
// (the reason comes from the confirmation prompt), then restores it.
func TestCatalogPage(t *testing.T) {
	f := start(t, app.Config{})
	b := signIn(t, f.e)
	page, resp := b.get("/catalog")
	if resp.StatusCode != 200 || !strings.Contains(page, `data-workspace="`+f.ws.ID+`" data-state="active"`) {
		t.Fatalf("catalog = %d:\n%s", resp.StatusCode, page)
	}
	resp = b.do("POST", "/catalog/"+f.ws.ID+"/offboard", "", "", map[string]string{"X-CSRF-Token": b.csrf, "HX-Request": "true", "HX-Prompt": "project finished"})
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), `data-state="departed"`) || !strings.Contains(string(out), "project finished") {
		t.Fatalf("offboard = %d:\n%s", resp.StatusCode, out)
	}
	// Purge needs the id typed again.
	resp = b.do("POST", "/catalog/"+f.ws.ID+"/purge", "", "", map[string]string{"X-CSRF-Token": b.csrf, "HX-Request": "true", "HX-Prompt": "yes"})
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("purge without the id = %d", resp.StatusCode)
	}
	resp = b.do("POST", "/catalog/"+f.ws.ID+"/restore", "", "", map[string]string{"X-CSRF-Token": b.csrf, "HX-Request": "true"})
	out, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), `data-state="active"`) {
		t.Fatalf("restore = %d:\n%s", resp.StatusCode, out)
	}
}

// TestBudgetBarUsesReportedTokens: once a model call reported its counts,
// the context bar starts from them (the step reported 80,000 input tokens
// of a 128,000 window: high, not the few tokens desk would estimate).
func TestBudgetBarUsesReportedTokens(t *testing.T) {
	f := start(t, app.Config{})
	x := f.script(t, "usage", map[string]any{"text": "ok", "usage": map[string]int{"input_tokens": 80000, "output_tokens": 10}})
	b := signIn(t, f.e)
	page, _ := b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	if !strings.Contains(page, `data-source="estimate"`) {
		t.Fatalf("a fresh session's bar is not the estimate:\n%s", page)
	}
	f.e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "hi"}, nil)
	waitFor(t, "the turn to finish", func() bool {
		var ex struct{ Executions []desk.Execution }
		f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
		return len(ex.Executions) == 1 && ex.Executions[0].Terminal()
	})
	page, _ = b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	bar := regexp.MustCompile(`<div id="budget"[^>]*>`).FindString(page)
	if !strings.Contains(bar, `data-source="provider"`) || !strings.Contains(bar, "level-high") || !strings.Contains(bar, "80010 of 128000 tokens") {
		t.Fatalf("budget bar after a reported call: %s", bar)
	}
}

// TestPatchDiffSpan: an apply_patch span shows its file changes as a
// diff, each line escaped and classed for +/- colouring, and a sandbox
// denial is marked as such.
func TestPatchDiffSpan(t *testing.T) {
	f := start(t, app.Config{})
	patch := "*** Begin Patch\n*** Add File: /artifacts/x.html\n+<script>alert(1)</script>\n+plain\n*** End Patch"
	x := f.script(t, "patch", map[string]any{"tool_calls": []map[string]any{{"name": "apply_patch", "arguments": map[string]any{"patch": patch}}}},
		map[string]any{"text": "done"})
	f.e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	waitFor(t, "the turn to finish", func() bool {
		var ex struct{ Executions []desk.Execution }
		f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
		return len(ex.Executions) == 1 && ex.Executions[0].Terminal()
	})
	b := signIn(t, f.e)
	page, _ := b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	if strings.Contains(page, "<script>alert(1)") {
		t.Fatal("the diff reached the page unescaped")
	}
	for _, want := range []string{
		`<pre class="diff">`,
		`<span class="diff-file">--- /dev/null</span>`,
		`<span class="diff-hunk">@@ -0,0 &#43;1,2 @@</span>`,
		`<span class="diff-add">&#43;&lt;script&gt;alert(1)&lt;/script&gt;</span>`,
		`<span class="diff-add">&#43;plain</span>`,
		`<span class="badge diff-kind">add</span> <code>/artifacts/x.html</code>`,
	} {
		if !strings.Contains(page, want) {
			t.Fatalf("the span lacks %s:\n%s", want, page[strings.Index(page, "apply_patch"):][:3000])
		}
	}
}

// TestSandboxDeniedSpan: a command the sandbox's walls stopped is marked
// as a sandbox denial in its span, with the reason.
func TestSandboxDeniedSpan(t *testing.T) {
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	f := start(t, app.Config{})
	f.e.Must(200, "PATCH", "/v1/workspaces/"+f.ws.ID+"/agent", map[string]any{"approval_mode": "auto-review"}, nil)
	x := f.script(t, "denied", map[string]any{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": "touch /etc/x"}}}},
		map[string]any{"text": "done"})
	f.e.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	waitFor(t, "the turn to finish", func() bool {
		var ex struct{ Executions []desk.Execution }
		f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
		return len(ex.Executions) == 1 && ex.Executions[0].Terminal()
	})
	page, _ := signIn(t, f.e).get("/w/" + f.ws.ID + "/s/" + x.ID)
	for _, want := range []string{`<span class="badge denied"`, `Sandbox denial: /etc/x is outside the sandbox&#39;s write boundary`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the span lacks %s", want)
		}
	}
}
