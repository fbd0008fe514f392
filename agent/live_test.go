package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/layout"
)

// liveSkip is why the live check did not run.
const liveSkip = "live check skipped: set DESK_LIVE_TEST=1 with OPENAI_API_KEY and/or ANTHROPIC_API_KEY " +
	"(models: DESK_LIVE_OPENAI_MODEL, default gpt-4o-mini; DESK_LIVE_ANTHROPIC_MODEL, default claude-haiku-4-5)"

// TestLiveTwoStepTurn is the check for people with keys: against the real
// OpenAI and Anthropic APIs, one turn in which the model calls write_file
// and then answers, through desk's complete request path (every tool
// declared). It costs a few cents, so it runs only when asked.
func TestLiveTwoStepTurn(t *testing.T) {
	if os.Getenv("DESK_LIVE_TEST") != "1" {
		t.Skip(liveSkip)
	}
	for _, p := range []struct{ name, keyEnv, modelEnv, model string }{
		{"openai", "OPENAI_API_KEY", "DESK_LIVE_OPENAI_MODEL", "gpt-4o-mini"},
		{"anthropic", "ANTHROPIC_API_KEY", "DESK_LIVE_ANTHROPIC_MODEL", "claude-haiku-4-5"},
	} {
		t.Run(p.name, func(t *testing.T) {
			if os.Getenv(p.keyEnv) == "" {
				t.Skipf("live check of %s skipped: set %s (and DESK_LIVE_TEST=1)", p.name, p.keyEnv)
			}
			model := os.Getenv(p.modelEnv)
			if model == "" {
				model = p.model
			}
			e := apptest.Start(t, app.Config{Model: p.name + ":" + model,
				Execution: execution.Options{PollInterval: 50 * time.Millisecond, StopTimeout: 15 * time.Second}})
			w := &deskWorld{Env: e, t: t}
			e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "live"}, &w.ws)
			e.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "live"}, &w.ses)
			exe := w.send("Use the write_file tool to write exactly the text pong to /artifacts/ping.txt. " +
				"After the tool has answered, reply with the single word done.")
			x := w.settled(exe, desk.PhaseEnded)
			b, err := os.ReadFile(filepath.Join(e.App.Home.Abs(w.ses.WorkspaceID, layout.SessionRel(w.ses.Actor, w.ses.ID)), "ping.txt"))
			if err != nil || !strings.Contains(string(b), "pong") {
				t.Fatalf("the file the model wrote: %q %v", b, err)
			}
			var msgs struct{ Messages []desk.Message }
			w.Must(200, "GET", "/v1/sessions/"+w.ses.ID+"/messages?limit=50", nil, &msgs)
			calls, steps := 0, 0
			for _, m := range msgs.Messages {
				if m.Role == desk.RoleAssistant {
					steps++
					calls += len(m.ToolCalls)
				}
			}
			if calls == 0 || steps < 2 || !strings.Contains(strings.ToLower(w.reply()), "done") {
				t.Fatalf("%d steps, %d calls, reply %q", steps, calls, w.reply())
			}
			for _, ev := range x.Events {
				if ev.Type == "assistant.message" && !strings.Contains(string(ev.Data), `"input_tokens"`) {
					t.Fatalf("a model step without usage: %s", ev.Data)
				}
			}
			t.Logf("%s %s: %d steps, reply %q", p.name, model, steps, w.reply())
		})
	}
}
