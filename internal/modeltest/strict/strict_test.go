package strict_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	ant "github.com/anthropics/anthropic-sdk-go/v2"
	antopt "github.com/anthropics/anthropic-sdk-go/v2/option"
	oai "github.com/openai/openai-go/v3"
	oaiopt "github.com/openai/openai-go/v3/option"

	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/agent/provider/anthropic"
	"github.com/desk-runtime/desk/agent/provider/openai"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

var weather = provider.Tool{Name: "weather", Description: "the weather of a city",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}

// conversation is a valid history with a tool round trip.
func conversation() []provider.Message {
	return []provider.Message{
		{Role: provider.RoleUser, Content: "weather in Oslo?"},
		{Role: provider.RoleAssistant, Content: "Let me look.", ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)}}},
		{Role: provider.RoleTool, ToolCallID: "call_1", Name: "weather", Content: `{"sky":"clear"}`},
	}
}

type adapter struct {
	name string
	make func(base string) provider.Provider
	srv  func(t testing.TB, r ...strict.Reply) *strict.Server
}

var adapters = []adapter{
	{"openai", func(base string) provider.Provider {
		return openai.New(openai.Options{BaseURL: base, APIKey: "sk-test-key", MaxRetries: -1})
	}, strict.NewOpenAI},
	{"openai-compatible", func(base string) provider.Provider {
		return openai.New(openai.Options{BaseURL: base, Name: openai.NameCompatible, MaxRetries: -1})
	}, strict.NewOpenAI},
	{"anthropic", func(base string) provider.Provider {
		return anthropic.New(anthropic.Options{BaseURL: base, APIKey: "sk-ant-test", MaxRetries: -1})
	}, strict.NewAnthropic},
}

// TestAdaptersPassTheStrictServers: each adapter's request for a history
// with a tool round trip is accepted; the scripted reply comes back as
// text, a tool call with its arguments and usage with cached tokens.
func TestAdaptersPassTheStrictServers(t *testing.T) {
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			srv := a.srv(t,
				strict.Reply{Text: "Checking the wind too.", ToolCalls: []strict.Call{{Name: "weather", Arguments: `{"city":"Bergen"}`}},
					Usage: strict.Usage{Input: 120, Output: 9, Cached: 100}},
				strict.Reply{Text: "Clear skies in Oslo.", Usage: strict.Usage{Input: 150, Output: 5}})
			p := a.make(srv.BaseURL())
			req := provider.Request{Model: "m", System: "be brief", Messages: conversation(), Tools: []provider.Tool{weather}, MaxTokens: 100}
			resp, err := p.Stream(context.Background(), req, func(provider.Event) {})
			if err != nil {
				t.Fatalf("stream: %v (refused: %+v)", err, srv.Rejected())
			}
			if resp.Text != "Checking the wind too." || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != `{"city":"Bergen"}` || resp.StopReason != "tool_calls" {
				t.Fatalf("response: %+v", resp)
			}
			if resp.Usage != (provider.Usage{InputTokens: 120, OutputTokens: 9, CachedTokens: 100}) {
				t.Fatalf("usage: %+v", resp.Usage)
			}
			req.Messages = append(req.Messages,
				provider.Message{Role: provider.RoleAssistant, Content: resp.Text, ToolCalls: resp.ToolCalls},
				provider.Message{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "windy", IsError: true})
			resp, err = p.Stream(context.Background(), req, func(provider.Event) {})
			if err != nil || resp.Text != "Clear skies in Oslo." || resp.StopReason != "end" {
				t.Fatalf("second call: %+v %v", resp, err)
			}
			got := srv.Accepted()
			if len(got) != 2 || len(srv.Requests()) != 2 {
				t.Fatalf("%d accepted of %d", len(got), len(srv.Requests()))
			}
			if names := got[1].ToolNames(); len(names) != 1 || names[0] != "weather" {
				t.Fatalf("tools: %v", names)
			}
			if res := got[1].ToolResults(); res["call_1"] != `{"sky":"clear"}` || res[resp2ID(got[1])] != "windy" {
				t.Fatalf("tool results: %v", res)
			}
		})
	}
}

// resp2ID is the id of the second tool call of a request's history.
func resp2ID(r strict.Request) string {
	ids := r.ToolCallIDs()
	if len(ids) < 2 {
		return ""
	}
	return ids[1]
}

