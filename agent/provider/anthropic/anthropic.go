// Package anthropic is desk's adapter for the Anthropic Messages API, built
// on the official anthropic-sdk-go (v2). It streams one call, forwards text
// and tool-input deltas as provider events, and assembles the complete
// response.
//
// The SDK's own retries are turned off: retries happen here, through
// provider.Retry, so both adapters behave the same, a retry never repeats
// events the caller has already seen, and tests can shorten the backoff.
// The package never logs, and never returns or formats the API key.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/desk-runtime/desk/agent/provider"
)

// Name is the provider's name in errors.
const Name = "anthropic"

// KeyEnv is the environment variable the key is read from by default.
const KeyEnv = "ANTHROPIC_API_KEY"

// DefaultBaseURL is the SDK's endpoint, used when neither Options.BaseURL
// nor ANTHROPIC_BASE_URL is set.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the output limit of a request that sets none (the
// Messages API requires one). Models whose own limit is lower get theirs.
const DefaultMaxTokens = 8192

// DefaultContextWindow is the window of a Claude model the table does not
// know.
const DefaultContextWindow = 200000

// Options configure a Provider. The zero value talks to api.anthropic.com
// with the key from ANTHROPIC_API_KEY.
type Options struct {
	// APIKey is the key; empty means $ANTHROPIC_API_KEY. It is required.
	APIKey string
	// BaseURL is the API root; empty means the SDK's default
	// ($ANTHROPIC_BASE_URL or DefaultBaseURL).
	BaseURL string
	// HTTPClient replaces the SDK's client (tests, proxies).
	HTTPClient *http.Client
	// MaxRetries is the number of retries after the first attempt of a
	// call, on 429, 529, 5xx, network failures and overloaded errors in
	// the stream: 0 means provider.DefaultMaxRetries, negative means none.
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay shape the exponential backoff
	// (defaults provider.DefaultBaseDelay and provider.DefaultMaxDelay).
	// A server's Retry-After overrides them, up to RetryMaxWait
	// (default provider.DefaultMaxRetryAfter).
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	RetryMaxWait   time.Duration
	// MaxTokens is the output limit when a request sets none; 0 means
	// DefaultMaxTokens (or the model's lower limit).
	MaxTokens int
	// ContextWindow, when positive, overrides the built-in table.
	ContextWindow int
}

