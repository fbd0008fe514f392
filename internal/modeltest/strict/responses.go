package strict

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/responses"
)

// Responses is a strict OpenAI Responses API server (POST /v1/responses),
// the API Codex speaks. It is its own type beside Server because its
// requests decode into other shapes; the Reply script is the same.
//
// A request body is decoded into the official SDK's request params
// (openai-go v3, responses.ResponseNewParams and the item and tool unions
// it holds) and refused, with a 400 in OpenAI's error shape, when:
//   - a top-level field is not one of the params' fields (nor one of the
//     few the API takes that this SDK version does not name yet, see
//     responsesExtraFields);
//   - an input item or tool does not decode into one of the SDK's
//     variants, or decoding loses a field of it (the SDK does not know the
//     field, so neither does the API it describes), except the fields the
//     API is known to take beyond the SDK (responsesExtraItemFields);
//   - a function tool's name or parameters schema is invalid, or a name
//     is declared twice;
//   - a tool output answers no earlier call, or a call is left without
//     its output (store:false conversations are sent whole).
//
// An accepted request is answered with the next Reply, streamed as the
// real API streams (response.created, response.in_progress,
// response.output_item.added, response.content_part.added,
// response.output_text.delta, response.function_call_arguments.delta,
// the .done events, response.completed with usage), or as one JSON
// response object when the request did not ask for a stream.
type Responses struct {
	// URL is the server's root; the OpenAI base URL is URL+"/v1".
	URL string

	mu      sync.Mutex
	replies []Reply
	respond func(ResponsesRequest) Reply
	key     string
	reqs    []ResponsesRequest
	calls   int
}

// NewResponses starts a strict Responses server (closed when the test
// ends) answering accepted requests with replies in order.
func NewResponses(t testing.TB, replies ...Reply) *Responses {
	t.Helper()
	s := &Responses{replies: replies}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// BaseURL is the OpenAI API root (URL/v1), what Codex's
// model_providers.<name>.base_url names.
func (s *Responses) BaseURL() string { return s.URL + "/v1" }

// Push appends replies to the script.
func (s *Responses) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Respond makes the server answer every accepted request with f's reply
// once the scripted replies are used up. f may block (a test holding a
// turn open); the stream has then sent response.created already.
func (s *Responses) Respond(f func(ResponsesRequest) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// RequireKey makes the server refuse (401) a request without this key.
func (s *Responses) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Requests returns every request received so far.
func (s *Responses) Requests() []ResponsesRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ResponsesRequest(nil), s.reqs...)
}

// Accepted returns the requests that passed every check.
func (s *Responses) Accepted() []ResponsesRequest {
	var out []ResponsesRequest
	for _, r := range s.Requests() {
		if r.Accepted() {
			out = append(out, r)
		}
	}
	return out
}

// Rejected returns the requests a check refused.
func (s *Responses) Rejected() []ResponsesRequest {
	var out []ResponsesRequest
	for _, r := range s.Requests() {
		if r.Error != "" {
			out = append(out, r)
		}
	}
	return out
}

// ResponsesRequest is one request the Responses server received.
type ResponsesRequest struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	Status int
	Error  string // the refusal's message; empty when accepted
	// Params is the body decoded into the SDK's request params (nil when
	// refused).
	Params *responses.ResponseNewParams
	// Input is the input items as sent, one raw object each.
	Input     []json.RawMessage
	Exhausted bool
}

// Accepted says the request passed every check.
func (r ResponsesRequest) Accepted() bool { return r.Error == "" && r.Status < 400 }

// item is the part of an input item the accessors read.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

func (r ResponsesRequest) items() []item {
	out := make([]item, 0, len(r.Input))
	for _, raw := range r.Input {
		var it item
		json.Unmarshal(raw, &it)
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		out = append(out, it)
	}
	return out
}

