package openai

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

const testKey = "sk-test-0123456789abcdefghijklmnopqrstuvwxyz-secret"

func exchange(t *testing.T, name string) providertest.Exchange {
	t.Helper()
	return providertest.Load(t, filepath.Join("testdata", name+".http"))
}

// newTestProvider points a provider at srv with a fast backoff: three
// attempts in all.
func newTestProvider(srv *providertest.Server, mod ...func(*Options)) *Provider {
	o := Options{
		APIKey:         testKey,
		BaseURL:        srv.URL + "/v1",
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
		Model:    "gpt-4o",
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
	if want := []string{"Hello", "!", " How can", " I help", " you today?"}; !reflect.DeepEqual(texts, want) {
		t.Errorf("deltas %q, want %q", texts, want)
	}
	if resp.Text != "Hello! How can I help you today?" || resp.StopReason != "end" || len(resp.ToolCalls) != 0 {
		t.Errorf("response %+v", resp)
	}
	if resp.Usage != (provider.Usage{InputTokens: 19, OutputTokens: 9}) {
		t.Errorf("usage %+v", resp.Usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" {
		t.Errorf("%s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
	body := requestBody(t, r)
	if body["model"] != "gpt-4o" || body["stream"] != true {
		t.Errorf("model/stream: %v %v", body["model"], body["stream"])
	}
	jsonEqual(t, "stream_options", body["stream_options"], `{"include_usage":true}`)
	jsonEqual(t, "messages", body["messages"], `[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"}]`)
	if _, ok := body["tools"]; ok {
		t.Error("tools sent without tools")
	}
	if _, ok := body["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent without MaxTokens")
	}
}

func TestToolCall(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "tool_call"))
	resp, events, err := stream(t, newTestProvider(srv), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if len(events) == 0 || events[0] != (provider.Event{Type: provider.EventToolCallStart, Index: 0, ToolCallID: "call_Qm3vW8xYz1AbCdEf2GhIj4Kl", Name: "read_file"}) {
		t.Fatalf("first event %+v", events)
	}
	var args strings.Builder
	for _, e := range events[1:] {
		if e.Type != provider.EventToolCallDelta || e.Index != 0 {
			t.Errorf("unexpected event %+v", e)
		}
		args.WriteString(e.ArgsDelta)
	}
	if args.String() != `{"path":"/artifacts/notes.md"}` {
		t.Errorf("streamed arguments %q", args.String())
	}
	if resp.StopReason != "tool_calls" || resp.Text != "" || len(resp.ToolCalls) != 1 {
		t.Fatalf("response %+v", resp)
	}
	c := resp.ToolCalls[0]
	if c.ID != "call_Qm3vW8xYz1AbCdEf2GhIj4Kl" || c.Name != "read_file" {
		t.Errorf("call %+v", c)
	}
	jsonEqual(t, "arguments", c.Arguments, `{"path":"/artifacts/notes.md"}`)
	if resp.Usage != (provider.Usage{InputTokens: 141, OutputTokens: 18}) {
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
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	wantStarts := []provider.Event{
		{Type: provider.EventToolCallStart, Index: 0, ToolCallID: "call_7sKd2LmNo3PqRs4TuVw5XyZa", Name: "fetch"},
		{Type: provider.EventToolCallStart, Index: 1, ToolCallID: "call_9bCd8EfGh7IjKl6MnOp5QrSt", Name: "list_files"},
	}
	if !reflect.DeepEqual(starts, wantStarts) {
		t.Errorf("starts %+v", starts)
	}
	if args[0] != `{"url": "https://example.com/a"}` || args[1] != `{"path": "/artifacts"}` {
		t.Errorf("streamed arguments %v", args)
	}
	if resp.StopReason != "tool_calls" || len(resp.ToolCalls) != 2 {
		t.Fatalf("response %+v", resp)
	}
	jsonEqual(t, "call 0", resp.ToolCalls[0], `{"id":"call_7sKd2LmNo3PqRs4TuVw5XyZa","name":"fetch","arguments":{"url":"https://example.com/a"}}`)
	jsonEqual(t, "call 1", resp.ToolCalls[1], `{"id":"call_9bCd8EfGh7IjKl6MnOp5QrSt","name":"list_files","arguments":{"path":"/artifacts"}}`)
}

// TestStreamsIncrementally holds the server's body after three events until
// the first text has reached the callback: an adapter that waited for the
// whole body would never see it, and the test would time out.
func TestStreamsIncrementally(t *testing.T) {
	resume := make(chan struct{})
	ex := exchange(t, "text")
	ex.PauseAfter, ex.Resume = 3, resume
	srv := providertest.NewServer(t, ex)
	p := newTestProvider(srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var texts []string
	resp, err := p.Stream(ctx, simpleRequest(), func(e provider.Event) {
		texts = append(texts, e.Text)
		if len(texts) == 2 {
			close(resume) // "Hello" and "!" arrived while the server held the rest
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts, "|") != "Hello|!| How can| I help| you today?" {
		t.Errorf("deltas %q", texts)
	}
	if resp.Text != "Hello! How can I help you today?" {
		t.Errorf("text %q", resp.Text)
	}
}

func TestCancelMidStream(t *testing.T) {
	ex := exchange(t, "text")
	ex.PauseAfter = 2 // then hang until the client goes away
	srv := providertest.NewServer(t, ex)
	p := newTestProvider(srv)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	resp, err := p.Stream(ctx, simpleRequest(), func(e provider.Event) {
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
		Model:  "gpt-4.1",
		System: "You are desk's agent.",
		Messages: []provider.Message{
			{Role: provider.RoleUser, Content: "Summarise notes.md and list /artifacts."},
			{Role: provider.RoleAssistant, Content: "Reading both.", ToolCalls: []provider.ToolCall{
				{ID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"/artifacts/notes.md"}`)},
				{ID: "call_2", Name: "list_files", Arguments: json.RawMessage(`{}`)},
			}},
			{Role: provider.RoleTool, ToolCallID: "call_1", Name: "read_file", Content: "# Notes\nbuy milk"},
			{Role: provider.RoleTool, ToolCallID: "call_2", Name: "list_files", Content: `{"code":"FS_DENIED"}`, IsError: true},
			{Role: provider.RoleAssistant, ToolCalls: []provider.ToolCall{
				{ID: "call_3", Name: "list_files", Arguments: nil},
			}},
			{Role: provider.RoleTool, ToolCallID: "call_3", Content: `{"files":[]}`},
			{Role: provider.RoleUser, Content: "Thanks. Now the summary please."},
		},
		Tools: []provider.Tool{
			{Name: "read_file", Description: "Read a file.", Parameters: json.RawMessage(
				`{"type":"object","properties":{"path":{"type":"string","description":"guest path","maxLength":4096}},"required":["path"],"additionalProperties":false}`)},
			{Name: "list_files", Description: "List a directory.", Parameters: nil},
		},
		MaxTokens: 500,
	}
	if _, _, err := stream(t, newTestProvider(srv), req); err != nil {
		t.Fatal(err)
	}
	body := requestBody(t, srv.Requests()[0])
	jsonEqual(t, "messages", body["messages"], `[
		{"role":"system","content":"You are desk's agent."},
		{"role":"user","content":"Summarise notes.md and list /artifacts."},
		{"role":"assistant","content":"Reading both.","tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"/artifacts/notes.md\"}"}},
			{"id":"call_2","type":"function","function":{"name":"list_files","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"# Notes\nbuy milk"},
		{"role":"tool","tool_call_id":"call_2","content":"{\"code\":\"FS_DENIED\"}"},
		{"role":"assistant","tool_calls":[
			{"id":"call_3","type":"function","function":{"name":"list_files","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"call_3","content":"{\"files\":[]}"},
		{"role":"user","content":"Thanks. Now the summary please."}]`)
	jsonEqual(t, "tools", body["tools"], `[
		{"type":"function","function":{"name":"read_file","description":"Read a file.","parameters":
			{"type":"object","properties":{"path":{"type":"string","description":"guest path","maxLength":4096}},"required":["path"],"additionalProperties":false}}},
		{"type":"function","function":{"name":"list_files","description":"List a directory.","parameters":{"type":"object","properties":{}}}}]`)
	if body["max_completion_tokens"] != float64(500) {
		t.Errorf("max_completion_tokens %v", body["max_completion_tokens"])
	}
	if _, ok := body["max_tokens"]; ok {
		t.Error("max_tokens sent to OpenAI")
	}
}

func TestCompatibleServer(t *testing.T) {
	t.Setenv(KeyEnv, "")
	srv := providertest.NewServer(t, exchange(t, "compat_index_zero"))
	p := newTestProvider(srv, func(o *Options) { o.APIKey = ""; o.Name = NameCompatible })
	req := simpleRequest()
	req.Model = "qwen3:8b"
	req.MaxTokens = 256
	resp, events, err := stream(t, p, req)
	if err != nil {
		t.Fatal(err)
	}
	// Both calls arrive at index 0 with different ids: two calls.
	if resp.Text != "Checking both." || resp.StopReason != "tool_calls" || len(resp.ToolCalls) != 2 {
		t.Fatalf("response %+v", resp)
	}
	jsonEqual(t, "calls", resp.ToolCalls, `[
		{"id":"call_k1v9x2qe","name":"read_file","arguments":{"path":"/artifacts/a.md"}},
		{"id":"call_7hd3m0wz","name":"read_file","arguments":{"path":"/artifacts/b.md"}}]`)
	if events[1].Type != provider.EventToolCallStart || events[3].Type != provider.EventToolCallStart || events[3].Index != 1 {
		t.Errorf("events %+v", events)
	}
	if resp.Usage != (provider.Usage{}) {
		t.Errorf("usage %+v from a server that sent none", resp.Usage)
	}
	r := srv.Requests()[0]
	if got := r.Header.Get("Authorization"); got != "" {
		t.Errorf("Authorization %q sent without a key", got)
	}
	body := requestBody(t, r)
	if body["max_tokens"] != float64(256) {
		t.Errorf("max_tokens %v", body["max_tokens"])
	}
	if _, ok := body["max_completion_tokens"]; ok {
		t.Error("max_completion_tokens sent to a compatible server")
	}
	if p.ContextWindow("qwen3:8b") != DefaultContextWindow {
		t.Error("unknown model window")
	}
}

func TestStreamOptionsRefused(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "compat_stream_options_400"), exchange(t, "text"))
	p := newTestProvider(srv, func(o *Options) { o.Name = NameCompatible })
	for i := range 2 {
		if _, _, err := stream(t, p, simpleRequest()); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if _, ok := requestBody(t, reqs[0])["stream_options"]; !ok {
		t.Error("first request without stream_options")
	}
	for _, r := range reqs[1:] {
		if _, ok := requestBody(t, r)["stream_options"]; ok {
			t.Error("stream_options asked again after the server refused it")
		}
	}
}

func TestLength(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "length"))
	resp, _, err := stream(t, newTestProvider(srv), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.StopReason != "max_tokens" || resp.Text != "Once upon" {
		t.Errorf("response %+v", resp)
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
		{name: "404 model", exchanges: []string{"error_404_model"}, model: "gpt-nope", kind: provider.ErrModel, status: 404, requests: 1,
			contains: []string{`"gpt-nope"`, "does not exist"}},
		{name: "vLLM 404", exchanges: []string{"compat_vllm_404"}, model: "llama-nope", kind: provider.ErrModel, status: 404, requests: 1,
			contains: []string{`"llama-nope"`, "The model `llama-nope` does not exist."}},
		{name: "Ollama 404", exchanges: []string{"compat_ollama_404"}, model: "llama9", kind: provider.ErrModel, status: 404, requests: 1,
			contains: []string{"try pulling it first"}},
		{name: "400 context length", exchanges: []string{"error_400_context"}, kind: provider.ErrBadRequest, status: 400, requests: 1,
			contains: []string{"maximum context length is 128000 tokens"}},
		{name: "persistent 503", exchanges: []string{"error_503"}, kind: provider.ErrTransient, status: 503, requests: 3,
			contains: []string{"HTTP 503", "overloaded", "after 3 attempts"}},
		{name: "persistent 429", exchanges: []string{"error_429"}, kind: provider.ErrRateLimit, status: 429, requests: 3,
			contains: []string{"Rate limit reached", "after 3 attempts"}},
		{name: "429 quota is not retried", exchanges: []string{"error_429_quota"}, kind: provider.ErrRateLimit, status: 429, requests: 1,
			contains: []string{"exceeded your current quota"}},
		{name: "429 asking for minutes", exchanges: []string{"error_429_long_wait"}, kind: provider.ErrRateLimit, status: 429, requests: 1,
			contains: []string{"asked to wait 10m0s"}},
		{name: "stream error event", exchanges: []string{"stream_error"}, kind: provider.ErrTransient, requests: 3,
			contains: []string{"error event in the stream", "Sorry about that", "after 3 attempts"}},
		{name: "stream cut after text is not retried", exchanges: []string{"truncated_after_text", "text"}, kind: provider.ErrTransient, requests: 1,
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
			if e.Kind != tc.kind || e.Status != tc.status || e.Provider != NameOpenAI {
				t.Errorf("kind %q status %d provider %q, want %q %d; %v", e.Kind, e.Status, e.Provider, tc.kind, tc.status, err)
			}
			for _, s := range tc.contains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "sk-") {
				t.Errorf("error shows the key: %q", err)
			}
			if n := len(srv.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}

func TestRetriesThenSucceeds(t *testing.T) {
	for _, first := range []string{"error_429", "error_503", "stream_error", "truncated"} {
		t.Run(first, func(t *testing.T) {
			srv := providertest.NewServer(t, exchange(t, first), exchange(t, "text"))
			resp, events, err := stream(t, newTestProvider(srv), simpleRequest())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "Hello! How can I help you today?" || len(events) != 5 {
				t.Errorf("response %+v after %d events", resp, len(events))
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
		})
	}
}

// TestRetryAfterIsHonoured sets a backoff far longer than the test may take:
// the 40 ms the server asks for must replace it.
func TestRetryAfterIsHonoured(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "error_429"), exchange(t, "text"))
	p := newTestProvider(srv, func(o *Options) { o.RetryBaseDelay, o.RetryMaxDelay = time.Minute, time.Minute })
	start := time.Now()
	if _, _, err := stream(t, p, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 40*time.Millisecond || d > 5*time.Second {
		t.Errorf("took %v, want the 40ms the server asked for", d)
	}
}

func TestCancelDuringBackoff(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "error_503"))
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
	p := newTestProvider(srv, func(o *Options) { o.APIKey = "" })
	_, err := p.Stream(context.Background(), simpleRequest(), nil)
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
	p := newTestProvider(srv, func(o *Options) { o.APIKey = "" })
	if _, _, err := stream(t, p, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization %q", got)
	}
}

func TestUnreachableServer(t *testing.T) {
	hs := httptest.NewServer(nil)
	url := hs.URL
	hs.Close()
	p := New(Options{APIKey: testKey, BaseURL: url + "/v1", MaxRetries: 1, RetryBaseDelay: time.Millisecond})
	_, err := p.Stream(context.Background(), simpleRequest(), nil)
	if provider.KindOf(err) != provider.ErrTransient || !strings.Contains(err.Error(), "cannot reach "+url) || !strings.Contains(err.Error(), "after 2 attempts") {
		t.Fatalf("err %v", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := providertest.NewServer(t, exchange(t, "text"))
	p := newTestProvider(srv)
	for _, req := range []provider.Request{
		{Model: "gpt-4o", Messages: []provider.Message{{Role: "robot", Content: "x"}}},
		{Model: "gpt-4o", Messages: []provider.Message{{Role: provider.RoleTool, Content: "x"}}},
		{Model: "gpt-4o", Tools: []provider.Tool{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
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
		"gpt-4o":               128000,
		"gpt-4o-mini":          128000,
		"gpt-4.1-mini":         1047576,
		"o3":                   200000,
		"o4-mini-2025-04-16":   200000,
		"gpt-5":                272000,
		"gpt-5-mini":           272000,
		"gpt-5-chat-latest":    128000,
		"gpt-4":                8192,
		"openai/gpt-4o":        128000,
		"llama3.1:8b-instruct": DefaultContextWindow,
	} {
		if got := p.ContextWindow(model); got != want {
			t.Errorf("%s: %d, want %d", model, got, want)
		}
	}
	if got := New(Options{ContextWindow: 32768}).ContextWindow("gpt-4o"); got != 32768 {
		t.Errorf("override: %d", got)
	}
}

func TestCompatibleWrongBaseURL(t *testing.T) {
	srv := providertest.NewServer(t, providertest.Exchange{Status: 404, Body: []byte("404 page not found\n")})
	p := newTestProvider(srv, func(o *Options) { o.Name = NameCompatible; o.BaseURL = srv.URL })
	req := simpleRequest()
	req.Model = "llama3.1"
	_, err := p.Stream(context.Background(), req, nil)
	if provider.KindOf(err) != provider.ErrModel || !strings.Contains(err.Error(), "ends in /v1") {
		t.Fatalf("err %v", err)
	}
}
