package provider

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

var fast = RetryPolicy{MaxRetries: 2, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}

func TestRetryStopsOnSuccessAndFinalErrors(t *testing.T) {
	calls := 0
	err := Retry(context.Background(), fast, func(context.Context) error {
		calls++
		if calls < 2 {
			return Retryable(&Error{Kind: ErrTransient, Provider: "p", Message: "boom"}, 0)
		}
		return nil
	})
	if err != nil || calls != 2 {
		t.Fatalf("err %v after %d calls", err, calls)
	}

	calls = 0
	final := &Error{Kind: ErrAuth, Provider: "p", Message: "no"}
	err = Retry(context.Background(), fast, func(context.Context) error { calls++; return final })
	if err != final || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestRetryGivesUp(t *testing.T) {
	calls := 0
	orig := &Error{Kind: ErrRateLimit, Provider: "p", Message: "slow down", Status: 429}
	err := Retry(context.Background(), fast, func(context.Context) error {
		calls++
		return Retryable(orig, 0)
	})
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrRateLimit || e.Status != 429 || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	if e.Message != "slow down (after 3 attempts)" || orig.Message != "slow down" {
		t.Errorf("message %q (original %q)", e.Message, orig.Message)
	}
	var re *RetryableError
	if errors.As(err, &re) {
		t.Error("the final error still says retryable")
	}

	calls = 0
	_ = Retry(context.Background(), RetryPolicy{MaxRetries: -1}, func(context.Context) error {
		calls++
		return Retryable(orig, 0)
	})
	if calls != 1 {
		t.Errorf("MaxRetries -1 made %d calls", calls)
	}
}

func TestRetryAfterOverridesBackoffAndIsCapped(t *testing.T) {
	slow := RetryPolicy{MaxRetries: 1, BaseDelay: time.Hour, MaxDelay: time.Hour, MaxRetryAfter: time.Second}
	start := time.Now()
	calls := 0
	err := Retry(context.Background(), slow, func(context.Context) error {
		calls++
		if calls == 1 {
			return Retryable(&Error{Kind: ErrRateLimit, Message: "x"}, 20*time.Millisecond)
		}
		return nil
	})
	if err != nil || time.Since(start) > 5*time.Second || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}

	calls = 0
	err = Retry(context.Background(), slow, func(context.Context) error {
		calls++
		return Retryable(&Error{Kind: ErrRateLimit, Message: "x"}, time.Minute)
	})
	if calls != 1 || !strings.Contains(err.Error(), "asked to wait 1m0s") {
		t.Fatalf("err %v after %d calls", err, calls)
	}
}

func TestRetryStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	slow := RetryPolicy{BaseDelay: time.Hour, MaxDelay: time.Hour}
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	err := Retry(ctx, slow, func(context.Context) error {
		return Retryable(&Error{Kind: ErrTransient}, 0)
	})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for retry, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 50 {
			d := p.backoff(retry)
			if d < want/2 || d > want {
				t.Fatalf("retry %d: %v outside [%v, %v]", retry, d, want/2, want)
			}
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"40"}, "Retry-After": {"9"}}, 40 * time.Millisecond, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{}, 0, false},
		{nil, 0, false},
	} {
		got, ok := RetryAfter(tc.h)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%v: %v %v, want %v %v", tc.h, got, ok, tc.want, tc.ok)
		}
	}
	date := http.Header{"Retry-After": {time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}}
	if d, ok := RetryAfter(date); !ok || d < 25*time.Second || d > 31*time.Second {
		t.Errorf("date: %v %v", d, ok)
	}
}

