package app_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/layout"
)

// Repository instructions, skills and the agent's identity, end to end:
// a real desk whose model is the real OpenAI adapter talking to the
// strict local Chat Completions server, so the tests see the system prompt
// the model really receives.

// strictWorld is an agent world whose model is a strict OpenAI server.
func strictWorld(t *testing.T, replies ...strict.Reply) (*agentWorld, *strict.Server) {
	t.Helper()
	srv := strict.NewOpenAI(t, replies...)
	t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
	t.Setenv("OPENAI_API_KEY", "sk-test-extensions")
	w := &agentWorld{&execWorld{world: newWorldOn(t, app.Config{Model: "openai:gpt-4o",
		Execution: execution.Options{PollInterval: 50 * time.Millisecond, StopTimeout: 15 * time.Second}})}}
	return w, srv
}

// titled is a session with a title, so no title call takes a reply.
func (w *agentWorld) titled(title string) desk.Session {
	w.T.Helper()
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": title}, &x)
	return x
}

// turn sends a message and waits for its execution to end well.
func (w *agentWorld) turn(x desk.Session, text string) desk.Execution {
	w.T.Helper()
	exe := w.settled(w.send(x.ID, text).ExecutionID)
	oneTerminal(w.T.(*testing.T), exe, desk.PhaseEnded)
	return exe
}

// checkout is the host directory of the workspace's /workspace.
func (w *agentWorld) checkout() string { return w.App.Home.Abs(w.ws.ID, layout.CheckoutDir) }

