package agent_test

// Provider contract tests: a real desk (store, execution model, the agent
// loop, desk's complete tool set, the real provider adapters made by
// agent.Providers from the environment) drives every turn shape against
// the strict local servers of internal/modeltest/strict, which refuse any
// request the real APIs would refuse. A request desk cannot send is a
// failed turn here, as it was for users.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/agent/typescript"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/sandbox"
)

// wait bounds every wait: generous, the machine may be loaded.
const wait = 60 * time.Second

// The keys the tests configure; no answer of desk may show them.
const (
	openaiKey    = "sk-test-openai-KEY0123456789"
	anthropicKey = "sk-ant-test-KEY0123456789"
)

// contractProvider is one way desk reaches a model.
type contractProvider struct {
	name string
	// start starts the strict server, points desk's environment at it and
	// returns the model spec.
	start func(t *testing.T) (*strict.Server, string)
}

var contractProviders = []contractProvider{
	{"openai", func(t *testing.T) (*strict.Server, string) {
		srv := strict.NewOpenAI(t)
		srv.RequireKey(openaiKey)
		t.Setenv("OPENAI_BASE_URL", srv.BaseURL())
		t.Setenv("OPENAI_API_KEY", openaiKey)
		return srv, "openai:gpt-4o"
	}},
	{"openai-compatible", func(t *testing.T) (*strict.Server, string) {
		srv := strict.NewOpenAI(t)
		// An OpenAI key in the environment must never reach a compatible
		// server (checked on every request below).
		t.Setenv("OPENAI_API_KEY", openaiKey)
		t.Setenv("OPENAI_COMPATIBLE_API_KEY", "")
		return srv, "openai-compatible:" + srv.BaseURL() + "#m"
	}},
	{"anthropic", func(t *testing.T) (*strict.Server, string) {
		srv := strict.NewAnthropic(t)
		srv.RequireKey(anthropicKey)
		t.Setenv("ANTHROPIC_BASE_URL", srv.BaseURL())
		t.Setenv("ANTHROPIC_API_KEY", anthropicKey)
		return srv, "anthropic:claude-sonnet-4-5"
	}},
}

var contractTypeScript = &typescript.Toolchain{TSC: "/nonexistent/tsc", Version: "7.0.2", Node: "/usr/bin/node"}

// desk is one desk under test with its strict model server.
type deskWorld struct {
	*apptest.Env
	t    *testing.T
	p    contractProvider
	srv  *strict.Server
	ws   desk.Workspace
	ses  desk.Session
	seen int // requests already checked by checkRequests
}

func newDesk(t *testing.T, p contractProvider) *deskWorld {
	srv, spec := p.start(t)
	// A toolchain for execute_typescript, so its schema is declared to
	// the strict servers too (no test here calls it).
	e := apptest.Start(t, app.Config{Model: spec, Execution: execution.Options{PollInterval: 50 * time.Millisecond, StopTimeout: 15 * time.Second},
		Agent: agent.Options{TypeScript: contractTypeScript}})
	w := &deskWorld{Env: e, t: t, p: p, srv: srv}
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "contract"}, &w.ws)
	e.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "contract"}, &w.ses)
	return w
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// send submits a message and returns the execution that took it.
func (w *deskWorld) send(text string) string {
	w.t.Helper()
	var res desk.SubmitResult
	w.Must(202, "POST", "/v1/sessions/"+w.ses.ID+"/messages", map[string]string{"text": text}, &res)
	if res.ExecutionID == "" {
		eventually(w.t, "the message to be claimed", func() bool {
			var q struct{ Items []desk.QueueItem }
			w.Must(200, "GET", "/v1/sessions/"+w.ses.ID+"/queue?all=true", nil, &q)
			for _, it := range q.Items {
				if it.ID == res.Item.ID {
					res.ExecutionID = it.ExecutionID
				}
			}
			return res.ExecutionID != ""
		})
	}
	return res.ExecutionID
}

func (w *deskWorld) exe(id string) desk.Execution {
	w.t.Helper()
	var x desk.Execution
	w.Must(200, "GET", "/v1/executions/"+id, nil, &x)
	return x
}

