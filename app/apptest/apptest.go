// Package apptest starts real desk servers for tests: a real store (SQLite
// in a temporary home, or Postgres when asked), the real handler behind an
// httptest listener, and helpers to speak raw HTTP to it. Restart closes the
// server and opens a new one on the same home, as a process restart would.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/leaktest"
	"go.uber.org/goleak"

	"github.com/desk-runtime/desk/app"
)

// Env is one running desk server under test.
type Env struct {
	T      testing.TB
	Config app.Config
	App    *app.App
	Server *httptest.Server
	Token  string // the admin token
}

// Start opens a desk on a fresh temporary home (or cfg.Home when set).
// At the end of the test the desk is closed — a failing App.Close fails
// the test — and no goroutine may be left behind (goleak), once every
// desk the test started is closed.
func Start(t testing.TB, cfg app.Config) *Env {
	t.Helper()
	if cfg.Home == "" {
		cfg.Home = t.TempDir()
	}
	if _, seen := verified.LoadOrStore(t, true); !seen && parallel.Load() == 0 {
		// Registered before the first desk's own cleanup, so it runs after
		// every desk of the test stopped (cleanups run last-in first-out).
		opts := leaktest.Options(goleak.IgnoreCurrent())
		t.Cleanup(func() {
			verified.Delete(t)
			if t.Failed() {
				return // a failed test may well have left work behind
			}
			http.DefaultTransport.(*http.Transport).CloseIdleConnections()
			if err := goleak.Find(opts...); err != nil {
				t.Errorf("goroutines left behind after every desk closed: %v", err)
			}
		})
	}
	e := &Env{T: t, Config: cfg}
	e.open()
	t.Cleanup(e.stop)
	return e
}

// verified holds the tests whose leak check is registered.
var verified sync.Map

// parallel counts the tests that called Parallel and have not ended.
var parallel atomic.Int32

// Parallel marks t as a test that owns its state and runs in parallel
// with others (t.Parallel). goleak sees the whole process, so while
// parallel tests run, one test's check would count another's running desk
// as its leak: their desks are checked instead by the package's TestMain
// (leaktest.Main) once every test ended. Tests that run alone (every
// top-level test that is not parallel runs before the parallel ones
// start) keep the check of their own.
func Parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	parallel.Add(1)
	t.Cleanup(func() { parallel.Add(-1) })
}

func (e *Env) open() {
	e.T.Helper()
	a, err := app.Open(context.Background(), e.Config)
	if err != nil {
		e.T.Fatalf("open desk: %v", err)
	}
	e.App, e.Token = a, a.AdminToken
	// The listener carries the per-address connection cap, as desk
	// serve's does.
	e.Server = httptest.NewUnstartedServer(a.Handler)
	e.Server.Listener = a.Listener(e.Server.Listener)
	e.Server.Start()
}

// stop closes the listener and the desk. Open event streams are told to
// end first, so closing the listener does not wait for their clients.
func (e *Env) stop() {
	if e.App != nil {
		e.App.Streams.Shutdown()
	}
	if e.Server != nil {
		e.Server.Close()
		e.Server = nil
	}
	if e.App != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.App.Close(ctx); err != nil {
			e.T.Errorf("close desk: %v", err)
		}
		e.App = nil
	}
}

// Restart stops the server and starts a new one on the same home and store.
func (e *Env) Restart() {
	e.T.Helper()
	e.stop()
	e.open()
}

// WebCookie starts a browser session of the web UI for token, as the
// sign-in form does, and returns the cookie a signed-in browser sends.
func (e *Env) WebCookie(token string) *http.Cookie {
	e.T.Helper()
	id, _, err := e.App.BrowserSessions.Start(context.Background(), token)
	if err != nil {
		e.T.Fatalf("start a browser session: %v", err)
	}
	return &http.Cookie{Name: "desk_session", Value: id}
}

// Response is a finished HTTP exchange.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrorCode returns the code of a JSON error body, or "".
func (r *Response) ErrorCode() string {
	var b struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Error.Code
}

// ErrorMessage returns the message of a JSON error body, or "".
func (r *Response) ErrorMessage() string {
	var b struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(r.Body, &b)
	return b.Error.Message
}

// Decode unmarshals the body into v, failing the test on error.
func (r *Response) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Req sends a request with the given token ("" for none). body may be nil,
// a []byte, a string, an io.Reader, or any value to encode as JSON.
func (e *Env) Req(method, path, token string, body any, header ...string) *Response {
	e.T.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case []byte:
		rd, ct = bytes.NewReader(b), "application/octet-stream"
	case string:
		rd, ct = strings.NewReader(b), "application/json"
	case io.Reader:
		rd, ct = b, "application/octet-stream"
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.T.Fatal(err)
		}
		rd, ct = bytes.NewReader(j), "application/json"
	}
	req, err := http.NewRequest(method, e.Server.URL+path, rd)
	if err != nil {
		e.T.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		e.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

// Admin sends a request with the admin token.
func (e *Env) Admin(method, path string, body any, header ...string) *Response {
	e.T.Helper()
	return e.Req(method, path, e.Token, body, header...)
}

// Must sends an admin request, fails the test unless the status is want,
// and decodes the JSON answer into out when out is not nil.
func (e *Env) Must(want int, method, path string, body, out any) *Response {
	e.T.Helper()
	r := e.Admin(method, path, body)
	if r.Status != want {
		e.T.Fatalf("%s %s = %d %s; want %d", method, path, r.Status, r.Body, want)
	}
	if out != nil {
		r.Decode(e.T, out)
	}
	return r
}

// Client speaks raw HTTP to a desk server at BaseURL, for tests whose
// server is not an Env (a child process).
type Client struct {
	BaseURL, Token string
}

// Try sends a request and decodes a JSON answer into out; err is set only
// when no answer arrived (the server is down).
func (c *Client) Try(method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.BaseURL+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Content-Type", "application/json")
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// Must is Try that fails the test unless the status is want.
func (c *Client) Must(t testing.TB, want int, method, path string, body, out any) {
	t.Helper()
	st, err := c.Try(method, path, body, out)
	if err != nil || st != want {
		t.Fatalf("%s %s = %d %v; want %d", method, path, st, err, want)
	}
}
