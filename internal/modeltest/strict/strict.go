// Package strict runs local model-API servers that check desk's requests
// the way the real APIs do, for tests only: nothing in desk's binary
// imports it. It is a normal package (not a _test file) so the tests of
// every package (agent, app, cmd/desk) can start one.
//
// Two servers:
//
//   - NewOpenAI serves the OpenAI Chat Completions API
//     (POST /v1/chat/completions), which desk's openai: and
//     openai-compatible: models both speak. Every request body is
//     validated against the request schema of OpenAI's published OpenAPI
//     document (testdata/openai-chat-completions.json, an unmodified extract
//     of github.com/openai/openai-openapi), made closed: a field the
//     document does not name is refused, as the real API refuses an
//     unrecognized argument.
//   - NewAnthropic serves the Anthropic Messages API (POST /v1/messages).
//     Anthropic publishes no OpenAPI document in a place we can vendor, so
//     the body is decoded field by field into the shapes of the official
//     SDK's request params (anthropic-sdk-go v2, MessageNewParams and the
//     block params it holds), refusing any other field the way the API
//     does ("…: Extra inputs are not permitted").
//
// Both compile every tool's parameters / input_schema as a JSON Schema
// (draft 2020-12, top-level type object), enforce the conversation rules
// the real APIs enforce (every tool call answered before the conversation
// goes on; for Anthropic also alternating roles starting with user), and
// refuse a bad request with a 400 in the provider's own error shape. An
// accepted request is answered with the next scripted Reply, streamed the
// way the real API streams (text and tool-call argument deltas, usage with
// cached tokens), or as one JSON body when the request did not ask for a
// stream. Every request, accepted or not, is recorded with its decoded
// body for assertions.
package strict

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Reply is one scripted answer of the model.
type Reply struct {
	// Text is the assistant's text, streamed in pieces.
	Text string
	// Reasoning is the model's reasoning, streamed ahead of the text: an
	// Anthropic thinking block, signed by the server (only when the
	// request enabled thinking, as the real API), or an OpenAI-compatible
	// server's reasoning_content deltas.
	Reasoning string
	// ToolCalls are the calls the answer makes, in order.
	ToolCalls []Call
	// Usage is reported with the answer (OpenAI: only when the request
	// asked for it with stream_options.include_usage, as the real API).
	Usage Usage
	// Stop overrides the stop reason ("length"/"max_tokens", …); empty
	// means the natural one (tool calls, else the end of the turn).
	Stop string
	// Error, when set, answers with this failure instead of a completion
	// (after the request passed validation).
	Error *APIError
	// Recorded, when set, is the path of a recorded exchange of the real
	// API (a raw HTTP response file, as agent/provider/*/testdata/*.http
	// hold: status line, headers, blank line, the body exactly as sent);
	// the server answers with it, event by event, instead of making one
	// up from the other fields.
	Recorded string
}

// Call is one tool call of a Reply.
type Call struct {
	ID        string // empty: one is made up (call_…, toolu_…)
	Name      string
	Arguments string // JSON text, streamed in pieces
}

// Usage is the token count a Reply reports. Input counts every prompt
// token, cached ones included; Cached is the part served from the prompt
// cache (OpenAI prompt_tokens_details.cached_tokens; for Anthropic,
// input_tokens is then Input-Cached and cache_read_input_tokens Cached).
type Usage struct {
	Input, Output, Cached int
}

// APIError is a scripted or detected failure, in the provider's terms.
type APIError struct {
	Status  int    // HTTP status (400 when 0)
	Type    string // invalid_request_error (default), rate_limit_error, …
	Message string
	Param   string // OpenAI's param, when there is one
	Code    string // OpenAI's code, when there is one
}

func (e *APIError) Error() string { return e.Message }

func (e *APIError) status() int {
	if e.Status == 0 {
		return http.StatusBadRequest
	}
	return e.Status
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// Status is what the server answered; Error the message of a refusal
	// (empty when the request was accepted).
	Status int
	Error  string
	// Chat is the decoded body of an accepted Chat Completions request;
	// Messages that of an accepted Anthropic Messages request.
	Chat     *ChatRequest
	Messages *MessagesRequest
	// Exhausted says the script had no reply left: the answer was the text
	// NoReplyLeft.
	Exhausted bool
}

// NoReplyLeft is the text answered once the script is used up.
const NoReplyLeft = "strict: no scripted reply left"

// Accepted says the request passed every check.
func (r Request) Accepted() bool { return r.Error == "" && r.Status < 400 }

// ToolNames are the tools the request declared, in order.
func (r Request) ToolNames() []string {
	var out []string
	switch {
	case r.Chat != nil:
		for _, t := range r.Chat.Tools {
			out = append(out, t.Function.Name)
		}
	case r.Messages != nil:
		for _, t := range r.Messages.Tools {
			out = append(out, t.Name)
		}
	}
	return out
}