// settled waits for an execution to end and checks its phase.
func (w *deskWorld) settled(id, phase string) desk.Execution {
	w.t.Helper()
	var x desk.Execution
	eventually(w.t, "execution "+id+" to settle", func() bool { x = w.exe(id); return x.Terminal() })
	if x.Phase != phase {
		w.t.Fatalf("execution %s is %s (%s), want %s; refused requests: %s", id, x.Phase, x.Reason, phase, w.refusals())
	}
	return x
}

func (w *deskWorld) refusals() string {
	if w.srv == nil {
		return "(a live API)"
	}
	var out []string
	for _, r := range w.srv.Rejected() {
		out = append(out, strconv.Itoa(r.Status)+" "+r.Error)
	}
	return strings.Join(out, "; ")
}

// reply is the text of the surface's last assistant message.
func (w *deskWorld) reply() string {
	w.t.Helper()
	var out struct{ Messages []desk.Message }
	w.Must(200, "GET", "/v1/sessions/"+w.ses.ID+"/messages?limit=500", nil, &out)
	for i := len(out.Messages) - 1; i >= 0; i-- {
		if out.Messages[i].Role == desk.RoleAssistant {
			return out.Messages[i].Text
		}
	}
	return ""
}

func (w *deskWorld) settings(patch map[string]any) {
	w.t.Helper()
	w.Must(200, "PATCH", "/v1/workspaces/"+w.ws.ID+"/agent", patch, nil)
}

// approvals are the session's pending approvals.
func (w *deskWorld) approvals() []desk.Approval {
	w.t.Helper()
	var out struct{ Approvals []desk.Approval }
	w.Must(200, "GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &out)
	return out.Approvals
}

// pendingApproval waits for the session's one pending approval.
func (w *deskWorld) pendingApproval() desk.Approval {
	w.t.Helper()
	var got desk.Approval
	eventually(w.t, "a pending approval", func() bool {
		out := w.approvals()
		if len(out) == 1 {
			got = out[0]
			return true
		}
		return false
	})
	return got
}

// checkRequests asserts what every request desk sent since the last check
// has in common: accepted by the strict server, declaring desk's complete
// tool set, with the right key (and none to a compatible server).
func (w *deskWorld) checkRequests(want int) []strict.Request {
	w.t.Helper()
	all := w.srv.Requests()
	if rj := w.srv.Rejected(); len(rj) > 0 {
		w.t.Fatalf("the strict server refused %d requests: %s", len(rj), w.refusals())
	}
	got := all[w.seen:]
	if len(got) != want {
		w.t.Fatalf("%d new requests, want %d", len(got), want)
	}
	w.seen = len(all)
	var names []string
	for _, tl := range tools.All() {
		if o, ok := tl.(tools.Optional); ok && o.Unavailable(&tools.Env{SurfaceKind: desk.SurfaceOrchestrator, Sandbox: sandbox.Direct(), TypeScript: contractTypeScript, Dispatch: w.App.Dispatches}) != "" {
			continue // the handler-only thread tools and the manager's peer tools
		}
		names = append(names, tl.Name())
	}
	for i, r := range got {
		if tn := r.ToolNames(); !slices.Equal(tn, names) {
			w.t.Fatalf("request %d declares tools %v, want %v", i, tn, names)
		}
		if w.p.name == "openai-compatible" && r.Header.Get("Authorization") != "" {
			w.t.Fatalf("a compatible server was sent an Authorization header")
		}
		if r.Exhausted {
			w.t.Fatalf("request %d found no scripted reply", i)
		}
	}
	return got
}

func forEachProvider(t *testing.T, f func(t *testing.T, w *deskWorld)) {
	for _, p := range contractProviders {
		t.Run(p.name, func(t *testing.T) { f(t, newDesk(t, p)) })
	}
}

func args(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestContractFirstMessage: the first message of a session is one
// accepted request with the system prompt, the user's text and every
// tool; the answer and its usage (cached tokens included) reach the turn.
func TestContractFirstMessage(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		w.srv.Push(strict.Reply{Text: "Hello from the strict model.", Usage: strict.Usage{Input: 900, Output: 7, Cached: 640}})
		exe := w.send("hi there")
		x := w.settled(exe, desk.PhaseEnded)
		if got := w.reply(); got != "Hello from the strict model." {
			t.Fatalf("reply %q", got)
		}
		r := w.checkRequests(1)[0]
		if ut := r.UserTexts(); len(ut) != 1 || !strings.HasPrefix(ut[0], "hi there") {
			t.Fatalf("user texts %q", ut)
		}
		switch {
		case r.Chat != nil:
			if r.Chat.Messages[0].Role != "system" || r.Chat.Messages[0].Text == "" || !r.Chat.Stream ||
				r.Chat.StreamOptions == nil || !r.Chat.StreamOptions.IncludeUsage {
				t.Fatalf("chat request: %s", r.Body)
			}
		case r.Messages != nil:
			if len(r.Messages.System) == 0 || !r.Messages.Stream || r.Messages.MaxTokens <= 0 {
				t.Fatalf("messages request: %s", r.Body)
			}
		}
		var usage struct {
			Usage struct {
				Input  int `json:"input_tokens"`
				Output int `json:"output_tokens"`
				Cached int `json:"cached_tokens"`
			} `json:"usage"`
		}
		for _, e := range x.Events {
			if e.Type == "assistant.message" {
				json.Unmarshal(e.Data, &usage)
			}
		}
		if usage.Usage.Input != 900 || usage.Usage.Output != 7 || usage.Usage.Cached != 640 {
			t.Fatalf("usage of the call: %+v", usage.Usage)
		}
	})
}

