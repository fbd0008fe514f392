// Package script is the script model provider: a real, documented feature
// for deterministic demos and for testing agents. A session created with
// {"model":"script","script":{"steps":[…]}} answers each model call with the
// next step of its script; the cursor is durable, so a restarted desk
// continues where it left off, and an exhausted script fails the call with
// a clear error instead of inventing an answer.
package script

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk/agent/provider"
)

// Step is one scripted model answer.
type Step struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// DelayMS streams the step slowly: the text (and each tool call) is
	// delivered in pieces spread over this many milliseconds; a tool
	// call's arguments then stream in pieces of about 256 bytes too, so a
	// page can be watched rendering them as they come.
	DelayMS int `json:"delay_ms,omitempty"`
	// Usage is the token counts the step reports, as a provider would;
	// without it the step reports an estimate from the request's size.
	Usage *provider.Usage `json:"usage,omitempty"`
}

// ToolCall is a scripted tool call; Arguments is any JSON value.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Script is a session's script. Handlers script the session's handler
// threads: a thread started with one of these titles answers from its
// steps, with a durable cursor of its own.
type Script struct {
	Steps    []Step            `json:"steps"`
	Handlers map[string][]Step `json:"handlers,omitempty"`
}

// Handler is the script of the handler thread titled title, or nil.
func (s *Script) Handler(title string) *Script {
	steps, ok := s.Handlers[title]
	if !ok {
		return nil
	}
	return &Script{Steps: steps}
}

