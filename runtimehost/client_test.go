package runtimehost_test

// desk as the ACP client of an agent that uses fs/* and terminal/*. The
// agent is this test binary re-executed (DESK_TEST_ACP_AGENT=1) speaking
// ACP over its stdio with the ACP Go SDK's agent side; each prompt is a
// JSON script of client calls whose outcomes the agent sends back as its
// reply. The host runs it as any runtime: in bubblewrap (user approval
// mode), with the real acp transport and the session's guest file system.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/wire"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/session"
)

func TestMain(m *testing.M) {
	if os.Getenv("DESK_TEST_ACP_AGENT") == "1" {
		runScriptedAgent()
		return
	}
	os.Exit(m.Run())
}

// op is one client call the scripted agent makes.
type op struct {
	Op      string   `json:"op"` // write | read | cwd | env | model | hang | term | term_kill | term_leave | term_tool
	Path    string   `json:"path,omitempty"`
	Content string   `json:"content,omitempty"`
	Line    int      `json:"line,omitempty"`
	Limit   int      `json:"limit,omitempty"`
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
}

// outcome is what the agent saw.
type outcome struct {
	Code      int     `json:"code,omitempty"` // the JSON-RPC error code, 0 for success
	Error     string  `json:"error,omitempty"`
	Content   string  `json:"content,omitempty"`
	Output    string  `json:"output,omitempty"`
	Truncated bool    `json:"truncated,omitempty"`
	Exit      *int    `json:"exit,omitempty"`
	Signal    *string `json:"signal,omitempty"`
}

type scriptedAgent struct {
	conn *sdk.AgentSideConnection
	cwd  string // what session/new said
}

func runScriptedAgent() {
	a := &scriptedAgent{}
	a.conn = sdk.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	<-a.conn.Done()
}

func (a *scriptedAgent) Authenticate(context.Context, sdk.AuthenticateRequest) (sdk.AuthenticateResponse, error) {
	return sdk.AuthenticateResponse{}, nil
}

func (a *scriptedAgent) Initialize(_ context.Context, p sdk.InitializeRequest) (sdk.InitializeResponse, error) {
	// Refuse to run against a client that did not declare what the
	// script needs: the declaration is part of what is tested.
	c := p.ClientCapabilities
	if !c.Fs.ReadTextFile || !c.Fs.WriteTextFile || !c.Terminal {
		return sdk.InitializeResponse{}, sdk.NewInvalidParams(map[string]any{"error": fmt.Sprintf("the client declared %+v", c)})
	}
	return sdk.InitializeResponse{ProtocolVersion: sdk.ProtocolVersionNumber}, nil
}

func (a *scriptedAgent) Cancel(context.Context, sdk.CancelNotification) error { return nil }
func (a *scriptedAgent) CloseSession(context.Context, sdk.CloseSessionRequest) (sdk.CloseSessionResponse, error) {
	return sdk.CloseSessionResponse{}, nil
}
func (a *scriptedAgent) ListSessions(context.Context, sdk.ListSessionsRequest) (sdk.ListSessionsResponse, error) {
	return sdk.ListSessionsResponse{}, nil
}
func (a *scriptedAgent) NewSession(_ context.Context, p sdk.NewSessionRequest) (sdk.NewSessionResponse, error) {
	a.cwd = p.Cwd
	return sdk.NewSessionResponse{SessionId: "scripted-1"}, nil
}
func (a *scriptedAgent) ResumeSession(context.Context, sdk.ResumeSessionRequest) (sdk.ResumeSessionResponse, error) {
	return sdk.ResumeSessionResponse{}, sdk.NewMethodNotFound("session/resume")
}
func (a *scriptedAgent) SetSessionConfigOption(context.Context, sdk.SetSessionConfigOptionRequest) (sdk.SetSessionConfigOptionResponse, error) {
	return sdk.SetSessionConfigOptionResponse{}, nil
}
func (a *scriptedAgent) SetSessionMode(context.Context, sdk.SetSessionModeRequest) (sdk.SetSessionModeResponse, error) {
	return sdk.SetSessionModeResponse{}, nil
}

func (a *scriptedAgent) Prompt(ctx context.Context, p sdk.PromptRequest) (sdk.PromptResponse, error) {
	var script []op
	if len(p.Prompt) != 1 || p.Prompt[0].Text == nil || json.Unmarshal([]byte(p.Prompt[0].Text.Text), &script) != nil {
		return sdk.PromptResponse{}, sdk.NewInvalidParams(map[string]any{"error": "the prompt is not a script"})
	}
	var outs []outcome
	for _, o := range script {
		outs = append(outs, a.do(ctx, p.SessionId, o))
	}
	b, _ := json.Marshal(outs)
	if err := a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: p.SessionId, Update: sdk.UpdateAgentMessageText(string(b))}); err != nil {
		return sdk.PromptResponse{}, err
	}
	return sdk.PromptResponse{StopReason: sdk.StopReasonEndTurn}, nil
}