// TestContractToolTurns: a write_file round trip, then two calls in one
// step of which one fails (read_file of a missing file), then the answer:
// every result goes back, paired with its call, the failure as an error.
func TestContractToolTurns(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		w.srv.Push(
			strict.Reply{Text: "Writing it.", ToolCalls: []strict.Call{{Name: "write_file", Arguments: args(map[string]string{"path": "/artifacts/notes.md", "content": "alpha\n"})}}},
			strict.Reply{ToolCalls: []strict.Call{
				{Name: "read_file", Arguments: args(map[string]string{"path": "/artifacts/notes.md"})},
				{Name: "read_file", Arguments: args(map[string]string{"path": "/artifacts/missing.md"})},
			}},
			strict.Reply{Text: "Done: notes.md holds alpha."})
		exe := w.send("write alpha to notes.md, then read it and missing.md")
		w.settled(exe, desk.PhaseEnded)
		if got := w.reply(); got != "Done: notes.md holds alpha." {
			t.Fatalf("reply %q", got)
		}
		b, err := os.ReadFile(filepath.Join(w.App.Home.Abs(w.ses.WorkspaceID, layout.SessionRel(w.ses.Actor, w.ses.ID)), "notes.md"))
		if err != nil || string(b) != "alpha\n" {
			t.Fatalf("the artifact: %q %v", b, err)
		}
		reqs := w.checkRequests(3)
		ids := reqs[2].ToolCallIDs()
		if len(ids) != 3 {
			t.Fatalf("calls in the last request: %v", ids)
		}
		res := reqs[2].ToolResults()
		if !strings.Contains(res[ids[1]], "alpha") || !strings.Contains(res[ids[2]], tools.CodeNotFound) {
			t.Fatalf("results: %v", res)
		}
		if r := reqs[1].ToolResults(); len(r) != 1 || r[ids[0]] == "" {
			t.Fatalf("the second request's results: %v", r)
		}
		if m := reqs[2].Messages; m != nil {
			// Both results of the parallel step in one user message, the
			// failure flagged.
			last := m.Messages[len(m.Messages)-1]
			if len(last.Content) != 2 || last.Content[0].IsError || !last.Content[1].IsError {
				t.Fatalf("the parallel results: %+v", last.Content)
			}
		}
	})
}