// Provider streams Messages API calls. It is safe for concurrent use.
type Provider struct {
	key       string
	endpoint  string
	client    sdk.Client
	retry     provider.RetryPolicy
	maxTokens int
	window    int
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider. It makes no request; a missing key is reported by
// the first Stream.
func New(opts Options) *Provider {
	key := opts.APIKey
	if key == "" {
		key = os.Getenv(KeyEnv)
	}
	base := opts.BaseURL
	if base == "" {
		base = os.Getenv("ANTHROPIC_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	// An explicit key also switches off the SDK's credential chain
	// (auth tokens, profiles on disk, federation), so desk uses exactly the
	// key it was given.
	ro := []option.RequestOption{
		option.WithAPIKey(key),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	return &Provider{
		key:      key,
		endpoint: provider.EndpointOf(base),
		client:   sdk.NewClient(ro...),
		retry: provider.RetryPolicy{
			MaxRetries:    opts.MaxRetries,
			BaseDelay:     opts.RetryBaseDelay,
			MaxDelay:      opts.RetryMaxDelay,
			MaxRetryAfter: opts.RetryMaxWait,
		},
		maxTokens: opts.MaxTokens,
		window:    opts.ContextWindow,
	}
}

// ThinkingBudget maps a reasoning effort to an extended-thinking budget
// in tokens (the API's minimum is 1024).
var ThinkingBudget = map[string]int{
	provider.EffortLow:    2048,
	provider.EffortMedium: 8192,
	provider.EffortHigh:   16384,
}

// contextWindows by model prefix (the longest prefix wins). Every Claude 3
// and 4 model has 200k by default (some offer 1M behind a beta flag, which
// desk does not send).
var contextWindows = map[string]int{
	"claude-instant":  100000,
	"claude-2.0":      100000,
	"claude-2.1":      200000,
	"claude-3":        200000,
	"claude-sonnet-4": 200000,
	"claude-opus-4":   200000,
	"claude-haiku-4":  200000,
}

// maxOutput are models whose output limit is below DefaultMaxTokens.
var maxOutput = map[string]int{
	"claude-3-haiku":  4096,
	"claude-3-opus":   4096,
	"claude-3-sonnet": 4096,
	"claude-2":        4096,
	"claude-instant":  4096,
}

// ContextWindow is the model's window in tokens: Options.ContextWindow when
// set, else the table, else DefaultContextWindow.
func (p *Provider) ContextWindow(model string) int {
	if p.window > 0 {
		return p.window
	}
	return provider.ContextWindowFor(contextWindows, model, DefaultContextWindow)
}

// Stream makes one streaming Messages call, retrying rate limits, overloads
// and transient failures until the first event has reached fn.
func (p *Provider) Stream(ctx context.Context, req provider.Request, fn func(provider.Event)) (*provider.Response, error) {
	if p.key == "" {
		return nil, provider.MissingKey(Name, KeyEnv)
	}
	if req.Model == "" {
		return nil, &provider.Error{Kind: provider.ErrModel, Provider: Name, Message: "no model was given"}
	}
	params, err := p.params(req)
	if err != nil {
		return nil, &provider.Error{Kind: provider.ErrBadRequest, Provider: Name, Message: err.Error()}
	}
	var out *provider.Response
	err = provider.Retry(ctx, p.retry, func(ctx context.Context) error {
		asm := provider.NewAssembler(fn)
		resp, err := p.once(ctx, req.Model, params, asm)
		if err != nil {
			if asm.Emitted() {
				return provider.NotRetryable(err)
			}
			return err
		}
		out = resp
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// turn is one message being built; consecutive messages of one role merge.
type turn struct {
	user   bool
	blocks []sdk.ContentBlockParamUnion
}

// params translates a request. Tool results become tool_result blocks of a
// user message, and consecutive ones share that message, ahead of any text
// (the API wants the results of one assistant turn together and first).
// Empty texts are left out: the API refuses empty text blocks.
func (p *Provider) params(req provider.Request) (sdk.MessageNewParams, error) {
	var turns []*turn
	add := func(user bool, results bool, b sdk.ContentBlockParamUnion) {
		if n := len(turns); n > 0 && turns[n-1].user == user {
			t := turns[n-1]
			if results {
				// Keep tool results ahead of the text of the same message.
				k := 0
				for k < len(t.blocks) && t.blocks[k].OfToolResult != nil {
					k++
				}
				t.blocks = append(t.blocks[:k], append([]sdk.ContentBlockParamUnion{b}, t.blocks[k:]...)...)
				return
			}
			t.blocks = append(t.blocks, b)
			return
		}
		turns = append(turns, &turn{user: user, blocks: []sdk.ContentBlockParamUnion{b}})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleUser:
			if m.Content != "" {
				add(true, false, sdk.NewTextBlock(m.Content))
			}
		case provider.RoleAssistant:
			// Thinking blocks go back first and unaltered, with their
			// signatures: in a tool loop the API refuses an assistant
			// message that dropped them. Unsigned reasoning (another
			// provider's) cannot be sent as a thinking block.
			for _, r := range m.Reasoning {
				switch {
				case r.Type == provider.ReasoningThinking && r.Signature != "":
					add(false, false, sdk.NewThinkingBlock(r.Signature, r.Text))
				case r.Type == provider.ReasoningRedacted && r.Data != "":
					add(false, false, sdk.NewRedactedThinkingBlock(r.Data))
				}
			}
			if m.Content != "" {
				add(false, false, sdk.NewTextBlock(m.Content))
			}
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Name == "" {
					return sdk.MessageNewParams{}, fmt.Errorf("message %d: a tool call needs an id and a name", i)
				}
				add(false, false, sdk.NewToolUseBlock(c.ID, toolInput(c.Arguments), c.Name))
			}
		case provider.RoleTool:
			if m.ToolCallID == "" {
				return sdk.MessageNewParams{}, fmt.Errorf("message %d: a tool result needs the tool_call_id of its call", i)
			}
			r := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				r.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			if m.IsError {
				r.IsError = sdk.Bool(true)
			}
			add(true, true, sdk.ContentBlockParamUnion{OfToolResult: &r})
		default:
			return sdk.MessageNewParams{}, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	params := sdk.MessageNewParams{
		Model:     sdk.Model(req.Model),
		MaxTokens: int64(p.maxTokensFor(req)),
	}
	if req.ReasoningEffort != "" {
		budget, ok := ThinkingBudget[req.ReasoningEffort]
		if !ok {
			return params, fmt.Errorf("reasoning effort %q: must be low, medium or high", req.ReasoningEffort)
		}
		// The budget is part of max_tokens and must stay below it: the
		// answer keeps the room it had without thinking.
		params.Thinking = sdk.ThinkingConfigParamOfEnabled(int64(budget))
		params.MaxTokens += int64(budget)
	}
	for _, t := range turns {
		if t.user {
			params.Messages = append(params.Messages, sdk.NewUserMessage(t.blocks...))
		} else {
			params.Messages = append(params.Messages, sdk.NewAssistantMessage(t.blocks...))
		}
	}
	if req.System != "" {
		params.System = []sdk.TextBlockParam{{Text: req.System}}
	}
	for _, t := range req.Tools {
		schema, err := inputSchema(t.Parameters)
		if err != nil {
			return params, fmt.Errorf("tool %s: parameters: %v", t.Name, err)
		}
		tp := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ToolUnionParam{OfTool: &tp})
	}
	return params, nil
}

func (p *Provider) maxTokensFor(req provider.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	n := p.maxTokens
	if n <= 0 {
		n = DefaultMaxTokens
	}
	if limit := provider.ContextWindowFor(maxOutput, req.Model, 0); limit > 0 && limit < n {
		n = limit
	}
	return n
}

// toolInput is the input of a tool_use block: the call's arguments, kept
// as raw JSON so nothing is re-encoded. The API accepts only an object, so
// arguments that are not one (a call cut short by max_tokens) go back as
// {}; the tool's error result tells the model what happened.
func toolInput(args json.RawMessage) any {
	members, err := objectMembers(args)
	if err != nil || members == nil {
		return map[string]any{}
	}
	return json.RawMessage(strings.TrimSpace(string(args)))
}

// objectMembers splits a JSON object into its raw members; nil for empty
// input.
func objectMembers(raw json.RawMessage) (map[string]json.RawMessage, error) {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	return m, nil
}

// inputSchema splits a JSON Schema object into the SDK's fields: type is
// always object, properties and required have their own fields, and
// everything else ($defs, additionalProperties, …) rides along as extra
// fields. Values stay raw JSON (the SDK's encoder would write a
// json.Number as a string).
func inputSchema(raw json.RawMessage) (sdk.ToolInputSchemaParam, error) {
	var s sdk.ToolInputSchemaParam
	m, err := objectMembers(raw)
	if err != nil {
		return s, err
	}
	s.Properties = map[string]any{}
	for k, v := range m {
		switch k {
		case "type":
		case "properties":
			s.Properties = v
		case "required":
			if err := json.Unmarshal(v, &s.Required); err != nil {
				return s, fmt.Errorf("required: %v", err)
			}
		default:
			if s.ExtraFields == nil {
				s.ExtraFields = map[string]any{}
			}
			s.ExtraFields[k] = v
		}
	}
	return s, nil
}

// once makes one attempt.
func (p *Provider) once(ctx context.Context, model string, params sdk.MessageNewParams, asm *provider.Assembler) (*provider.Response, error) {
	var httpRes *http.Response
	stream := p.client.Messages.NewStreaming(ctx, params, option.WithResponseInto(&httpRes))
	defer stream.Close()

	var (
		stop    string
		stopped bool
		usage   provider.Usage
		calls   = map[int64]int{}    // content block index → tool call index
		reason  = map[int64]int{}    // content block index → reasoning block index
		initial = map[int64]string{} // a tool_use block's input given whole at its start
		deltas  = map[int64]bool{}   // the block's input came as deltas
	)
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "message_start":
			u := ev.Message.Usage
			usage.InputTokens = int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens)
			usage.OutputTokens = int(u.OutputTokens)
			usage.CachedTokens = int(u.CacheReadInputTokens)
		case "content_block_start":
			cb := ev.ContentBlock
			switch cb.Type {
			case "text":
				asm.Text(cb.Text)
			case "thinking":
				reason[ev.Index] = asm.StartReasoning(provider.ReasoningThinking)
				asm.ReasoningText(reason[ev.Index], cb.Thinking)
				asm.ReasoningSignature(reason[ev.Index], cb.Signature)
			case "redacted_thinking":
				i := asm.StartReasoning(provider.ReasoningRedacted)
				asm.ReasoningData(i, cb.Data)
			case "tool_use":
				calls[ev.Index] = asm.StartToolCall(cb.ID, cb.Name)
				if in, err := json.Marshal(cb.Input); err == nil && string(in) != "{}" && string(in) != "null" {
					initial[ev.Index] = string(in)
				}
			}
		case "content_block_delta":
			switch ev.Delta.Type {
			case "text_delta":
				asm.Text(ev.Delta.Text)
			case "thinking_delta":
				if i, ok := reason[ev.Index]; ok {
					asm.ReasoningText(i, ev.Delta.Thinking)
				}
			case "signature_delta":
				if i, ok := reason[ev.Index]; ok {
					asm.ReasoningSignature(i, ev.Delta.Signature)
				}
			case "input_json_delta":
				if i, ok := calls[ev.Index]; ok {
					deltas[ev.Index] = true
					asm.ToolCallArgs(i, ev.Delta.PartialJSON)
				}
			}
		case "content_block_stop":
			if i, ok := calls[ev.Index]; ok && !deltas[ev.Index] && initial[ev.Index] != "" {
				asm.ToolCallArgs(i, initial[ev.Index])
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = string(ev.Delta.StopReason)
			}
			if ev.Usage.OutputTokens > 0 {
				usage.OutputTokens = int(ev.Usage.OutputTokens)
			}
			if in := ev.Usage.InputTokens + ev.Usage.CacheCreationInputTokens + ev.Usage.CacheReadInputTokens; in > 0 {
				usage.InputTokens = int(in)
				usage.CachedTokens = int(ev.Usage.CacheReadInputTokens)
			}
		case "message_stop":
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.classify(ctx, model, httpRes, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !stopped {
		if httpRes != nil && !strings.Contains(httpRes.Header.Get("Content-Type"), "event-stream") {
			return nil, &provider.Error{Kind: provider.ErrBadRequest, Provider: Name,
				Message: fmt.Sprintf("the server answered %q, not an event stream", httpRes.Header.Get("Content-Type"))}
		}
		return nil, provider.Retryable(&provider.Error{Kind: provider.ErrTransient, Provider: Name,
			Message: "the stream ended before the response was complete"}, 0)
	}
	return asm.Response(stopReason(stop), usage), nil
}

// stopReason maps stop_reason: tool_use → tool_calls; max_tokens and
// model_context_window_exceeded → max_tokens; end_turn, stop_sequence,
// refusal, pause_turn and anything new → end.
func stopReason(s string) string {
	switch s {
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "max_tokens"
	}
	return "end"
}

// classify turns a failed attempt into a *provider.Error, retryable or not.
func (p *Provider) classify(ctx context.Context, model string, httpRes *http.Response, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	secrets := []string{p.key}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		f := provider.HTTPFailure{Provider: Name, KeyEnv: KeyEnv, Model: model, Status: apiErr.StatusCode, Secrets: secrets}
		if apiErr.StatusCode < 400 {
			// An error event in a stream that began with 200, such as
			// overloaded_error.
			f.InStream = true
			f.Status = 0
			f.Message, f.Code = apiErr.Message, string(apiErr.Type())
			return provider.ClassifyHTTP(f)
		}
		res := apiErr.Response
		if res == nil {
			res = httpRes
		}
		if res != nil {
			f.Header = res.Header
			if res.Body != nil {
				body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
				f.Message, f.Code = provider.ErrorBody(body)
			}
		}
		if f.Message == "" {
			f.Message = apiErr.Message
		}
		if f.Code == "" {
			f.Code = string(apiErr.Type())
		}
		return provider.ClassifyHTTP(f)
	}
	// Without the response at hand the SDK reports an error event as text.
	if rest, ok := strings.CutPrefix(err.Error(), "received error while streaming: "); ok {
		f := provider.HTTPFailure{Provider: Name, KeyEnv: KeyEnv, Model: model, Secrets: secrets, InStream: true}
		f.Message, f.Code = provider.ErrorBody([]byte(rest))
		return provider.ClassifyHTTP(f)
	}
	if isNetwork(err) {
		return provider.ClassifyNetwork(Name, p.endpoint, err, secrets...)
	}
	return provider.Retryable(&provider.Error{Kind: provider.ErrTransient, Provider: Name,
		Message: "the response stream could not be read: " + provider.Detail(err.Error(), secrets...)}, 0)
}

func isNetwork(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
