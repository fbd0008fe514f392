package strict

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ChatRequest is a decoded Chat Completions request (the fields desk's
// checks and tests look at; Fields holds every top-level field as sent).
type ChatRequest struct {
	Model         string        `json:"model"`
	Messages      []ChatMessage `json:"messages"`
	Tools         []ChatTool    `json:"tools"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int   `json:"max_tokens"`
	MaxCompletionTokens *int   `json:"max_completion_tokens"`
	ReasoningEffort     string `json:"reasoning_effort"`

	Fields map[string]json.RawMessage `json:"-"`
}

// ChatMessage is one message of a Chat Completions request. Text is its
// content flattened to text (the string, or the text parts joined).
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ChatToolCall  `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	// ReasoningContent is an assistant message's reasoning, which only a
	// server that AcceptReasoningContent takes.
	ReasoningContent string `json:"reasoning_content"`

	Text string `json:"-"`
}

// ChatToolCall is a tool call of an assistant message.
type ChatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// ChatTool is a declared function tool.
type ChatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

//go:embed testdata/openai-chat-completions.json
var openaiDocument []byte

// openaiSchemas are the compiled request schemas, made closed.
var openaiSchemas = sync.OnceValues(func() (*chatSchemas, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openaiDocument))
	if err != nil {
		return nil, err
	}
	schemas := doc.(map[string]any)["components"].(map[string]any)["schemas"].(map[string]any)
	out := &chatSchemas{fields: map[string]bool{}}
	collectFields(schemas, schemas["CreateChatCompletionRequest"], out.fields)
	closeSchemas(schemas)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("openai.json", doc); err != nil {
		return nil, err
	}
	compile := func(name string) *jsonschema.Schema {
		if err != nil {
			return nil
		}
		var s *jsonschema.Schema
		s, err = c.Compile("openai.json#/components/schemas/" + name)
		return s
	}
	out.request = compile("CreateChatCompletionRequest")
	out.tool = compile("ChatCompletionTool")
	out.roles = map[string]*jsonschema.Schema{
		"system":    compile("ChatCompletionRequestSystemMessage"),
		"developer": compile("ChatCompletionRequestDeveloperMessage"),
		"user":      compile("ChatCompletionRequestUserMessage"),
		"assistant": compile("ChatCompletionRequestAssistantMessage"),
		"tool":      compile("ChatCompletionRequestToolMessage"),
		"function":  compile("ChatCompletionRequestFunctionMessage"),
	}
	return out, err
})

type chatSchemas struct {
	request *jsonschema.Schema
	tool    *jsonschema.Schema
	roles   map[string]*jsonschema.Schema
	fields  map[string]bool // the request's top-level fields
}

// closeSchemas makes every object schema of the document refuse fields
// it does not name (unevaluatedProperties: false), as the real API
// refuses them. A schema that is one part of an allOf is left open (its
// siblings name the rest of the fields), and the whole it is part of is
// closed instead; a schema that says what other fields may hold
// (additionalProperties) keeps its word.
func closeSchemas(schemas map[string]any) {
	parts := map[string]bool{} // schemas used as a part of an allOf
	var findParts func(v any)
	findParts = func(v any) {
		switch n := v.(type) {
		case map[string]any:
			if all, ok := n["allOf"].([]any); ok {
				for _, p := range all {
					if m, ok := p.(map[string]any); ok {
						if ref, ok := m["$ref"].(string); ok {
							parts[strings.TrimPrefix(ref, "#/components/schemas/")] = true
						}
					}
				}
			}
			for _, c := range n {
				findParts(c)
			}
		case []any:
			for _, c := range n {
				findParts(c)
			}
		}
	}
	findParts(schemas)
	var walk func(v any, part bool)
	walk = func(v any, part bool) {
		switch n := v.(type) {
		case map[string]any:
			_, hasProps := n["properties"]
			_, hasAP := n["additionalProperties"]
			_, hasUP := n["unevaluatedProperties"]
			if !part && !hasAP && !hasUP && (hasProps || n["allOf"] != nil) {
				n["unevaluatedProperties"] = false
			}
			for k, c := range n {
				if k == "allOf" {
					for _, p := range c.([]any) {
						walk(p, true)
					}
					continue
				}
				if k == "properties" {
					for _, p := range c.(map[string]any) {
						walk(p, false)
					}
					continue
				}
				walk(c, false)
			}
		case []any:
			for _, c := range n {
				walk(c, false)
			}
		}
	}
	for name, s := range schemas {
		walk(s, parts[name])
	}
}

