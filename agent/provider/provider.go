// Package provider defines how desk's agent talks to a language model: one
// streaming request of system prompt, messages and tool declarations in, a
// stream of text and tool-call deltas and a complete response out. The
// adapters (openai, anthropic, script) live in subpackages and translate to
// and from their wire formats; nothing above this package knows a vendor.
//
// An adapter must never log or return a provider key, and must retry rate
// limits and transient failures itself, with backoff, before reporting an
// error.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Roles of messages.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of the conversation sent to the model.
type Message struct {
	Role string `json:"role"`
	// Content is the text of a user or assistant message, or the result of
	// a tool call (Role tool).
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	// IsError marks a tool result that reports a failure.
	IsError bool `json:"is_error,omitempty"`
	// Reasoning is what the model thought before this assistant message,
	// as the provider returned it. Adapters send back what their API
	// requires: Anthropic's signed thinking blocks (which must come back
	// unaltered in a tool loop), an OpenAI-compatible server's
	// reasoning_content within the turn's tool loop.
	Reasoning []Reasoning `json:"reasoning,omitempty"`
}

// Reasoning kinds.
const (
	ReasoningThinking = "thinking"          // Anthropic thinking, signed
	ReasoningRedacted = "redacted_thinking" // Anthropic's encrypted thinking: Data only
	ReasoningText     = "reasoning"         // an OpenAI-compatible server's reasoning_content
)

// Reasoning is one block of a model's reasoning.
type Reasoning struct {
	Type string `json:"type"`
	// Text is the readable reasoning (a summary, for models that
	// summarise).
	Text string `json:"text,omitempty"`
	// Signature is Anthropic's proof that Text is the model's own: a block
	// sent back without it, or altered, is refused.
	Signature string `json:"signature,omitempty"`
	// Data is a redacted block's opaque content.
	Data string `json:"data,omitempty"`
}

// Reasoning efforts a request may ask for.
const (
	EffortLow    = "low"
	EffortMedium = "medium"
	EffortHigh   = "high"
)

// ValidEffort says whether e is a reasoning effort ("" is none).
func ValidEffort(e string) bool {
	switch e {
	case "", EffortLow, EffortMedium, EffortHigh:
		return true
	}
	return false
}

// ToolCall is one call of a tool by the model.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Tool declares a tool to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"` // a JSON Schema object
}

// Request is one model call.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int // 0: the adapter's default
	// ReasoningEffort asks a reasoning model to think: OpenAI's
	// reasoning_effort, an Anthropic thinking budget. "" sends nothing
	// (the model's own default).
	ReasoningEffort string
}

// Event types streamed during a call.
const (
	EventText          = "text_delta"      // Text holds the next piece of assistant text
	EventToolCallStart = "tool_call_start" // Index, ToolCallID and Name of a new call
	EventToolCallDelta = "tool_call_delta" // Index and ArgsDelta: more of a call's JSON arguments
	EventReasoning     = "reasoning_delta" // Text holds the next piece of reasoning
)

// Event is one streamed piece of a response.
type Event struct {
	Type       string
	Text       string
	Index      int // which tool call of the response
	ToolCallID string
	Name       string
	ArgsDelta  string
}