// ToolNames are the function and custom tools the request declared, in
// order (a namespace's tools as namespace.name).
func (r ResponsesRequest) ToolNames() []string {
	if r.Params == nil {
		return nil
	}
	var out []string
	for _, t := range r.Params.Tools {
		switch {
		case t.OfFunction != nil:
			out = append(out, t.OfFunction.Name)
		case t.OfCustom != nil:
			out = append(out, t.OfCustom.Name)
		case t.OfNamespace != nil:
			for _, f := range t.OfNamespace.Tools {
				if n := f.GetName(); n != nil {
					out = append(out, t.OfNamespace.Name+"."+*n)
				}
			}
		}
	}
	return out
}

// UserTexts are the texts of the request's user messages, oldest first
// (Codex's own context messages included).
func (r ResponsesRequest) UserTexts() []string { return r.texts("user") }

// AssistantTexts are the texts of the assistant messages in the history.
func (r ResponsesRequest) AssistantTexts() []string { return r.texts("assistant") }

func (r ResponsesRequest) texts(role string) []string {
	var out []string
	for _, it := range r.items() {
		if it.Type == "message" && it.Role == role {
			out = append(out, contentParts(it.Content))
		}
	}
	return out
}

// ToolCallIDs are the call ids of every function or custom tool call in
// the request's history.
func (r ResponsesRequest) ToolCallIDs() []string {
	var out []string
	for _, it := range r.items() {
		if it.Type == "function_call" || it.Type == "custom_tool_call" {
			out = append(out, it.CallID)
		}
	}
	return out
}

// ToolResults maps every call id the history answers to its output text.
func (r ResponsesRequest) ToolResults() map[string]string {
	out := map[string]string{}
	for _, it := range r.items() {
		if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
			out[it.CallID] = contentParts(it.Output)
		}
	}
	return out
}

// contentParts flattens a content or output: the string, or the text of
// its parts joined.
func contentParts(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		out = append(out, p.Text)
	}
	return strings.Join(out, "\n")
}

// responsesExtraFields are top-level fields the Responses API takes that
// openai-go v3.98 does not name; the real Codex sends them.
// "stream" is the API's too: the SDK sets it itself in NewStreaming.
var responsesExtraFields = map[string]bool{"client_metadata": true, "stream": true}

// responsesExtraItemFields are fields of input items the API takes that
// the SDK's union decoding drops: a message item decodes as
// EasyInputMessageParam, which has neither the id nor the status an
// assistant message of Codex's store:false history carries (the API's
// output-message shape has both).
var responsesExtraItemFields = map[string]bool{"id": true, "status": true}

// responsesFields are the JSON names of ResponseNewParams' fields.
var responsesFields = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[responses.ResponseNewParams]()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
})

func (s *Responses) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	rec := ResponsesRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	params, input, err := checkResponses(r, body, key)
	var reply Reply
	s.mu.Lock()
	if err == nil {
		rec.Params, rec.Input = params, input
		switch {
		case len(s.replies) > 0:
			reply, s.replies = s.replies[0], s.replies[1:]
		case s.respond != nil:
			f := s.respond
			s.mu.Unlock()
			reply = f(rec)
			s.mu.Lock()
		default:
			reply, rec.Exhausted = Reply{Text: NoReplyLeft}, true
		}
		for i := range reply.ToolCalls {
			if reply.ToolCalls[i].ID == "" {
				s.calls++
				reply.ToolCalls[i].ID = fmt.Sprintf("call_strict%04d", s.calls)
			}
		}
	}
	idx := len(s.reqs)
	switch {
	case err != nil:
		rec.Status, rec.Error = err.status(), err.Message
	case reply.Error != nil:
		rec.Status = reply.Error.status()
	default:
		rec.Status = http.StatusOK
	}
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	if err == nil && reply.Error != nil {
		err = reply.Error
	}
	if err != nil {
		(&Server{kind: "openai"}).writeError(w, err)
		return
	}
	if reply.Recorded != "" {
		replay(w, reply.Recorded)
		return
	}
	answerResponses(w, params, body, reply, idx)
}