// ToolResults maps every tool call id the request's history answers to
// the text of its result.
func (r Request) ToolResults() map[string]string {
	out := map[string]string{}
	switch {
	case r.Chat != nil:
		for _, m := range r.Chat.Messages {
			if m.Role == "tool" {
				out[m.ToolCallID] = m.Text
			}
		}
	case r.Messages != nil:
		for _, m := range r.Messages.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_result" {
					out[b.ToolUseID] = b.Text
				}
			}
		}
	}
	return out
}

// ToolCallIDs are the ids of every tool call in the request's history.
func (r Request) ToolCallIDs() []string {
	var out []string
	switch {
	case r.Chat != nil:
		for _, m := range r.Chat.Messages {
			for _, c := range m.ToolCalls {
				out = append(out, c.ID)
			}
		}
	case r.Messages != nil:
		for _, m := range r.Messages.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_use" {
					out = append(out, b.ID)
				}
			}
		}
	}
	return out
}

// UserTexts are the texts of the request's user messages (tool results
// left out), oldest first.
func (r Request) UserTexts() []string {
	var out []string
	switch {
	case r.Chat != nil:
		for _, m := range r.Chat.Messages {
			if m.Role == "user" {
				out = append(out, m.Text)
			}
		}
	case r.Messages != nil:
		for _, m := range r.Messages.Messages {
			if m.Role != "user" {
				continue
			}
			var parts []string
			for _, b := range m.Content {
				if b.Type == "text" {
					parts = append(parts, b.Text)
				}
			}
			if len(parts) > 0 {
				out = append(out, strings.Join(parts, "\n"))
			}
		}
	}
	return out
}

// Server is a strict model server. It is safe for concurrent use.
type Server struct {
	// URL is the server's root (http://127.0.0.1:port). The OpenAI base
	// URL is URL+"/v1"; the Anthropic base URL is URL.
	URL string

	kind string // "openai" or "anthropic"
	mu   sync.Mutex
	// signedCalls are the tool_use ids the server answered together with a
	// signed thinking block, with that block's signature: a tool loop
	// that sends one back must start its assistant message with it.
	signedCalls map[string]string
	// reasoningContent: assistant messages may carry reasoning_content
	// (an OpenAI-compatible server such as DeepSeek's).
	reasoningContent bool
	replies          []Reply
	respond          func(Request) Reply
	key              string
	reqs             []Request
	calls            int // ids handed out
}

// NewOpenAI starts a strict Chat Completions server (closed when the test
// ends) answering accepted requests with replies in order.
func NewOpenAI(t testing.TB, replies ...Reply) *Server {
	return start(t, "openai", replies)
}

// NewAnthropic starts a strict Messages server (closed when the test
// ends) answering accepted requests with replies in order.
func NewAnthropic(t testing.TB, replies ...Reply) *Server {
	return start(t, "anthropic", replies)
}

func start(t testing.TB, kind string, replies []Reply) *Server {
	t.Helper()
	s := &Server{kind: kind, replies: replies}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// BaseURL is what a desk model spec or environment variable names: the
// OpenAI API root (URL/v1) or the Anthropic one (URL).
func (s *Server) BaseURL() string {
	if s.kind == "openai" {
		return s.URL + "/v1"
	}
	return s.URL
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Respond makes the server answer every accepted request with f's reply
// (called with the decoded request), after the scripted replies are used
// up.
func (s *Server) Respond(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.respond = f
}

// AcceptReasoningContent makes an OpenAI server take reasoning_content
// on assistant messages, as OpenAI-compatible reasoning servers do (the
// OpenAI API refuses it).
func (s *Server) AcceptReasoningContent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reasoningContent = true
}

// RequireKey makes the server refuse (401, in the provider's shape) a
// request that does not carry this key. Without it any key, or none, is
// accepted.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Requests returns every request received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Accepted returns the requests that passed every check.
func (s *Server) Accepted() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Accepted() {
			out = append(out, r)
		}
	}
	return out
}

