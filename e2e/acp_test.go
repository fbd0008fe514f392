package e2e

// Black-box tests of desk acp: the real binary serving ACP on its stdio
// against a real desk serve, driven by the official TypeScript client
// (@agentclientprotocol/sdk, testdata/acp_client.mjs) and, for bad input,
// by raw JSON-RPC lines.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// acpSDK finds node and the ACP TypeScript SDK through DESK_NPM_BIN, or
// skips.
func acpSDK(t *testing.T) (node, npmBin string) {
	t.Helper()
	npmBin = os.Getenv("DESK_NPM_BIN")
	if npmBin == "" {
		t.Skip("DESK_NPM_BIN is not set: the ACP TypeScript client (@agentclientprotocol/sdk) is needed for this test")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(npmBin), "@agentclientprotocol", "sdk", "package.json")); err != nil {
		t.Skipf("@agentclientprotocol/sdk is not installed next to DESK_NPM_BIN=%s", npmBin)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH: the ACP TypeScript client needs it")
	}
	return node, npmBin
}

// acpReport is what testdata/acp_client.mjs saw.
type acpReport struct {
	LoadSession bool   `json:"loadSession"`
	AgentName   string `json:"agentName"`
	SessionID   string `json:"sessionId"`
	FirstStop   string `json:"firstStop"`
	FirstCount  int    `json:"firstCount"`
	SecondStop  string `json:"secondStop"`
	CancelMs    int    `json:"cancelMs"`
	Updates     []struct {
		SessionUpdate string `json:"sessionUpdate"`
		Content       any    `json:"content"`
		ToolCallID    string `json:"toolCallId"`
		Title         string `json:"title"`
		Kind          string `json:"kind"`
		Status        string `json:"status"`
	} `json:"updates"`
	Permissions []struct {
		Title      string   `json:"title"`
		ToolCallID string   `json:"toolCallId"`
		Options    []string `json:"options"`
	} `json:"permissions"`
	UnknownSession any `json:"unknownSession"`
	// resume mode
	Capabilities struct {
		Resume, List, Close *struct{} `json:",omitempty"`
	} `json:"capabilities"`
	Listed             []string `json:"listed"`
	ListedElsewhere    int      `json:"listedElsewhere"`
	UpdatesAfterResume int      `json:"updatesAfterResume"`
	ResumeUnknown      any      `json:"resumeUnknown"`
}