// collectFields gathers the property names of a schema through its allOf
// parts and references.
func collectFields(schemas map[string]any, v any, into map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		collectFields(schemas, schemas[strings.TrimPrefix(ref, "#/components/schemas/")], into)
	}
	if props, ok := m["properties"].(map[string]any); ok {
		for k := range props {
			into[k] = true
		}
	}
	if all, ok := m["allOf"].([]any); ok {
		for _, p := range all {
			collectFields(schemas, p, into)
		}
	}
}

// schemaError is the most specific failure of a validation: the one
// deepest in the instance.
func schemaError(err error, prefix string) (param, msg string) {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return "", err.Error()
	}
	best := jsonschema.OutputUnit{InstanceLocation: "", Error: nil}
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		if best.Error == nil || len(u.InstanceLocation) > len(best.InstanceLocation) {
			best = u
		}
	}
	if best.Error == nil {
		return prefix, ve.Error()
	}
	return pointerParam(prefix, best.InstanceLocation), best.Error.String()
}

// pointerParam writes a JSON pointer as OpenAI names a param:
// messages[2].content.
func pointerParam(prefix, ptr string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, p := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if p == "" {
			continue
		}
		if p[0] >= '0' && p[0] <= '9' {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(p)
	}
	return b.String()
}

func openaiErr(param, code, format string, args ...any) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// checkOpenAI validates a Chat Completions request as the real API does.
func checkOpenAI(r *http.Request, body []byte, key string, reasoningContent bool) (*ChatRequest, *APIError) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		return nil, &APIError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}
	}
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		return nil, &APIError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, openaiErr("", "", "Invalid Content-Type header (%s), expected application/json.", ct)
	}
	sch, err := openaiSchemas()
	if err != nil {
		return nil, &APIError{Status: 500, Type: "server_error", Message: "strict: the OpenAPI document does not compile: " + err.Error()}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return nil, openaiErr("", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, openaiErr("", "", "Invalid type for request body: expected an object.")
	}
	var unknown []string
	for k := range top {
		if !sch.fields[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, openaiErr("", "", "Unrecognized request argument supplied: %s", strings.Join(unknown, ", "))
	}
	// Messages and tools one by one first, against their own schema, so
	// a refusal names exactly what was wrong.
	msgs, _ := top["messages"].([]any)
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		if role == "assistant" && reasoningContent {
			if _, ok := mm["reasoning_content"].(string); ok {
				// The compatible server's extension: checked as a string,
				// the rest against OpenAI's schema (the body decodes it).
				delete(mm, "reasoning_content")
			}
		}
		s := sch.roles[role]
		if s == nil {
			return nil, openaiErr(fmt.Sprintf("messages.[%d].role", i), "invalid_value",
				"Invalid value: '%v'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function', and 'developer'.", mm["role"])
		}
		if err := s.Validate(m); err != nil {
			param, msg := schemaError(err, fmt.Sprintf("messages[%d]", i))
			return nil, openaiErr(param, "invalid_value", "Invalid value for '%s': %s", param, msg)
		}
	}
	tools, _ := top["tools"].([]any)
	for i, t := range tools {
		if err := sch.tool.Validate(t); err != nil {
			param, msg := schemaError(err, fmt.Sprintf("tools[%d]", i))
			return nil, openaiErr(param, "invalid_value", "Invalid value for '%s': %s", param, msg)
		}
	}
	if err := sch.request.Validate(doc); err != nil {
		param, msg := schemaError(err, "")
		return nil, openaiErr(param, "invalid_value", "Invalid value for '%s': %s", param, msg)
	}
	var req ChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, openaiErr("", "", "strict: the body passed the schema but does not decode: %v", err)
	}
	json.Unmarshal(body, &req.Fields)
	for i := range req.Messages {
		req.Messages[i].Text = contentText(req.Messages[i].Content)
	}
	if req.StreamOptions != nil && !req.Stream {
		return nil, openaiErr("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	if req.MaxTokens != nil && req.MaxCompletionTokens != nil {
		return nil, openaiErr("max_tokens", "invalid_value", "Setting 'max_tokens' and 'max_completion_tokens' at the same time is not supported.")
	}
	names := map[string]bool{}
	for i, t := range req.Tools {
		if t.Type != "function" {
			continue
		}
		if !toolNameRE.MatchString(t.Function.Name) {
			return nil, openaiErr(fmt.Sprintf("tools[%d].function.name", i), "invalid_value",
				"Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)
		}
		if names[t.Function.Name] {
			return nil, openaiErr("tools", "invalid_value", "Duplicate function name '%s' in tools.", t.Function.Name)
		}
		names[t.Function.Name] = true
		if t.Function.Parameters == nil {
			continue // a function without parameters takes none
		}
		if err := checkToolSchema(t.Function.Parameters); err != nil {
			return nil, openaiErr(fmt.Sprintf("tools[%d].function.parameters", i), "invalid_function_parameters",
				"Invalid schema for function '%s': %v", t.Function.Name, err)
		}
	}
	// Every tool call of an assistant message is answered by a tool
	// message before the conversation goes on, and every tool message
	// answers a call.
	pending := []string{}
	for i, m := range req.Messages {
		if m.Role == "tool" {
			k := slices.Index(pending, m.ToolCallID)
			if k < 0 {
				return nil, openaiErr(fmt.Sprintf("messages.[%d].role", i), "",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			pending = slices.Delete(pending, k, k+1)
			continue
		}
		if len(pending) > 0 {
			return nil, openaiErr(fmt.Sprintf("messages.[%d].role", i), "",
				"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(pending, ", "))
		}
		for _, c := range m.ToolCalls {
			pending = append(pending, c.ID)
		}
	}
	if len(pending) > 0 {
		return nil, openaiErr(fmt.Sprintf("messages.[%d].role", len(req.Messages)), "",
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(pending, ", "))
	}
	return &req, nil
}

// contentText flattens a message content: the string, or its text parts
// joined.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// answerOpenAI answers an accepted request with a reply, streamed as the
// real API streams chat.completion.chunk objects, or whole.
func answerOpenAI(w http.ResponseWriter, req *ChatRequest, reply Reply, n int) {
	id := fmt.Sprintf("chatcmpl-strict%04d", n)
	created := time.Now().Unix()
	finish := reply.Stop
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	usage := map[string]any{
		"prompt_tokens":     reply.Usage.Input,
		"completion_tokens": reply.Usage.Output,
		"total_tokens":      reply.Usage.Input + reply.Usage.Output,
		"prompt_tokens_details": map[string]any{
			"cached_tokens": reply.Usage.Cached, "audio_tokens": 0,
		},
		"completion_tokens_details": map[string]any{
			"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0,
		},
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Text, "refusal": nil}
		if reply.Text == "" && len(reply.ToolCalls) > 0 {
			msg["content"] = nil
		}
		var calls []any
		for _, c := range reply.ToolCalls {
			calls = append(calls, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		if calls != nil {
			msg["tool_calls"] = calls
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
			"usage":   usage, "system_fingerprint": "fp_strict",
		})
		return
	}
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	s := newSSE(w)
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "system_fingerprint": "fp_strict",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		}
		if includeUsage {
			c["usage"] = nil
		}
		s.event("", c)
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	for _, p := range pieces(reply.Reasoning) {
		chunk(map[string]any{"reasoning_content": p}, nil)
	}
	for _, p := range pieces(reply.Text) {
		chunk(map[string]any{"content": p}, nil)
	}
	for i, c := range reply.ToolCalls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil)
		for _, p := range pieces(c.Arguments) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if includeUsage {
		s.event("", map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": req.Model, "system_fingerprint": "fp_strict",
			"choices": []any{}, "usage": usage,
		})
	}
	s.event("", "[DONE]")
}