// TestStrictServersRefuseWhatTheAPIsRefuse: unknown fields, a tool
// schema that is not a JSON Schema object, and a tool call without its
// result get a 400 in the provider's error shape, from the wire and
// through the adapters.
func TestStrictServersRefuseWhatTheAPIsRefuse(t *testing.T) {
	bad := provider.Tool{Name: "bad", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"nope"}}}`)}
	notObject := provider.Tool{Name: "str", Parameters: json.RawMessage(`{"type":"string"}`)}
	dangling := conversation()[:2]
	orphan := []provider.Message{{Role: provider.RoleUser, Content: "hi"}, {Role: provider.RoleTool, ToolCallID: "call_9", Content: "x"}}
	cases := []struct {
		name string
		req  provider.Request
		want map[string]string // adapter → part of the message
	}{
		{"invalid schema", provider.Request{Model: "m", Messages: conversation()[:1], Tools: []provider.Tool{weather, bad}},
			map[string]string{"openai": "Invalid schema for function 'bad'", "anthropic": "tools.1.input_schema: JSON schema is invalid"}},
		{"not an object schema", provider.Request{Model: "m", Messages: conversation()[:1], Tools: []provider.Tool{notObject}},
			// The anthropic adapter always declares type object (the field is
			// a constant of the SDK's ToolInputSchemaParam).
			map[string]string{"openai": "Invalid schema for function 'str'"}},
		{"dangling tool call", provider.Request{Model: "m", Messages: append(dangling, provider.Message{Role: provider.RoleUser, Content: "and?"}), Tools: []provider.Tool{weather}},
			map[string]string{"openai": "did not have response messages: call_1", "anthropic": "`tool_use` ids were found without `tool_result` blocks immediately after: call_1"}},
		{"orphan tool result", provider.Request{Model: "m", Messages: orphan},
			map[string]string{"openai": "must be a response to a preceeding message with 'tool_calls'", "anthropic": "unexpected `tool_use_id` found in `tool_result` blocks: call_9"}},
	}
	for _, a := range adapters {
		for _, c := range cases {
			t.Run(a.name+"/"+c.name, func(t *testing.T) {
				want := c.want["openai"]
				if a.name == "anthropic" {
					want = c.want["anthropic"]
				}
				if want == "" {
					t.Skip("not a request this adapter can make")
				}
				srv := a.srv(t, strict.Reply{Text: "never"})
				_, err := a.make(srv.BaseURL()).Stream(context.Background(), c.req, func(provider.Event) {})
				var pe *provider.Error
				if err == nil || !asProviderError(err, &pe) || pe.Kind != provider.ErrBadRequest || !strings.Contains(pe.Message, want) {
					t.Fatalf("err = %v; want a bad_request naming %q", err, want)
				}
				if rj := srv.Rejected(); len(rj) != 1 || rj[0].Status != 400 {
					t.Fatalf("rejected: %+v", rj)
				}
			})
		}
	}

	// The wire shapes, and unknown fields.
	post := func(url, body string, hdr ...string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			return res.StatusCode, nil
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("error body %s: %v", b, err)
		}
		return res.StatusCode, m
	}
	o := strict.NewOpenAI(t)
	code, body := post(o.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"temprature":1}`)
	e, _ := body["error"].(map[string]any)
	if code != 400 || e["type"] != "invalid_request_error" || !strings.Contains(e["message"].(string), "Unrecognized request argument supplied: temprature") {
		t.Fatalf("openai unknown field: %d %v", code, body)
	}
	if _, ok := e["param"]; !ok {
		t.Fatalf("openai error without param: %v", body)
	}
	code, body = post(o.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi","colour":"red"}]}`)
	if e, _ := body["error"].(map[string]any); code != 400 || e["param"] != "messages[0].colour" {
		t.Fatalf("openai unknown message field: %d %v", code, body)
	}
	code, body = post(o.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":42}]}`)
	if e, _ := body["error"].(map[string]any); code != 400 || !strings.HasPrefix(e["param"].(string), "messages[0].content") {
		t.Fatalf("openai content of the wrong type: %d %v", code, body)
	}
	code, body = post(o.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":"ten"}`)
	if e, _ := body["error"].(map[string]any); code != 400 || e["param"] != "max_completion_tokens" {
		t.Fatalf("openai max_completion_tokens of the wrong type: %d %v", code, body)
	}
	code, body = post(o.URL+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 {
		t.Fatalf("openai valid stream: %d %v", code, body)
	}
	an := strict.NewAnthropic(t)
	hdr := []string{"x-api-key", "k", "anthropic-version", "2023-06-01"}
	code, body = post(an.URL+"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"temprature":1}`, hdr...)
	e, _ = body["error"].(map[string]any)
	if code != 400 || body["type"] != "error" || e["type"] != "invalid_request_error" || e["message"] != "temprature: Extra inputs are not permitted" {
		t.Fatalf("anthropic unknown field: %d %v", code, body)
	}
	code, body = post(an.URL+"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi","colour":1}]}]}`, hdr...)
	if e, _ := body["error"].(map[string]any); code != 400 || e["message"] != "messages.0.content.0.colour: Extra inputs are not permitted" {
		t.Fatalf("anthropic unknown block field: %d %v", code, body)
	}
	code, body = post(an.URL+"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "x-api-key", "k")
	if e, _ := body["error"].(map[string]any); code != 400 || !strings.Contains(e["message"].(string), "anthropic-version") {
		t.Fatalf("anthropic without a version: %d %v", code, body)
	}
	code, body = post(an.URL+"/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":"hi"}]}`, hdr...)
	if e, _ := body["error"].(map[string]any); code != 400 || !strings.Contains(e["message"].(string), "first message must use the \"user\" role") {
		t.Fatalf("anthropic assistant first: %d %v", code, body)
	}
	// Beta-only fields (BetaMessageNewParams), as Claude Code sends them:
	// refused on the plain endpoint, accepted on ?beta=true.
	beta := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"context_management":{"edits":[]}}`
	code, body = post(an.URL+"/v1/messages", beta, hdr...)
	if e, _ := body["error"].(map[string]any); code != 400 || e["message"] != "context_management: Extra inputs are not permitted" {
		t.Fatalf("anthropic beta field on the plain endpoint: %d %v", code, body)
	}
	if code, body = post(an.URL+"/v1/messages?beta=true", beta, hdr...); code != 200 {
		t.Fatalf("anthropic beta field on the beta endpoint: %d %v", code, body)
	}
	if n := len(an.Rejected()); n != 5 {
		t.Fatalf("anthropic rejected %d", n)
	}
}

func asProviderError(err error, pe **provider.Error) bool {
	for err != nil {
		if e, ok := err.(*provider.Error); ok {
			*pe = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TestScriptedErrorsAndKeys: a scripted 4xx comes back in the provider's
// shape and the adapter reports the provider's message; RequireKey
// refuses a wrong key with 401.
func TestScriptedErrorsAndKeys(t *testing.T) {
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) {
			srv := a.srv(t, strict.Reply{Error: &strict.APIError{Message: "prompt is too long: 300000 tokens > 200000 maximum"}})
			_, err := a.make(srv.BaseURL()).Stream(context.Background(), provider.Request{Model: "m", Messages: conversation()[:1]}, func(provider.Event) {})
			var pe *provider.Error
			if !asProviderError(err, &pe) || pe.Kind != provider.ErrBadRequest || !strings.Contains(pe.Message, "prompt is too long") || pe.Status != 400 {
				t.Fatalf("err = %v", err)
			}
			if a.name == "openai-compatible" {
				return // sends no key
			}
			srv.RequireKey("another-key")
			_, err = a.make(srv.BaseURL()).Stream(context.Background(), provider.Request{Model: "m", Messages: conversation()[:1]}, func(provider.Event) {})
			if !asProviderError(err, &pe) || pe.Kind != provider.ErrAuth {
				t.Fatalf("wrong key: %v", err)
			}
		})
	}
}

// TestWholeAnswers: a request that asks for no stream gets the whole
// answer in the API's response shape, as the official SDKs decode it.
func TestWholeAnswers(t *testing.T) {
	reply := strict.Reply{Text: "Looking.", ToolCalls: []strict.Call{{ID: "call_w", Name: "weather", Arguments: `{"city":"Oslo"}`}},
		Usage: strict.Usage{Input: 40, Output: 8, Cached: 16}}

	o := strict.NewOpenAI(t, reply)
	oc := oai.NewClient(oaiopt.WithBaseURL(o.BaseURL()), oaiopt.WithAPIKey("k"), oaiopt.WithMaxRetries(0))
	cc, err := oc.Chat.Completions.New(context.Background(), oai.ChatCompletionNewParams{Model: "m",
		Messages: []oai.ChatCompletionMessageParamUnion{oai.UserMessage("weather?")}})
	if err != nil {
		t.Fatal(err)
	}
	ch := cc.Choices[0]
	if ch.Message.Content != "Looking." || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Arguments != `{"city":"Oslo"}` ||
		ch.FinishReason != "tool_calls" || cc.Usage.PromptTokensDetails.CachedTokens != 16 || cc.Usage.PromptTokens != 40 {
		t.Fatalf("chat completion: %+v", cc)
	}
	if r := o.Accepted(); len(r) != 1 || r[0].Chat.Stream {
		t.Fatalf("recorded: %+v", r)
	}

	a := strict.NewAnthropic(t, reply)
	ac := ant.NewClient(antopt.WithBaseURL(a.BaseURL()), antopt.WithAPIKey("k"), antopt.WithMaxRetries(0))
	msg, err := ac.Messages.New(context.Background(), ant.MessageNewParams{Model: "m", MaxTokens: 50,
		Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("weather?"))}})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 2 || msg.Content[0].Text != "Looking." || msg.Content[1].Name != "weather" || msg.StopReason != "tool_use" ||
		msg.Usage.CacheReadInputTokens != 16 || msg.Usage.InputTokens != 24 || msg.Usage.OutputTokens != 8 {
		t.Fatalf("message: %+v", msg)
	}
}

// TestAnthropicCountTokens: POST /v1/messages/count_tokens (Claude Code
// calls it) answers the SDK's own CountTokens with a count, off the
// script, and refuses a field the endpoint does not take.
func TestAnthropicCountTokens(t *testing.T) {
	a := strict.NewAnthropic(t, strict.Reply{Text: "the script's only reply"})
	ac := ant.NewClient(antopt.WithBaseURL(a.BaseURL()), antopt.WithAPIKey("k"), antopt.WithMaxRetries(0))
	n, err := ac.Messages.CountTokens(context.Background(), ant.MessageCountTokensParams{Model: "m",
		Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("how many tokens is this?"))},
		Tools: []ant.MessageCountTokensToolUnionParam{{OfTool: &ant.ToolParam{Name: "weather",
			InputSchema: ant.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}}})
	if err != nil || n.InputTokens < 1 {
		t.Fatalf("count_tokens = %+v, %v", n, err)
	}
	if len(a.Requests()) != 0 {
		t.Fatalf("a count was taken for a turn: %+v", a.Requests())
	}
	_, err = ac.Messages.CountTokens(context.Background(), ant.MessageCountTokensParams{Model: "m",
		Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("hi"))}}, antopt.WithJSONSet("max_tokens", 5))
	var ae *ant.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Error(), "max_tokens") {
		t.Fatalf("count_tokens with max_tokens = %v, want a 400 naming it", err)
	}
	// The script is untouched: the next turn gets its reply.
	msg, err := ac.Messages.New(context.Background(), ant.MessageNewParams{Model: "m", MaxTokens: 50,
		Messages: []ant.MessageParam{ant.NewUserMessage(ant.NewTextBlock("hi"))}})
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "the script's only reply" {
		t.Fatalf("the turn after the counts: %+v %v", msg, err)
	}
}

// The Anthropic server signs the thinking it streams when the request
// enables thinking, and refuses a tool loop that drops the block or alters
// it; the adapter streams the block as reasoning and sends it back whole.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	const thought = "Oslo: call the weather tool."
	srv := strict.NewAnthropic(t, strict.Reply{Reasoning: thought, ToolCalls: []strict.Call{{Name: "weather", Arguments: `{"city":"Oslo"}`}}})
	p := anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), APIKey: "sk-ant-test", MaxRetries: -1})
	ctx := context.Background()
	var streamed strings.Builder
	first := []provider.Message{{Role: provider.RoleUser, Content: "weather in Oslo?"}}
	resp, err := p.Stream(ctx, provider.Request{Model: "claude-sonnet-4-5", Messages: first, Tools: []provider.Tool{weather}, ReasoningEffort: provider.EffortLow},
		func(ev provider.Event) {
			if ev.Type == provider.EventReasoning {
				streamed.WriteString(ev.Text)
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if streamed.String() != thought || len(resp.Reasoning) != 1 || resp.Reasoning[0].Signature != strict.Sign(thought) || resp.Text != "" {
		t.Fatalf("streamed %q, response reasoning %+v text %q", streamed.String(), resp.Reasoning, resp.Text)
	}
	if th := srv.Accepted()[0].Messages.Thinking; th == nil || th.BudgetTokens != anthropic.ThinkingBudget[provider.EffortLow] {
		t.Fatalf("thinking sent: %+v", th)
	}
	loop := func(r []provider.Reasoning) []provider.Message {
		return append(append([]provider.Message{}, first...),
			provider.Message{Role: provider.RoleAssistant, ToolCalls: resp.ToolCalls, Reasoning: r},
			provider.Message{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: `{"sky":"clear"}`})
	}
	altered := []provider.Reasoning{{Type: provider.ReasoningThinking, Text: thought + " (edited)", Signature: resp.Reasoning[0].Signature}}
	for _, c := range []struct {
		name string
		r    []provider.Reasoning
		want string
	}{
		{"dropped", nil, "Expected `thinking` or `redacted_thinking`, but found `tool_use`"},
		{"altered", altered, "Invalid `signature` in `thinking` block"},
		{"kept", resp.Reasoning, ""},
	} {
		srv.Push(strict.Reply{Text: "Clear."})
		_, err := p.Stream(ctx, provider.Request{Model: "claude-sonnet-4-5", Messages: loop(c.r), Tools: []provider.Tool{weather}, ReasoningEffort: provider.EffortLow}, nil)
		switch {
		case c.want == "" && err != nil:
			t.Fatalf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Fatalf("%s: got %v, want a refusal with %q", c.name, err, c.want)
		}
	}
}

// An OpenAI-compatible reasoning server streams reasoning_content, which
// the adapter reports as reasoning, not text, and takes it back within
// the turn's tool loop; OpenAI's own API refuses the field.
func TestCompatibleReasoningContent(t *testing.T) {
	srv := strict.NewOpenAI(t, strict.Reply{Reasoning: "think first", ToolCalls: []strict.Call{{Name: "weather", Arguments: `{"city":"Oslo"}`}}}, strict.Reply{Text: "Clear."})
	srv.AcceptReasoningContent()
	p := openai.New(openai.Options{BaseURL: srv.BaseURL(), Name: openai.NameCompatible, MaxRetries: -1})
	first := []provider.Message{{Role: provider.RoleUser, Content: "weather in Oslo?"}}
	resp, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: first, Tools: []provider.Tool{weather}, ReasoningEffort: provider.EffortHigh}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Reasoning) != 1 || resp.Reasoning[0].Text != "think first" || resp.Text != "" {
		t.Fatalf("reasoning %+v text %q", resp.Reasoning, resp.Text)
	}
	if got := srv.Accepted()[0].Chat.ReasoningEffort; got != "high" {
		t.Fatalf("reasoning_effort sent %q", got)
	}
	msgs := append(first, provider.Message{Role: provider.RoleAssistant, ToolCalls: resp.ToolCalls, Reasoning: resp.Reasoning},
		provider.Message{Role: provider.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "{}"})
	if _, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: msgs, Tools: []provider.Tool{weather}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Accepted()[1].Chat.Messages[1].ReasoningContent; got != "think first" {
		t.Fatalf("reasoning_content sent back %q", got)
	}
	// OpenAI itself never gets the field.
	o := strict.NewOpenAI(t, strict.Reply{Text: "ok"})
	op := openai.New(openai.Options{BaseURL: o.BaseURL(), APIKey: "sk-test", MaxRetries: -1})
	if _, err := op.Stream(context.Background(), provider.Request{Model: "m", Messages: msgs}, nil); err != nil {
		t.Fatalf("openai: %v (refused: %v)", err, o.Rejected())
	}
}
