package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// reasoningDesk is a desk whose default model is an Anthropic model
// declared as reasoning, with a second, non-reasoning one, against one
// strict Anthropic server.
func reasoningDesk(t *testing.T) *deskWorld {
	srv := strict.NewAnthropic(t)
	srv.RequireKey(anthropicKey)
	t.Setenv("ANTHROPIC_BASE_URL", srv.BaseURL())
	t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
	e := apptest.Start(t, app.Config{Model: "anthropic:claude-sonnet-4-5;reasoning", Models: []string{"anthropic:claude-haiku-4-5"},
		Execution: execution.Options{PollInterval: 50 * time.Millisecond, StopTimeout: 15 * time.Second}})
	w := &deskWorld{Env: e, t: t, srv: srv, p: contractProviders[2]}
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "reasoning"}, &w.ws)
	return w
}

func (w *deskWorld) messages() []desk.Message {
	w.t.Helper()
	var out struct{ Messages []desk.Message }
	w.Must(200, "GET", "/v1/sessions/"+w.ses.ID+"/messages?limit=500", nil, &out)
	return out.Messages
}

// An Anthropic turn with thinking and a tool call: the signed thinking
// block streams as assistant.reasoning events, is kept apart from the
// reply in the transcript, and goes back to the strict server unaltered
// in the tool loop (which refuses a loop that drops it).
func TestReasoningAnthropicThinkingToolLoop(t *testing.T) {
	w := reasoningDesk(t)
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "think", "reasoning_effort": "high"}, &w.ses)
	if w.ses.ReasoningEffort != "high" {
		t.Fatalf("session reasoning_effort = %q", w.ses.ReasoningEffort)
	}
	const thought = "The user wants the artifacts; list them before answering."
	w.srv.Push(
		strict.Reply{Reasoning: thought, Text: "Looking.", ToolCalls: []strict.Call{{Name: "list_files", Arguments: `{"path":"/artifacts"}`}}},
		strict.Reply{Reasoning: "Empty: say so.", Text: "There is nothing there yet."})
	exe := w.send("what is in my artifacts?")
	w.settled(exe, desk.PhaseEnded)
	if rj := w.srv.Rejected(); len(rj) > 0 {
		t.Fatalf("refused: %s", w.refusals())
	}
	reqs := w.srv.Accepted()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		th := r.Messages.Thinking
		if th == nil || th.Type != "enabled" || th.BudgetTokens != 16384 || r.Messages.MaxTokens <= th.BudgetTokens {
			t.Fatalf("request %d: thinking %+v, max_tokens %d: want enabled with the high budget below max_tokens", i, th, r.Messages.MaxTokens)
		}
	}
	loop := reqs[1].Messages.Messages
	asst := loop[len(loop)-2]
	if asst.Role != "assistant" || len(asst.Content) < 2 || asst.Content[0].Type != "thinking" ||
		asst.Content[0].Text != thought || asst.Content[0].Signature != strict.Sign(thought) {
		t.Fatalf("the tool loop's assistant message does not start with the signed thinking block: %+v", asst.Content)
	}
	var withReasoning []desk.Message
	for _, m := range w.messages() {
		if m.Role == desk.RoleAssistant {
			if strings.Contains(m.Text, thought) {
				t.Fatalf("the reasoning leaked into the reply text: %q", m.Text)
			}
			if len(m.Reasoning()) > 0 {
				withReasoning = append(withReasoning, m)
			}
		}
	}
	if len(withReasoning) != 2 || withReasoning[0].Reasoning()[0].Text != thought || withReasoning[0].Reasoning()[0].Signature == "" {
		t.Fatalf("the transcript keeps the reasoning of %d messages, want 2 (the first %q, signed)", len(withReasoning), thought)
	}
	evs, err := w.App.Store.ListEvents(context.Background(), desk.EventFilter{ExecutionID: exe, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	for _, e := range evs {
		if e.Type == "assistant.reasoning" {
			var d struct{ Text string }
			json.Unmarshal(e.Data, &d)
			streamed.WriteString(d.Text)
		}
		if e.Type == "assistant.delta" && strings.Contains(string(e.Data), "list them") {
			t.Fatalf("reasoning streamed as reply text: %s", e.Data)
		}
	}
	if !strings.Contains(streamed.String(), thought) {
		t.Fatalf("assistant.reasoning events carried %q, want %q", streamed.String(), thought)
	}
}

// A reasoning effort is refused, naming the field, for a model the
// operator did not declare as reasoning, and nothing is made.
func TestReasoningEffortRefusedForPlainModel(t *testing.T) {
	w := reasoningDesk(t)
	r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"model": "anthropic:claude-haiku-4-5", "reasoning_effort": "low"})
	if r.Status != 400 || !strings.Contains(string(r.Body), "reasoning_effort") || !strings.Contains(string(r.Body), ";reasoning") {
		t.Fatalf("got %d %s, want 400 naming reasoning_effort", r.Status, string(r.Body))
	}
	r = w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"reasoning_effort": "extreme"})
	if r.Status != 400 || !strings.Contains(string(r.Body), "reasoning_effort") {
		t.Fatalf("got %d %s, want 400 naming reasoning_effort", r.Status, string(r.Body))
	}
	var list desk.SessionList
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/sessions", nil, &list)
	if len(list.Sessions) != 0 {
		t.Fatalf("a refused session was made: %d sessions", len(list.Sessions))
	}
}