func failed(err error) outcome {
	var re *sdk.RequestError
	if errors.As(err, &re) {
		b, _ := json.Marshal(re.Data)
		return outcome{Code: re.Code, Error: re.Message + " " + string(b)}
	}
	return outcome{Code: -1, Error: err.Error()}
}

func (a *scriptedAgent) do(ctx context.Context, ses sdk.SessionId, o op) outcome {
	switch o.Op {
	case "write":
		if _, err := a.conn.WriteTextFile(ctx, sdk.WriteTextFileRequest{SessionId: ses, Path: o.Path, Content: o.Content}); err != nil {
			return failed(err)
		}
		return outcome{}
	case "cwd":
		return outcome{Content: a.cwd}
	case "env": // the agent's own environment variable Path
		return outcome{Content: os.Getenv(o.Path)}
	case "hang": // a runtime that waits for ever (until cancelled)
		<-ctx.Done()
		return outcome{Code: -1, Error: "cancelled"}
	case "model": // a Responses call as a runtime makes it: its env's URL and key
		req, _ := http.NewRequestWithContext(ctx, "POST", os.Getenv("OPENAI_BASE_URL")+"/responses", strings.NewReader(`{"model":"gpt-test","input":"hi"}`))
		req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return outcome{Code: -1, Error: err.Error()}
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return outcome{Code: res.StatusCode, Content: string(b)}
	case "read":
		req := sdk.ReadTextFileRequest{SessionId: ses, Path: o.Path}
		if o.Line > 0 {
			req.Line = sdk.Ptr(o.Line)
		}
		if o.Limit > 0 {
			req.Limit = sdk.Ptr(o.Limit)
		}
		res, err := a.conn.ReadTextFile(ctx, req)
		if err != nil {
			return failed(err)
		}
		return outcome{Content: res.Content}
	}
	req := sdk.CreateTerminalRequest{SessionId: ses, Command: o.Command, Args: o.Args}
	if o.Cwd != "" {
		req.Cwd = sdk.Ptr(o.Cwd)
	}
	if o.Limit > 0 {
		req.OutputByteLimit = sdk.Ptr(o.Limit)
	}
	t, err := a.conn.CreateTerminal(ctx, req)
	if err != nil {
		return failed(err)
	}
	id := t.TerminalId
	// term_tool reports the command as claude-code-acp does: a tool call
	// announced with empty input, the input in a second announcement, the
	// terminal embedded (no text), and a completion without content.
	call := sdk.ToolCallId("tool-" + id)
	update := func(u sdk.SessionUpdate) {
		_ = a.conn.SessionUpdate(ctx, sdk.SessionNotification{SessionId: ses, Update: u})
	}
	if o.Op == "term_tool" {
		update(sdk.StartToolCall(call, "Terminal", sdk.WithStartKind(sdk.ToolKindExecute), sdk.WithStartRawInput(map[string]any{})))
		update(sdk.StartToolCall(call, o.Command, sdk.WithStartKind(sdk.ToolKindExecute), sdk.WithStartRawInput(map[string]any{"command": o.Command})))
		update(sdk.UpdateToolCall(call, sdk.WithUpdateStatus(sdk.ToolCallStatusInProgress), sdk.WithUpdateContent([]sdk.ToolCallContent{sdk.ToolTerminalRef(id)})))
		defer update(sdk.UpdateToolCall(call, sdk.WithUpdateStatus(sdk.ToolCallStatusCompleted)))
	}
	switch o.Op {
	case "term_leave": // never released: the turn's end must kill it
		return outcome{}
	case "term_kill":
		// Kill once it ran: its first output is there.
		var outErr error
		if !testwait.Poll(30*time.Second, func() bool {
			out, err := a.conn.TerminalOutput(ctx, sdk.TerminalOutputRequest{SessionId: ses, TerminalId: id})
			outErr = err
			return err != nil || out.Output != ""
		}) {
			return failed(fmt.Errorf("terminal %s printed nothing in 30s", id))
		}
		if outErr != nil {
			return failed(outErr)
		}
		if _, err := a.conn.KillTerminal(ctx, sdk.KillTerminalRequest{SessionId: ses, TerminalId: id}); err != nil {
			return failed(err)
		}
	}
	w, err := a.conn.WaitForTerminalExit(ctx, sdk.WaitForTerminalExitRequest{SessionId: ses, TerminalId: id})
	if err != nil {
		return failed(err)
	}
	out, err := a.conn.TerminalOutput(ctx, sdk.TerminalOutputRequest{SessionId: ses, TerminalId: id})
	if err != nil {
		return failed(err)
	}
	if _, err := a.conn.ReleaseTerminal(ctx, sdk.ReleaseTerminalRequest{SessionId: ses, TerminalId: id}); err != nil {
		return failed(err)
	}
	// A released terminal is gone.
	if _, err := a.conn.TerminalOutput(ctx, sdk.TerminalOutputRequest{SessionId: ses, TerminalId: id}); err == nil {
		return outcome{Code: -1, Error: "terminal/output answered after release"}
	}
	return outcome{Output: out.Output, Truncated: out.Truncated, Exit: w.ExitCode, Signal: w.Signal}
}