func writeHost(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// systemOf is the system prompt of an accepted Chat Completions request.
func systemOf(t *testing.T, r strict.Request) string {
	t.Helper()
	if r.Chat == nil || len(r.Chat.Messages) == 0 || r.Chat.Messages[0].Role != "system" {
		t.Fatalf("a request without a system message: %s", r.Body)
	}
	return r.Chat.Messages[0].Text
}

// accepted are the server's requests, all of which must have passed.
func accepted(t *testing.T, srv *strict.Server, want int) []strict.Request {
	t.Helper()
	if rj := srv.Rejected(); len(rj) > 0 {
		t.Fatalf("the strict server refused %d requests: %s", len(rj), rj[0].Error)
	}
	got := srv.Requests()
	if len(got) != want {
		for i, r := range got {
			t.Logf("request %d: %v %s", i, r.UserTexts(), r.Body[:min(len(r.Body), 300)])
		}
		t.Fatalf("%d requests, want %d", len(got), want)
	}
	for i, r := range got {
		if r.Exhausted {
			t.Fatalf("request %d found no scripted reply", i)
		}
	}
	return got
}

func digestOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

func (w *agentWorld) contextOf(x desk.Session) agent.ContextView {
	w.T.Helper()
	var v agent.ContextView
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/context", nil, &v)
	return v
}

// TestExternalInstructionsInPrompt: an AGENTS.md the agent writes into
// the checkout is not in the rest of that turn's requests (instructions are
// read when a turn starts) and is in the system prompt of the next turn,
// under a header naming it, before the primary root's CLAUDE.md; the
// context view lists both with digest and size; with external_instructions
// off neither reaches the model, and the listing says why.
func TestExternalInstructionsInPrompt(t *testing.T) {
	const banana = "ALWAYS SAY BANANA\n"
	w, srv := strictWorld(t,
		strict.Reply{ToolCalls: []strict.Call{{Name: "write_file", Arguments: `{"path":"/workspace/AGENTS.md","content":"ALWAYS SAY BANANA\n"}`}}},
		strict.Reply{Text: "Written."},
		strict.Reply{Text: "BANANA"},
		strict.Reply{Text: "plain"})
	// (full-access: no gate, so no reviewer call takes a reply.)
	w.settings(map[string]any{"approval_mode": "full-access"})
	x := w.titled("instructions")
	w.turn(x, "write the instructions")
	if b, err := os.ReadFile(filepath.Join(w.checkout(), "AGENTS.md")); err != nil || string(b) != banana {
		t.Fatalf("AGENTS.md in the checkout: %q %v", b, err)
	}
	// A primary root with its own CLAUDE.md.
	root := t.TempDir()
	writeHost(t, filepath.Join(root, "CLAUDE.md"), "PRIMARY ROOT RULES")
	w.Must(200, "PATCH", "/v1/workspaces/"+w.ws.ID, map[string]any{"host_paths": []map[string]string{{"path": root, "mode": "ro"}}, "primary_root": root}, nil)

	v := w.contextOf(x)
	if len(v.ExternalInstructions) != 2 {
		t.Fatalf("context lists %+v", v.ExternalInstructions)
	}
	a, c := v.ExternalInstructions[0], v.ExternalInstructions[1]
	if a.Path != "/workspace/AGENTS.md" || a.Digest != digestOf(banana) || a.Size != int64(len(banana)) || !a.Included || a.Truncated {
		t.Fatalf("AGENTS.md record %+v", a)
	}
	if c.Path != root+"/CLAUDE.md" || c.Digest != digestOf("PRIMARY ROOT RULES") || !c.Included {
		t.Fatalf("CLAUDE.md record %+v", c)
	}
	w.turn(x, "what do you say?")

	rs := accepted(t, srv, 3)
	for i := range 2 {
		if s := systemOf(t, rs[i]); strings.Contains(s, "BANANA") {
			t.Fatalf("request %d of the turn that wrote AGENTS.md already holds it", i)
		}
	}
	sys := systemOf(t, rs[2])
	head := "=== /workspace/AGENTS.md (18 bytes, " + digestOf(banana) + ") ===\n" + banana + "=== end of /workspace/AGENTS.md ==="
	ia, ic := strings.Index(sys, head), strings.Index(sys, "=== "+root+"/CLAUDE.md")
	if ia < 0 || ic < ia || !strings.Contains(sys, "PRIMARY ROOT RULES\n=== end of "+root+"/CLAUDE.md ===") {
		t.Fatalf("the next turn's system prompt:\n%s", sys)
	}
	if sys != v.SystemPrompt {
		t.Fatalf("the context view showed a different system prompt than the turn sent:\n%s\n---\n%s", v.SystemPrompt, sys)
	}

	// Off.
	if st := w.settings(map[string]any{"external_instructions": false}); st.ExternalInstructions {
		t.Fatalf("PATCH answered %+v", st)
	}
	v = w.contextOf(x)
	if strings.Contains(v.SystemPrompt, "BANANA") || len(v.ExternalInstructions) != 2 {
		t.Fatalf("with instructions off, the context: %+v", v.ExternalInstructions)
	}
	for _, in := range v.ExternalInstructions {
		if in.Included || !strings.Contains(in.Note, "external_instructions: false") {
			t.Fatalf("with instructions off: %+v", in)
		}
	}
	w.turn(x, "and now?")
	rs = accepted(t, srv, 4)
	if s := systemOf(t, rs[3]); strings.Contains(s, "BANANA") || strings.Contains(s, "PRIMARY ROOT RULES") {
		t.Fatalf("with instructions off the model got them:\n%s", s)
	}
	var st desk.AgentSettings
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/agent", nil, &st)
	if st.ExternalInstructions {
		t.Fatal("the setting did not stay off")
	}
}

// TestSkillsListedAndLoaded: list_extensions lists the checkout's skills
// with their front matter; load_extension of an unknown name is BAD_INPUT
// naming the available ones; a loaded skill is not in the request of the
// step that loaded it, is in the next one with its files named, stays for
// the next turn, and the context view lists the load with its command.
func TestSkillsListedAndLoaded(t *testing.T) {
	w, srv := strictWorld(t,
		strict.Reply{ToolCalls: []strict.Call{{ID: "call_list", Name: "list_extensions", Arguments: `{}`}}},
		strict.Reply{ToolCalls: []strict.Call{{ID: "call_nope", Name: "load_extension", Arguments: `{"name":"nope"}`},
			{ID: "call_load", Name: "load_extension", Arguments: `{"name":"pdf-tools"}`}}},
		strict.Reply{Text: "Loaded."},
		strict.Reply{Text: "Still loaded."})
	co := w.checkout()
	body := "# Filling PDF forms\nRun scripts/fill.py with the form's path.\n"
	writeHost(t, filepath.Join(co, ".agents/skills/pdf/SKILL.md"), "---\nname: pdf-tools\ndescription: Fill and merge PDF forms.\n---\n\n"+body)
	writeHost(t, filepath.Join(co, ".agents/skills/pdf/scripts/fill.py"), "print('filled')\n")
	writeHost(t, filepath.Join(co, ".claude/skills/charts/SKILL.md"), "---\ndescription: Draw charts from CSV.\n---\nUse matplotlib.\n")
	x := w.titled("skills")
	w.turn(x, "fill my form")

	rs := accepted(t, srv, 3)
	var listed struct {
		Skills []struct {
			Name, Description, Path string
			Loaded                  bool
		}
	}
	if err := json.Unmarshal([]byte(rs[1].ToolResults()["call_list"]), &listed); err != nil {
		t.Fatalf("list_extensions result %q: %v", rs[1].ToolResults()["call_list"], err)
	}
	if len(listed.Skills) != 2 || listed.Skills[0].Name != "pdf-tools" || listed.Skills[0].Description != "Fill and merge PDF forms." ||
		listed.Skills[0].Path != "/workspace/.agents/skills/pdf/SKILL.md" || listed.Skills[0].Loaded ||
		listed.Skills[1].Name != "charts" || listed.Skills[1].Description != "Draw charts from CSV." {
		t.Fatalf("list_extensions listed %+v", listed.Skills)
	}
	nope := rs[2].ToolResults()["call_nope"]
	if !strings.Contains(nope, "BAD_INPUT") || !strings.Contains(nope, `no skill named \"nope\"`) || !strings.Contains(nope, "pdf-tools, charts") {
		t.Fatalf("loading an unknown skill: %s", nope)
	}
	if load := rs[2].ToolResults()["call_load"]; !strings.Contains(load, `"loaded":"pdf-tools"`) || !strings.Contains(load, "/workspace/.agents/skills/pdf/scripts/fill.py") {
		t.Fatalf("load_extension result: %s", load)
	}
	section := "=== skill pdf-tools: /workspace/.agents/skills/pdf/SKILL.md ===\nFiles: /workspace/.agents/skills/pdf/scripts/fill.py\n" + body + "=== end of skill pdf-tools ==="
	for i := range 2 {
		if s := systemOf(t, rs[i]); strings.Contains(s, "skill pdf-tools") {
			t.Fatalf("request %d (before the load took effect) holds the skill", i)
		}
	}
	if s := systemOf(t, rs[2]); !strings.Contains(s, section) || strings.Contains(s, "Use matplotlib") || strings.Contains(s, "name: pdf-tools") {
		t.Fatalf("the step after the load:\n%s", s)
	}

	// Durable: the next turn still has it; the context view lists it.
	w.turn(x, "again")
	rs = accepted(t, srv, 4)
	if s := systemOf(t, rs[3]); strings.Count(s, "=== skill pdf-tools:") != 1 {
		t.Fatalf("the next turn's prompt:\n%s", s)
	}
	var load *desk.Command
	for _, c := range w.commands(x.ID) {
		if c.Tool == "load_extension" && c.CallID == "call_load" {
			load = c
		}
	}
	if load == nil || load.Status != desk.CommandSucceeded {
		t.Fatalf("the load's command record: %+v", load)
	}
	v := w.contextOf(x)
	if len(v.LoadedExtensions) != 1 {
		t.Fatalf("context lists loads %+v", v.LoadedExtensions)
	}
	if l := v.LoadedExtensions[0]; l.Name != "pdf-tools" || l.CommandID != load.ID || l.ExecutionID != load.ExecutionID ||
		l.Path != "/workspace/.agents/skills/pdf/SKILL.md" || l.Digest != digestOf("---\nname: pdf-tools\ndescription: Fill and merge PDF forms.\n---\n\n"+body) {
		t.Fatalf("loaded extension %+v (command %s)", l, load.ID)
	}
}

// TestIdentityInCommands: a command sees its session's id, signature and
// workspace (no thread id on the orchestrator surface), and the system
// prompt states them; a command that forges them and writes an artifact,
// and the agent's own write after it, both get the server-stamped origin.
func TestIdentityInCommands(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	x := w.script(
		calls(sh(`echo "$DESK_SESSION_ID|$DESK_SIGNATURE|$DESK_WORKSPACE_ID|${DESK_THREAD_ID-none}"; `+
			`export DESK_SESSION_ID=`+w.b.ID+` DESK_WORKSPACE_ID=ws_forged DESK_SIGNATURE=@forged; `+
			`echo "$DESK_SESSION_ID" > /artifacts/by-command.txt`)),
		calls(tc("write_file", map[string]any{"path": "/artifacts/by-agent.md", "content": "# mine\n"})),
		says("done"))
	exe := w.turn(x, "who are you?")
	cs := w.commands(x.ID)
	if len(cs) != 2 {
		t.Fatalf("commands %+v", cs)
	}
	if got, want := strings.TrimSpace(cs[0].Output), x.ID+"|"+x.Signature+"|"+w.ws.ID+"|none"; got != want || x.Signature == "" {
		t.Fatalf("the command saw %q; want %q", got, want)
	}
	arts := w.list(x.ID)
	if len(arts) != 2 {
		t.Fatalf("artifacts %+v", arts)
	}
	byPath := map[string]desk.Artifact{}
	for _, a := range arts {
		byPath[a.Path] = a
	}
	for p, cmd := range map[string]*desk.Command{"/artifacts/by-command.txt": cs[0], "/artifacts/by-agent.md": cs[1]} {
		a, ok := byPath[p]
		want := desk.Origin{WorkspaceID: w.ws.ID, SessionID: x.ID, ExecutionID: exe.ID, SurfaceID: x.SurfaceID, CommandID: cmd.ID,
			Actor: x.Actor, Kind: desk.OriginAgent}
		if !ok || a.Origin != want {
			t.Fatalf("%s: origin %+v, want %+v", p, a.Origin, want)
		}
	}
	if got := w.list(w.b.ID); len(got) != 0 {
		t.Fatalf("the forged session id reached session b: %+v", got)
	}
	v := w.contextOf(x)
	if !strings.Contains(v.SystemPrompt, "You work for session "+x.ID+" ("+x.Signature+") of workspace "+w.ws.ID) ||
		!strings.Contains(v.SystemPrompt, "$DESK_SESSION_ID") || strings.Contains(v.SystemPrompt, "DESK_THREAD_ID") {
		t.Fatalf("the system prompt's identity:\n%s", v.SystemPrompt)
	}
}