// TestContractLongTranscript: a surface whose transcript is far bigger
// than the model's window sends a request cut to the window, which starts
// at a user message and keeps every call with its result.
func TestContractLongTranscript(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		ctx := context.Background()
		text := strings.Repeat("lorem ipsum ", 40) // about 120 tokens
		const exchanges = 700                      // ~340k tokens: beyond every window here
		now := desk.Now()
		for i := range exchanges {
			id := "call_old" + strconv.Itoa(i)
			for _, m := range []*desk.Message{
				{Role: desk.RoleUser, Text: "question " + strconv.Itoa(i) + " " + text},
				{Role: desk.RoleAssistant, Text: text, ToolCalls: []desk.MessageCall{{ID: id, Name: "list_files", Arguments: json.RawMessage(`{"path":"/artifacts"}`)}}},
				{Role: desk.RoleTool, ToolCallID: id, ToolName: "list_files", Text: `{"files":[]}`},
				{Role: desk.RoleAssistant, Text: "answer " + text},
			} {
				m.ID, m.SessionID, m.SurfaceID, m.CreatedAt = desk.NewID("msg"), w.ses.ID, w.ses.SurfaceID, now
				if err := w.App.Store.AppendMessage(ctx, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		w.srv.Push(strict.Reply{Text: "Short answer."})
		w.settled(w.send("the newest question"), desk.PhaseEnded)
		r := w.checkRequests(1)[0]
		ut := r.UserTexts()
		// What fits the 80 % budget of the window, at desk's estimate of
		// four bytes a token, counting every message of an exchange.
		window := map[string]int{"anthropic": 200000}[w.p.name]
		if window == 0 {
			window = 128000
		}
		perExchange := (len("question 000 ") + 3*len(text) + len("answer ") + len(`{"path":"/artifacts"}`) + len(`{"files":[]}`)) / 4
		fits := window * 8 / 10 / perExchange
		if n := len(ut) - 1; n > fits || n < fits/2 {
			t.Fatalf("%d old exchanges sent of %d; %d fit", n, exchanges, fits)
		}
		if !strings.HasPrefix(ut[len(ut)-1], "the newest question") || !strings.HasPrefix(ut[0], "question ") {
			t.Fatalf("first %q … last %q", ut[0][:20], ut[len(ut)-1][:20])
		}
	})
}

// TestContractInterruptedTurnThenNewTurn: a turn interrupted while its
// command waits for approval leaves a call without a result; the next
// turn's request still answers it ("interrupted: outcome unknown"), so the
// provider accepts it.
func TestContractInterruptedTurnThenNewTurn(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		w.settings(map[string]any{"approval_mode": desk.ApprovalModeUser})
		w.srv.Push(strict.Reply{Text: "Running it.", ToolCalls: []strict.Call{{Name: "exec_command", Arguments: args(map[string]string{"command": "echo never"})}}})
		exe := w.send("run echo")
		w.pendingApproval()
		w.Must(200, "POST", "/v1/sessions/"+w.ses.ID+"/executions/"+exe+"/interrupt", nil, nil)
		w.settled(exe, desk.PhaseInterrupted)
		if first := w.checkRequests(1)[0]; len(first.ToolCallIDs()) != 0 {
			t.Fatalf("the first request already has calls: %v", first.ToolCallIDs())
		}
		w.srv.Push(strict.Reply{Text: "Fresh start."})
		w.settled(w.send("never mind, say hi"), desk.PhaseEnded)
		r := w.checkRequests(1)[0]
		ids := r.ToolCallIDs()
		if len(ids) != 1 {
			t.Fatalf("calls in the history: %v", ids)
		}
		if res := r.ToolResults()[ids[0]]; !strings.Contains(res, "interrupted: outcome unknown") {
			t.Fatalf("the interrupted call's result: %q", res)
		}
		if w.reply() != "Fresh start." {
			t.Fatalf("reply %q", w.reply())
		}
	})
}