// sandboxedHost is a host running the scripted agent in bubblewrap, with
// terminals in the command sandbox and artifacts written through the
// artifact service.
func sandboxedHost(t *testing.T, f *fixture) *runtimehost.Host {
	t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap is not installed")
	}
	runner, err := sandbox.Detect()
	if err != nil {
		t.Skipf("no command sandbox here: %v", err)
	}
	ctx := context.Background()
	set, err := f.store.GetAgentSettings(ctx, f.sess.WorkspaceID)
	must(t, err)
	set.ApprovalMode = desk.ApprovalModeUser
	must(t, f.store.SetAgentSettings(ctx, f.sess.WorkspaceID, set))
	return runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
		Spawner:    sandbox.BubblewrapSpawner(bwrap), Commands: runner,
		Paths: session.NewArtifacts(f.store, f.home, session.ArtifactOptions{}),
		LookupEnv: func(k string) (string, bool) {
			if k == "DESK_TEST_ACP_AGENT" {
				return "1", true
			}
			return "", false
		}})
}

func scriptedFixture(t *testing.T) *fixture {
	self, err := os.Executable()
	must(t, err)
	f := setup(t, self)
	ctx := context.Background()
	// The runtime passes the variable that makes the test binary the agent.
	must(t, f.store.DeleteRuntime(ctx, "dbl"))
	must(t, f.store.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: []string{self}, Env: []string{"DESK_TEST_ACP_AGENT"}, CreatedAt: desk.Now()}))
	return f
}

func runScript(t *testing.T, h *runtimehost.Host, f *fixture, script []op) []outcome {
	t.Helper()
	b, _ := json.Marshal(script)
	out, err := h.Execute(context.Background(), f.turn(&emitted{}, string(b)))
	if err != nil {
		t.Fatalf("turn: %v", err)
	}
	var outs []outcome
	if err := json.Unmarshal([]byte(out.Reply), &outs); err != nil || len(outs) != len(script) {
		t.Fatalf("reply %q: %v", out.Reply, err)
	}
	return outs
}

