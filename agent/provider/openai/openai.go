// Package openai is desk's adapter for the OpenAI Chat Completions API and
// for every server that speaks it (Ollama, vLLM, llama.cpp, LM Studio, …),
// built on the official openai-go SDK. It streams one call, forwards text
// and tool-call deltas as provider events, and assembles the complete
// response.
//
// Chat Completions, not the Responses API, because it is what
// OpenAI-compatible servers implement. The SDK's own retries are turned off:
// retries happen here, through provider.Retry, so both adapters behave the
// same, a retry never repeats events the caller has already seen, and tests
// can shorten the backoff. The package never logs, and never returns or
// formats the API key.
package openai

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
	"sync/atomic"
	"syscall"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"

	"github.com/desk-runtime/desk/agent/provider"
)

// Names of the adapter, as they appear in errors.
const (
	NameOpenAI     = "openai"
	NameCompatible = "openai-compatible"
)

// KeyEnv is the environment variable the key is read from by default.
const KeyEnv = "OPENAI_API_KEY"

// CompatibleKeyEnv is where an OpenAI-compatible server's key is read
// from. It is deliberately not OPENAI_API_KEY: a user's OpenAI key must
// never be sent to whatever base URL a compatible model names.
const CompatibleKeyEnv = "OPENAI_COMPATIBLE_API_KEY"

// DefaultBaseURL is the SDK's endpoint, used when neither Options.BaseURL
// nor OPENAI_BASE_URL is set.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultContextWindow is the window assumed for a model the table does not
// know (conservative for hosted models; local servers may have less, see
// Options.ContextWindow).
const DefaultContextWindow = 128000

// Options configure a Provider. The zero value talks to api.openai.com with
// the key from OPENAI_API_KEY.
type Options struct {
	// APIKey is the key; empty means $OPENAI_API_KEY. With Name "openai" a
	// key is required; an OpenAI-compatible server may need none, and then
	// no Authorization header is sent.
	APIKey string
	// BaseURL is the API root, e.g. "http://localhost:11434/v1" for Ollama;
	// empty means the SDK's default ($OPENAI_BASE_URL or DefaultBaseURL).
	BaseURL string
	// HTTPClient replaces the SDK's client (tests, proxies).
	HTTPClient *http.Client
	// MaxRetries is the number of retries after the first attempt of a
	// call, on 429, 5xx and network failures: 0 means
	// provider.DefaultMaxRetries, negative means none.
	MaxRetries int
	// RetryBaseDelay and RetryMaxDelay shape the exponential backoff
	// (defaults provider.DefaultBaseDelay and provider.DefaultMaxDelay).
	// A server's Retry-After overrides them, up to RetryMaxWait
	// (default provider.DefaultMaxRetryAfter).
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	RetryMaxWait   time.Duration
	// Name is "openai" (default) or "openai-compatible"; it names the
	// provider in errors and decides whether a key is required and which
	// max-tokens field is sent (max_completion_tokens to OpenAI, the
	// widely supported max_tokens to other servers).
	Name string
	// ContextWindow, when positive, is the window of every model of this
	// provider, overriding the built-in table (useful for local servers,
	// whose window depends on how the model was loaded).
	ContextWindow int
}

