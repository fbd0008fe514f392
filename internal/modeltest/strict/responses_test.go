package strict_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// TestResponsesStreamsLikeTheAPI: the official SDK's streaming client
// accepts the server's events; text and a function call come back whole,
// with usage, and the request's tool round trip was accepted.
func TestResponsesStreamsLikeTheAPI(t *testing.T) {
	srv := strict.NewResponses(t, strict.Reply{Text: "Running it.", ToolCalls: []strict.Call{{Name: "exec_command", Arguments: `{"cmd":"echo hi"}`}},
		Usage: strict.Usage{Input: 90, Output: 7, Cached: 64}})
	srv.RequireKey("sk-test")
	c := oai.NewClient(oaiopt.WithBaseURL(srv.BaseURL()), oaiopt.WithAPIKey("sk-test"), oaiopt.WithMaxRetries(0))
	params := responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("list files", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(`{"cmd":"ls"}`, "call_a", "exec_command"),
			decodeItem(`{"type":"function_call_output","call_id":"call_a","output":"a.txt"}`),
		}},
		Tools: []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "exec_command",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"cmd": map[string]any{"type": "string"}}}}}},
	}
	stream := c.Responses.NewStreaming(context.Background(), params)
	var text strings.Builder
	var final responses.Response
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v (refused: %+v)", err, srv.Rejected())
	}
	if text.String() != "Running it." {
		t.Fatalf("text deltas: %q", text.String())
	}
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	if len(types) < 4 || strings.Join(types[:4], ",") != strings.Join(want, ",") || types[len(types)-1] != "response.completed" {
		t.Fatalf("event order: %v", types)
	}
	if !strings.Contains(strings.Join(types, ","), "response.function_call_arguments.delta") {
		t.Fatalf("no argument deltas: %v", types)
	}
	if len(final.Output) != 2 || final.Output[1].Type != "function_call" || final.Output[1].Name != "exec_command" || final.Output[1].Arguments.OfString != `{"cmd":"echo hi"}` {
		t.Fatalf("final output: %+v", final.Output)
	}
	if final.Usage.InputTokens != 90 || final.Usage.OutputTokens != 7 || final.Usage.InputTokensDetails.CachedTokens != 64 {
		t.Fatalf("usage: %+v", final.Usage)
	}
	reqs := srv.Accepted()
	if len(reqs) != 1 || reqs[0].ToolResults()["call_a"] != "a.txt" || reqs[0].UserTexts()[0] != "list files" || reqs[0].ToolNames()[0] != "exec_command" {
		t.Fatalf("recorded: %+v", reqs)
	}
	// Not streamed: one response object.
	srv.Push(strict.Reply{Text: "whole"})
	resp, err := c.Responses.New(context.Background(), params)
	if err != nil || resp.OutputText() != "whole" {
		t.Fatalf("non-streamed: %+v %v", resp, err)
	}
}

// TestResponsesAcceptsCodexRequest: the complete first request of the
// real Codex CLI passes every check.
func TestResponsesAcceptsCodexRequest(t *testing.T) {
	body, err := os.ReadFile("testdata/codex-0.171.0-request.json")
	if err != nil {
		t.Fatal(err)
	}
	srv := strict.NewResponses(t, strict.Reply{Text: "hi"})
	res := post(t, srv.BaseURL()+"/responses", body)
	if res.StatusCode != 200 {
		t.Fatalf("refused: %+v", srv.Rejected())
	}
	r := srv.Accepted()[0]
	if got := r.UserTexts(); got[len(got)-1] != "say hi" {
		t.Fatalf("user texts: %q", got)
	}
	if names := strings.Join(r.ToolNames(), ","); !strings.Contains(names, "exec_command") || !strings.Contains(names, "multi_agent_v1.") {
		t.Fatalf("tool names: %s", names)
	}
}

// TestResponsesRefusesBadRequests: each malformed request is a 400 in
// OpenAI's error shape naming what was wrong, and is recorded as refused.
func TestResponsesRefusesBadRequests(t *testing.T) {
	good := map[string]any{"model": "m", "stream": true, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hi"}}}}}
	with := func(f func(m map[string]any)) []byte {
		b, _ := json.Marshal(good)
		var m map[string]any
		json.Unmarshal(b, &m)
		f(m)
		b, _ = json.Marshal(m)
		return b
	}
	cases := []struct {
		name, param, msg string
		body             []byte
	}{
		{"unknown top-level field", "max_tokens", "Unknown parameter: 'max_tokens'.", with(func(m map[string]any) { m["max_tokens"] = 5 })},
		{"unknown item field", "input[0].colour", "Unknown parameter: 'input[0].colour'.", with(func(m map[string]any) {
			m["input"].([]any)[0].(map[string]any)["colour"] = "red"
		})},
		{"unknown item type", "input[0]", "", with(func(m map[string]any) {
			m["input"] = []any{map[string]any{"type": "telepathy", "thought": "x"}}
		})},
		{"orphan output", "input[1]", "No tool call found for function call output with call_id call_x.", with(func(m map[string]any) {
			m["input"] = append(m["input"].([]any), map[string]any{"type": "function_call_output", "call_id": "call_x", "output": "1"})
		})},
		{"unanswered call", "input", "No tool output found for function call call_y.", with(func(m map[string]any) {
			m["input"] = append(m["input"].([]any), map[string]any{"type": "function_call", "call_id": "call_y", "name": "f", "arguments": "{}"})
		})},
		{"bad tool schema", "tools[0].parameters", "Invalid schema for function 'f'", with(func(m map[string]any) {
			m["tools"] = []any{map[string]any{"type": "function", "name": "f", "parameters": map[string]any{"type": "string"}}}
		})},
		{"bad tool name", "tools[0].name", "does not match pattern", with(func(m map[string]any) {
			m["tools"] = []any{map[string]any{"type": "function", "name": "a b", "parameters": map[string]any{"type": "object"}}}
		})},
		{"missing model", "model", "Missing required parameter: 'model'.", with(func(m map[string]any) { delete(m, "model") })},
		{"not JSON", "", "could not parse the JSON body", []byte(`{"model":`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := strict.NewResponses(t, strict.Reply{Text: "never"})
			res := post(t, srv.BaseURL()+"/responses", c.body)
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			json.NewDecoder(res.Body).Decode(&e)
			if res.StatusCode != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("answer %d %+v", res.StatusCode, e)
			}
			if c.param != "" && (e.Error.Param == nil || *e.Error.Param != c.param) {
				t.Fatalf("param %v, want %s (%s)", e.Error.Param, c.param, e.Error.Message)
			}
			if len(srv.Rejected()) != 1 || len(srv.Accepted()) != 0 {
				t.Fatalf("recorded: %+v", srv.Requests())
			}
		})
	}
}

func post(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	res, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func decodeItem(raw string) (it responses.ResponseInputItemUnionParam) {
	json.Unmarshal([]byte(raw), &it)
	return it
}
