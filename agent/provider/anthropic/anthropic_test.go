package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/internal/modeltest/providertest"
)

const testKey = "sk-ant-api03-test0123456789abcdefghijklmnopqrstuvwxyz-secretAA"

func exchange(t *testing.T, name string) providertest.Exchange {
	t.Helper()
	return providertest.Load(t, filepath.Join("testdata", name+".http"))
}

// newTestProvider points a provider at srv with a fast backoff: three
// attempts in all.
func newTestProvider(srv *providertest.Server, mod ...func(*Options)) *Provider {
	o := Options{
		APIKey:         testKey,
		BaseURL:        srv.URL,
		MaxRetries:     2,
		RetryBaseDelay: time.Millisecond,
		RetryMaxDelay:  5 * time.Millisecond,
	}
	for _, m := range mod {
		m(&o)
	}
	return New(o)
}

func simpleRequest() provider.Request {
	return provider.Request{
		Model:    "claude-sonnet-4-5",
		System:   "You are terse.",
		Messages: []provider.Message{{Role: provider.RoleUser, Content: "Hi"}},
	}
}

func stream(t *testing.T, p *Provider, req provider.Request) (*provider.Response, []provider.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var events []provider.Event
	resp, err := p.Stream(ctx, req, func(e provider.Event) { events = append(events, e) })
	return resp, events, err
}

func jsonEqual(t *testing.T, what string, got any, want string) {
	t.Helper()
	gb, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(gb, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad expectation for %s: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s:\n got  %s\n want %s", what, gb, want)
	}
}

func requestBody(t *testing.T, r providertest.Request) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, r.Body)
	}
	return m
}

func TestText(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "text"))
	resp, events, err := stream(t, newTestProvider(srv), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range events {
		if e.Type != provider.EventText {
			t.Errorf("unexpected event %+v", e)
		}
		texts = append(texts, e.Text)
	}
	if want := []string{"Hello", "! How can", " I help you today?"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("deltas %q, want %q", texts, want)
	}
	if resp.Text != "Hello! How can I help you today?" || resp.StopReason != "end" || len(resp.ToolCalls) != 0 {
		t.Errorf("response %+v", resp)
	}
	// Input counts the cached tokens too: 25 + 12, of which the 12 read
	// from the cache are CachedTokens.
	if resp.Usage != (provider.Usage{InputTokens: 37, OutputTokens: 12, CachedTokens: 12}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/messages" {
		t.Errorf("%s %s", r.Method, r.Path)
	}
	// SDK v2 sends the key as a bearer token (v1 sent x-api-key).
	if r.Header.Get("Authorization") != "Bearer "+testKey && r.Header.Get("X-Api-Key") != testKey {
		t.Errorf("key not sent: %v", r.Header)
	}
	if r.Header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	body := requestBody(t, r)
	if body["model"] != "claude-sonnet-4-5" || body["stream"] != true {
		t.Errorf("model/stream: %v %v", body["model"], body["stream"])
	}
	if body["max_tokens"] != float64(DefaultMaxTokens) {
		t.Errorf("max_tokens %v", body["max_tokens"])
	}
	jsonEqual(t, "system", body["system"], `[{"type":"text","text":"You are terse."}]`)
	jsonEqual(t, "messages", body["messages"], `[{"role":"user","content":[{"type":"text","text":"Hi"}]}]`)
	if _, ok := body["tools"]; ok {
		t.Error("tools sent without tools")
	}
}

