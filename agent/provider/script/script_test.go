package script

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk/agent/provider"
)

type memCursor struct{ n int }

func (c *memCursor) Next(context.Context) (int, error) { c.n++; return c.n - 1, nil }

func TestParseRefusesBadScripts(t *testing.T) {
	for _, bad := range []string{
		`{}`, `{"steps":[]}`, `{"steps":[{}]}`, `{"steps":[{"text":"x","delay_ms":-1}]}`,
		`{"steps":[{"tool_calls":[{"arguments":{}}]}]}`, `{"steps":[{"tool_calls":[{"name":"x","arguments":[1]}]}]}`, `not json`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}

func TestStepsInOrderThenExhausted(t *testing.T) {
	s, err := Parse([]byte(`{"steps":[{"text":"hello there"},{"tool_calls":[{"name":"read_file","arguments":{"path":"/a"}},{"name":"list_files"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Script: s, Cursor: &memCursor{}, Session: "ses_x"}
	var evs []provider.Event
	r, err := p.Stream(context.Background(), provider.Request{}, func(e provider.Event) { evs = append(evs, e) })
	if err != nil || r.Text != "hello there" || r.StopReason != "end" || len(evs) != 2 || evs[0].Text != "hello " {
		t.Fatalf("step 1: %+v %v %+v", r, err, evs)
	}
	r, err = p.Stream(context.Background(), provider.Request{}, func(provider.Event) {})
	if err != nil || len(r.ToolCalls) != 2 || r.ToolCalls[1].Name != "list_files" || string(r.ToolCalls[1].Arguments) != "{}" || r.StopReason != "tool_calls" {
		t.Fatalf("step 2: %+v %v", r, err)
	}
	_, err = p.Stream(context.Background(), provider.Request{}, func(provider.Event) {})
	if provider.KindOf(err) != provider.ErrExhausted || !strings.Contains(err.Error(), "3rd time") || !strings.Contains(err.Error(), "2 step") {
		t.Fatalf("exhausted: %v", err)
	}
}

func TestDelayStreamsSlowlyAndStopsOnCancel(t *testing.T) {
	s, _ := Parse([]byte(`{"steps":[{"text":"one two three four","delay_ms":400}]}`))
	p := &Provider{Script: s, Cursor: &memCursor{}}
	ctx, cancel := context.WithCancel(context.Background())
	var got []string
	start := time.Now()
	_, err := p.Stream(ctx, provider.Request{}, func(e provider.Event) {
		got = append(got, e.Text)
		if len(got) == 2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || len(got) != 2 {
		t.Fatalf("cancel mid-stream: %v %v", err, got)
	}
	if el := time.Since(start); el < 150*time.Millisecond || el > 350*time.Millisecond {
		t.Fatalf("two of four pieces of a 400ms step took %v", el)
	}
}

// TestStepUsage: a step's usage is reported exactly as written (so tests
// can count tokens deterministically); without one the step reports an
// estimate; impossible counts are refused when the script is parsed.
func TestStepUsage(t *testing.T) {
	s, err := Parse([]byte(`{"steps":[{"text":"hi","usage":{"input_tokens":1200,"output_tokens":34,"cached_tokens":1000}},{"text":"plain"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Script: s, Cursor: &memCursor{}}
	r, err := p.Stream(context.Background(), provider.Request{System: strings.Repeat("x", 400)}, func(provider.Event) {})
	if err != nil || r.Usage != (provider.Usage{InputTokens: 1200, OutputTokens: 34, CachedTokens: 1000}) {
		t.Fatalf("step with usage: %+v %v", r, err)
	}
	r, err = p.Stream(context.Background(), provider.Request{System: strings.Repeat("x", 400)}, func(provider.Event) {})
	if err != nil || r.Usage.InputTokens != 100 || r.Usage.OutputTokens != 2 || r.Usage.CachedTokens != 0 {
		t.Fatalf("step without usage: %+v %v", r, err)
	}
	for _, bad := range []string{
		`{"steps":[{"text":"x","usage":{"input_tokens":-1}}]}`,
		`{"steps":[{"text":"x","usage":{"input_tokens":10,"cached_tokens":11}}]}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("Parse(%s) = %v", bad, err)
		}
	}
}

// TestPlaceholders: {{thread:<title>}} and {{thread_group:<title>}} in
// tool-call arguments are resolved through Refs; an unknown title fails
// the call by name; without Refs the arguments are left as written.
func TestPlaceholders(t *testing.T) {
	s, err := Parse([]byte(`{"steps":[
		{"tool_calls":[{"name":"thread_followup","arguments":{"thread_ids":["{{thread:alpha}}","{{thread:beta two}}"],"thread_group_id":"{{thread_group:alpha}}","text":"keep {{ this"}}]},
		{"tool_calls":[{"name":"thread_request_report","arguments":{"thread_id":"{{thread:nobody}}"}}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	refs := func(_ context.Context, kind, title string) (string, error) {
		switch {
		case kind == "thread" && title == "alpha":
			return "thr_A", nil
		case kind == "thread" && title == "beta two":
			return "thr_B", nil
		case kind == "thread_group" && title == "alpha":
			return "tgr_A", nil
		}
		return "", errors.New("no thread titled " + title)
	}
	p := &Provider{Script: s, Cursor: &memCursor{}, Session: "ses_x", Refs: refs}
	var delta string
	r, err := p.Stream(context.Background(), provider.Request{}, func(e provider.Event) { delta += e.ArgsDelta })
	want := `{"thread_ids":["thr_A","thr_B"],"thread_group_id":"tgr_A","text":"keep {{ this"}`
	if err != nil || string(r.ToolCalls[0].Arguments) != want || delta != want {
		t.Fatalf("resolved: %s (streamed %s) %v", r.ToolCalls[0].Arguments, delta, err)
	}
	if _, err := p.Stream(context.Background(), provider.Request{}, func(provider.Event) {}); err == nil || !strings.Contains(err.Error(), "{{thread:nobody}}") || !strings.Contains(err.Error(), "no thread titled nobody") {
		t.Fatalf("unknown title: %v", err)
	}
	raw := &Provider{Script: s, Cursor: &memCursor{}}
	r, err = raw.Stream(context.Background(), provider.Request{}, func(provider.Event) {})
	if err != nil || !strings.Contains(string(r.ToolCalls[0].Arguments), "{{thread:alpha}}") {
		t.Fatalf("without Refs: %s %v", r.ToolCalls[0].Arguments, err)
	}
}

// TestSlowArgumentsStreamInPieces: a slow step's tool arguments arrive in
// several deltas that join to the whole arguments, each cut on a
// character boundary; a step without a delay sends them in one delta.
func TestSlowArgumentsStreamInPieces(t *testing.T) {
	content := strings.Repeat("é line of the file\n", 80)
	for _, delay := range []int{0, 20} {
		s, err := Parse([]byte(`{"steps":[{"tool_calls":[{"name":"write_file","arguments":{"path":"/artifacts/a.md","content":` +
			strconv.Quote(content) + `}}],"delay_ms":` + strconv.Itoa(delay) + `}]}`))
		if err != nil {
			t.Fatal(err)
		}
		p := &Provider{Script: s, Cursor: &memCursor{}}
		var deltas []string
		resp, err := p.Stream(context.Background(), provider.Request{}, func(e provider.Event) {
			if e.Type == provider.EventToolCallDelta {
				deltas = append(deltas, e.ArgsDelta)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(deltas, ""); got != string(resp.ToolCalls[0].Arguments) {
			t.Fatalf("delay %d: deltas join to %q, want the arguments", delay, got)
		}
		for _, d := range deltas {
			if !utf8.ValidString(d) {
				t.Fatalf("delay %d: a piece cuts a character: %q", delay, d)
			}
		}
		if delay == 0 && len(deltas) != 1 || delay > 0 && len(deltas) < 5 {
			t.Fatalf("delay %d: %d deltas", delay, len(deltas))
		}
	}
}