// TestContractApprovals: a blocked command runs once approved and its
// output goes back to the model; a denied one goes back as declined.
func TestContractApprovals(t *testing.T) {
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		w.settings(map[string]any{"approval_mode": desk.ApprovalModeUser})
		w.srv.Push(
			strict.Reply{ToolCalls: []strict.Call{{Name: "exec_command", Arguments: args(map[string]string{"command": "echo approved-output"})}}},
			strict.Reply{ToolCalls: []strict.Call{{Name: "exec_command", Arguments: args(map[string]string{"command": "echo denied-output"})}}},
			strict.Reply{Text: "One ran, one was declined."})
		exe := w.send("run two commands")
		ap := w.pendingApproval()
		w.Must(200, "POST", "/v1/approvals/"+ap.ID, map[string]string{"decision": "approve"}, nil)
		eventually(t, "the second approval", func() bool {
			out := w.approvals()
			if len(out) == 1 && out[0].ID != ap.ID {
				w.Must(200, "POST", "/v1/approvals/"+out[0].ID, map[string]string{"decision": "deny", "reason": "not now"}, nil)
				return true
			}
			return false
		})
		w.settled(exe, desk.PhaseEnded)
		reqs := w.checkRequests(3)
		ids := reqs[2].ToolCallIDs()
		res := reqs[2].ToolResults()
		if len(ids) != 2 || !strings.Contains(res[ids[0]], "approved-output") || strings.Contains(res[ids[1]], "denied-output") ||
			!strings.Contains(res[ids[1]], tools.CodeDeclined) {
			t.Fatalf("results: %v", res)
		}
	})
}

// TestContractProviderRefusal: a provider's 400 ends the execution failed
// with a reason that carries the provider's message, and never the key
// even when the provider's message echoes it.
func TestContractProviderRefusal(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		key := openaiKey
		if w.p.name == "anthropic" {
			key = anthropicKey
		}
		w.srv.Push(strict.Reply{Error: &strict.APIError{Status: 400, Type: "invalid_request_error",
			Message: "prompt is too long: 210000 tokens > 200000 maximum (request made with key " + key + ")"}})
		x := w.settled(w.send("a very long question"), desk.PhaseFailed)
		if !strings.Contains(x.Reason, "prompt is too long: 210000 tokens > 200000 maximum") || !strings.Contains(x.Reason, "400") {
			t.Fatalf("reason %q", x.Reason)
		}
		for _, e := range x.Events {
			if strings.Contains(string(e.Data), key) {
				t.Fatalf("event %s shows the key: %s", e.Type, e.Data)
			}
		}
		if strings.Contains(x.Reason, key) {
			t.Fatalf("the reason shows the key: %q", x.Reason)
		}
		if n := len(w.srv.Requests()); n != 1 {
			t.Fatalf("a 400 was sent %d times", n)
		}
	})
}

// TestContractRecordedStreams: the real APIs' recorded streams (a tool
// call with argument deltas, an error event in the middle of a stream,
// then text) drive a turn: desk runs the recorded call, answers it under
// the recorded id in a request the strict server accepts, retries the
// failed stream, and ends with the recorded text.
func TestContractRecordedStreams(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		dir, callID := "provider/openai/testdata/", "call_Qm3vW8xYz1AbCdEf2GhIj4Kl"
		midStream := "stream_error.http"
		if w.p.name == "anthropic" {
			dir, callID, midStream = "provider/anthropic/testdata/", "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "overloaded_in_stream.http"
		}
		w.srv.Push(strict.Reply{Recorded: dir + "tool_call.http"}, strict.Reply{Recorded: dir + midStream}, strict.Reply{Recorded: dir + "text.http"})
		w.settled(w.send("read my notes"), desk.PhaseEnded)
		if got := w.reply(); got != "Hello! How can I help you today?" {
			t.Fatalf("reply %q", got)
		}
		reqs := w.checkRequests(3)
		for _, r := range reqs[1:] {
			if ids := r.ToolCallIDs(); len(ids) != 1 || ids[0] != callID || !strings.Contains(r.ToolResults()[callID], tools.CodeNotFound) {
				t.Fatalf("the recorded call and its result: %v %v", ids, r.ToolResults())
			}
		}
		if string(reqs[1].Body) != string(reqs[2].Body) {
			t.Fatal("the retry after the stream's error event is not the same request")
		}
	})
}