// texts joins the text of the updates of one kind, from index from on.
func (r *acpReport) texts(kind string, from, to int) string {
	var b strings.Builder
	for _, u := range r.Updates[from:to] {
		if u.SessionUpdate != kind {
			continue
		}
		if m, ok := u.Content.(map[string]any); ok {
			if s, ok := m["text"].(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

func runACPClient(t *testing.T, node, npmBin string, agent []string, env []string, args ...string) *acpReport {
	t.Helper()
	argv, _ := json.Marshal(agent)
	cmd := exec.Command(node, append([]string{filepath.Join("testdata", "acp_client.mjs")}, args...)...)
	cmd.Env = append(append([]string{}, env...), "DESK_NPM_BIN="+npmBin, "ACP_AGENT="+string(argv))
	var stderr safeBuffer
	cmd.Stderr = &stderr
	timer := time.AfterFunc(3*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node acp_client.mjs %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr.String())
	}
	var r acpReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("acp_client.mjs printed %q: %v\nstderr: %s", out, err, stderr.String())
	}
	return &r
}

// TestACPAgentTypeScriptClient: the official TypeScript client drives
// desk acp through new → prompt (streamed, with a permission answered) →
// cancel of a second prompt, then loads the same session in a fresh
// process and sees the transcript replayed.
func TestACPAgentTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, npmBin := acpSDK(t)
	d := startDesk(t, deskOpts{})
	d.workspace("acp", false) // named by --workspace below
	script := filepath.Join(t.TempDir(), "script.json")
	slow := `{"text":"` + strings.Repeat("slowly streaming words ", 40) + `","delay_ms":30000}`
	if err := os.WriteFile(script, []byte(`{"steps":[`+execStep("echo acp-approved")+`,`+textStep("It ran.")+`,`+slow+`,`+textStep("Resumed.")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	agent := []string{deskBin, "--server", d.URL, "acp", "--workspace", "acp", "--model", "script", "--script", script}

	r := runACPClient(t, node, npmBin, agent, d.Env, "first")
	if !r.LoadSession || r.AgentName != "desk" || !strings.HasPrefix(r.SessionID, "ses_") {
		t.Fatalf("initialize/new: %+v", r)
	}
	if r.FirstStop != "end_turn" || r.SecondStop != "cancelled" {
		t.Fatalf("stop reasons: first %q, second %q", r.FirstStop, r.SecondStop)
	}
	if len(r.Permissions) != 1 || !strings.Contains(r.Permissions[0].Title, "echo acp-approved") ||
		strings.Join(r.Permissions[0].Options, ",") != "approve:allow_once,deny:reject_once" {
		t.Fatalf("permission requests: %+v", r.Permissions)
	}
	callID := r.Permissions[0].ToolCallID
	var started, completed bool
	for _, u := range r.Updates[:r.FirstCount] {
		switch {
		case u.SessionUpdate == "tool_call" && u.ToolCallID == callID && u.Kind == "execute":
			started = true
		case u.SessionUpdate == "tool_call_update" && u.ToolCallID == callID && u.Status == "completed":
			completed = true
		}
	}
	if !started || !completed {
		t.Fatalf("the exec_command call %s: tool_call %v, completed update %v\nupdates: %+v", callID, started, completed, r.Updates[:r.FirstCount])
	}
	if got := r.texts("agent_message_chunk", 0, r.FirstCount); got != "It ran." {
		t.Fatalf("the first turn's streamed text: %q", got)
	}
	if got := r.texts("agent_message_chunk", r.FirstCount, len(r.Updates)); got == "" || !strings.HasPrefix(strings.Repeat("slowly streaming words ", 40), got) {
		t.Fatalf("the second turn's streamed text: %q", got)
	}

	// desk saw it all: the approval answered in the editor, the second
	// execution interrupted.
	adm, err := client.New(d.URL, readToken(t, d.Home))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	aps, err := adm.Approvals(ctx, r.SessionID, false)
	if err != nil || len(aps) != 1 || aps[0].Status != desk.ApprovalApproved || !strings.Contains(aps[0].Reason, "editor") {
		t.Fatalf("approvals: %+v %v", aps, err)
	}
	xs, err := adm.Executions(ctx, r.SessionID)
	if err != nil || len(xs) != 2 {
		t.Fatalf("executions: %+v %v", xs, err)
	}
	phases := map[string]int{}
	for _, x := range xs {
		phases[x.Phase]++
	}
	if phases[desk.PhaseEnded] != 1 || phases[desk.PhaseInterrupted] != 1 {
		t.Fatalf("execution phases: %v", phases)
	}
	t.Logf("cancel → stop reason in %d ms", r.CancelMs)

	// A fresh process loads the session: the transcript comes back.
	l := runACPClient(t, node, npmBin, agent, d.Env, "load", r.SessionID)
	var seq []string
	for _, u := range l.Updates {
		switch u.SessionUpdate {
		case "user_message_chunk", "agent_message_chunk":
			m, _ := u.Content.(map[string]any)
			seq = append(seq, fmt.Sprintf("%s:%v", u.SessionUpdate, m["text"]))
		case "tool_call":
			seq = append(seq, fmt.Sprintf("tool_call:%s:%s:%s", u.ToolCallID, u.Kind, u.Status))
		}
	}
	want := []string{"user_message_chunk:run it", "tool_call:" + callID + ":execute:completed", "agent_message_chunk:It ran.", "user_message_chunk:now the slow one"}
	if len(seq) < len(want) || strings.Join(seq[:len(want)], "|") != strings.Join(want, "|") {
		t.Fatalf("replayed transcript:\n%s\nwant it to begin with:\n%s", strings.Join(seq, "\n"), strings.Join(want, "\n"))
	}
	if l.UnknownSession != float64(-32602) {
		t.Fatalf("a prompt on a session not opened: %v", l.UnknownSession)
	}

	// desk restarts; the editor lists its sessions, resumes this one
	// without a replay, prompts it, and closes it.
	d = d.Restart(syscall.SIGTERM)
	agent = []string{deskBin, "--server", d.URL, "acp", "--workspace", "acp", "--model", "script", "--script", script}
	rs := runACPClient(t, node, npmBin, agent, d.Env, "resume", r.SessionID)
	if rs.Capabilities.Resume == nil || rs.Capabilities.List == nil || rs.Capabilities.Close == nil {
		t.Fatalf("session capabilities: %+v", rs.Capabilities)
	}
	if len(rs.Listed) != 1 || !strings.HasPrefix(rs.Listed[0], r.SessionID+"|/workspace|ACP: ") || rs.ListedElsewhere != 0 {
		t.Fatalf("session/list: %v (elsewhere %d)", rs.Listed, rs.ListedElsewhere)
	}
	if rs.UpdatesAfterResume != 0 {
		t.Fatalf("session/resume replayed %d updates; only session/load replays", rs.UpdatesAfterResume)
	}
	if rs.FirstStop != "end_turn" || rs.FirstCount == 0 {
		t.Fatalf("the prompt after resume: stop %q, %d updates", rs.FirstStop, rs.FirstCount)
	}
	if rs.UnknownSession != float64(-32602) || rs.ResumeUnknown != float64(-32602) {
		t.Fatalf("a prompt after session/close: %v; resume of an unknown session: %v", rs.UnknownSession, rs.ResumeUnknown)
	}
	if adm, err = client.New(d.URL, readToken(t, d.Home)); err != nil {
		t.Fatal(err)
	}
	ms, err := adm.Transcript(ctx, r.SessionID, client.TranscriptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if last := ms[len(ms)-1]; last.Role != desk.RoleAssistant || last.Text != "Resumed." || !strings.Contains(joinUserTexts(ms), "after the restart") {
		t.Fatalf("the transcript after the resumed prompt ends with %+v", last)
	}
}

// joinUserTexts joins the text of the user messages of ms.
func joinUserTexts(ms []*desk.Message) string {
	var b strings.Builder
	for _, m := range ms {
		if m.Role == desk.RoleUser {
			b.WriteString(m.Text + "\n")
		}
	}
	return b.String()
}

func readToken(t *testing.T, home string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestACPAgentBadInput: malformed JSON, a batch, a wrong version, unknown
// methods, wrong argument types and an oversized message each get the
// JSON-RPC error of their kind, and desk acp goes on serving.
func TestACPAgentBadInput(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	d.workspace("bad", false)
	cmd := deskCmd(t.Context(), d.Env, "--server", d.URL, "acp")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr safeBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	lines := make(chan map[string]json.RawMessage, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = map[string]json.RawMessage{"garbage": json.RawMessage(fmt.Sprintf("%q", sc.Text()))}
			}
			lines <- m
		}
		close(lines)
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("write: %v\nstderr: %s", err, stderr.String())
		}
	}
	next := func(what string) map[string]json.RawMessage {
		t.Helper()
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("%s: desk acp closed stdout\nstderr: %s", what, stderr.String())
			}
			if m["garbage"] != nil {
				t.Fatalf("%s: not JSON on stdout: %s", what, m["garbage"])
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no answer\nstderr: %s", what, stderr.String())
		}
		return nil
	}
	expectError := func(what, line, id string, code int) {
		t.Helper()
		send(line)
		m := next(what)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if string(m["id"]) != id || json.Unmarshal(m["error"], &e) != nil || e.Code != code {
			t.Fatalf("%s: got id %s error %s, want id %s code %d", what, m["id"], m["error"], id, code)
		}
	}
	expectError("malformed JSON", `{"jsonrpc":"2.0","id":1,"method":`, "null", -32700)
	send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if m := next("initialize"); string(m["id"]) != "2" || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	expectError("a batch", `[{"jsonrpc":"2.0","id":3,"method":"initialize"}]`, "null", -32600)
	expectError("a wrong version", `{"jsonrpc":"1.0","id":4,"method":"initialize","params":{}}`, "4", -32600)
	expectError("an object id", `{"jsonrpc":"2.0","id":{"x":1},"method":"initialize","params":{}}`, "null", -32600)
	expectError("an unknown method", `{"jsonrpc":"2.0","id":5,"method":"session/teleport","params":{}}`, "5", -32601)
	expectError("a wrong argument type", `{"jsonrpc":"2.0","id":6,"method":"session/new","params":{"cwd":42,"mcpServers":[]}}`, "6", -32602)
	expectError("params not an object", `{"jsonrpc":"2.0","id":"seven","method":"session/new","params":"cwd"}`, `"seven"`, -32602)
	expectError("a missing argument", `{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"ses_x"}}`, "8", -32602)
	huge := `{"jsonrpc":"2.0","id":9,"method":"session/prompt","params":{"sessionId":"ses_x","prompt":[{"type":"text","text":"` + strings.Repeat("A", 6<<20) + `"}]}}`
	expectError("a huge message", huge, "9", -32600)
	// Still serving: a session can be created.
	send(`{"jsonrpc":"2.0","id":10,"method":"session/new","params":{"cwd":"/tmp/project","mcpServers":[]}}`)
	m := next("session/new after the bad input")
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if string(m["id"]) != "10" || json.Unmarshal(m["result"], &res) != nil || !strings.HasPrefix(res.SessionID, "ses_") {
		t.Fatalf("session/new after the bad input: %v", m)
	}
	stdin.Close()
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("desk acp exited with %v after stdin closed\nstderr: %s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("desk acp did not exit when stdin closed")
	}
}
