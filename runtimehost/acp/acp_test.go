package acp_test

// Tests of the ACP transport against the real codex-acp (from npm, found
// through DESK_NPM_BIN), run offline: its codex talks to a strict,
// scripted OpenAI Responses API server on loopback (strict.NewResponses)
// through a model provider configured in CODEX_HOME/config.toml.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

func codexACP(t *testing.T) string {
	return npmbin.Find(t, "codex-acp", "codex-acp (@zed-industries/codex-acp)")
}

// env is one runtime's durable state: CODEX_HOME with the provider
// pointed at the scripted server, and a working directory.
type env struct {
	t    *testing.T
	bin  string
	home string
	cwd  string
	srv  *strict.Responses
}

func newEnv(t *testing.T, replies ...strict.Reply) *env {
	t.Helper()
	e := &env{t: t, bin: codexACP(t), home: t.TempDir(), cwd: t.TempDir(), srv: strict.NewResponses(t, replies...)}
	cfg := fmt.Sprintf(`model = "gpt-5-codex"
model_provider = "scripted"
approval_policy = "on-request"
sandbox_mode = "read-only"

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects.%q]
trust_level = "trusted"
`, e.srv.BaseURL(), e.cwd)
	if err := os.WriteFile(filepath.Join(e.home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// child is one codex-acp process with a transport attached.
type child struct {
	cmd    *exec.Cmd
	conn   wire.Conn
	stderr *lockedBuf
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (e *env) start() *child {
	e.t.Helper()
	cmd := exec.Command(e.bin)
	cmd.Dir = e.cwd
	// The npm launcher is a node script that starts the native binary:
	// the whole group is killed, and Wait does not wait on a grandchild
	// that still holds stderr.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 2 * time.Second
	cmd.Env = append(os.Environ(), "CODEX_HOME="+e.home, "HOME="+e.home, "SCRIPTED_API_KEY=test-key", "RUST_LOG=warn", "NO_COLOR=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	c := &child{cmd: cmd, stderr: &lockedBuf{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if c.conn != nil {
			c.conn.Close()
		}
		stdin.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if e.t.Failed() {
			e.t.Logf("codex-acp stderr:\n%s", c.stderr.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := acp.Transport{}.Attach(ctx, wire.Stdio{Stdin: stdin, Stdout: stdout}, wire.Options{Cwd: e.cwd})
	if err != nil {
		e.t.Fatalf("attach: %v\nstderr: %s", err, c.stderr.String())
	}
	c.conn = conn
	return c
}

// sink records a turn.
type sink struct {
	mu     sync.Mutex
	ids    []string
	text   strings.Builder
	tools  []wire.ToolEvent
	plans  [][]wire.PlanEntry
	perms  []wire.PermissionRequest
	answer func(wire.PermissionRequest) wire.PermissionAnswer
}

func (s *sink) NativeID(id string) { s.mu.Lock(); s.ids = append(s.ids, id); s.mu.Unlock() }
func (s *sink) Text(d string)      { s.mu.Lock(); s.text.WriteString(d); s.mu.Unlock() }
func (s *sink) Tool(ev wire.ToolEvent) {
	s.mu.Lock()
	s.tools = append(s.tools, ev)
	s.mu.Unlock()
}
func (s *sink) Plan(es []wire.PlanEntry) { s.mu.Lock(); s.plans = append(s.plans, es); s.mu.Unlock() }
func (s *sink) Permission(ctx context.Context, r wire.PermissionRequest) (wire.PermissionAnswer, error) {
	s.mu.Lock()
	s.perms = append(s.perms, r)
	answer := s.answer
	s.mu.Unlock()
	if answer == nil {
		<-ctx.Done()
		return wire.PermissionAnswer{Cancelled: true}, nil
	}
	return answer(r), nil
}

func (c *child) prompt(t *testing.T, text string, s *sink) wire.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := c.conn.Prompt(ctx, text, s)
	if err != nil {
		t.Fatalf("prompt %q: %v\nstderr: %s", text, err, c.stderr.String())
	}
	return res
}

func (c *child) open(t *testing.T, native string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id, err := c.conn.Open(ctx, native)
	if err != nil {
		t.Fatalf("open %q: %v\nstderr: %s", native, err, c.stderr.String())
	}
	return id
}

// lastRequest is the server's last accepted request.
func (e *env) lastRequest() strict.ResponsesRequest {
	e.t.Helper()
	rs := e.srv.Accepted()
	if len(rs) == 0 {
		e.t.Fatalf("the model server accepted no request; refused: %+v", e.srv.Rejected())
	}
	return rs[len(rs)-1]
}

// Two turns on one conversation, the second in a fresh process through
// session/load: the model sees the first turn's exchange again.
func TestTwoTurnsAndLoadInAFreshProcess(t *testing.T) {
	e := newEnv(t, strict.Reply{Text: "The code word is PLUM."}, strict.Reply{Text: "You asked about PLUM."}, strict.Reply{Text: "Still PLUM."})
	c := e.start()
	id := c.open(t, "")
	if id == "" {
		t.Fatal("session/new gave no id")
	}
	s := &sink{}
	if res := c.prompt(t, "remember the code word", s); res.StopReason != wire.StopEndTurn || !strings.HasSuffix(s.text.String(), "The code word is PLUM.") {
		t.Fatalf("first turn: %+v text %q", res, s.text.String())
	}
	s2 := &sink{}
	if res := c.prompt(t, "what was it?", s2); res.StopReason != wire.StopEndTurn || !strings.HasSuffix(s2.text.String(), "You asked about PLUM.") {
		t.Fatalf("second turn: %+v text %q", res, s2.text.String())
	}
	r := e.lastRequest()
	if u := strings.Join(r.UserTexts(), "|"); !strings.Contains(u, "remember the code word") || !strings.Contains(u, "what was it?") ||
		!strings.Contains(strings.Join(r.AssistantTexts(), "|"), "PLUM") {
		t.Fatalf("the second turn's request lacks the first: users %q assistants %q", r.UserTexts(), r.AssistantTexts())
	}

	// A fresh process reopens the same conversation.
	c.conn.Close()
	f := e.start()
	if got := f.open(t, id); got != id {
		t.Fatalf("load gave %q, want %q", got, id)
	}
	s3 := &sink{}
	if res := f.prompt(t, "and now?", s3); res.StopReason != wire.StopEndTurn || !strings.HasSuffix(s3.text.String(), "Still PLUM.") {
		t.Fatalf("turn after the load: %+v text %q", res, s3.text.String())
	}
	r = e.lastRequest()
	if u := strings.Join(r.UserTexts(), "|"); !strings.Contains(u, "remember the code word") || !strings.Contains(u, "and now?") {
		t.Fatalf("the loaded conversation's request lacks the earlier turns: %q", r.UserTexts())
	}
}

// A load of an id the runtime does not know is ErrCannotLoad.
func TestLoadUnknown(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := c.conn.Open(ctx, "019a0000-0000-7000-8000-000000000000")
	if !errors.Is(err, wire.ErrCannotLoad) {
		t.Fatalf("open of an unknown id: %v", err)
	}
	if n := len(e.srv.Requests()); n != 0 {
		t.Fatalf("the failed load reached the model %d times", n)
	}
}

// A command the model runs needs permission: the sink answers with the
// exact allow-once option id, the command runs, its call is reported as
// a Tool with its output, and the model gets the output.
func TestToolCallWithPermission(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	args, _ := json.Marshal(map[string]any{"cmd": "echo desk-acp-ran > " + marker + " && echo done-" + "marker", "sandbox_permissions": "require_escalated", "justification": "the test asks for it"})
	e := newEnv(t, strict.Reply{ToolCalls: []strict.Call{{ID: "call_1", Name: "exec_command", Arguments: string(args)}}}, strict.Reply{Text: "It ran."})
	c := e.start()
	c.open(t, "")
	var chosen string
	s := &sink{answer: func(r wire.PermissionRequest) wire.PermissionAnswer {
		for _, o := range r.Options {
			if o.Kind == wire.AllowOnce {
				chosen = o.ID
				return wire.PermissionAnswer{OptionID: o.ID}
			}
		}
		return wire.PermissionAnswer{Cancelled: true}
	}}
	res := c.prompt(t, "run the command", s)
	if res.StopReason != wire.StopEndTurn || !strings.HasSuffix(s.text.String(), "It ran.") {
		t.Fatalf("turn: %+v text %q tools %+v perms %+v", res, s.text.String(), s.tools, s.perms)
	}
	if len(s.perms) != 1 || chosen == "" {
		t.Fatalf("permission requests: %+v", s.perms)
	}
	t.Logf("permission %q options %+v, answered %q", s.perms[0].Title, s.perms[0].Options, chosen)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	var final *wire.ToolEvent
	for i := range s.tools {
		if s.tools[i].Status == wire.ToolCompleted {
			final = &s.tools[i]
		}
	}
	if final == nil || final.Kind != wire.ToolCommand || !strings.Contains(final.Output, "done-marker") {
		t.Fatalf("tool events: %+v", s.tools)
	}
	if out := e.lastRequest().ToolResults(); !strings.Contains(fmt.Sprint(out), "done-marker") {
		t.Fatalf("the model did not get the output: %v", out)
	}
}

// Cancel mid-turn stops the turn within 2 s with StopCancelled.
func TestCancelMidTurn(t *testing.T) {
	e := newEnv(t)
	// Registered after the server's own cleanup, so it runs first: the
	// held handler returns before the server waits for it.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	streaming := make(chan struct{}, 1)
	e.srv.Respond(func(strict.ResponsesRequest) strict.Reply {
		streaming <- struct{}{}
		<-release
		return strict.Reply{Text: "too late"}
	})
	c := e.start()
	c.open(t, "")
	done := make(chan wire.Result, 1)
	go func() {
		res, err := c.conn.Prompt(context.Background(), "take your time", &sink{})
		if err != nil {
			res = wire.Result{StopReason: "error: " + err.Error()}
		}
		done <- res
	}()
	select {
	case <-streaming:
	case <-time.After(60 * time.Second):
		t.Fatalf("the turn never reached the model\nstderr: %s", c.stderr.String())
	}
	t0 := time.Now()
	if err := c.conn.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.StopReason != wire.StopCancelled {
			t.Fatalf("cancelled turn: %+v", res)
		}
		t.Logf("cancel → cancelled in %v", time.Since(t0))
	case <-time.After(2 * time.Second):
		t.Fatal("the turn did not stop within 2 s of Cancel")
	}
}
