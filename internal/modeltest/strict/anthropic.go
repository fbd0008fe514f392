package strict

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// MessagesRequest is a decoded Anthropic Messages request.
type MessagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    []Block         `json:"system"` // a string system prompt is one text block
	Messages  []AnthropicTurn `json:"messages"`
	Tools     []AnthropicTool `json:"tools"`
	Stream    bool            `json:"stream"`
	// Thinking is the extended-thinking setting, when the request sent
	// one.
	Thinking *ThinkingConfig            `json:"-"`
	Fields   map[string]json.RawMessage `json:"-"`
	// CountTokens marks a POST /v1/messages/count_tokens (which Claude
	// Code calls, e.g. to size MCP tools): answered with a count, never
	// through the script.
	CountTokens bool `json:"-"`
}

// ThinkingConfig is a request's thinking field.
type ThinkingConfig struct {
	Type         string `json:"type"` // enabled, disabled, adaptive
	BudgetTokens int    `json:"budget_tokens"`
}

// ThinkingEnabled says the request asked the model to think.
func (r *MessagesRequest) ThinkingEnabled() bool {
	return r != nil && r.Thinking != nil && (r.Thinking.Type == "enabled" || r.Thinking.Type == "adaptive")
}

// thinkingKey signs the thinking blocks this process's servers send.
var thinkingKey = func() []byte {
	k := make([]byte, 32)
	rand.Read(k)
	return k
}()

// Sign is the signature the strict Anthropic server gives a thinking block
// of this text: a block sent back with another signature, or with its text
// changed, is refused, as the real API refuses it.
func Sign(thinking string) string {
	m := hmac.New(sha256.New, thinkingKey)
	m.Write([]byte(thinking))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// checkThinking enforces the API's rules for thinking blocks: every
// thinking block sent back carries the signature it was given for exactly
// its text, and when thinking is on, the assistant message of the tool
// loop in progress (whose tool_results end the request) starts with the
// thinking block it was answered with. signed maps the tool_use ids the
// server sent with a signed thinking block to that block's signature.
func checkThinking(req *MessagesRequest, signed map[string]string) *APIError {
	if req == nil {
		return nil
	}
	for i, m := range req.Messages {
		for j, b := range m.Content {
			if b.Type == "thinking" && !hmac.Equal([]byte(b.Signature), []byte(Sign(b.Text))) {
				return anthropicErr("messages.%d.content.%d: Invalid `signature` in `thinking` block", i, j)
			}
		}
	}
	n := len(req.Messages)
	if !req.ThinkingEnabled() || n < 2 || req.Messages[n-1].Role != "user" {
		return nil
	}
	last := req.Messages[n-1]
	loop := false
	for _, b := range last.Content {
		if b.Type == "tool_result" {
			loop = true
		}
	}
	if !loop {
		return nil
	}
	asst := req.Messages[n-2]
	want := ""
	for _, b := range asst.Content {
		if b.Type == "tool_use" && signed[b.ID] != "" {
			want = signed[b.ID]
		}
	}
	if want == "" {
		return nil
	}
	first := "nothing"
	if len(asst.Content) > 0 {
		first = asst.Content[0].Type
	}
	if first != "thinking" && first != "redacted_thinking" {
		return anthropicErr("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", n-2, first)
	}
	if asst.Content[0].Signature != want {
		return anthropicErr("messages.%d.content.0: the thinking block is not the one this tool call was made with: thinking blocks must be passed back unmodified", n-2)
	}
	return nil
}

// AnthropicTurn is one message (a string content is one text block).
type AnthropicTurn struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Block is one content block. Text is a text block's text, or a
// tool_result's content flattened to text.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Signature string          `json:"signature"` // a thinking block's
	Data      string          `json:"data"`      // a redacted_thinking block's
}

