package e2e

// Helpers of the runtime acceptance suite (runtime_accept_test.go): the
// per-protocol part (which real binary, how it is pointed at a scripted
// model server, how that server's requests read), a neutral script the
// suite writes once for every protocol, and black-box probes of a running
// desk binary (its HTTP API, its archive, its process tree).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/internal/testwait"
)

// modelCall is what the scripted model sees of one request of the
// runtime's conversation, the same for every protocol.
type modelCall struct {
	Users   []string // the user texts of the request, oldest first
	Results []string // the tool results in its history
	At      time.Time
}

// lastUser is the newest user text: what this turn asked.
func (c modelCall) lastUser() string {
	if len(c.Users) == 0 {
		return ""
	}
	return c.Users[len(c.Users)-1]
}

// has says whether any user text of the request contains s.
func (c modelCall) has(s string) bool {
	return slices.ContainsFunc(c.Users, func(u string) bool { return strings.Contains(u, s) })
}

// modelAnswer is the scripted model's answer: text, or a shell command
// for the runtime to run (one it must ask permission for). Wait, when
// set, holds the answer until it is closed (a model call in flight).
type modelAnswer struct {
	Text    string
	Command string
	// Ordinary: the command asks for nothing beyond the runtime's own
	// sandbox (Codex runs it there without asking), instead of asking to
	// leave it.
	Ordinary bool
	Wait     <-chan struct{}
}

// scriptedModel is a protocol's strict model server driven by a neutral
// script, with a record of the conversation's requests.
type scriptedModel struct {
	mu       sync.Mutex
	calls    []modelCall
	arrived  chan struct{} // gets a value on each conversation request
	rejected func() []string
}

func (m *scriptedModel) record(c modelCall) {
	c.At = time.Now()
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
	select {
	case m.arrived <- struct{}{}:
	default:
	}
}

// requests returns the conversation's requests so far.
func (m *scriptedModel) requests() []modelCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]modelCall(nil), m.calls...)
}