// Provider streams chat completions. It is safe for concurrent use.
type Provider struct {
	name     string
	key      string
	endpoint string // scheme://host, for messages
	client   sdk.Client
	retry    provider.RetryPolicy
	window   int
	// noStreamUsage is set once a server refuses stream_options, so later
	// calls do not ask again.
	noStreamUsage atomic.Bool
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider. It makes no request; a missing key is reported by
// the first Stream.
func New(opts Options) *Provider {
	name := opts.Name
	if name == "" {
		name = NameOpenAI
	}
	key := opts.APIKey
	if key == "" {
		if name == NameCompatible {
			key = os.Getenv(CompatibleKeyEnv)
		} else {
			key = os.Getenv(KeyEnv)
		}
	}
	base := opts.BaseURL
	if base == "" {
		base = os.Getenv("OPENAI_BASE_URL")
	}
	if base == "" {
		base = DefaultBaseURL
	}
	// The key is always passed explicitly (possibly empty), so the SDK
	// never picks a different one from the environment.
	ro := []option.RequestOption{
		option.WithAPIKey(key),
		option.WithBaseURL(base),
		option.WithMaxRetries(0),
	}
	if opts.HTTPClient != nil {
		ro = append(ro, option.WithHTTPClient(opts.HTTPClient))
	}
	return &Provider{
		name:     name,
		key:      key,
		endpoint: provider.EndpointOf(base),
		client:   sdk.NewClient(ro...),
		retry: provider.RetryPolicy{
			MaxRetries:    opts.MaxRetries,
			BaseDelay:     opts.RetryBaseDelay,
			MaxDelay:      opts.RetryMaxDelay,
			MaxRetryAfter: opts.RetryMaxWait,
		},
		window: opts.ContextWindow,
	}
}

// contextWindows are input windows by model prefix (the longest prefix
// wins). For the gpt-5 family this is the input limit (272k of its 400k
// total), which is what a context budget measures.
var contextWindows = map[string]int{
	"gpt-3.5-turbo": 16385,
	"gpt-4":         8192,
	"gpt-4-32k":     32768,
	"gpt-4-turbo":   128000,
	"gpt-4-0125":    128000,
	"gpt-4-1106":    128000,
	"gpt-4o":        128000,
	"chatgpt-4o":    128000,
	"gpt-4.1":       1047576,
	"gpt-4.5":       128000,
	"o1":            200000,
	"o1-mini":       128000,
	"o1-preview":    128000,
	"o3":            200000,
	"o4-mini":       200000,
	"codex-mini":    200000,
	"gpt-5":         272000,
	"gpt-5-chat":    128000,
}

// ContextWindow is the model's input window in tokens: Options.ContextWindow
// when set, else the table, else DefaultContextWindow.
func (p *Provider) ContextWindow(model string) int {
	if p.window > 0 {
		return p.window
	}
	return provider.ContextWindowFor(contextWindows, model, DefaultContextWindow)
}

// Stream makes one streaming chat completion, retrying rate limits and
// transient failures until the first event has reached fn.
func (p *Provider) Stream(ctx context.Context, req provider.Request, fn func(provider.Event)) (*provider.Response, error) {
	if p.name == NameOpenAI && p.key == "" {
		return nil, provider.MissingKey(p.name, KeyEnv)
	}
	if req.Model == "" {
		return nil, &provider.Error{Kind: provider.ErrModel, Provider: p.name, Message: "no model was given"}
	}
	params, err := p.params(req)
	if err != nil {
		return nil, &provider.Error{Kind: provider.ErrBadRequest, Provider: p.name, Message: err.Error()}
	}
	var out *provider.Response
	err = provider.Retry(ctx, p.retry, func(ctx context.Context) error {
		asm := provider.NewAssembler(fn)
		resp, err := p.once(ctx, req.Model, params, asm)
		if err != nil && !asm.Emitted() && p.refusedStreamOptions(err) {
			// An older or stricter server refused stream_options: ask
			// again at once without it, and never ask this server again.
			p.noStreamUsage.Store(true)
			resp, err = p.once(ctx, req.Model, params, asm)
		}
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

func (p *Provider) refusedStreamOptions(err error) bool {
	if p.noStreamUsage.Load() {
		return false
	}
	var e *provider.Error
	return errors.As(err, &e) && e.Kind == provider.ErrBadRequest && strings.Contains(e.Message, "stream_options")
}

// params translates a request; it fails only on input the caller must fix
// (an unknown role, a tool result without its call id, a schema that is
// not JSON).
func (p *Provider) params(req provider.Request) (sdk.ChatCompletionNewParams, error) {
	params := sdk.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	if req.System != "" {
		params.Messages = append(params.Messages, sdk.SystemMessage(req.System))
	}
	if req.ReasoningEffort != "" {
		if !provider.ValidEffort(req.ReasoningEffort) {
			return params, fmt.Errorf("reasoning effort %q: must be low, medium or high", req.ReasoningEffort)
		}
		params.ReasoningEffort = shared.ReasoningEffort(req.ReasoningEffort)
	}
	// An OpenAI-compatible reasoning server (DeepSeek's thinking mode)
	// wants an assistant message's reasoning_content back within the tool
	// loop of the turn in progress, and not from earlier turns; OpenAI's
	// Chat Completions returns no reasoning and refuses the field.
	loopFrom := len(req.Messages)
	for i := len(req.Messages) - 1; i >= 0 && req.Messages[i].Role != provider.RoleUser; i-- {
		loopFrom = i
	}
	for i, m := range req.Messages {
		switch m.Role {
		case provider.RoleUser:
			params.Messages = append(params.Messages, sdk.UserMessage(m.Content))
		case provider.RoleAssistant:
			var a sdk.ChatCompletionAssistantMessageParam
			// An assistant turn needs content unless it calls tools.
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = sdk.String(m.Content)
			}
			for _, c := range m.ToolCalls {
				if c.ID == "" || c.Name == "" {
					return params, fmt.Errorf("message %d: a tool call needs an id and a name", i)
				}
				args := strings.TrimSpace(string(c.Arguments))
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
						ID: c.ID,
						Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name:      c.Name,
							Arguments: args,
						},
					},
				})
			}
			if p.name == NameCompatible && i >= loopFrom {
				var rc strings.Builder
				for _, r := range m.Reasoning {
					if r.Type == provider.ReasoningText {
						rc.WriteString(r.Text)
					}
				}
				if rc.Len() > 0 {
					a.SetExtraFields(map[string]any{"reasoning_content": rc.String()})
				}
			}
			params.Messages = append(params.Messages, sdk.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case provider.RoleTool:
			if m.ToolCallID == "" {
				return params, fmt.Errorf("message %d: a tool result needs the tool_call_id of its call", i)
			}
			// Chat Completions has no error flag for tool results; the
			// content (desk's tools answer JSON with a code) says it.
			params.Messages = append(params.Messages, sdk.ToolMessage(m.Content, m.ToolCallID))
		default:
			return params, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		schema, err := schemaMap(t.Parameters)
		if err != nil {
			return params, fmt.Errorf("tool %s: parameters: %v", t.Name, err)
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fd.Description = sdk.String(t.Description)
		}
		params.Tools = append(params.Tools, sdk.ChatCompletionFunctionTool(fd))
	}
	if req.MaxTokens > 0 {
		if p.name == NameOpenAI {
			params.MaxCompletionTokens = sdk.Int(int64(req.MaxTokens))
		} else {
			params.MaxTokens = sdk.Int(int64(req.MaxTokens))
		}
	}
	return params, nil
}

// schemaMap splits a JSON Schema object into its top-level members, each
// kept as the caller's raw JSON so nothing is re-encoded (the SDK's encoder
// would write a json.Number as a string).
func schemaMap(raw json.RawMessage) (map[string]any, error) {
	if len(strings.TrimSpace(string(raw))) == 0 || string(raw) == "null" {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	m := make(map[string]any, len(members))
	for k, v := range members {
		m[k] = v
	}
	return m, nil
}

// wireCall is a tool call as the stream numbers it.
type wireCall struct {
	index int // in the response
	id    string
}

// once makes one attempt.
func (p *Provider) once(ctx context.Context, model string, params sdk.ChatCompletionNewParams, asm *provider.Assembler) (*provider.Response, error) {
	if !p.noStreamUsage.Load() {
		params.StreamOptions = sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)}
	}
	var httpRes *http.Response
	stream := p.client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&httpRes))
	defer stream.Close()

	var (
		finish string
		usage  provider.Usage
		calls  = map[int64]*wireCall{}
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() && (chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0) {
			usage = provider.Usage{InputTokens: int(chunk.Usage.PromptTokens), OutputTokens: int(chunk.Usage.CompletionTokens),
				CachedTokens: int(chunk.Usage.PromptTokensDetails.CachedTokens)}
		}
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue // only one choice is ever asked for
			}
			// Reasoning servers (DeepSeek, vLLM, Ollama's OpenAI door)
			// stream the model's thinking as reasoning_content (some as
			// reasoning) ahead of the answer.
			for _, k := range []string{"reasoning_content", "reasoning"} {
				if f, ok := choice.Delta.JSON.ExtraFields[k]; ok {
					var r string
					if json.Unmarshal([]byte(f.Raw()), &r) == nil {
						asm.ReasoningText(-1, r)
					}
				}
			}
			asm.Text(choice.Delta.Content)
			asm.Text(choice.Delta.Refusal)
			for _, tc := range choice.Delta.ToolCalls {
				w, ok := calls[tc.Index]
				// A new id at a known index is a new call: some servers
				// send every call at index 0.
				if !ok || (tc.ID != "" && w.id != "" && tc.ID != w.id) {
					w = &wireCall{index: asm.StartToolCall(tc.ID, tc.Function.Name), id: tc.ID}
					calls[tc.Index] = w
				}
				asm.ToolCallArgs(w.index, tc.Function.Arguments)
			}
			if choice.FinishReason != "" {
				finish = choice.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, p.classify(ctx, model, httpRes, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if finish == "" {
		if httpRes != nil && !strings.Contains(httpRes.Header.Get("Content-Type"), "event-stream") {
			return nil, &provider.Error{Kind: provider.ErrBadRequest, Provider: p.name,
				Message: fmt.Sprintf("the server answered %q, not an event stream; it may not support streaming", httpRes.Header.Get("Content-Type"))}
		}
		return nil, provider.Retryable(&provider.Error{Kind: provider.ErrTransient, Provider: p.name,
			Message: "the stream ended before the response was complete"}, 0)
	}
	return asm.Response(stopReason(finish), usage), nil
}

// stopReason maps finish_reason: "stop" → end, "tool_calls" (and the
// legacy "function_call") → tool_calls, "length" → max_tokens; anything
// else (content_filter, a server's own word) ends the turn.
func stopReason(finish string) string {
	switch finish {
	case "tool_calls", "function_call":
		return "tool_calls"
	case "length":
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
		f := provider.HTTPFailure{Provider: p.name, KeyEnv: KeyEnv, Model: model, Status: apiErr.StatusCode, Secrets: secrets}
		res := apiErr.Response
		if res == nil {
			res = httpRes
		}
		if res != nil {
			f.Header = res.Header
			if res.Body != nil {
				// The SDK buffers the error body and puts it back; it is
				// read here because it only parses {"error":{…}}, and
				// compatible servers answer in other shapes too.
				body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
				f.Message, f.Code = provider.ErrorBody(body)
			}
		}
		if f.Message == "" {
			f.Message, f.Code = apiErr.Message, apiErr.Code
		}
		if f.Code == "" {
			f.Code = apiErr.Type
		}
		classified := provider.ClassifyHTTP(f)
		// A 404 that does not mention the model is more often a base URL
		// without its /v1 than a missing model.
		var e *provider.Error
		if p.name != NameOpenAI && errors.As(classified, &e) && e.Kind == provider.ErrModel && !strings.Contains(f.Message, model) {
			e.Message += "; check that the base URL is the API root (it usually ends in /v1)"
		}
		return classified
	}
	var streamErr *ssestream.StreamError
	if errors.As(err, &streamErr) {
		f := provider.HTTPFailure{Provider: p.name, KeyEnv: KeyEnv, Model: model, Secrets: secrets, InStream: true}
		var ev struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(streamErr.Event.Data, &ev) == nil && len(ev.Error) > 0 {
			f.Message, f.Code = provider.ErrorBody([]byte(`{"error":` + string(ev.Error) + `}`))
		}
		return provider.ClassifyHTTP(f)
	}
	if isNetwork(err) {
		return provider.ClassifyNetwork(p.name, p.endpoint, err, secrets...)
	}
	// A chunk that does not decode: a broken proxy or server; another
	// attempt may fare better.
	return provider.Retryable(&provider.Error{Kind: provider.ErrTransient, Provider: p.name,
		Message: "the response stream could not be read: " + provider.Detail(err.Error(), secrets...)}, 0)
}

func isNetwork(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