func TestClassifyHTTP(t *testing.T) {
	key := "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
	for _, tc := range []struct {
		f     HTTPFailure
		kind  string
		retry bool
	}{
		{HTTPFailure{Status: 401, Message: "Incorrect API key provided: " + key}, ErrAuth, false},
		{HTTPFailure{Status: 403, Message: "Project does not have access to model gpt-5"}, ErrAuth, false},
		{HTTPFailure{Status: 404, Message: "Not Found"}, ErrModel, false},
		{HTTPFailure{Status: 400, Message: "model 'llama9' not found"}, ErrModel, false},
		{HTTPFailure{Status: 400, Code: "model_not_found"}, ErrModel, false},
		{HTTPFailure{Status: 400, Message: "invalid model ID"}, ErrModel, false},
		{HTTPFailure{Status: 400, Message: "This model's maximum context length is 8192 tokens"}, ErrBadRequest, false},
		{HTTPFailure{Status: 400, Message: "'tools' is not supported with this model"}, ErrBadRequest, false},
		{HTTPFailure{Status: 422, Message: "bad"}, ErrBadRequest, false},
		{HTTPFailure{Status: 429}, ErrRateLimit, true},
		{HTTPFailure{Status: 429, Code: "insufficient_quota"}, ErrRateLimit, false},
		{HTTPFailure{Status: 429, Header: http.Header{"X-Should-Retry": {"false"}}}, ErrRateLimit, false},
		{HTTPFailure{Status: 500}, ErrTransient, true},
		{HTTPFailure{Status: 501}, ErrBadRequest, false},
		{HTTPFailure{Status: 502}, ErrTransient, true},
		{HTTPFailure{Status: 529}, ErrTransient, true},
		{HTTPFailure{Status: 408}, ErrTransient, true},
		{HTTPFailure{Status: 400, Header: http.Header{"X-Should-Retry": {"true"}}}, ErrBadRequest, true},
		{HTTPFailure{InStream: true, Code: "overloaded_error", Message: "Overloaded"}, ErrTransient, true},
		{HTTPFailure{InStream: true, Code: "rate_limit_error"}, ErrRateLimit, true},
		{HTTPFailure{InStream: true, Code: "invalid_request_error"}, ErrBadRequest, false},
	} {
		tc.f.Provider, tc.f.KeyEnv, tc.f.Model, tc.f.Secrets = "p", "P_KEY", "m", []string{key}
		err := ClassifyHTTP(tc.f)
		var re *RetryableError
		if KindOf(err) != tc.kind || errors.As(err, &re) != tc.retry {
			t.Errorf("%+v: %v (retryable %v), want %s retry %v", tc.f, err, errors.As(err, &re), tc.kind, tc.retry)
		}
		if strings.Contains(err.Error(), "sk-") {
			t.Errorf("%+v: key in %q", tc.f, err)
		}
		var e *Error
		errors.As(err, &e)
		if e.Status != tc.f.Status {
			t.Errorf("status %d, want %d", e.Status, tc.f.Status)
		}
		if tc.kind == ErrModel && !strings.Contains(e.Message, `"m"`) {
			t.Errorf("model error %q does not name the model", e.Message)
		}
		if tc.kind == ErrAuth && !strings.Contains(e.Message, "P_KEY") {
			t.Errorf("auth error %q does not name the variable", e.Message)
		}
	}
}

func TestRedact(t *testing.T) {
	s := Redact("key sk-ant-api03-AbC_dEf-123456 and Bearer abcdefghijkl and my-secret-value here", "my-secret-value")
	if strings.Contains(s, "sk-ant") || strings.Contains(s, "abcdefghijkl") || strings.Contains(s, "my-secret-value") {
		t.Errorf("%q", s)
	}
	if Redact("model: claude-nope") != "model: claude-nope" {
		t.Error("redacted an innocent message")
	}
}

func TestErrorBody(t *testing.T) {
	for body, want := range map[string][2]string{
		`{"error":{"message":"m1","type":"t1","code":"c1"}}`:                 {"m1", "c1"},
		`{"type":"error","error":{"type":"not_found_error","message":"m2"}}`: {"m2", "not_found_error"},
		`{"error":"m3"}`: {"m3", ""},
		`{"object":"error","message":"m4","type":"NotFoundError","code":404}`: {"m4", "404"},
		`{"detail":"m5"}`: {"m5", ""},
		// Nothing but the known fields: a body that is not JSON, or JSON
		// without them, contributes nothing.
		"<html>bad gateway Authorization: Bearer abcdefghijklmnop</html>": {"", ""},
		`{"debug":"Authorization: Bearer secret123"}`:                     {"", ""},
		`{"detail":[{"loc":["body"],"msg":"field required"}]}`:            {"", ""},
	} {
		m, c := ErrorBody([]byte(body))
		if m != want[0] || c != want[1] {
			t.Errorf("%s: %q %q, want %q", body, m, c, want)
		}
	}
}

