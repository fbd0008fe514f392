package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/agent/provider/anthropic"
	"github.com/desk-runtime/desk/agent/provider/openai"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// commandStore answers ListCommands from a list; nothing else of the
// store is used by answerDangling.
type commandStore struct {
	desk.Store
	cmds  []*desk.Command
	reads int
}

func (s *commandStore) ListCommands(_ context.Context, exes []string) ([]*desk.Command, error) {
	s.reads++
	var out []*desk.Command
	for _, c := range s.cmds {
		for _, e := range exes {
			if c.ExecutionID == e {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

func call(id, name string) desk.MessageCall {
	return desk.MessageCall{ID: id, Name: name, Arguments: json.RawMessage(`{"command":"make"}`)}
}

// danglingHistory is a transcript after a declined call whose result was
// never written, an interrupted parallel step (one result of two) and a
// turn that died mid-step, plus a stray result whose call is gone.
func danglingHistory() []*desk.Message {
	msg := func(exe, role, text string, calls ...desk.MessageCall) *desk.Message {
		return &desk.Message{ExecutionID: exe, Role: role, Text: text, ToolCalls: calls}
	}
	res := func(exe, id, text string) *desk.Message {
		return &desk.Message{ExecutionID: exe, Role: desk.RoleTool, ToolCallID: id, ToolName: "exec_command", Text: text}
	}
	return []*desk.Message{
		msg("exe_1", desk.RoleUser, "build it"),
		msg("exe_1", desk.RoleAssistant, "Building.", call("c_declined", "exec_command")),
		msg("exe_2", desk.RoleUser, "then test it"),
		msg("exe_2", desk.RoleAssistant, "", call("c_done", "exec_command"), call("c_cancelled", "exec_command")),
		res("exe_2", "c_done", `{"exit_code":0}`),
		msg("exe_3", desk.RoleUser, "and ship it"),
		res("exe_3", "c_gone", `{"exit_code":0}`),
		msg("exe_3", desk.RoleAssistant, "", call("c_unknown", "exec_command")),
		msg("exe_4", desk.RoleUser, "status?"),
	}
}

// TestAnswerDangling: every tool call of the history gets a result, right
// after its message's own results: "declined by the user" for a declined
// command, "interrupted: outcome unknown" for anything else (a cancelled
// or unknown command, or none at all); a stray result is dropped, and a
// history with nothing to repair is returned as it was without reading a
// command record.
func TestAnswerDangling(t *testing.T) {
	st := &commandStore{cmds: []*desk.Command{
		{ExecutionID: "exe_1", CallID: "c_declined", Status: desk.CommandDeclined},
		{ExecutionID: "exe_2", CallID: "c_done", Status: desk.CommandSucceeded},
		{ExecutionID: "exe_2", CallID: "c_cancelled", Status: desk.CommandCancelled},
		{ExecutionID: "exe_3", CallID: "c_unknown", Status: desk.CommandUnknown},
	}}
	a := &Agent{store: st}
	out, err := a.answerDangling(context.Background(), danglingHistory())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range out {
		s := m.Role
		if m.Role == desk.RoleTool {
			s += ":" + m.ToolCallID
			if m.ToolCallID != "c_done" {
				var v struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal([]byte(m.Text), &v); err != nil || !m.IsError {
					t.Fatalf("synthesized result %q (error %v)", m.Text, m.IsError)
				}
				s += "=" + v.Error.Message
			}
		}
		got = append(got, s)
	}
	want := []string{"user", "assistant", "tool:c_declined=" + resultDeclined, "user", "assistant", "tool:c_done",
		"tool:c_cancelled=" + resultInterrupted, "user", "assistant", "tool:c_unknown=" + resultInterrupted, "user"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("repaired history:\n got %v\nwant %v", got, want)
	}

	st.reads = 0
	whole := out[:7]
	again, err := a.answerDangling(context.Background(), whole)
	if err != nil || len(again) != len(whole) || st.reads != 0 {
		t.Fatalf("a whole history: %d messages of %d, %d command reads, %v", len(again), len(whole), st.reads, err)
	}
}

// TestDanglingHistoryAgainstStrictServers: the history above, as every
// provider receives it, is refused with the providers' 400 without the
// repair and accepted with it.
func TestDanglingHistoryAgainstStrictServers(t *testing.T) {
	st := &commandStore{cmds: []*desk.Command{{ExecutionID: "exe_1", CallID: "c_declined", Status: desk.CommandDeclined}}}
	a := &Agent{store: st}
	repaired, err := a.answerDangling(context.Background(), danglingHistory())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"openai", "openai-compatible", "anthropic"} {
		t.Run(name, func(t *testing.T) {
			var srv *strict.Server
			var p provider.Provider
			switch name {
			case "anthropic":
				srv = strict.NewAnthropic(t, strict.Reply{Text: "shipped"})
				p = anthropic.New(anthropic.Options{BaseURL: srv.BaseURL(), APIKey: "sk-ant-test", MaxRetries: -1})
			default:
				srv = strict.NewOpenAI(t, strict.Reply{Text: "shipped"})
				p = openai.New(openai.Options{BaseURL: srv.BaseURL(), APIKey: "sk-test", Name: name, MaxRetries: -1})
			}
			send := func(ms []*desk.Message) error {
				_, err := p.Stream(context.Background(), provider.Request{Model: "m", Messages: toProvider(ms), Tools: declarations(&tools.Env{})[:1]}, func(provider.Event) {})
				return err
			}
			err := send(danglingHistory())
			if provider.KindOf(err) != provider.ErrBadRequest || !strings.Contains(err.Error(), "c_declined") {
				t.Fatalf("without the repair: %v", err)
			}
			if err := send(repaired); err != nil {
				t.Fatalf("with the repair: %v", err)
			}
			acc := srv.Accepted()
			if len(acc) != 1 {
				t.Fatalf("%d accepted", len(acc))
			}
			res := acc[0].ToolResults()
			if !strings.Contains(res["c_declined"], resultDeclined) || !strings.Contains(res["c_cancelled"], resultInterrupted) ||
				!strings.Contains(res["c_unknown"], resultInterrupted) || res["c_done"] != `{"exit_code":0}` {
				t.Fatalf("results sent: %v", res)
			}
			if _, ok := res["c_gone"]; ok {
				t.Fatal("the stray result was sent")
			}
		})
	}
}