// Usage counts tokens of one call.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedTokens is the part of InputTokens the provider served from its
	// prompt cache (OpenAI prompt_tokens_details.cached_tokens, Anthropic
	// cache_read_input_tokens).
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Response is the complete answer of one call.
type Response struct {
	Text      string     `json:"text"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Reasoning are the reasoning blocks of the response, in order.
	Reasoning  []Reasoning `json:"reasoning,omitempty"`
	StopReason string      `json:"stop_reason"` // "end", "tool_calls", "max_tokens"
	Usage      Usage       `json:"usage"`
}

// Provider is a model behind an API.
type Provider interface {
	// Stream makes the call, calling fn (from the calling goroutine) for
	// each event as it arrives, and returns the complete response. It stops
	// promptly when ctx is cancelled.
	Stream(ctx context.Context, req Request, fn func(Event)) (*Response, error)
	// ContextWindow is the model's context size in tokens (an estimate
	// when the provider does not say).
	ContextWindow(model string) int
}

// Error kinds.
const (
	ErrAuth       = "auth"        // the key is missing, wrong or not allowed
	ErrModel      = "model"       // the model does not exist or is not available
	ErrRateLimit  = "rate_limit"  // still limited after the retries
	ErrTransient  = "transient"   // still failing after the retries (5xx, network)
	ErrBadRequest = "bad_request" // the provider refused the request
	ErrExhausted  = "exhausted"   // a script ran out of steps
)

// Error is a failure of a model call, with a kind and a message safe to
// show (it never contains a key).
type Error struct {
	Kind     string
	Provider string
	Message  string
	Status   int // HTTP status, when there was one
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Provider, e.Message, e.Kind)
}

// KindOf returns the kind of a provider error, or "".
func KindOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}

// Spec is a parsed model reference.
type Spec struct {
	Provider string // openai, anthropic, openai-compatible, script
	Model    string
	BaseURL  string // openai-compatible only
}

// MaxSpecLen bounds a model reference (a base URL and a model name).
const MaxSpecLen = 2048

// ParseSpec parses "openai:<model>", "anthropic:<model>",
// "openai-compatible:<base-url>#<model>" or "script". A model name is
// printable text without spaces; a base URL is http or https with a host.
// Whatever it accepts, String gives back (surrounding spaces trimmed) and
// parses to the same Spec.
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	if s == "script" {
		return Spec{Provider: "script"}, nil
	}
	if len(s) > MaxSpecLen || !utf8.ValidString(s) {
		return Spec{}, fmt.Errorf("model %.60q… must be valid UTF-8 of at most %d bytes", s, MaxSpecLen)
	}
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || rest == "" {
		return Spec{}, fmt.Errorf("model %q must be openai:<model>, anthropic:<model>, openai-compatible:<base-url>#<model> or script", s)
	}
	switch kind {
	case "openai", "anthropic":
		if err := modelName(rest); err != nil {
			return Spec{}, fmt.Errorf("model %q: %w", s, err)
		}
		return Spec{Provider: kind, Model: rest}, nil
	case "openai-compatible":
		base, model, ok := strings.Cut(rest, "#")
		if !ok || model == "" {
			return Spec{}, fmt.Errorf("model %q must be openai-compatible:<http(s) base-url>#<model>", s)
		}
		if err := baseURL(base); err != nil {
			return Spec{}, fmt.Errorf("model %q: %w", s, err)
		}
		if err := modelName(model); err != nil {
			return Spec{}, fmt.Errorf("model %q: %w", s, err)
		}
		return Spec{Provider: kind, Model: model, BaseURL: base}, nil
	}
	return Spec{}, fmt.Errorf("unknown model provider %q in %q (openai, anthropic, openai-compatible or script)", kind, s)
}

// modelName refuses names no provider has: spaces and control characters
// (which would also make a reference that does not read back the same).
func modelName(m string) error {
	for _, r := range m {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return fmt.Errorf("the model name %q must not contain spaces or control characters", m)
		}
	}
	return nil
}

// baseURL accepts an absolute http or https URL with a host.
func baseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" {
		return fmt.Errorf("the base URL %q must be an http:// or https:// URL with a host", base)
	}
	for _, r := range base {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("the base URL %q must not contain spaces or control characters", base)
		}
	}
	return nil
}

// String is the spec in the form ParseSpec reads.
func (s Spec) String() string {
	switch s.Provider {
	case "script":
		return "script"
	case "openai-compatible":
		return s.Provider + ":" + s.BaseURL + "#" + s.Model
	}
	return s.Provider + ":" + s.Model
}