// TestClassifyHTTPDetail: what a provider said reaches the error as its
// type and message only, redacted, at most MaxDetail characters.
func TestClassifyHTTPDetail(t *testing.T) {
	body := `{"error":{"type":"invalid_request_error","message":"bad key sk-live-ABCDEF0123456789abcdef in header; token=hunter2hunter2 ` +
		`digest 0123456789abcdef0123456789abcdef01234567 b64 QWxhZGRpbjpvcGVuIHNlc2FtZQ9xY3Z2d2F5bG9uZ2tleQ"}, "debug":"Authorization: Bearer secret123"}`
	m, c := ErrorBody([]byte(body))
	err := ClassifyHTTP(HTTPFailure{Provider: "p", Model: "m", Status: 400, Message: m, Code: c, Secrets: []string{"the-key"}})
	got := err.Error()
	for _, leak := range []string{"sk-live", "ABCDEF0123456789abcdef", "hunter2", "0123456789abcdef0123", "QWxhZGRpbjpvcGVu", "secret123", "debug"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q leaks %q", got, leak)
		}
	}
	for _, keep := range []string{"HTTP 400", "invalid_request_error", "bad key", "in header"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q lacks %q", got, keep)
		}
	}
	long := ClassifyHTTP(HTTPFailure{Provider: "p", Model: "m", Status: 400, Message: strings.Repeat("é ", 600), Code: "invalid_request_error"})
	var e *Error
	if !errors.As(long, &e) {
		t.Fatal(long)
	}
	_, detail, _ := strings.Cut(e.Message, "(HTTP 400): ")
	if n := len([]rune(detail)); n > MaxDetail || n < MaxDetail-2 || !strings.HasPrefix(detail, "invalid_request_error: é") {
		t.Errorf("detail of %d characters: %q", n, detail)
	}
	html := ClassifyHTTP(HTTPFailure{Provider: "p", Model: "m", Status: 502})
	if !strings.Contains(html.Error(), "HTTP 502") {
		t.Errorf("%v", html)
	}
}

func TestDetailKeepsNames(t *testing.T) {
	for _, s := range []string{"model meta-llama/Llama-3.1-70B-Instruct-Turbo not found", "maximum context length is 8192 tokens",
		"/v1/chat/completions-with-a-rather-long-path-name"} {
		if got := Detail(s); got != s {
			t.Errorf("%q became %q", s, got)
		}
	}
}

func TestEndpointOf(t *testing.T) {
	if got := EndpointOf("https://user:pass@api.example.com/v1?key=x"); got != "https://api.example.com" {
		t.Errorf("%q", got)
	}
}

func TestAssembler(t *testing.T) {
	var events []Event
	a := NewAssembler(func(e Event) { events = append(events, e) })
	if a.Emitted() {
		t.Fatal("emitted before anything")
	}
	a.Text("")
	if a.Emitted() {
		t.Fatal("empty text counted as emitted")
	}
	a.Text("Hi")
	i := a.StartToolCall("", "fetch")
	a.ToolCallArgs(i, `{"url":`)
	a.ToolCallArgs(i, `"x"}`)
	j := a.StartToolCall("id2", "write_file")
	a.ToolCallArgs(j, `{"path": "/artif`) // cut short
	a.StartToolCall("id3", "list_files")  // no arguments at all
	a.ToolCallArgs(7, "ignored")
	r := a.Response("end", Usage{InputTokens: 1})
	if r.StopReason != "tool_calls" || r.Text != "Hi" || len(r.ToolCalls) != 3 {
		t.Fatalf("%+v", r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("response does not marshal: %v", err)
	}
	want := `{"text":"Hi","tool_calls":[{"id":"call_0","name":"fetch","arguments":{"url":"x"}},` +
		`{"id":"id2","name":"write_file","arguments":"{\"path\": \"/artif"},` +
		`{"id":"id3","name":"list_files","arguments":{}}],"stop_reason":"tool_calls","usage":{"input_tokens":1,"output_tokens":0}}`
	if string(b) != want {
		t.Errorf("\n got  %s\n want %s", b, want)
	}
	if len(events) != 7 {
		t.Errorf("%d events: %+v", len(events), events)
	}
	if r := NewAssembler(nil).Response("max_tokens", Usage{}); r.StopReason != "max_tokens" {
		t.Errorf("%+v", r)
	}
	if r := NewAssembler(nil).Response("", Usage{}); r.StopReason != "end" {
		t.Errorf("%+v", r)
	}
}

func TestContextWindowFor(t *testing.T) {
	table := map[string]int{"gpt-4": 8192, "gpt-4o": 128000}
	for model, want := range map[string]int{"gpt-4o-mini": 128000, "GPT-4": 8192, "openrouter/openai/gpt-4o": 128000, "x": 7} {
		if got := ContextWindowFor(table, model, 7); got != want {
			t.Errorf("%s: %d, want %d", model, got, want)
		}
	}
}
