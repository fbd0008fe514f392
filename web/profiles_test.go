package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// TestNewSessionFromProfileAndReasoning: the new-session form offers the
// workspace's profiles and a reasoning-effort picker; a session posted
// with a profile keeps it; an assistant step's reasoning shows in a
// collapsed, labelled <details>, apart from the reply, and a marker
// message reads as a change of the agent.
func TestNewSessionFromProfileAndReasoning(t *testing.T) {
	f := start(t, app.Config{Model: "anthropic:claude-sonnet-4-5;reasoning", Models: []string{"openai:gpt-4.1"}})
	f.e.Must(201, "POST", "/v1/workspaces/"+f.ws.ID+"/profiles", map[string]any{"name": "deep", "reasoning_effort": "high", "instructions": "Think."}, nil)
	b := signInWith(t, f.e, f.e.Token)
	form, _ := b.get("/w/" + f.ws.ID + "/new")
	for _, want := range []string{`id="ns-profile"`, `<option value="deep">deep · reasoning high</option>`, `<option value="default">`, `id="ns-effort" name="reasoning_effort">`} {
		if !strings.Contains(form, want) {
			t.Fatalf("the new-session form lacks %s", want)
		}
	}
	_, resp := b.post("/w/"+f.ws.ID+"/sessions", url.Values{"title": {"deep one"}, "model": {"anthropic:claude-sonnet-4-5"}, "profile": {"deep"}})
	if resp.StatusCode >= 400 {
		t.Fatalf("create from the profile: %d", resp.StatusCode)
	}
	var out struct{ Sessions []desk.Session }
	f.e.Must(200, "GET", "/v1/workspaces/"+f.ws.ID+"/sessions", nil, &out)
	if len(out.Sessions) != 1 || out.Sessions[0].Profile != "deep" || out.Sessions[0].ReasoningEffort != "high" {
		t.Fatalf("sessions %+v", out.Sessions)
	}
	x := out.Sessions[0]

	ctx := context.Background()
	st := f.e.App.Store
	user := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, Role: desk.RoleUser, Text: "why?", CreatedAt: desk.Now()}
	asst := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: "exe_fixture", Role: desk.RoleAssistant, Text: "Because.", CreatedAt: desk.Now()}
	asst.SetReasoning([]desk.MessageReasoning{{Type: "thinking", Text: "weigh <both> sides", Signature: "sig"}, {Type: "redacted_thinking", Data: "opaque"}})
	for _, m := range []*desk.Message{user, asst} {
		if err := st.AppendMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	f.e.Must(200, "PATCH", "/v1/sessions/"+x.ID, map[string]string{"reasoning_effort": "low"}, nil)
	page, _ := b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	i := strings.Index(page, `<details class="reasoning" data-reasoning><summary>Reasoning</summary>`)
	if i < 0 || strings.Index(page, "weigh &lt;both&gt; sides") < i || !strings.Contains(page, "(redacted by the provider)") {
		t.Fatalf("the page lacks the collapsed, labelled, escaped reasoning")
	}
	if j := strings.Index(page, "Because."); j < i {
		t.Fatalf("the reply is not after its reasoning")
	}
	if strings.Contains(page, `data-reasoning open`) || strings.Contains(page, "opaque") {
		t.Fatalf("the reasoning is open by default or shows a redacted block's data")
	}
	if !strings.Contains(page, "Agent changed") || !strings.Contains(page, "reasoning effort high → low") {
		t.Fatalf("the page lacks the marker")
	}
	// The header's switcher: the reasoning picker is live for the
	// reasoning model; switching the model clears the effort (the new
	// model takes none) and disables the picker.
	if !strings.Contains(page, `id="agent-switch"`) || !strings.Contains(page, `<option value="low" selected>reasoning: low</option>`) || strings.Contains(page, `id="as-effort" aria-label="Reasoning effort" disabled`) {
		t.Fatalf("the header lacks a live switcher")
	}
	if _, resp := b.post("/s/"+x.ID+"/agent", url.Values{"model": {"openai:gpt-4.1"}, "reasoning_effort": {"low"}}); resp.StatusCode >= 400 {
		t.Fatalf("switch: %d", resp.StatusCode)
	}
	var got desk.Session
	f.e.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
	if got.Model != "openai:gpt-4.1" || got.ReasoningEffort != "" {
		t.Fatalf("after the switch: model %q effort %q", got.Model, got.ReasoningEffort)
	}
	page, _ = b.get("/w/" + f.ws.ID + "/s/" + x.ID)
	if !strings.Contains(page, `id="as-effort" aria-label="Reasoning effort" disabled title="this model is not declared as reasoning"`) {
		t.Fatalf("the reasoning picker is not disabled, with why, for a plain model")
	}
}