// checkResponses validates a Responses request as the real API does.
func checkResponses(r *http.Request, body []byte, key string) (*responses.ResponseNewParams, []json.RawMessage, *APIError) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		return nil, nil, &APIError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)}
	}
	if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
		return nil, nil, &APIError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
			Message: "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."}
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return nil, nil, openaiErr("", "", "Invalid Content-Type header (%s), expected application/json.", ct)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, nil, openaiErr("", "", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	var unknown []string
	for k := range top {
		if !responsesFields()[k] && !responsesExtraFields[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, nil, openaiErr(unknown[0], "unknown_parameter", "Unknown parameter: '%s'.", unknown[0])
	}
	if _, ok := top["model"]; !ok {
		return nil, nil, openaiErr("model", "missing_required_parameter", "Missing required parameter: 'model'.")
	}
	var p responses.ResponseNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, nil, openaiErr("", "invalid_value", "Invalid request body: %v", err)
	}
	if p.Model == "" {
		return nil, nil, openaiErr("model", "invalid_type", "Invalid type for 'model': expected a string.")
	}
	// Input: a string, or a list of items each one of the SDK's variants.
	var input []json.RawMessage
	if raw, ok := top["input"]; ok && !bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`"`)) {
		if err := json.Unmarshal(raw, &input); err != nil {
			return nil, nil, openaiErr("input", "invalid_type", "Invalid type for 'input': expected a string or an array of input items.")
		}
		for i, raw := range input {
			var it responses.ResponseInputItemUnionParam
			var head struct{ Type, Role string }
			json.Unmarshal(raw, &head)
			if head.Type == "" && head.Role != "" {
				// The API takes a message without its type (the SDK's
				// EasyInputMessage omits it); the union needs it to decode.
				var m map[string]any
				json.Unmarshal(raw, &m)
				m["type"] = "message"
				raw, _ = json.Marshal(m)
			}
			if err := json.Unmarshal(raw, &it); err != nil {
				return nil, nil, openaiErr(fmt.Sprintf("input[%d]", i), "invalid_value", "Invalid value for 'input[%d]': %v", i, err)
			}
			if lost := roundTripLoss(raw, it, responsesExtraItemFields); lost != "" {
				return nil, nil, openaiErr(fmt.Sprintf("input[%d]%s", i, lost), "unknown_parameter", "Unknown parameter: 'input[%d]%s'.", i, lost)
			}
		}
	}
	var tools []json.RawMessage
	if raw, ok := top["tools"]; ok {
		if err := json.Unmarshal(raw, &tools); err != nil {
			return nil, nil, openaiErr("tools", "invalid_type", "Invalid type for 'tools': expected an array of tools.")
		}
	}
	for i, raw := range tools {
		var t responses.ToolUnionParam
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, openaiErr(fmt.Sprintf("tools[%d]", i), "invalid_value", "Invalid value for 'tools[%d]': %v", i, err)
		}
		if lost := roundTripLoss(raw, t, nil); lost != "" {
			return nil, nil, openaiErr(fmt.Sprintf("tools[%d]%s", i, lost), "unknown_parameter", "Unknown parameter: 'tools[%d]%s'.", i, lost)
		}
	}
	if err := checkResponsesTools(tools); err != nil {
		return nil, nil, err
	}
	if err := checkResponsesCalls(input); err != nil {
		return nil, nil, err
	}
	return &p, input, nil
}

// roundTripLoss marshals v (raw decoded into an SDK param) back and
// returns the path of the first field of raw the SDK dropped ("" when
// none), ignoring the names in extra at any depth.
func roundTripLoss(raw json.RawMessage, v any, extra map[string]bool) string {
	out, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var a, b any
	json.Unmarshal(raw, &a)
	json.Unmarshal(out, &b)
	return lostField("", a, b, extra)
}