// Parse validates a script: at least one step, every step with text or
// tool calls, every tool call named, arguments a JSON object, delays within
// a minute.
func Parse(b []byte) (*Script, error) {
	var s Script
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("script: %v", err)
	}
	if len(s.Steps) == 0 {
		return nil, fmt.Errorf("script: steps must list at least one step")
	}
	if err := checkSteps("", s.Steps); err != nil {
		return nil, err
	}
	for title, steps := range s.Handlers {
		if title == "" || len(steps) == 0 {
			return nil, fmt.Errorf("script: handlers must map a thread title to at least one step")
		}
		if err := checkSteps(fmt.Sprintf("handler %q ", title), steps); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// checkSteps validates one list of steps; at names it in errors.
func checkSteps(at string, steps []Step) error {
	for i, st := range steps {
		if st.Text == "" && len(st.ToolCalls) == 0 {
			return fmt.Errorf("script: %sstep %d has neither text nor tool_calls", at, i)
		}
		if st.DelayMS < 0 || st.DelayMS > 60000 {
			return fmt.Errorf("script: %sstep %d delay_ms must be between 0 and 60000", at, i)
		}
		if u := st.Usage; u != nil && (u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedTokens < 0 || u.CachedTokens > u.InputTokens) {
			return fmt.Errorf("script: %sstep %d usage counts must not be negative, and cached_tokens must not exceed input_tokens", at, i)
		}
		for j, c := range st.ToolCalls {
			if c.Name == "" {
				return fmt.Errorf("script: %sstep %d tool call %d has no name", at, i, j)
			}
			if len(c.Arguments) > 0 {
				var m map[string]any
				if err := json.Unmarshal(c.Arguments, &m); err != nil {
					return fmt.Errorf("script: %sstep %d tool call %d arguments must be a JSON object", at, i, j)
				}
			}
		}
	}
	return nil
}

// Cursor hands out step numbers durably: Next returns the index of the step
// to answer with and advances it in the same breath.
type Cursor interface {
	Next(ctx context.Context) (int, error)
}

// Provider answers from one session's script.
type Provider struct {
	Script *Script
	Cursor Cursor
	// Session names the session in error messages.
	Session string
	// Refs resolves the placeholders {{thread:<title>}} and
	// {{thread_group:<title>}} in tool-call arguments to the id of the
	// session's thread with that title (or of its group), so a script can
	// address threads whose ids it cannot know in advance. Nil leaves
	// placeholders as they are.
	Refs func(ctx context.Context, kind, title string) (string, error)
}

// placeholder is a reference a script's tool-call arguments may contain.
var placeholder = regexp.MustCompile(`\{\{(thread|thread_group):([^{}"\\]+)\}\}`)

// resolve replaces the placeholders of args.
func (p *Provider) resolve(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
	if p.Refs == nil || !placeholder.Match(args) {
		return args, nil
	}
	var err error
	out := placeholder.ReplaceAllFunc(args, func(m []byte) []byte {
		sub := placeholder.FindSubmatch(m)
		id, e := p.Refs(ctx, string(sub[1]), string(sub[2]))
		if e != nil && err == nil {
			err = fmt.Errorf("script of session %s: %s: %w", p.Session, m, e)
		}
		return []byte(id)
	})
	return out, err
}

var _ provider.Provider = (*Provider)(nil)

// ContextWindow of a script is nominal.
func (p *Provider) ContextWindow(string) int { return 128000 }

// Stream answers with the next step.
func (p *Provider) Stream(ctx context.Context, req provider.Request, fn func(provider.Event)) (*provider.Response, error) {
	i, err := p.Cursor.Next(ctx)
	if err != nil {
		return nil, err
	}
	if i >= len(p.Script.Steps) {
		return nil, &provider.Error{Kind: provider.ErrExhausted, Provider: "script",
			Message: fmt.Sprintf("the script of session %s is exhausted: the model was called a %s time, but the script has %d step(s)", p.Session, ordinal(i+1), len(p.Script.Steps))}
	}
	st := p.Script.Steps[i]
	pieces := splitText(st.Text)
	n := len(pieces)
	for _, c := range st.ToolCalls {
		n += len(splitArgs(string(c.Arguments)))
	}
	var pause time.Duration
	if st.DelayMS > 0 && n > 0 {
		pause = time.Duration(st.DelayMS) * time.Millisecond / time.Duration(n)
	}
	wait := func() error {
		if pause == 0 {
			return ctx.Err()
		}
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for _, piece := range pieces {
		if err := wait(); err != nil {
			return nil, err
		}
		fn(provider.Event{Type: provider.EventText, Text: piece})
	}
	resp := &provider.Response{Text: st.Text, StopReason: "end"}
	for k, c := range st.ToolCalls {
		if err := wait(); err != nil {
			return nil, err
		}
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		args, err := p.resolve(ctx, args)
		if err != nil {
			return nil, err
		}
		id := "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(k)
		fn(provider.Event{Type: provider.EventToolCallStart, Index: k, ToolCallID: id, Name: c.Name})
		if pause == 0 {
			fn(provider.Event{Type: provider.EventToolCallDelta, Index: k, ArgsDelta: string(args)})
		}
		for j, piece := range splitArgs(string(args)) {
			if pause == 0 {
				break
			}
			if j > 0 {
				if err := wait(); err != nil {
					return nil, err
				}
			}
			fn(provider.Event{Type: provider.EventToolCallDelta, Index: k, ArgsDelta: piece})
		}
		resp.ToolCalls = append(resp.ToolCalls, provider.ToolCall{ID: id, Name: c.Name, Arguments: args})
	}
	if len(resp.ToolCalls) > 0 {
		resp.StopReason = "tool_calls"
	}
	resp.Usage = provider.Usage{InputTokens: estimate(req), OutputTokens: (len(st.Text) + 3) / 4}
	if st.Usage != nil {
		resp.Usage = *st.Usage
	}
	return resp, nil
}

// splitText cuts text into word-sized pieces, so a slow step streams.
func splitText(s string) []string {
	var out []string
	start := 0
	for i, r := range s {
		if r == ' ' || r == '\n' {
			out = append(out, s[start:i+utf8.RuneLen(r)])
			start = i + utf8.RuneLen(r)
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// argsPiece is the size of a slow step's argument pieces.
const argsPiece = 256

// splitArgs cuts arguments into pieces of about argsPiece bytes, never
// inside a character.
func splitArgs(s string) []string {
	var out []string
	for len(s) > argsPiece {
		n := argsPiece
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

func estimate(req provider.Request) int {
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Arguments)
		}
	}
	return n / 4
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
