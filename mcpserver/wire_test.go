package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/desk-runtime/desk/app/apptest"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a host sends on the wire, byte for byte, and what it gets back.

type rpcReply struct {
	ID     any             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type rawResponse struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// reply decodes the JSON-RPC reply of a response: a JSON body, or the
// first message event of an SSE body.
func (r *rawResponse) reply(t *testing.T) rpcReply {
	t.Helper()
	body := r.Body
	if strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		body = nil
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.TrimSpace(d) != "" {
				body = []byte(d)
				break
			}
		}
	}
	var rep rpcReply
	if err := json.Unmarshal(body, &rep); err != nil {
		t.Fatalf("reply %d %q: %v", r.StatusCode, r.Body, err)
	}
	return rep
}

func rawPost(t testing.TB, url, token string, h http.Header, body string) *rawResponse {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &rawResponse{StatusCode: resp.StatusCode, Header: resp.Header, Body: b}
}

func csHeaders(cs *sdk.ClientSession) http.Header {
	return http.Header{
		"Mcp-Session-Id":       {cs.ID()},
		"Mcp-Protocol-Version": {cs.InitializeResult().ProtocolVersion},
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawSession initializes a session by hand and returns its headers.
func rawSession(t testing.TB, w *world, token string) http.Header {
	t.Helper()
	r := rawPost(t, w.mcpURL, token, nil, initialize)
	if r.StatusCode != 200 || r.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", r.StatusCode, r.Body)
	}
	h := http.Header{"Mcp-Session-Id": {r.Header.Get("Mcp-Session-Id")}, "Mcp-Protocol-Version": {"2025-06-18"}}
	if n := rawPost(t, w.mcpURL, token, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); n.StatusCode != 202 {
		t.Fatalf("initialized: %d %s", n.StatusCode, n.Body)
	}
	return h
}

func TestOriginAndToken(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for _, origin := range []string{"http://evil.example.com", "https://localhost.evil.example", "null"} {
		r := rawPost(t, w.mcpURL, w.tokA, http.Header{"Origin": {origin}}, initialize)
		if r.StatusCode != http.StatusForbidden {
			t.Fatalf("Origin %s: %d %s, want 403", origin, r.StatusCode, r.Body)
		}
		if rep := r.reply(t); rep.Error == nil || !strings.Contains(rep.Error.Message, "Origin") {
			t.Fatalf("Origin %s: body %s", origin, r.Body)
		}
	}
	for _, origin := range []string{"http://localhost:5173", "http://127.0.0.1:9", "http://[::1]:8080"} {
		if r := rawPost(t, w.mcpURL, w.tokA, http.Header{"Origin": {origin}}, initialize); r.StatusCode != 200 {
			t.Fatalf("loopback Origin %s: %d %s", origin, r.StatusCode, r.Body)
		}
	}
	// A rebinding page reaching the loopback listener under another name.
	req, _ := http.NewRequest("POST", w.mcpURL, strings.NewReader(initialize))
	req.Host = "evil.example.com"
	req.Header.Set("Authorization", "Bearer "+w.tokA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("foreign Host: %d, want 403", resp.StatusCode)
	}
	if r := rawPost(t, w.mcpURL, "", nil, initialize); r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d %v", r.StatusCode, r.Header)
	}
	if r := rawPost(t, w.mcpURL, "not-a-token", nil, initialize); r.StatusCode != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("bad token: %d", r.StatusCode)
	}
}

// Bad input is answered with the JSON-RPC error of the right code, and the
// session keeps serving.
func TestBadInput(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	h := rawSession(t, w, w.tokA)
	ping := func() {
		t.Helper()
		r := rawPost(t, w.mcpURL, w.tokA, h, `{"jsonrpc":"2.0","id":77,"method":"ping"}`)
		if rep := r.reply(t); r.StatusCode != 200 || rep.Error != nil || rep.Result == nil {
			t.Fatalf("ping after bad input: %d %s", r.StatusCode, r.Body)
		}
	}
	huge := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"artifact_write","arguments":{"content":"` + strings.Repeat("x", 5<<20) + `"}}}`
	for _, c := range []struct {
		name, body string
		status     int
		code       int64
	}{
		{"malformed JSON", `{"jsonrpc":"2.0","id":2,"method":`, 400, -32700},
		{"not JSON at all", `hello`, 400, -32700},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":3,"method":"ping"}`, 400, -32600},
		{"method not a string", `{"jsonrpc":"2.0","id":3,"method":42}`, 400, -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"desk/unknown"}`, 400, -32601},
		{"unknown tool", `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`, 200, -32602},
		{"params of the wrong type", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":17}}`, 200, -32602},
		{"huge message", huge, 413, -32600},
	} {
		r := rawPost(t, w.mcpURL, w.tokA, h, c.body)
		rep := r.reply(t)
		if r.StatusCode != c.status || rep.Error == nil || rep.Error.Code != c.code {
			t.Errorf("%s: %d %s, want %d with code %d", c.name, r.StatusCode, trim(r.Body), c.status, c.code)
		}
		ping()
	}
	// A protocol version the session does not speak, and a session id
	// that does not exist.
	bad := http.Header{"Mcp-Session-Id": h["Mcp-Session-Id"], "Mcp-Protocol-Version": {"1999-01-01"}}
	if r := rawPost(t, w.mcpURL, w.tokA, bad, `{"jsonrpc":"2.0","id":10,"method":"ping"}`); r.StatusCode != 400 || r.reply(t).Error == nil {
		t.Errorf("unknown protocol version: %d %s", r.StatusCode, trim(r.Body))
	}
	gone := http.Header{"Mcp-Session-Id": {"no-such-session"}, "Mcp-Protocol-Version": {"2025-06-18"}}
	if r := rawPost(t, w.mcpURL, w.tokA, gone, `{"jsonrpc":"2.0","id":11,"method":"ping"}`); r.StatusCode != 404 || r.reply(t).Error == nil {
		t.Errorf("unknown session: %d %s", r.StatusCode, trim(r.Body))
	}
	ping()

	// Arguments of the wrong type reach the tool's schema: per the MCP
	// spec (2025-11-25) that is a tool execution error the model can
	// correct, naming the field, not a protocol error.
	r := rawPost(t, w.mcpURL, w.tokA, h, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"session_send","arguments":{"session_id":"ses_x","text":5}}}`)
	rep := r.reply(t)
	var res struct {
		IsError bool `json:"isError"`
		Content []struct{ Text string }
	}
	json.Unmarshal(rep.Result, &res)
	if rep.Error != nil || !res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "text") {
		t.Fatalf("wrong argument type: %s", trim(r.Body))
	}
	ping()
}

func trim(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
