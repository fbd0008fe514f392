package app_test

import (
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// TestUsageFromStrictServers: a turn through the real adapters against the
// strict local OpenAI and Anthropic servers records exactly the token
// counts the server reported (cached ones included) — per session, per
// execution and per model.
func TestUsageFromStrictServers(t *testing.T) {
	for _, c := range []struct {
		name  string
		start func(t *testing.T, r ...strict.Reply) (*strict.Server, string)
	}{
		{"openai", func(t *testing.T, r ...strict.Reply) (*strict.Server, string) {
			srv := strict.NewOpenAI(t, r...)
			t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
			t.Setenv("OPENAI_API_KEY", "sk-test-usage")
			return srv, "openai:gpt-4o"
		}},
		{"anthropic", func(t *testing.T, r ...strict.Reply) (*strict.Server, string) {
			srv := strict.NewAnthropic(t, r...)
			t.Setenv("ANTHROPIC_BASE_URL", srv.BaseURL())
			t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-usage")
			return srv, "anthropic:claude-sonnet-4-5"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, spec := c.start(t,
				strict.Reply{ToolCalls: []strict.Call{{Name: "write_file", Arguments: `{"path":"/artifacts/n.md","content":"# n\n"}`}},
					Usage: strict.Usage{Input: 500, Output: 40, Cached: 300}},
				strict.Reply{Text: "Written.", Usage: strict.Usage{Input: 700, Output: 12, Cached: 500}})
			w := &agentWorld{&execWorld{world: newWorldOn(t, app.Config{Model: spec,
				Execution: execution.Options{PollInterval: 50 * time.Millisecond, StopTimeout: 15 * time.Second}})}}
			// A titled session makes no title call: the two replies are the
			// turn's.
			var x desk.Session
			w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "usage"}, &x)
			exe := w.settled(w.send(x.ID, "write n.md").ExecutionID)
			oneTerminal(t, exe, desk.PhaseEnded)
			if n := len(srv.Accepted()); n != 2 {
				t.Fatalf("the strict server accepted %d requests (%d refused: %+v)", n, len(srv.Rejected()), srv.Rejected())
			}
			want := desk.UsageTotals{Calls: 2, InputTokens: 1200, OutputTokens: 52, CachedTokens: 800, TotalTokens: 1252}
			u := w.sessionUsage(x.ID)
			if u.Total != want || len(u.Models) != 1 || u.Models[0].Model != spec || u.Models[0].UsageTotals != want {
				t.Fatalf("session usage %+v, want %+v of %s", u, want, spec)
			}
			if exe.Usage == nil || *exe.Usage != want {
				t.Fatalf("execution usage %+v", exe.Usage)
			}
		})
	}
}
