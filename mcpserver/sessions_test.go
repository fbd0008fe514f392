package mcpserver_test

import (
	"context"
	"github.com/desk-runtime/desk/app/apptest"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/mcpserver"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

const ping = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

// The 33rd session of a token closes that token's least recently used
// idle session, on desk's real /mcp; the closed one answers 404 (so its
// host opens a new one), the others and another token's keep working.
//
// Parallel through apptest.Parallel: goroutine leaks are checked once for
// the package (TestMain), since a process-wide check per test would count
// another test's running desk as this one's leak.
func TestThe33rdSessionOfATokenEvictsItsLeastRecentlyUsed(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	var hs []http.Header
	for range mcpserver.DefaultSessionsPerToken {
		hs = append(hs, rawSession(t, w, w.tokA))
	}
	other := rawSession(t, w, w.tokB)
	// hs[0] is used again: hs[1] becomes the least recently used.
	if r := rawPost(t, w.mcpURL, w.tokA, hs[0], ping); r.StatusCode != 200 {
		t.Fatalf("ping: %d %s", r.StatusCode, r.Body)
	}
	if n := w.env.App.MCP.Sessions(); n != mcpserver.DefaultSessionsPerToken+1 {
		t.Fatalf("%d sessions open, want %d", n, mcpserver.DefaultSessionsPerToken+1)
	}
	newest := rawSession(t, w, w.tokA) // the 33rd
	if n := w.env.App.MCP.Sessions(); n != mcpserver.DefaultSessionsPerToken+1 {
		t.Fatalf("after the 33rd: %d sessions open, want still %d", n, mcpserver.DefaultSessionsPerToken+1)
	}
	if r := rawPost(t, w.mcpURL, w.tokA, hs[1], ping); r.StatusCode != http.StatusNotFound {
		t.Fatalf("the least recently used session: %d %s, want 404 (closed)", r.StatusCode, r.Body)
	}
	for _, h := range []http.Header{hs[0], hs[2], hs[31], newest} {
		if r := rawPost(t, w.mcpURL, w.tokA, h, ping); r.StatusCode != 200 {
			t.Fatalf("a kept session %s: %d %s", h.Get("Mcp-Session-Id"), r.StatusCode, r.Body)
		}
	}
	if r := rawPost(t, w.mcpURL, w.tokB, other, ping); r.StatusCode != 200 {
		t.Fatalf("another token's session: %d %s", r.StatusCode, r.Body)
	}
	// A kept session still calls desk as its own token.
	r := rawPost(t, w.mcpURL, w.tokA, newest, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"workspaces_list","arguments":{}}}`)
	if rep := r.reply(t); rep.Error != nil || !strings.Contains(string(rep.Result), w.ws) {
		t.Fatalf("workspaces_list on the 33rd session: %s", r.Body)
	}
}

// bubble is an MCP endpoint with a tool that blocks until released, served
// in a synctest bubble without sockets: time is the bubble's.
type bubble struct {
	t       *testing.T
	e       *mcpserver.Endpoint
	srv     *sdk.Server
	release chan struct{}
}

func newBubble(t *testing.T, perToken int) *bubble {
	b := &bubble{t: t, release: make(chan struct{})}
	b.srv = sdk.NewServer(&sdk.Implementation{Name: "bubble", Version: "1"}, nil)
	sdk.AddTool(b.srv, &sdk.Tool{Name: "block"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		select {
		case <-b.release:
		case <-ctx.Done():
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "released"}}}, nil, nil
	})
	b.e = mcpserver.Transport(func(*http.Request) *sdk.Server { return b.srv }, mcpserver.TransportOptions{
		Verify: func(_ context.Context, tok string) error {
			if tok != "one" && tok != "two" {
				return desk.Errorf(desk.EUNAUTHORIZED, "unknown token")
			}
			return nil
		},
		SessionsPerToken: perToken,
	})
	t.Cleanup(func() {
		if err := b.e.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func (b *bubble) post(token string, h http.Header, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "http://127.0.0.1/mcp", strings.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	b.e.ServeHTTP(rec, req)
	return rec
}

func (b *bubble) open(token string) http.Header {
	b.t.Helper()
	r := b.post(token, nil, initialize)
	if r.Code != 200 || r.Header().Get("Mcp-Session-Id") == "" {
		b.t.Fatalf("initialize as %s: %d %s", token, r.Code, r.Body)
	}
	h := http.Header{"Mcp-Session-Id": {r.Header().Get("Mcp-Session-Id")}, "Mcp-Protocol-Version": {"2025-06-18"}}
	if n := b.post(token, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.Code != 202 {
		b.t.Fatalf("initialized: %d %s", n.Code, n.Body)
	}
	return h
}

func (b *bubble) ping(token string, h http.Header) int {
	return b.post(token, h, ping).Code
}

func (b *bubble) sessions() int {
	n := 0
	for range b.srv.Sessions() {
		n++
	}
	return n
}

// With every session of a token busy (a call in flight), one more is
// refused with 429 and a message naming the cap; another token is not
// affected; once the calls end, the least recently used idle session is
// the one closed.
func TestSessionCapRefusesWhenNoneIsIdle(t *testing.T) {
	apptest.Parallel(t)
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, 2)
		s1, s2 := b.open("one"), b.open("one")
		calls := make(chan int, 2)
		for _, h := range []http.Header{s1, s2} {
			go func() {
				calls <- b.post("one", h, `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"block","arguments":{}}}`).Code
			}()
		}
		synctest.Wait() // both calls are in the tool
		r := b.post("one", nil, initialize)
		if r.Code != http.StatusTooManyRequests || !strings.Contains(r.Body.String(), "too many MCP sessions for this token: 2 are open and none is idle") {
			t.Fatalf("a third session with both busy: %d %s, want 429 naming the cap", r.Code, r.Body)
		}
		if r.Header().Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
		b.open("two") // another token has its own cap
		close(b.release)
		for range 2 {
			if c := <-calls; c != 200 {
				t.Fatalf("blocked call: %d", c)
			}
		}
		// The bubble's fake clock: s1's next use is now the later one.
		time.Sleep(time.Second)
		if c := b.ping("one", s1); c != 200 { // s2 is now the least recently used
			t.Fatalf("ping s1: %d", c)
		}
		s3 := b.open("one")
		if c := b.ping("one", s2); c != http.StatusNotFound {
			t.Fatalf("s2 after the third session: %d, want 404", c)
		}
		for _, h := range []http.Header{s1, s3} {
			if c := b.ping("one", h); c != 200 {
				t.Fatalf("kept session: %d", c)
			}
		}
		if n := b.sessions(); n != 3 {
			t.Fatalf("%d sessions on the server, want 3 (two of one, one of two)", n)
		}
	})
}

// A session that receives nothing for SessionTimeout (10 minutes) is
// closed; one used meanwhile stays open.
func TestIdleSessionsCloseAfterTenMinutes(t *testing.T) {
	apptest.Parallel(t)
	if mcpserver.SessionTimeout != 10*time.Minute {
		t.Fatalf("SessionTimeout is %v, want 10m", mcpserver.SessionTimeout)
	}
	synctest.Test(t, func(t *testing.T) {
		b := newBubble(t, 0)
		idle, used := b.open("one"), b.open("one")
		time.Sleep(9 * time.Minute) // the bubble's fake clock
		if c := b.ping("one", used); c != 200 {
			t.Fatalf("ping: %d", c)
		}
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if c := b.ping("one", idle); c != http.StatusNotFound {
			t.Fatalf("a session idle for 10 minutes: %d, want 404 (closed)", c)
		}
		if c := b.ping("one", used); c != 200 {
			t.Fatalf("a session used a minute ago: %d, want 200", c)
		}
		time.Sleep(mcpserver.SessionTimeout)
		synctest.Wait()
		if n := b.sessions(); n != 0 {
			t.Fatalf("%d sessions open after everything idled out", n)
		}
	})
}

// Two sessions subscribed to one resource share its follower; when the
// session whose client runs it ends, the other keeps being notified.
func TestSubscriptionOutlivesTheSessionThatStartedIt(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	ses, err := w.clientA.CreateSession(ctx, w.ws, client.SessionCreate{Title: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	art, err := w.clientA.PutArtifact(ctx, ses.ID, "a.md", strings.NewReader("# one\n"), -1, client.PutOptions{MediaType: "text/markdown"})
	if err != nil {
		t.Fatal(err)
	}
	uri := "desk://sessions/" + ses.ID + "/artifacts/" + art.ID
	first, second := w.connect(t, w.tokA), w.connect(t, w.tokA)
	for _, cs := range []*sdk.ClientSession{first, second} {
		if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the first session closed", func() bool { return w.env.App.MCP.Sessions() == 1 })
	seen := len(w.resourceUpdates())
	eventually(t, "a change notified to the second session", func() bool {
		if len(w.resourceUpdates()) > seen {
			return true
		}
		if _, err := w.clientA.UpdateArtifact(ctx, ses.ID, art.ID, strings.NewReader("# two\n"), 6, "text/markdown"); err != nil {
			t.Fatal(err)
		}
		// Give this change's notification a moment before making another.
		return testwait.Poll(time.Second, func() bool { return len(w.resourceUpdates()) > seen })
	})
}