func TestACPClientFilesAndTerminalsInTheSandbox(t *testing.T) {
	f := scriptedFixture(t)
	h := sandboxedHost(t, f)
	ctx := context.Background()
	defer h.Close(ctx)
	checkout, artifacts := f.dirs()
	must(t, os.WriteFile(filepath.Join(checkout, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(artifacts, session.ImmutableDir), 0o755))
	must(t, os.WriteFile(filepath.Join(artifacts, session.ImmutableDir, "frozen.md"), []byte("frozen"), 0o644))
	outside := filepath.Join(t.TempDir(), "outside.txt") // a host path no mount covers

	outs := runScript(t, h, f, []op{
		{Op: "write", Path: "/workspace/hello.txt", Content: "hi from the agent"},
		{Op: "read", Path: "/workspace/notes.txt", Line: 2, Limit: 1},
		{Op: "read", Path: "/workspace/missing.txt"},
		{Op: "write", Path: outside, Content: "escaped"},
		{Op: "write", Path: "/workspace/../../" + outside, Content: "escaped"},
		{Op: "write", Path: "/artifacts/immutable/frozen.md", Content: "changed"},
		{Op: "write", Path: "/runtime-home/planted", Content: "x"},
		{Op: "write", Path: "/artifacts/report.md", Content: "# Report\n"},
		{Op: "term", Command: "sh", Args: []string{"-c", "cat hello.txt; echo; echo to-stderr >&2; exit 3"}},
		{Op: "term", Command: "printf 0123456789abcdef", Limit: 10},
		{Op: "term", Command: "cat /etc/hostname 2>&1; ls " + filepath.Dir(outside) + " 2>&1 || true"},
		{Op: "term_kill", Command: "echo started; exec sleep 300"},
		{Op: "term", Command: "pwd", Cwd: "/etc"},
	})
	ok := func(i int) outcome {
		t.Helper()
		if outs[i].Code != 0 {
			t.Fatalf("op %d failed: %+v", i, outs[i])
		}
		return outs[i]
	}
	refusedWith := func(i, code int) {
		t.Helper()
		if outs[i].Code != code {
			t.Fatalf("op %d: got %+v, want error code %d", i, outs[i], code)
		}
	}
	ok(0)
	if b, err := os.ReadFile(filepath.Join(checkout, "hello.txt")); err != nil || string(b) != "hi from the agent" {
		t.Fatalf("/workspace/hello.txt on the host: %q, %v", b, err)
	}
	if c := ok(1).Content; c != "two\n" {
		t.Fatalf("read line 2 limit 1: %q", c)
	}
	refusedWith(2, -32002)
	for _, i := range []int{3, 4, 5, 6} {
		refusedWith(i, -32602)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("a write outside the boundary changed the host: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(artifacts, session.ImmutableDir, "frozen.md")); string(b) != "frozen" {
		t.Fatalf("immutable artifact changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(runtimehost.StateDir(f.home, f.sess), "planted")); !os.IsNotExist(err) {
		t.Fatalf("the runtime's state directory was written through fs/*: %v", err)
	}
	ok(7)
	arts, err := f.store.ListArtifacts(ctx, f.sess.ID)
	must(t, err)
	var art *desk.Artifact
	for _, a := range arts {
		if a.Path == "/artifacts/report.md" {
			art = a
		}
	}
	if art == nil || art.Origin.ExecutionID == "" || art.Origin.Kind != desk.OriginAgent {
		t.Fatalf("/artifacts/report.md has no artifact row stamped with the turn: %+v", art)
	}
	if o := ok(8); o.Exit == nil || *o.Exit != 3 || !strings.Contains(o.Output, "hi from the agent") || !strings.Contains(o.Output, "to-stderr") {
		t.Fatalf("terminal with args: %+v", o)
	}
	if o := ok(9); o.Output != "6789abcdef" || !o.Truncated {
		t.Fatalf("bounded terminal: %+v", o)
	}
	// Inside the sandbox: the sandbox's hostname, and no host directory.
	if o := ok(10); strings.Contains(o.Output, "outside.txt") || !strings.Contains(o.Output, "No such file") {
		t.Fatalf("the terminal saw the host: %+v", o)
	}
	if o := ok(11); o.Signal == nil || o.Exit != nil || !strings.Contains(o.Output, "started") {
		t.Fatalf("killed terminal: %+v", o)
	}
	refusedWith(12, -32602)
}

func TestACPTerminalDiesWithItsTurn(t *testing.T) {
	f := scriptedFixture(t)
	h := sandboxedHost(t, f)
	ctx := context.Background()
	defer h.Close(ctx)
	tick := filepath.Join(f.home.Abs(f.sess.WorkspaceID, layout.CheckoutDir), "tick")
	outs := runScript(t, h, f, []op{{Op: "term_leave", Command: "while :; do echo x >> /workspace/tick; sleep 0.05; done"}})
	if outs[0].Code != 0 {
		t.Fatalf("term_leave: %+v", outs[0])
	}
	// The turn has returned: its terminal was killed with its tree before
	// that, so the file stops growing (allowing one write in flight).
	st1, err := os.Stat(tick)
	if err != nil {
		// It may not have ticked yet when it was killed; it must not start.
		testwait.Never(t, 500*time.Millisecond, func() bool { _, err := os.Stat(tick); return !os.IsNotExist(err) }, "the terminal to write after its turn ended")
		return
	}
	testwait.Never(t, 500*time.Millisecond, func() bool {
		st2, err := os.Stat(tick)
		return err != nil || st2.Size() > st1.Size()+2
	}, "the terminal to outlive its turn (its tick file to grow or go)")
	if h.Running() != 1 {
		t.Fatalf("the agent itself should stay alive between turns; running %d", h.Running())
	}
}

// TestACPClientFullAccessHostPaths: in a full-access workspace the child
// runs on the host, so session/new names the host directory behind
// /workspace, and the host paths the agent then uses for fs/* and
// terminals are mapped back to the guest file system: reads and writes
// land in the checkout and in artifacts (with a row), a terminal runs in
// the host directory, and a host path outside every mount is refused.
func TestACPClientFullAccessHostPaths(t *testing.T) {
	f := scriptedFixture(t)
	h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
		Paths:      session.NewArtifacts(f.store, f.home, session.ArtifactOptions{}),
		LookupEnv: func(k string) (string, bool) {
			if k == "DESK_TEST_ACP_AGENT" {
				return "1", true
			}
			return "", false
		}})
	ctx := context.Background()
	defer h.Close(ctx)
	checkout, artifacts := f.dirs()
	must(t, os.WriteFile(filepath.Join(checkout, "notes.txt"), []byte("one\ntwo\n"), 0o644))
	outside := filepath.Join(t.TempDir(), "outside.txt")

	outs := runScript(t, h, f, []op{
		{Op: "cwd"},
		{Op: "read", Path: filepath.Join(checkout, "notes.txt"), Line: 2},
		{Op: "write", Path: filepath.Join(checkout, "sub", "..", "hello.txt"), Content: "host path"},
		{Op: "write", Path: filepath.Join(artifacts, "report.md"), Content: "# Report\n"},
		{Op: "write", Path: outside, Content: "escaped"},
		{Op: "read", Path: "/workspace/notes.txt"},
		{Op: "term", Command: "pwd; cat hello.txt", Cwd: checkout},
		{Op: "term", Command: "echo from a terminal > " + filepath.Join(artifacts, "term.txt")},
	})
	for i, o := range outs {
		if i != 4 && o.Code != 0 {
			t.Fatalf("op %d failed: %+v", i, o)
		}
	}
	if outs[0].Content != checkout {
		t.Fatalf("session/new cwd = %q, want the host checkout %s", outs[0].Content, checkout)
	}
	if outs[1].Content != "two\n" || outs[5].Content != "one\ntwo\n" {
		t.Fatalf("reads by host and guest path: %q %q", outs[1].Content, outs[5].Content)
	}
	if b, err := os.ReadFile(filepath.Join(checkout, "hello.txt")); err != nil || string(b) != "host path" {
		t.Fatalf("the write by host path: %q %v", b, err)
	}
	// The file the terminal wrote is an artifact of the turn once the
	// turn is over, beside the one fs/write_text_file wrote.
	arts, err := f.store.ListArtifacts(ctx, f.sess.ID)
	must(t, err)
	if len(arts) != 2 || arts[0].Path != "/artifacts/report.md" || arts[1].Path != "/artifacts/term.txt" ||
		arts[1].Origin.ExecutionID == "" || arts[1].Origin.Kind != desk.OriginAgent {
		t.Fatalf("the artifacts written by host path and by a terminal: %+v", arts)
	}
	if outs[4].Code != -32602 {
		t.Fatalf("a host path outside every mount: %+v", outs[4])
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Fatalf("the refused write reached the host: %v", err)
	}
	if o := outs[6]; o.Output != checkout+"\nhost path" {
		t.Fatalf("terminal in the host checkout: %+v", o)
	}
}

// TestACPClientTerminalToolOutput: a tool call that embeds one of desk's
// terminals, as claude-code-acp reports its commands (no text of the
// output anywhere, the input only in a second announcement), is a command
// record with the terminal's exact output and the later input.
func TestACPClientTerminalToolOutput(t *testing.T) {
	f := scriptedFixture(t)
	h := sandboxedHost(t, f)
	ctx := context.Background()
	defer h.Close(ctx)
	b, _ := json.Marshal([]op{{Op: "term_tool", Command: "echo one; echo two; echo three"}})
	turn := f.turn(&emitted{}, string(b))
	if _, err := h.Execute(ctx, turn); err != nil {
		t.Fatalf("turn: %v", err)
	}
	cs, err := f.store.ListCommands(ctx, []string{turn.Execution.ID})
	must(t, err)
	var c *desk.Command
	for _, x := range cs {
		if x.CallID == "tool-term_1" {
			c = x
		}
	}
	if c == nil {
		t.Fatalf("no command record of the tool call: %+v", cs)
	}
	if c.Status != desk.CommandSucceeded || c.Output != "one\ntwo\nthree\n" {
		t.Fatalf("the tool call's record: %s %q, want succeeded with the terminal's output", c.Status, c.Output)
	}
	var args map[string]string
	if json.Unmarshal(c.Arguments, &args) != nil || args["command"] != "echo one; echo two; echo three" {
		t.Fatalf("the record's arguments %s, want the later input", c.Arguments)
	}
}

// dirs are the host directories behind the session's /workspace and
// /artifacts.
func (f *fixture) dirs() (checkout, artifacts string) {
	x := f.sess
	return f.home.Abs(x.WorkspaceID, layout.CheckoutDir), f.home.Abs(x.WorkspaceID, layout.SessionRel(x.Actor, x.ID))
}