// TestContractTitleRequest: the title of a session without one comes
// from its own model request (no tools, a small output limit), which the
// strict server accepts too.
func TestContractTitleRequest(t *testing.T) {
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		var x desk.Session
		w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{}, &x)
		w.ses = x
		w.srv.Respond(func(r strict.Request) strict.Reply {
			if len(r.ToolNames()) == 0 {
				return strict.Reply{Text: "Quarterly figures review"}
			}
			return strict.Reply{Text: "On it."}
		})
		w.settled(w.send("please review the quarterly figures with me"), desk.PhaseEnded)
		eventually(t, "the title", func() bool {
			w.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &x)
			return x.Title == "Quarterly figures review"
		})
		if rj := w.srv.Rejected(); len(rj) > 0 {
			t.Fatalf("refused: %s", w.refusals())
		}
		var title *strict.Request
		for _, r := range w.srv.Requests() {
			if len(r.ToolNames()) == 0 {
				title = &r
			}
		}
		if title == nil || len(w.srv.Requests()) != 2 || !strings.HasPrefix(title.UserTexts()[0], "please review") {
			t.Fatalf("title request: %+v of %d", title, len(w.srv.Requests()))
		}
	})
}

// TestContractCodingTools: the coding tools' calls and results travel
// through every provider's real request shape: an apply_patch that adds a
// file, a command started with yield_time_ms that waits on its stdin, and
// the write_stdin that feeds it and collects its exit; each result reaches
// the next request as the call's output.
func TestContractCodingTools(t *testing.T) {
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	forEachProvider(t, func(t *testing.T, w *deskWorld) {
		patch := "*** Begin Patch\n*** Add File: /artifacts/plan.md\n+step one\n+step two\n*** End Patch\n"
		w.srv.Push(
			strict.Reply{ToolCalls: []strict.Call{{Name: "apply_patch", Arguments: args(map[string]string{"patch": patch})}}},
			strict.Reply{ToolCalls: []strict.Call{{Name: "exec_command", Arguments: args(map[string]any{
				"command": `read line; echo "got $line"`, "yield_time_ms": 300})}}},
			strict.Reply{ToolCalls: []strict.Call{{Name: "write_stdin", Arguments: args(map[string]any{
				"session_id": 1, "chars": "PLUM\n", "yield_time_ms": 5000})}}},
			strict.Reply{Text: "The plan is written and the command answered."})
		exe := w.send("write the plan, then start a command that reads a line and feed it PLUM")
		// The command asks first (the default approval mode is user's);
		// write_stdin to a command already approved does not.
		ap := w.pendingApproval()
		if ap.Tool != "exec_command" {
			t.Fatalf("the approval asked for is %s's", ap.Tool)
		}
		w.Must(200, "POST", "/v1/approvals/"+ap.ID, map[string]string{"decision": "approve"}, nil)
		w.settled(exe, desk.PhaseEnded)
		if got := w.reply(); got != "The plan is written and the command answered." {
			t.Fatalf("reply %q", got)
		}
		b, err := os.ReadFile(filepath.Join(w.App.Home.Abs(w.ses.WorkspaceID, layout.SessionRel(w.ses.Actor, w.ses.ID)), "plan.md"))
		if err != nil || string(b) != "step one\nstep two\n" {
			t.Fatalf("the patched artifact: %q %v", b, err)
		}
		reqs := w.checkRequests(4)
		result := func(i int) map[string]any {
			t.Helper()
			// Request i carries the transcript so far: i results, the
			// newest that of the call request i-1 was answered with.
			ids, res := reqs[i].ToolCallIDs(), reqs[i].ToolResults()
			if len(ids) != i || len(res) != i {
				t.Fatalf("request %d carries calls %v and results %v, want %d", i, ids, res, i)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(res[ids[i-1]]), &m); err != nil {
				t.Fatalf("request %d: the result is not the tool's JSON: %q", i, res[ids[i-1]])
			}
			return m
		}
		files, _ := result(1)["files"].([]any)
		if len(files) != 1 || files[0].(map[string]any)["path"] != "/artifacts/plan.md" || files[0].(map[string]any)["kind"] != "add" ||
			!strings.Contains(files[0].(map[string]any)["diff"].(string), "+step two") {
			t.Fatalf("apply_patch result: %v", result(1))
		}
		if r := result(2); r["session_id"] != float64(1) || r["running"] != true {
			t.Fatalf("exec_command with yield_time_ms: %v", r)
		}
		if r := result(3); r["running"] != false || r["exit_code"] != float64(0) || !strings.Contains(r["stdout"].(string), "got PLUM") {
			t.Fatalf("write_stdin: %v", r)
		}
	})
}