func lostField(path string, a, b any, extra map[string]bool) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return path
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			yv, ok := y[k]
			if !ok {
				if extra[k] || x[k] == nil {
					continue
				}
				return path + "." + k
			}
			if l := lostField(path+"."+k, x[k], yv, extra); l != "" {
				return l
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(y) != len(x) {
			return path
		}
		for i := range x {
			if l := lostField(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], extra); l != "" {
				return l
			}
		}
	}
	return ""
}

// checkResponsesTools checks function tools' names and schemas, and
// that no name is declared twice, including inside namespaces.
func checkResponsesTools(tools []json.RawMessage) *APIError {
	type tool struct {
		Type       string            `json:"type"`
		Name       string            `json:"name"`
		Parameters json.RawMessage   `json:"parameters"`
		Tools      []json.RawMessage `json:"tools"`
	}
	names := map[string]bool{}
	var check func(param string, raws []json.RawMessage, ns string) *APIError
	check = func(param string, raws []json.RawMessage, ns string) *APIError {
		for i, raw := range raws {
			var t tool
			json.Unmarshal(raw, &t)
			p := fmt.Sprintf("%s[%d]", param, i)
			switch t.Type {
			case "namespace":
				if err := check(p+".tools", t.Tools, t.Name+"."); err != nil {
					return err
				}
				continue
			case "function", "custom":
			default:
				continue
			}
			if !toolNameRE.MatchString(t.Name) {
				return openaiErr(p+".name", "invalid_value",
					"Invalid '%s.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", p)
			}
			if names[ns+t.Name] {
				return openaiErr(param, "invalid_value", "Duplicate tool name '%s' in tools.", ns+t.Name)
			}
			names[ns+t.Name] = true
			if t.Type == "function" && len(t.Parameters) > 0 && string(t.Parameters) != "null" {
				if err := checkToolSchema(t.Parameters); err != nil {
					return openaiErr(p+".parameters", "invalid_function_parameters",
						"Invalid schema for function '%s': %v", t.Name, err)
				}
			}
		}
		return nil
	}
	return check("tools", tools, "")
}

// checkResponsesCalls enforces that every tool output answers an earlier
// call and every call has its output.
func checkResponsesCalls(input []json.RawMessage) *APIError {
	var pending []string
	answered := map[string]bool{}
	for i, raw := range input {
		var it item
		json.Unmarshal(raw, &it)
		switch it.Type {
		case "function_call", "custom_tool_call", "local_shell_call":
			pending = append(pending, it.CallID)
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			k := slices.Index(pending, it.CallID)
			if k < 0 {
				return openaiErr(fmt.Sprintf("input[%d]", i), "", "No tool call found for function call output with call_id %s.", it.CallID)
			}
			pending = slices.Delete(pending, k, k+1)
			answered[it.CallID] = true
		}
	}
	if len(pending) > 0 {
		return openaiErr("input", "", "No tool output found for function call %s.", pending[0])
	}
	return nil
}