// Rejected returns the requests refused with a 4xx by a check (not the
// scripted errors).
func (s *Server) Rejected() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Error != "" {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	key, rc := s.key, s.reasoningContent
	signed := maps.Clone(s.signedCalls)
	s.mu.Unlock()
	var (
		reply Reply
		err   *APIError
		idx   int
	)
	if s.kind == "openai" {
		rec.Chat, err = checkOpenAI(r, body, key, rc)
	} else {
		rec.Messages, err = checkAnthropic(r, body, key)
		if err == nil {
			err = checkThinking(rec.Messages, signed)
		}
	}
	if err == nil && rec.Messages != nil && rec.Messages.CountTokens {
		// A count, as the API gives it: not a turn, so never the script's
		// and not among Requests (a refused one is, as any refusal).
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]int{"input_tokens": max(1, len(body)/4)})
		return
	}
	s.mu.Lock()
	if err == nil {
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
				prefix := "call_strict"
				if s.kind == "anthropic" {
					prefix = "toolu_strict"
				}
				reply.ToolCalls[i].ID = fmt.Sprintf("%s%04d", prefix, s.calls)
			}
		}
		if s.kind == "anthropic" && reply.Reasoning != "" && rec.Messages.ThinkingEnabled() {
			if s.signedCalls == nil {
				s.signedCalls = map[string]string{}
			}
			for _, c := range reply.ToolCalls {
				s.signedCalls[c.ID] = Sign(reply.Reasoning)
			}
		}
	}
	idx = len(s.reqs)
	if err != nil {
		rec.Status, rec.Error = err.status(), err.Message
		rec.Chat, rec.Messages = nil, nil
	} else if reply.Error != nil {
		rec.Status = reply.Error.status()
	} else {
		rec.Status = http.StatusOK
	}
	s.reqs = append(s.reqs, rec)
	s.mu.Unlock()

	if err == nil && reply.Error != nil {
		err = reply.Error
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	if reply.Recorded != "" {
		replay(w, reply.Recorded)
		return
	}
	if s.kind == "openai" {
		answerOpenAI(w, rec.Chat, reply, idx)
	} else {
		answerAnthropic(w, rec.Messages, reply, idx)
	}
}

func (s *Server) writeError(w http.ResponseWriter, e *APIError) {
	typ := e.Type
	if typ == "" {
		typ = "invalid_request_error"
	}
	var body any
	if s.kind == "openai" {
		nullable := func(v string) any {
			if v == "" {
				return nil
			}
			return v
		}
		w.Header().Set("x-request-id", "req_strict")
		body = map[string]any{"error": map[string]any{"message": e.Message, "type": typ, "param": nullable(e.Param), "code": nullable(e.Code)}}
	} else {
		w.Header().Set("request-id", "req_strict")
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": e.Message}, "request_id": "req_strict"}
	}
	w.Header().Set("Content-Type", "application/json")
	if e.status() == http.StatusTooManyRequests || e.status() >= 500 {
		// Scripted transient failures say not to retry, so a test sees one
		// attempt per reply.
		w.Header().Set("x-should-retry", "false")
	}
	w.WriteHeader(e.status())
	json.NewEncoder(w).Encode(body)
}

// replay answers with a recorded exchange, flushing after each event.
func replay(w http.ResponseWriter, path string) {
	raw, err := os.ReadFile(path)
	if err != nil {
		http.Error(w, "strict: "+err.Error(), http.StatusInternalServerError)
		return
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		http.Error(w, "strict: "+path+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for k, vs := range res.Header {
		if k == "Content-Length" || k == "Transfer-Encoding" {
			continue
		}
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(res.StatusCode)
	f, _ := w.(http.Flusher)
	for len(body) > 0 {
		i := bytes.Index(body, []byte("\n\n"))
		if i < 0 {
			i = len(body) - 2
		}
		w.Write(body[:i+2])
		body = body[i+2:]
		if f != nil {
			f.Flush()
		}
	}
}

// sse writes server-sent events, flushing each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (s *sse) event(name string, data any) {
	var buf bytes.Buffer
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	switch d := data.(type) {
	case string:
		fmt.Fprintf(&buf, "data: %s\n\n", d)
	default:
		b, _ := json.Marshal(d)
		fmt.Fprintf(&buf, "data: %s\n\n", b)
	}
	s.w.Write(buf.Bytes())
	if s.f != nil {
		s.f.Flush()
	}
}

// pieces cuts s into the small pieces a real stream sends.
func pieces(s string) []string {
	const n = 7
	var out []string
	rs := []rune(s)
	for len(rs) > 0 {
		k := min(n, len(rs))
		out = append(out, string(rs[:k]))
		rs = rs[k:]
	}
	return out
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// checkToolSchema compiles a tool's schema as JSON Schema 2020-12 and
// requires a top-level type object, as both APIs do.
func checkToolSchema(raw json.RawMessage) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return fmt.Errorf("the schema is missing")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not valid JSON: %v", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return fmt.Errorf("a schema must be a JSON object")
	}
	if m["type"] != "object" {
		return fmt.Errorf("schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%v\"'", m["type"])
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("tool.json", doc); err != nil {
		return err
	}
	if _, err := c.Compile("tool.json"); err != nil {
		return fmt.Errorf("%v", err)
	}
	return nil
}
