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

// Two profiles — desk's agent on a reasoning model, and a registered
// runtime — each start a session; PATCH switches the desk session's model
// between turns, the strict server sees the next request on the new
// model, and the transcript has the marker. A profile naming an
// undeclared model is refused naming the field.
func TestProfilesAndModelSwitch(t *testing.T) {
	w := reasoningDesk(t)
	base := "/v1/workspaces/" + w.ws.ID + "/profiles"
	r := w.Admin("POST", base, map[string]any{"name": "rogue", "model": "openai-compatible:https://evil.example/v1#m"})
	if r.Status != 400 || !strings.HasPrefix(r.ErrorMessage(), "model:") {
		t.Fatalf("an undeclared model: %d %s", r.Status, r.Body)
	}
	r = w.Admin("POST", base, map[string]any{"name": "plain", "model": "anthropic:claude-haiku-4-5", "reasoning_effort": "high"})
	if r.Status != 400 || !strings.Contains(r.ErrorMessage(), "reasoning_effort") {
		t.Fatalf("effort for a plain model: %d %s", r.Status, r.Body)
	}
	r = w.Admin("POST", base, map[string]any{"name": "narrow", "tools": []string{"list_files", "rm_rf"}})
	if r.Status != 400 || !strings.Contains(r.ErrorMessage(), "tools[1]") {
		t.Fatalf("an unknown tool: %d %s", r.Status, r.Body)
	}
	var thinker, runner desk.Profile
	w.Must(201, "POST", base, map[string]any{"name": "thinker", "model": "anthropic:claude-sonnet-4-5", "reasoning_effort": "medium",
		"instructions": "Answer in one line.", "tools": []string{"list_files", "read_file"}}, &thinker)
	w.Must(201, "POST", "/v1/runtimes", map[string]any{"name": "fake-rt", "protocol": "acp", "argv": []string{"/bin/cat"}}, nil)
	w.Must(201, "POST", base, map[string]any{"name": "runner", "runtime": "fake-rt"}, &runner)
	var list desk.ProfileList
	w.Must(200, "GET", base, nil, &list)
	var names []string
	for _, p := range list.Profiles {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "default,runner,thinker" {
		t.Fatalf("profiles %v", names)
	}

	var rs desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"profile": "runner"}, &rs)
	if rs.Runtime != "fake-rt" || rs.Profile != "runner" || rs.ProfileSnapshot == nil {
		t.Fatalf("runtime session %+v", rs)
	}
	if r := w.Admin("PATCH", "/v1/sessions/"+rs.ID, map[string]string{"model": "anthropic:claude-haiku-4-5"}); r.Status != 400 {
		t.Fatalf("a runtime session's model changed: %d %s", r.Status, r.Body)
	}

	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"profile": "thinker", "title": "profiles"}, &w.ses)
	if w.ses.Profile != "thinker" || w.ses.ReasoningEffort != "medium" || w.ses.Model != "anthropic:claude-sonnet-4-5" || w.ses.ProfileSnapshot.Instructions != "Answer in one line." {
		t.Fatalf("profile session %+v", w.ses)
	}
	// The profile changes later; the session keeps its snapshot.
	w.Must(200, "PUT", base+"/thinker", map[string]any{"model": "anthropic:claude-sonnet-4-5", "instructions": "Changed."}, nil)
	w.srv.Push(strict.Reply{Reasoning: "short", Text: "one"})
	w.settled(w.send("first"), desk.PhaseEnded)
	first := w.srv.Accepted()[0].Messages
	sys := first.System[0].Text
	if first.Model != "claude-sonnet-4-5" || first.Thinking == nil || first.Thinking.BudgetTokens != 8192 ||
		!strings.Contains(sys, "Answer in one line.") || strings.Contains(sys, "Changed.") {
		t.Fatalf("first request: model %s thinking %+v system …%s", first.Model, first.Thinking, sys[max(0, len(sys)-200):])
	}
	if got := strings.Join(w.srv.Accepted()[0].ToolNames(), ","); got != "list_files,read_file" {
		t.Fatalf("tools %s, want the profile's", got)
	}

	var patched desk.Session
	w.Must(200, "PATCH", "/v1/sessions/"+w.ses.ID, map[string]string{"model": "anthropic:claude-haiku-4-5"}, &patched)
	if patched.Model != "anthropic:claude-haiku-4-5" || patched.ReasoningEffort != "" {
		t.Fatalf("patched %+v: want haiku, no effort (it is not a reasoning model)", patched)
	}
	w.srv.Push(strict.Reply{Text: "two"})
	w.settled(w.send("second"), desk.PhaseEnded)
	second := w.srv.Accepted()[1].Messages
	if second.Model != "claude-haiku-4-5" || second.Thinking != nil {
		t.Fatalf("second request: model %s thinking %+v", second.Model, second.Thinking)
	}
	var marker *desk.SessionChange
	for _, m := range w.messages() {
		if m.Role == desk.RoleMarker {
			marker = m.Marker()
		}
	}
	if marker == nil || marker.Model != "anthropic:claude-haiku-4-5" || marker.FromModel != "anthropic:claude-sonnet-4-5" || marker.ReasoningEffort != "default" {
		t.Fatalf("marker %+v", marker)
	}
	if rj := w.srv.Rejected(); len(rj) > 0 {
		t.Fatalf("refused: %s", w.refusals())
	}
}