// answerResponses answers an accepted request with a reply, as the real
// API does.
func answerResponses(w http.ResponseWriter, p *responses.ResponseNewParams, body []byte, reply Reply, n int) {
	var req struct {
		Stream bool              `json:"stream"`
		Tools  []json.RawMessage `json:"tools"`
	}
	json.Unmarshal(body, &req)
	custom := map[string]bool{}
	for _, raw := range req.Tools {
		var t struct{ Type, Name string }
		json.Unmarshal(raw, &t)
		if t.Type == "custom" {
			custom[t.Name] = true
		}
	}
	id := fmt.Sprintf("resp_strict%04d", n)
	created := time.Now().Unix()
	base := func(status string, output []any, usage any) map[string]any {
		return map[string]any{
			"id": id, "object": "response", "created_at": created, "status": status,
			"background": false, "error": nil, "incomplete_details": nil, "instructions": nil,
			"max_output_tokens": nil, "model": p.Model, "output": output, "parallel_tool_calls": true,
			"previous_response_id": nil, "reasoning": map[string]any{"effort": nil, "summary": nil},
			"service_tier": "default", "store": false, "temperature": 1.0,
			"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto",
			"tools": []any{}, "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": nil, "metadata": map[string]any{},
		}
	}
	usage := map[string]any{
		"input_tokens":          reply.Usage.Input,
		"input_tokens_details":  map[string]any{"cached_tokens": reply.Usage.Cached},
		"output_tokens":         reply.Usage.Output,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          reply.Usage.Input + reply.Usage.Output,
	}
	msgID := fmt.Sprintf("msg_strict%04d", n)
	var output []any
	textItem := func(status string, text string) map[string]any {
		content := []any{}
		if status == "completed" {
			content = append(content, map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": text})
		}
		return map[string]any{"id": msgID, "type": "message", "status": status, "content": content, "role": "assistant"}
	}
	callItem := func(i int, c Call, status string, args string) map[string]any {
		if custom[c.Name] {
			return map[string]any{"id": fmt.Sprintf("ctc_strict%04d_%d", n, i), "type": "custom_tool_call", "status": status,
				"call_id": c.ID, "name": c.Name, "input": args}
		}
		return map[string]any{"id": fmt.Sprintf("fc_strict%04d_%d", n, i), "type": "function_call", "status": status,
			"arguments": args, "call_id": c.ID, "name": c.Name}
	}
	if reply.Text != "" {
		output = append(output, textItem("completed", reply.Text))
	}
	for i, c := range reply.ToolCalls {
		output = append(output, callItem(i, c, "completed", c.Arguments))
	}
	status := "completed"
	if reply.Stop == "length" || reply.Stop == "max_tokens" || reply.Stop == "max_output_tokens" {
		status = "incomplete"
	}
	final := base(status, output, usage)
	if status == "incomplete" {
		final["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(final)
		return
	}
	s := newSSE(w)
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		s.event(typ, fields)
	}
	emit("response.created", map[string]any{"response": base("in_progress", []any{}, nil)})
	emit("response.in_progress", map[string]any{"response": base("in_progress", []any{}, nil)})
	idx := 0
	if reply.Text != "" {
		emit("response.output_item.added", map[string]any{"output_index": idx, "item": textItem("in_progress", "")})
		emit("response.content_part.added", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": ""}})
		for _, piece := range pieces(reply.Text) {
			emit("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0, "delta": piece, "logprobs": []any{}})
		}
		emit("response.output_text.done", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0, "text": reply.Text, "logprobs": []any{}})
		emit("response.content_part.done", map[string]any{"item_id": msgID, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "annotations": []any{}, "logprobs": []any{}, "text": reply.Text}})
		emit("response.output_item.done", map[string]any{"output_index": idx, "item": textItem("completed", reply.Text)})
		idx++
	}
	for i, c := range reply.ToolCalls {
		it := callItem(i, c, "in_progress", "")
		itemID := it["id"]
		emit("response.output_item.added", map[string]any{"output_index": idx, "item": it})
		delta, done := "response.function_call_arguments.delta", "response.function_call_arguments.done"
		field := "arguments"
		if custom[c.Name] {
			delta, done, field = "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "input"
		}
		for _, piece := range pieces(c.Arguments) {
			emit(delta, map[string]any{"item_id": itemID, "output_index": idx, "delta": piece})
		}
		emit(done, map[string]any{"item_id": itemID, "output_index": idx, field: c.Arguments})
		emit("response.output_item.done", map[string]any{"output_index": idx, "item": callItem(i, c, "completed", c.Arguments)})
		idx++
	}
	if status == "incomplete" {
		emit("response.incomplete", map[string]any{"response": final})
		return
	}
	emit("response.completed", map[string]any{"response": final})
}