func TestToolCall(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "tool_call"))
	resp, events, err := stream(t, newTestProvider(srv), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := []provider.Event{
		{Type: provider.EventText, Text: "Let me read"},
		{Type: provider.EventText, Text: " that file."},
		{Type: provider.EventToolCallStart, Index: 0, ToolCallID: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", Name: "read_file"},
		{Type: provider.EventToolCallDelta, Index: 0, ArgsDelta: `{"path": "/artif`},
		{Type: provider.EventToolCallDelta, Index: 0, ArgsDelta: `acts/notes.md"}`},
	}
	if !reflect.DeepEqual(events, want) {
		t.Errorf("events\n got  %+v\n want %+v", events, want)
	}
	if resp.StopReason != "tool_calls" || resp.Text != "Let me read that file." || len(resp.ToolCalls) != 1 {
		t.Fatalf("response %+v", resp)
	}
	jsonEqual(t, "call", resp.ToolCalls[0], `{"id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"read_file","arguments":{"path":"/artifacts/notes.md"}}`)
	if resp.Usage != (provider.Usage{InputTokens: 37, OutputTokens: 61, CachedTokens: 12}) {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestParallelToolCalls(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "parallel_tool_calls"))
	resp, events, err := stream(t, newTestProvider(srv), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	var starts []provider.Event
	args := map[int]string{}
	for _, e := range events {
		switch e.Type {
		case provider.EventToolCallStart:
			starts = append(starts, e)
		case provider.EventToolCallDelta:
			if len(starts) == 0 || e.Index != starts[len(starts)-1].Index {
				t.Errorf("delta %+v does not follow the start of its call", e)
			}
			args[e.Index] += e.ArgsDelta
		}
	}
	// Content blocks 1 and 2 are tool calls 0 and 1.
	wantStarts := []provider.Event{
		{Type: provider.EventToolCallStart, Index: 0, ToolCallID: "toolu_01A09q90qw90lq917835lq9", Name: "fetch"},
		{Type: provider.EventToolCallStart, Index: 1, ToolCallID: "toolu_01B2c3D4e5F6g7H8i9J0k1L2", Name: "list_files"},
	}
	if !reflect.DeepEqual(starts, wantStarts) {
		t.Errorf("starts %+v", starts)
	}
	if args[0] != `{"url": "https://example.com/a"}` || args[1] != `{"path": "/artifacts"}` {
		t.Errorf("streamed arguments %v", args)
	}
	if resp.StopReason != "tool_calls" || resp.Text != "I'll do both at once." || len(resp.ToolCalls) != 2 {
		t.Fatalf("response %+v", resp)
	}
	jsonEqual(t, "calls", resp.ToolCalls, `[
		{"id":"toolu_01A09q90qw90lq917835lq9","name":"fetch","arguments":{"url":"https://example.com/a"}},
		{"id":"toolu_01B2c3D4e5F6g7H8i9J0k1L2","name":"list_files","arguments":{"path":"/artifacts"}}]`)
}

// TestStreamsIncrementally holds the server's body until the first text has
// reached the callback: an adapter that waited for the whole body would
// never see it, and the test would time out.
func TestStreamsIncrementally(t *testing.T) {
	resume := make(chan struct{})
	ex := exchange(t, "text")
	ex.PauseAfter, ex.Resume = 4, resume // message_start, block start, ping, "Hello"
	srv := providertest.NewServer(t, ex)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var texts []string
	resp, err := newTestProvider(srv).Stream(ctx, simpleRequest(), func(e provider.Event) {
		texts = append(texts, e.Text)
		if len(texts) == 1 {
			close(resume)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, "|") != "Hello|! How can| I help you today?" || resp.Text != "Hello! How can I help you today?" {
		t.Errorf("deltas %q, text %q", texts, resp.Text)
	}
}

func TestCancelMidStream(t *testing.T) {
	ex := exchange(t, "text")
	ex.PauseAfter = 4 // then hang until the client goes away
	srv := providertest.NewServer(t, ex)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	resp, err := newTestProvider(srv).Stream(ctx, simpleRequest(), func(e provider.Event) {
		if e.Text == "Hello" {
			cancelled = time.Now()
			cancel()
		}
	})
	if resp != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("resp %+v err %v, want context.Canceled", resp, err)
	}
	if cancelled.IsZero() {
		t.Fatal("never saw the first delta")
	}
	if d := time.Since(cancelled); d > time.Second {
		t.Errorf("returned %v after the cancel", d)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests after a cancel, want 1", n)
	}
}

func TestMultiTurnRequestShape(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "text"))
	req := provider.Request{
		Model:  "claude-opus-4-1",
		System: "You are desk's agent.",
		Messages: []provider.Message{
			{Role: provider.RoleUser, Content: "Summarise notes.md and list /artifacts."},
			{Role: provider.RoleAssistant, Content: "Reading both.", ToolCalls: []provider.ToolCall{
				{ID: "toolu_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"/artifacts/notes.md","limit":4096}`)},
				{ID: "toolu_2", Name: "list_files", Arguments: json.RawMessage(`{}`)},
			}},
			{Role: provider.RoleTool, ToolCallID: "toolu_1", Name: "read_file", Content: "# Notes\nbuy milk"},
			{Role: provider.RoleTool, ToolCallID: "toolu_2", Name: "list_files", Content: `{"code":"FS_DENIED"}`, IsError: true},
			{Role: provider.RoleUser, Content: "Thanks. Now the summary please."},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{
				// Cut short by max_tokens: not an object, so it goes back as {}.
				{ID: "toolu_3", Name: "write_file", Arguments: json.RawMessage(`"{\"path\": \"/artif"`)},
			}},
			{Role: provider.RoleTool, ToolCallID: "toolu_3", Content: "", IsError: true},
		},
		Tools: []provider.Tool{
			{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(
				`{"type":"object","properties":{"path":{"type":"string","description":"guest path","maxLength":4096},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}`)},
			{Name: "list_files", Description: "List a directory.", Parameters: nil},
		},
		MaxTokens: 500,
	}
	if _, _, err := stream(t, newTestProvider(srv), req); err != nil {
		t.Fatal(err)
	}
	body := requestBody(t, srv.Requests()[0])
	jsonEqual(t, "system", body["system"], `[{"type":"text","text":"You are desk's agent."}]`)
	// Tool results go back in one user message, ahead of the text that
	// followed them.
	jsonEqual(t, "messages", body["messages"], `[
		{"role":"user","content":[{"type":"text","text":"Summarise notes.md and list /artifacts."}]},
		{"role":"assistant","content":[
			{"type":"text","text":"Reading both."},
			{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"/artifacts/notes.md","limit":4096}},
			{"type":"tool_use","id":"toolu_2","name":"list_files","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"# Notes\nbuy milk"}]},
			{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"{\"code\":\"FS_DENIED\"}"}],"is_error":true},
			{"type":"text","text":"Thanks. Now the summary please."}]},
		{"role":"assistant","content":[
			{"type":"tool_use","id":"toolu_3","name":"write_file","input":{}}]},
		{"role":"user","content":[
			{"type":"tool_result","tool_use_id":"toolu_3","is_error":true}]}]`)
	jsonEqual(t, "tools", body["tools"], `[
		{"name":"read_file","description":"Read a file.","input_schema":
			{"type":"object","properties":{"path":{"type":"string","description":"guest path","maxLength":4096},"limit":{"type":"integer"}},"required":["path"],"additionalProperties":false}},
		{"name":"list_files","description":"List a directory.","input_schema":{"type":"object","properties":{}}}]`)
	if body["max_tokens"] != float64(500) {
		t.Errorf("max_tokens %v", body["max_tokens"])
	}
}

func TestMaxTokens(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "max_tokens"))
	p := newTestProvider(srv)
	resp, _, err := stream(t, p, simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "max_tokens" || resp.Text != "Once upon" {
		t.Errorf("response %+v", resp)
	}
	// A model whose own output limit is below the default gets its limit.
	req := simpleRequest()
	req.Model = "claude-3-haiku-20240307"
	if _, _, err := stream(t, p, req); err != nil {
		t.Fatal(err)
	}
	if got := requestBody(t, srv.Requests()[1])["max_tokens"]; got != float64(4096) {
		t.Errorf("claude-3-haiku max_tokens %v", got)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name      string
		exchanges []string
		model     string
		kind      string
		status    int
		requests  int
		contains  []string
	}{
		{name: "401 bad key", exchanges: []string{"error_401"}, kind: provider.ErrAuth, status: 401, requests: 1,
			contains: []string{"refused", KeyEnv}},
		{name: "404 model", exchanges: []string{"error_404_model"}, model: "claude-nope", kind: provider.ErrModel, status: 404, requests: 1,
			contains: []string{`"claude-nope"`, "model: claude-nope"}},
		{name: "400 prompt too long", exchanges: []string{"error_400_too_long"}, kind: provider.ErrBadRequest, status: 400, requests: 1,
			contains: []string{"prompt is too long"}},
		{name: "persistent 529", exchanges: []string{"error_529"}, kind: provider.ErrTransient, status: 529, requests: 3,
			contains: []string{"HTTP 529", "Overloaded", "after 3 attempts"}},
		{name: "persistent 429", exchanges: []string{"error_429"}, kind: provider.ErrRateLimit, status: 429, requests: 3,
			contains: []string{"exceed the rate limit", "after 3 attempts"}},
		{name: "overloaded in the stream", exchanges: []string{"overloaded_in_stream"}, kind: provider.ErrTransient, requests: 3,
			contains: []string{"error event in the stream", "Overloaded", "after 3 attempts"}},
		{name: "overloaded after text is not retried", exchanges: []string{"overloaded_after_text", "text"}, kind: provider.ErrTransient, requests: 1,
			contains: []string{"Overloaded"}},
		{name: "persistent truncation", exchanges: []string{"truncated"}, kind: provider.ErrTransient, requests: 3,
			contains: []string{"ended before the response was complete"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var exs []providertest.Exchange
			for _, n := range tc.exchanges {
				exs = append(exs, exchange(t, n))
			}
			srv := providertest.NewServer(t, exs...)
			req := simpleRequest()
			if tc.model != "" {
				req.Model = tc.model
			}
			resp, _, err := stream(t, newTestProvider(srv), req)
			if resp != nil {
				t.Errorf("response %+v with an error", resp)
			}
			var e *provider.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *provider.Error", err, err)
			}
			if e.Kind != tc.kind || e.Status != tc.status || e.Provider != Name {
				t.Errorf("kind %q status %d provider %q, want %q %d; %v", e.Kind, e.Status, e.Provider, tc.kind, tc.status, err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "sk-ant") {
				t.Errorf("error shows the key: %q", err)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	for _, first := range []string{"error_429", "error_529", "overloaded_in_stream", "truncated"} {
		t.Run(first, func(t *testing.T) {
			srv := providertest.NewServer(t, exchange(t, first), exchange(t, "text"))
			resp, events, err := stream(t, newTestProvider(srv), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Hello! How can I help you today?" || len(events) != 3 {
				t.Errorf("response %+v after %d events", resp, len(events))
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "error_529"))
	p := newTestProvider(srv, func(o *Options) { o.RetryBaseDelay, o.RetryMaxDelay = time.Minute, time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Stream(ctx, simpleRequest(), nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
}

func TestMissingKey(t *testing.T) {
	t.Setenv(KeyEnv, "")
	srv := providertest.NewServer(t, exchange(t, "text"))
	_, err := newTestProvider(srv, func(o *Options) { o.APIKey = "" }).Stream(context.Background(), simpleRequest(), nil)
	if provider.KindOf(err) != provider.ErrAuth || !strings.Contains(err.Error(), KeyEnv) {
		t.Fatalf("err %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests without a key", n)
	}
}

func TestKeyFromEnvironment(t *testing.T) {
	t.Setenv(KeyEnv, testKey)
	srv := providertest.NewServer(t, exchange(t, "text"))
	if _, _, err := stream(t, newTestProvider(srv, func(o *Options) { o.APIKey = "" }), simpleRequest()); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Header.Get("Authorization") != "Bearer "+testKey && r.Header.Get("X-Api-Key") != testKey {
		t.Errorf("key not sent: %v", r.Header)
	}
}

func TestUnreachableServer(t *testing.T) {
	hs := httptest.NewServer(nil)
	url := hs.URL
	hs.Close()
	p := New(Options{APIKey: testKey, BaseURL: url, MaxRetries: 1, RetryBaseDelay: time.Millisecond})
	_, err := p.Stream(context.Background(), simpleRequest(), nil)
	if provider.KindOf(err) != provider.ErrTransient || !strings.Contains(err.Error(), "cannot reach "+url) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Fatalf("err %v", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "text"))
	p := newTestProvider(srv)
	for _, req := range []provider.Request{
		{Model: "claude-sonnet-4-5", Messages: []provider.Message{{Role: "robot", Content: "x"}}},
		{Model: "claude-sonnet-4-5", Messages: []provider.Message{{Role: provider.RoleTool, Content: "x"}}},
		{Model: "claude-sonnet-4-5", Tools: []provider.Tool{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
	} {
		if _, err := p.Stream(context.Background(), req, nil); provider.KindOf(err) != provider.ErrBadRequest {
			t.Errorf("%+v: err %v", req, err)
		}
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d requests for bad input", n)
	}
}

func TestContextWindow(t *testing.T) {
	p := New(Options{APIKey: "x"})
	for model, want := range map[string]int{
		"claude-3-5-sonnet-20241022": 200000,
		"claude-3-7-sonnet-latest":   200000,
		"claude-sonnet-4-5":          200000,
		"claude-opus-4-1-20250805":   200000,
		"claude-haiku-4-5":           200000,
		"claude-2.0":                 100000,
		"claude-something-new":       DefaultContextWindow,
	} {
		if got := p.ContextWindow(model); got != want {
			t.Errorf("%s: %d, want %d", model, got, want)
		}
	}
	if got := New(Options{ContextWindow: 1000000}).ContextWindow("claude-sonnet-4-5"); got != 1000000 {
		t.Errorf("override: %d", got)
	}
}