// AnthropicTool is a declared (custom) tool.
type AnthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// The fields of the request params of anthropic-sdk-go v2
// (MessageNewParams, plus stream, which the streaming call adds) and of
// the block params desk can send. Anything else is refused.
var (
	anthropicTop = []string{"model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream",
		"temperature", "top_p", "top_k", "stop_sequences", "metadata", "thinking", "service_tier",
		"cache_control", "container", "inference_geo", "output_config", "speed"}
	// What POST /v1/messages/count_tokens takes: the fields of
	// anthropic-sdk-go v2's MessageCountTokensParams.
	anthropicCountTop = []string{"model", "messages", "system", "tools", "tool_choice", "thinking", "cache_control", "output_config", "speed"}
	// and what its beta form takes on top (BetaMessageCountTokensParams).
	anthropicBetaCountTop = []string{"billing_policy", "compaction", "context_management", "mcp_servers", "output_format"}
	// What the beta endpoint (POST /v1/messages?beta=true, which the SDK's
	// Beta.Messages and Claude Code call) takes on top: the fields of
	// anthropic-sdk-go v2's BetaMessageNewParams.
	anthropicBetaTop = []string{"billing_policy", "compaction", "context_management", "diagnostics",
		"fallback_credit_token", "fallbacks", "mcp_servers", "output_format", "thread"}
	anthropicBlockFields = map[string][]string{
		"text":              {"type", "text", "cache_control", "citations"},
		"image":             {"type", "source", "cache_control"},
		"document":          {"type", "source", "cache_control", "citations", "context", "title"},
		"tool_use":          {"type", "id", "name", "input", "cache_control"},
		"tool_result":       {"type", "tool_use_id", "content", "is_error", "cache_control"},
		"thinking":          {"type", "thinking", "signature"},
		"redacted_thinking": {"type", "data"},
	}
	// Which blocks each role may send.
	anthropicRoleBlocks = map[string][]string{
		"user":      {"text", "image", "document", "tool_result"},
		"assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
	}
	anthropicToolFields = []string{"name", "description", "input_schema", "cache_control", "type", "strict",
		"input_examples", "defer_loading", "eager_input_streaming", "allowed_callers"}
)

func anthropicErr(format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf(format, args...)}
}