// awaitRequest waits until a request whose newest user text contains s
// arrived, and returns it.
func (m *scriptedModel) awaitRequest(t *testing.T, s string) modelCall {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		for _, c := range m.requests() {
			if strings.Contains(c.lastUser(), s) {
				return c
			}
		}
		select {
		case <-m.arrived:
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("the model never got a request for %q; refused: %q", s, m.rejected())
	return modelCall{}
}

// asking returns the requests whose newest user text contains s.
func (m *scriptedModel) asking(s string) []modelCall {
	var out []modelCall
	for _, c := range m.requests() {
		if strings.Contains(c.lastUser(), s) {
			out = append(out, c)
		}
	}
	return out
}

// protocolCase is everything the suite knows of one protocol: the real
// program, how it is registered, and its model server. Nothing else in
// the suite depends on which protocol it runs.
type protocolCase struct {
	name     string // the subtest's name, and the runtime's ("rt-"+name)
	protocol string // the registry's protocol word
	bin      string // the npm program (internal/npmbin)
	what     string // what it is, for the skip message
	// skip names subtests the pinned program cannot pass, with why: a
	// fault of the program's own, shown in the test output, never desk's.
	skip map[string]string
	// terminalOutside: the runtime's commands run in desk's terminal
	// sandbox, not beside the runtime (they cannot see its processes).
	terminalOutside bool
	// model starts the scripted model server for the runtime at bin, as
	// the operator's provider, and returns the runtime's argv, the names
	// of the variables it needs passed through, and desk's environment
	// (their values, and the provider's base URL and key).
	model func(t *testing.T, bin string, m *scriptedModel, script func(modelCall) modelAnswer) (argv, envNames, deskEnv []string)
}

// operatorKey is the operator's provider key: desk's environment holds
// it, the strict servers require it, and no runtime child may see it.
const operatorKey = "sk-operator-key-the-child-never-sees-0123456789"

// modelUsage is what every scripted answer reports using.
var modelUsage = strict.Usage{Input: 1000, Output: 50}

// codexConfig is Codex's configuration on the command line: the same for
// codex app-server and codex-acp (which embeds Codex). on-request with a
// read-only sandbox makes Codex ask before a command that leaves its
// sandbox (docs/runtimes.md). codex app-server is pointed at desk's model
// gateway by desk itself (the transport's arguments); codex-acp, an ACP
// agent like any other, by the operator's arguments naming
// ${DESK_GATEWAY_URL}, which desk fills in.
func codexConfig(acp bool) []string { return codexConfigMode(acp, "read-only") }

// codexConfigMode is codexConfig with Codex's sandbox in mode.
func codexConfigMode(acp bool, mode string) []string {
	kvs := []string{"model=gpt-test", "approval_policy=on-request", "sandbox_mode=" + mode}
	if acp {
		kvs = append(kvs, "model_provider=desk", "model_providers.desk.name=desk",
			"model_providers.desk.base_url=${DESK_GATEWAY_URL}/v1",
			"model_providers.desk.wire_api=responses",
			"model_providers.desk.env_key=OPENAI_API_KEY",
			"model_providers.desk.request_max_retries=0",
			"model_providers.desk.stream_max_retries=0")
	}
	var out []string
	for _, kv := range kvs {
		out = append(out, "-c", kv)
	}
	return out
}

// codexModel serves the OpenAI Responses API as the operator's OpenAI
// (desk's OPENAI_BASE_URL and OPENAI_API_KEY; the runtime is registered
// with no variables); a command is Codex's exec_command asking to leave
// its sandbox, so Codex asks permission.
func codexModel(args func(bin string) []string) func(*testing.T, string, *scriptedModel, func(modelCall) modelAnswer) ([]string, []string, []string) {
	return func(t *testing.T, bin string, m *scriptedModel, script func(modelCall) modelAnswer) ([]string, []string, []string) {
		srv := strict.NewResponses(t)
		srv.RequireKey(operatorKey)
		m.rejected = func() []string {
			var out []string
			for _, r := range srv.Rejected() {
				out = append(out, r.Error)
			}
			return out
		}
		n := 0
		srv.Respond(func(r strict.ResponsesRequest) strict.Reply {
			c := modelCall{Users: r.UserTexts()}
			for _, v := range r.ToolResults() {
				c.Results = append(c.Results, v)
			}
			m.record(c)
			a := script(c)
			if a.Wait != nil {
				<-a.Wait
			}
			if a.Command != "" {
				n++
				args := map[string]string{"cmd": a.Command, "sandbox_permissions": "require_escalated", "justification": "the test asks for it"}
				if a.Ordinary {
					args = map[string]string{"cmd": a.Command}
				}
				in, _ := json.Marshal(args)
				return strict.Reply{ToolCalls: []strict.Call{{ID: fmt.Sprintf("call_%d", n), Name: "exec_command", Arguments: string(in)}}, Usage: modelUsage}
			}
			return strict.Reply{Text: a.Text, Usage: modelUsage}
		})
		// The operator declares the model Codex is configured with: desk's
		// gateway forwards calls for declared models only.
		return args(bin), nil, []string{"OPENAI_BASE_URL=" + srv.BaseURL(), "OPENAI_API_KEY=" + operatorKey, "DESK_MODELS=openai:gpt-test"}
	}
}

// claudeModel serves the Anthropic Messages API as the operator's
// Anthropic (desk's ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY); a command
// is a call of bash, the name of Claude Code's shell tool where it runs
// (Bash in Claude Code itself; mcp__acp__Bash under claude-code-acp,
// which routes it through the client's terminal/create, that is through
// desk). Claude Code's own side requests (without that tool) get plain
// text and are not part of the conversation. argv is the runtime's
// command line; it is registered with Claude Code's quiet-mode variables
// only.
func claudeModel(bash string, argv func(bin string) []string) func(*testing.T, string, *scriptedModel, func(modelCall) modelAnswer) ([]string, []string, []string) {
	return func(t *testing.T, bin string, m *scriptedModel, script func(modelCall) modelAnswer) ([]string, []string, []string) {
		srv := strict.NewAnthropic(t)
		srv.RequireKey(operatorKey)
		m.rejected = func() []string {
			var out []string
			for _, r := range srv.Rejected() {
				out = append(out, fmt.Sprintf("%s %s: %d %s", r.Method, r.Path, r.Status, r.Error))
			}
			return out
		}
		n := 0
		srv.Respond(func(r strict.Request) strict.Reply {
			if !slices.Contains(r.ToolNames(), bash) {
				return strict.Reply{Text: "Title", Usage: modelUsage}
			}
			c := modelCall{Users: r.UserTexts()}
			for _, v := range r.ToolResults() {
				c.Results = append(c.Results, v)
			}
			m.record(c)
			a := script(c)
			if a.Wait != nil {
				<-a.Wait
			}
			if a.Command != "" {
				n++
				in, _ := json.Marshal(map[string]any{"command": a.Command, "description": "run it", "timeout": 60000})
				return strict.Reply{ToolCalls: []strict.Call{{ID: fmt.Sprintf("toolu_desk%d", n), Name: bash, Arguments: string(in)}}, Usage: modelUsage}
			}
			return strict.Reply{Text: a.Text, Usage: modelUsage}
		})
		env := []string{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1"}
		names := make([]string, len(env)) // the runtime is registered with the variables' names
		for i, kv := range env {
			names[i], _, _ = strings.Cut(kv, "=")
		}
		// The operator declares the models Claude Code calls: the one it
		// is started with, and claude-code-acp's default.
		return argv(bin), names, append(env, "ANTHROPIC_BASE_URL="+srv.BaseURL(), "ANTHROPIC_API_KEY="+operatorKey, "DESK_MODELS=anthropic:claude-sonnet-4-5,anthropic:claude-sonnet-4-5-20250929")
	}
}

// protocolCases are the three protocols, each with the real runtimes our
// users run.
var protocolCases = []protocolCase{
	{name: "acp", protocol: "acp", bin: "codex-acp", what: "codex-acp (@zed-industries/codex-acp)",
		model: codexModel(func(bin string) []string { return append([]string{bin}, codexConfig(true)...) })},
	// Claude Code over ACP: the adapter hands Claude Code's file and shell
	// tools to the client, so its commands are desk's terminals and its
	// writes desk's fs/write_text_file.
	{name: "acp-claude", protocol: "acp", bin: "claude-code-acp", what: "claude-code-acp (@zed-industries/claude-code-acp)",
		model: claudeModel("mcp__acp__Bash", func(bin string) []string { return []string{bin} }),
		// Its Bash is desk's terminal: a sandbox of its own, not the
		// runtime's.
		terminalOutside: true,
		// Its session/cancel answers the prompt "cancelled" at once but
		// leaves the model call running; that call's answer then ends the
		// next prompt early (measured: the next turn ended in 31 ms with
		// the interrupted call's text, or never when the call stays
		// open). Its successors fix the cancel path but need Node 22.
		skip: map[string]string{"interrupt": "claude-code-acp 0.16.2 leaks an interrupted turn's model answer into the next prompt (docs/runtimes.md)"}},
	{name: "codex-app-server", protocol: "codex-app-server", bin: "codex", what: "Codex (@openai/codex)",
		model: codexModel(func(bin string) []string { return append([]string{bin, "app-server"}, codexConfig(false)...) })},
	{name: "claude-stream-json", protocol: "claude-stream-json", bin: "claude", what: "Claude Code (@anthropic-ai/claude-code)",
		model: claudeModel("Bash", func(bin string) []string { return []string{bin, "--model", "claude-sonnet-4-5"} })},
}

// findRuntime is npmbin.Find for a case.
func (p protocolCase) find(t *testing.T) string { return npmbin.Find(t, p.bin, p.what) }

// api is a desk's HTTP API as one token sees it.
type api struct {
	t     *testing.T
	url   string
	token string
}

// do sends a request and returns the status and the body; out, when not
// nil, gets the decoded body of a 2xx answer.
func (a api) do(method, path string, body, out any) (int, string) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	cl := &http.Client{Timeout: 30 * time.Second}
	res, err := cl.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return res.StatusCode, string(b)
}

// must is do that fails unless the status is want.
func (a api) must(want int, method, path string, body, out any) string {
	a.t.Helper()
	st, b := a.do(method, path, body, out)
	if st != want {
		a.t.Fatalf("%s %s = %d %s; want %d", method, path, st, b, want)
	}
	return b
}

// execution reads one execution with its events.
func (a api) execution(id string) desk.Execution {
	a.t.Helper()
	var x desk.Execution
	a.must(200, "GET", "/v1/executions/"+id, nil, &x)
	return x
}

// session reads a session.
func (a api) session(id string) desk.Session {
	a.t.Helper()
	var s desk.Session
	a.must(200, "GET", "/v1/sessions/"+id, nil, &s)
	return s
}

// send submits a message and returns its execution id once it has one.
func (a api) send(ses, text string) string {
	a.t.Helper()
	var res desk.SubmitResult
	a.must(202, "POST", "/v1/sessions/"+ses+"/messages", map[string]string{"text": text}, &res)
	if res.ExecutionID != "" {
		return res.ExecutionID
	}
	return a.itemExecution(ses, res.Item.ID)
}

// itemExecution waits until a queue row has its execution.
func (a api) itemExecution(ses, item string) string {
	a.t.Helper()
	var id string
	testwait.Until(a.t, 3*time.Minute, func() bool {
		var q struct{ Items []desk.QueueItem }
		a.must(200, "GET", "/v1/sessions/"+ses+"/queue?all=true", nil, &q)
		for _, it := range q.Items {
			if it.ID == item {
				id = it.ExecutionID
			}
		}
		return id != ""
	}, "queue row "+item+" has an execution")
	return id
}

// settled waits for an execution to settle and returns it.
func (a api) settled(id string) desk.Execution {
	a.t.Helper()
	var x desk.Execution
	testwait.Until(a.t, 4*time.Minute, func() bool {
		x = a.execution(id)
		return x.Terminal()
	}, "execution "+id+" settles")
	return x
}

// phase waits for an execution to be in phase.
func (a api) phase(id, phase string) desk.Execution {
	a.t.Helper()
	var x desk.Execution
	testwait.Until(a.t, 3*time.Minute, func() bool {
		x = a.execution(id)
		return x.Phase == phase || x.Terminal()
	}, "execution "+id+" is "+phase)
	if x.Phase != phase {
		a.t.Fatalf("execution %s is %s (%s), want %s", id, x.Phase, x.Reason, phase)
	}
	return x
}

// messages lists a session's transcript.
func (a api) messages(ses string) []desk.Message {
	a.t.Helper()
	var out struct{ Messages []desk.Message }
	a.must(200, "GET", "/v1/sessions/"+ses+"/messages?limit=200", nil, &out)
	return out.Messages
}

// archive reads a workspace's archive records.
func (a api) archive(ws string) []map[string]any {
	a.t.Helper()
	_, body := a.do("GET", "/v1/workspaces/"+ws+"/archive", nil, nil)
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			a.t.Fatalf("archive line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// countEvents counts an execution's events of type typ.
func countEvents(x desk.Execution, typ string) int {
	n := 0
	for _, e := range x.Events {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// hostProc is one process of the host's process table.
type hostProc struct {
	pid, ppid int
	state     string
	cmd       string
}

// processes reads /proc.
func processes() map[int]hostProc {
	out := map[int]hostProc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = hostProc{pid: pid, ppid: ppid, state: f[0], cmd: strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")}
	}
	return out
}

// descendants are the live (not zombie) processes under root.
func descendants(root int) []hostProc {
	all := processes()
	kids := map[int][]int{}
	for _, p := range all {
		kids[p.ppid] = append(kids[p.ppid], p.pid)
	}
	var out []hostProc
	var walk func(int)
	walk = func(pid int) {
		for _, k := range kids[pid] {
			if p := all[k]; p.state != "Z" {
				out = append(out, p)
			}
			walk(k)
		}
	}
	walk(root)
	return out
}

// alive says which of ps still run (not zombies).
func stillAlive(ps []hostProc) []hostProc {
	all := processes()
	var out []hostProc
	for _, p := range ps {
		if q, ok := all[p.pid]; ok && q.state != "Z" && q.cmd == p.cmd {
			out = append(out, q)
		}
	}
	return out
}

// noChildren waits until the desk process with pid has no descendants.
func noChildren(t *testing.T, pid int, what string) {
	t.Helper()
	var ds []hostProc
	if !testwait.Poll(20*time.Second, func() bool { ds = descendants(pid); return len(ds) == 0 }) {
		t.Fatalf("%s: desk still has child processes: %+v", what, ds)
	}
}

func terminal(x desk.Execution) bool { return x.Terminal() }

// on is the API for a subtest (its failures end the subtest).
func (a api) on(t *testing.T) api { a.t = t; return a }