// object decodes a JSON object at path, refusing fields not in allowed.
func object(raw json.RawMessage, path string, allowed []string) (map[string]json.RawMessage, *APIError) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, anthropicErr("%s: Input should be a valid dictionary", path)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			return nil, anthropicErr("%s: Extra inputs are not permitted", join(path, k))
		}
	}
	return m, nil
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// field decodes a member into v: required ones must be present, and
// every present one must have v's type.
func field(m map[string]json.RawMessage, path, k string, required bool, v any, want string) *APIError {
	raw, ok := m[k]
	if !ok {
		if required {
			return anthropicErr("%s: Field required", join(path, k))
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if string(raw) == "null" || dec.Decode(v) != nil {
		return anthropicErr("%s: Input should be %s", join(path, k), want)
	}
	return nil
}

// checkAnthropic validates a Messages request as the real API does.
func checkAnthropic(r *http.Request, body []byte, key string) (*MessagesRequest, *APIError) {
	count := r.URL.Path == "/v1/messages/count_tokens"
	if r.Method != http.MethodPost || (r.URL.Path != "/v1/messages" && !count) {
		return nil, &APIError{Status: http.StatusNotFound, Type: "not_found_error", Message: "Not Found"}
	}
	// The API takes the key in x-api-key or, as the official SDK (v2)
	// sends it, as a bearer token.
	got := r.Header.Get("x-api-key")
	if got == "" {
		got, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if got == "" {
		return nil, &APIError{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "x-api-key header is required"}
	}
	if key != "" && got != key {
		return nil, &APIError{Status: http.StatusUnauthorized, Type: "authentication_error", Message: "invalid x-api-key"}
	}
	if r.Header.Get("anthropic-version") == "" {
		return nil, anthropicErr("anthropic-version: header is required")
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, anthropicErr("Content-Type: expected application/json, got %q", ct)
	}
	if !json.Valid(body) {
		return nil, anthropicErr("There was an error parsing the body of your request: the body is not valid JSON")
	}
	allowedTop := anthropicTop
	if count {
		allowedTop = anthropicCountTop
	}
	if r.URL.Query().Get("beta") == "true" {
		beta := anthropicBetaTop
		if count {
			beta = anthropicBetaCountTop
		}
		allowedTop = append(slices.Clone(allowedTop), beta...)
	}
	top, e := object(body, "", allowedTop)
	if e != nil {
		return nil, e
	}
	req := &MessagesRequest{Fields: top, CountTokens: count}
	if e := field(top, "", "model", true, &req.Model, "a valid string"); e != nil {
		return nil, e
	}
	if e := field(top, "", "max_tokens", !count, &req.MaxTokens, "a valid integer"); e != nil {
		return nil, e
	}
	if req.MaxTokens < 1 && !count {
		return nil, anthropicErr("max_tokens: Input should be greater than or equal to 1")
	}
	if e := field(top, "", "stream", false, &req.Stream, "a valid boolean"); e != nil {
		return nil, e
	}
	var f64 float64
	for _, k := range []string{"temperature", "top_p"} {
		if e := field(top, "", k, false, &f64, "a valid number"); e != nil {
			return nil, e
		}
	}
	var n int
	if e := field(top, "", "top_k", false, &n, "a valid integer"); e != nil {
		return nil, e
	}
	var stops []string
	if e := field(top, "", "stop_sequences", false, &stops, "a valid list of strings"); e != nil {
		return nil, e
	}
	if raw, ok := top["thinking"]; ok {
		m, e := object(raw, "thinking", []string{"type", "budget_tokens", "display"})
		if e != nil {
			return nil, e
		}
		var tc ThinkingConfig
		if e := field(m, "thinking", "type", true, &tc.Type, "'enabled', 'disabled' or 'adaptive'"); e != nil {
			return nil, e
		}
		switch tc.Type {
		case "enabled":
			if e := field(m, "thinking", "budget_tokens", true, &tc.BudgetTokens, "a valid integer"); e != nil {
				return nil, e
			}
			if tc.BudgetTokens < 1024 {
				return nil, anthropicErr("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
			}
			if !count && tc.BudgetTokens >= req.MaxTokens {
				return nil, anthropicErr("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
			}
		case "disabled", "adaptive":
			if _, ok := m["budget_tokens"]; ok {
				return nil, anthropicErr("thinking.%s.budget_tokens: Extra inputs are not permitted", tc.Type)
			}
		default:
			return nil, anthropicErr("thinking.type: Input tag '%s' found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'", tc.Type)
		}
		req.Thinking = &tc
	}
	// system: a string or a list of text blocks.
	if raw, ok := top["system"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if s != "" {
				req.System = []Block{{Type: "text", Text: s}}
			}
		} else {
			var list []json.RawMessage
			if json.Unmarshal(raw, &list) != nil {
				return nil, anthropicErr("system: Input should be a valid string or a valid list")
			}
			for i, b := range list {
				blk, e := block(b, fmt.Sprintf("system.%d", i), []string{"text"})
				if e != nil {
					return nil, e
				}
				req.System = append(req.System, blk)
			}
		}
	}
	var msgs []json.RawMessage
	if e := field(top, "", "messages", true, &msgs, "a valid list"); e != nil {
		return nil, e
	}
	for i, raw := range msgs {
		path := fmt.Sprintf("messages.%d", i)
		m, e := object(raw, path, []string{"role", "content"})
		if e != nil {
			return nil, e
		}
		var t AnthropicTurn
		if e := field(m, path, "role", true, &t.Role, "'user' or 'assistant'"); e != nil {
			return nil, e
		}
		allowed, ok := anthropicRoleBlocks[t.Role]
		if !ok {
			return nil, anthropicErr("%s.role: Input should be 'user' or 'assistant'", path)
		}
		content, ok := m["content"]
		if !ok {
			return nil, anthropicErr("%s.content: Field required", path)
		}
		var s string
		if json.Unmarshal(content, &s) == nil {
			if s == "" && i < len(msgs)-1 {
				return nil, anthropicErr("messages: text content blocks must be non-empty")
			}
			t.Content = []Block{{Type: "text", Text: s}}
		} else {
			var list []json.RawMessage
			if json.Unmarshal(content, &list) != nil {
				return nil, anthropicErr("%s.content: Input should be a valid string or a valid list", path)
			}
			if len(list) == 0 && !(t.Role == "assistant" && i == len(msgs)-1) {
				return nil, anthropicErr("%s: all messages must have non-empty content except for the optional final assistant message", path)
			}
			for j, b := range list {
				blk, e := block(b, fmt.Sprintf("%s.content.%d", path, j), allowed)
				if e != nil {
					return nil, e
				}
				t.Content = append(t.Content, blk)
			}
		}
		req.Messages = append(req.Messages, t)
	}
	if len(req.Messages) == 0 {
		return nil, anthropicErr("messages: at least one message is required")
	}
	var tools []json.RawMessage
	if e := field(top, "", "tools", false, &tools, "a valid list"); e != nil {
		return nil, e
	}
	names := map[string]bool{}
	for i, raw := range tools {
		path := fmt.Sprintf("tools.%d", i)
		m, e := object(raw, path, anthropicToolFields)
		if e != nil {
			return nil, e
		}
		var t AnthropicTool
		var typ string
		if e := field(m, path, "type", false, &typ, "'custom'"); e != nil {
			return nil, e
		}
		if typ != "" && typ != "custom" {
			return nil, anthropicErr("%s.type: strict: only custom tools are checked, got %q", path, typ)
		}
		if e := field(m, path, "name", true, &t.Name, "a valid string"); e != nil {
			return nil, e
		}
		if !toolNameRE.MatchString(t.Name) {
			return nil, anthropicErr("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", path)
		}
		if names[t.Name] {
			return nil, anthropicErr("tools: Tool names must be unique.")
		}
		names[t.Name] = true
		if e := field(m, path, "description", false, &t.Description, "a valid string"); e != nil {
			return nil, e
		}
		schema, ok := m["input_schema"]
		if !ok {
			return nil, anthropicErr("%s.input_schema: Field required", path)
		}
		var sm map[string]json.RawMessage
		if json.Unmarshal(schema, &sm) != nil || sm == nil {
			return nil, anthropicErr("%s.input_schema: Input should be a valid dictionary", path)
		}
		if _, ok := sm["type"]; !ok {
			return nil, anthropicErr("%s.input_schema.type: Field required", path)
		}
		if err := checkToolSchema(schema); err != nil {
			return nil, anthropicErr("%s.input_schema: JSON schema is invalid. It must match JSON Schema draft 2020-12 (https://json-schema.org/draft/2020-12). Learn more about tool use at https://docs.claude.com/en/docs/tool-use. (%v)", path, err)
		}
		t.InputSchema = schema
		req.Tools = append(req.Tools, t)
	}
	// The conversation: starts with the user, alternates, and every
	// tool_use is answered by a tool_result in the very next message (and
	// only there).
	if req.Messages[0].Role != "user" {
		return nil, anthropicErr("messages: first message must use the \"user\" role")
	}
	for i, m := range req.Messages {
		if i > 0 && req.Messages[i-1].Role == m.Role {
			return nil, anthropicErr("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		var uses []string
		if i > 0 {
			for _, b := range req.Messages[i-1].Content {
				if b.Type == "tool_use" {
					uses = append(uses, b.ID)
				}
			}
		}
		answered := map[string]bool{}
		for j, b := range m.Content {
			if b.Type != "tool_result" {
				continue
			}
			if !slices.Contains(uses, b.ToolUseID) {
				return nil, anthropicErr("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
			}
			answered[b.ToolUseID] = true
		}
		var missing []string
		for _, id := range uses {
			if !answered[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return nil, anthropicErr("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(missing, ", "))
		}
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role == "assistant" {
		for _, b := range last.Content {
			if b.Type == "tool_use" {
				return nil, anthropicErr("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", len(req.Messages), b.ID)
			}
		}
	}
	return req, nil
}

var (
	cacheControlFields = []string{"type", "ttl"}
	toolIDRE           = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// block decodes one content block at path, of a type in allowed.
func block(raw json.RawMessage, path string, allowed []string) (Block, *APIError) {
	var b Block
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &head) != nil || head.Type == "" {
		return b, anthropicErr("%s.type: Field required", path)
	}
	fields, ok := anthropicBlockFields[head.Type]
	if !ok || !slices.Contains(allowed, head.Type) {
		return b, anthropicErr("%s: Input tag '%s' found using 'type' does not match any of the expected tags: %s", path, head.Type, "'"+strings.Join(allowed, "', '")+"'")
	}
	m, e := object(raw, path, fields)
	if e != nil {
		return b, e
	}
	b.Type = head.Type
	if cc, ok := m["cache_control"]; ok {
		if _, e := object(cc, path+".cache_control", cacheControlFields); e != nil {
			return b, e
		}
	}
	switch b.Type {
	case "text":
		if e := field(m, path, "text", true, &b.Text, "a valid string"); e != nil {
			return b, e
		}
		if b.Text == "" {
			return b, anthropicErr("messages: text content blocks must be non-empty")
		}
	case "image":
		src, ok := m["source"]
		if !ok {
			return b, anthropicErr("%s.source: Field required", path)
		}
		s, e := object(src, path+".source", []string{"type", "media_type", "data", "url"})
		if e != nil {
			return b, e
		}
		var typ, mt string
		field(s, path+".source", "type", true, &typ, "a valid string")
		if typ == "base64" {
			if e := field(s, path+".source", "media_type", true, &mt, "a valid string"); e != nil {
				return b, e
			}
			if !slices.Contains([]string{"image/jpeg", "image/png", "image/gif", "image/webp"}, mt) {
				return b, anthropicErr("%s.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'", path)
			}
		}
	case "thinking":
		if e := field(m, path, "thinking", true, &b.Text, "a valid string"); e != nil {
			return b, e
		}
		if e := field(m, path, "signature", true, &b.Signature, "a valid string"); e != nil {
			return b, e
		}
	case "redacted_thinking":
		if e := field(m, path, "data", true, &b.Data, "a valid string"); e != nil {
			return b, e
		}
	case "tool_use":
		if e := field(m, path, "id", true, &b.ID, "a valid string"); e != nil {
			return b, e
		}
		if !toolIDRE.MatchString(b.ID) {
			return b, anthropicErr("%s.id: String should match pattern '^[a-zA-Z0-9_-]+$'", path)
		}
		if e := field(m, path, "name", true, &b.Name, "a valid string"); e != nil {
			return b, e
		}
		in, ok := m["input"]
		if !ok {
			return b, anthropicErr("%s.input: Field required", path)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(in, &obj) != nil || obj == nil {
			return b, anthropicErr("%s.input: Input should be a valid dictionary", path)
		}
		b.Input = in
	case "tool_result":
		if e := field(m, path, "tool_use_id", true, &b.ToolUseID, "a valid string"); e != nil {
			return b, e
		}
		if e := field(m, path, "is_error", false, &b.IsError, "a valid boolean"); e != nil {
			return b, e
		}
		if c, ok := m["content"]; ok {
			var s string
			if json.Unmarshal(c, &s) == nil {
				b.Text = s
			} else {
				var list []json.RawMessage
				if json.Unmarshal(c, &list) != nil {
					return b, anthropicErr("%s.content: Input should be a valid string or a valid list", path)
				}
				var texts []string
				for k, item := range list {
					ib, e := block(item, fmt.Sprintf("%s.content.%d", path, k), []string{"text", "image", "document"})
					if e != nil {
						return b, e
					}
					if ib.Type == "text" {
						texts = append(texts, ib.Text)
					}
				}
				b.Text = strings.Join(texts, "\n")
			}
		}
	}
	return b, nil
}

// answerAnthropic answers an accepted request with a reply, streamed as
// the real API streams (message_start, content blocks with text and
// input_json deltas, message_delta with the stop reason and usage,
// message_stop), or whole.
func answerAnthropic(w http.ResponseWriter, req *MessagesRequest, reply Reply, n int) {
	id := fmt.Sprintf("msg_strict%04d", n)
	stop := reply.Stop
	if stop == "" {
		stop = "end_turn"
		if len(reply.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	uncached := max(reply.Usage.Input-reply.Usage.Cached, 0)
	thinking := reply.Reasoning != "" && req.ThinkingEnabled()
	if !req.Stream {
		var content []any
		if thinking {
			content = append(content, map[string]any{"type": "thinking", "thinking": reply.Reasoning, "signature": Sign(reply.Reasoning)})
		}
		if reply.Text != "" {
			content = append(content, map[string]any{"type": "text", "text": reply.Text})
		}
		for _, c := range reply.ToolCalls {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": json.RawMessage(c.Arguments)})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": content,
			"stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": uncached, "cache_creation_input_tokens": 0,
				"cache_read_input_tokens": reply.Usage.Cached, "output_tokens": reply.Usage.Output},
		})
		return
	}
	s := newSSE(w)
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": uncached, "cache_creation_input_tokens": 0,
			"cache_read_input_tokens": reply.Usage.Cached, "output_tokens": 1},
	}})
	s.event("ping", map[string]any{"type": "ping"})
	idx := 0
	if thinking {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		for _, p := range pieces(reply.Reasoning) {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "thinking_delta", "thinking": p}})
		}
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
			"delta": map[string]any{"type": "signature_delta", "signature": Sign(reply.Reasoning)}})
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if reply.Text != "" {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, p := range pieces(reply.Text) {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "text_delta", "text": p}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for _, c := range reply.ToolCalls {
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": idx,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		for _, p := range pieces(c.Arguments) {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": reply.Usage.Output}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
