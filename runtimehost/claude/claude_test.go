package claude_test

// Black-box tests of the stream-json transport with the real Claude Code
// binary (DESK_NPM_BIN), offline against the strict Anthropic Messages
// server, reporting to a recording Sink.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/runtimehost/claude"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

func claudeBinary(t *testing.T) string {
	return npmbin.Find(t, "claude", "Claude Code (@anthropic-ai/claude-code)")
}

// home is one durable Claude Code state directory (its conversations
// live there), shared by the processes of one test.
type home struct {
	t    *testing.T
	bin  string
	dir  string
	cwd  string
	base string
}

func newHome(t *testing.T, srv *strict.Server) *home {
	dir := t.TempDir()
	cwd := filepath.Join(dir, "work")
	os.MkdirAll(cwd, 0o755)
	return &home{t: t, bin: claudeBinary(t), dir: dir, cwd: cwd, base: srv.BaseURL()}
}

// child is one started process and its attached connection.
type child struct {
	cmd  *exec.Cmd
	conn wire.Conn
}

// start starts `claude` with the transport's Args(native) and attaches.
func (h *home) start(native string) *child {
	h.t.Helper()
	return h.startArgv(append([]string{h.bin, "--model", "claude-sonnet-4-5"}, claude.Transport{}.Args(native)...))
}

func (h *home) startArgv(argv []string) *child {
	h.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = h.cwd
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + h.dir,
		"CLAUDE_CONFIG_DIR=" + filepath.Join(h.dir, ".claude"),
		"ANTHROPIC_BASE_URL=" + h.base,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_BUG_COMMAND=1",
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	conn, err := claude.Transport{}.Attach(context.Background(), wire.Stdio{Stdin: stdin, Stdout: stdout}, wire.Options{Cwd: h.cwd})
	if err != nil {
		h.t.Fatal(err)
	}
	c := &child{cmd: cmd, conn: conn}
	h.t.Cleanup(func() {
		conn.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if h.t.Failed() {
			h.t.Logf("claude stderr:\n%s", stderr.String())
		}
	})
	return c
}

// sink records a turn; perm answers permission requests.
type sink struct {
	mu     sync.Mutex
	native []string
	text   strings.Builder
	tools  []wire.ToolEvent
	plans  [][]wire.PlanEntry
	perms  []wire.PermissionRequest
	perm   func(wire.PermissionRequest) wire.PermissionAnswer
	onTool func(wire.ToolEvent)
}

func (s *sink) NativeID(id string) { s.mu.Lock(); s.native = append(s.native, id); s.mu.Unlock() }
func (s *sink) Text(d string)      { s.mu.Lock(); s.text.WriteString(d); s.mu.Unlock() }
func (s *sink) Plan(p []wire.PlanEntry) {
	s.mu.Lock()
	s.plans = append(s.plans, p)
	s.mu.Unlock()
}
func (s *sink) Tool(ev wire.ToolEvent) {
	s.mu.Lock()
	s.tools = append(s.tools, ev)
	f := s.onTool
	s.mu.Unlock()
	if f != nil {
		f(ev)
	}
}
func (s *sink) Permission(ctx context.Context, req wire.PermissionRequest) (wire.PermissionAnswer, error) {
	s.mu.Lock()
	s.perms = append(s.perms, req)
	f := s.perm
	s.mu.Unlock()
	if f == nil {
		return wire.PermissionAnswer{OptionID: claude.OptionDeny}, nil
	}
	return f(req), nil
}

func option(req wire.PermissionRequest, kind string) string {
	for _, o := range req.Options {
		if o.Kind == kind {
			return o.ID
		}
	}
	return ""
}

func prompt(t *testing.T, c *child, text string, s *sink) wire.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.conn.Prompt(ctx, text, s)
	if err != nil {
		t.Fatalf("Prompt(%q): %v", text, err)
	}
	return res
}

func open(t *testing.T, c *child, native string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.conn.Open(ctx, native); err != nil {
		t.Fatalf("Open(%q): %v", native, err)
	}
}

// main answers only the main conversation's requests (the ones that
// declare the Bash tool) with f; Claude Code's side calls get plain text.
func mainOnly(srv *strict.Server, f func(strict.Request) strict.Reply) {
	srv.Respond(func(r strict.Request) strict.Reply {
		if !slices.Contains(r.ToolNames(), "Bash") {
			return strict.Reply{Text: "Title"}
		}
		return f(r)
	})
}

func noRejects(t *testing.T, srv *strict.Server) {
	t.Helper()
	if rj := srv.Rejected(); len(rj) > 0 {
		t.Fatalf("the strict server refused Claude Code's request: %d %s\n%.2000s", rj[0].Status, rj[0].Error, rj[0].Body)
	}
}

func lastUser(r strict.Request) string {
	u := r.UserTexts()
	if len(u) == 0 {
		return ""
	}
	return u[len(u)-1]
}

// Two turns on one process; the second request carries the first turn,
// and a fresh process resuming the id continues the same conversation.
func TestContinuationAndResume(t *testing.T) {
	srv := strict.NewAnthropic(t)
	mainOnly(srv, func(r strict.Request) strict.Reply {
		switch u := lastUser(r); {
		case strings.Contains(u, "third"):
			return strict.Reply{Text: "three"}
		case strings.Contains(u, "second"):
			return strict.Reply{Text: "two"}
		default:
			return strict.Reply{Text: "one"}
		}
	})
	h := newHome(t, srv)
	c := h.start("")
	open(t, c, "")
	s1 := &sink{}
	if res := prompt(t, c, "the first message", s1); res.StopReason != wire.StopEndTurn || s1.text.String() != "one" {
		t.Fatalf("turn 1: %+v text %q", res, s1.text.String())
	}
	if len(s1.native) != 1 || s1.native[0] == "" {
		t.Fatalf("NativeID: %v", s1.native)
	}
	native := s1.native[0]
	s2 := &sink{}
	if res := prompt(t, c, "the second message", s2); res.StopReason != wire.StopEndTurn || s2.text.String() != "two" {
		t.Fatalf("turn 2: %+v text %q", res, s2.text.String())
	}
	noRejects(t, srv)
	var second strict.Request
	for _, r := range srv.Accepted() {
		if strings.Contains(lastUser(r), "second") {
			second = r
		}
	}
	if joined := strings.Join(second.UserTexts(), "|"); !strings.Contains(joined, "the first message") {
		t.Fatalf("the second turn's request does not carry the first: %q", joined)
	}
	c.conn.Close()
	c.cmd.Wait()

	// A fresh process reopens the exact conversation.
	c2 := h.start(native)
	open(t, c2, native)
	s3 := &sink{}
	if res := prompt(t, c2, "the third message", s3); res.StopReason != wire.StopEndTurn || s3.text.String() != "three" {
		t.Fatalf("turn 3: %+v text %q", res, s3.text.String())
	}
	if len(s3.native) > 0 && s3.native[0] != native {
		t.Fatalf("the resumed process reported %v, want %s", s3.native, native)
	}
	var third strict.Request
	for _, r := range srv.Accepted() {
		if strings.Contains(lastUser(r), "third") {
			third = r
		}
	}
	if joined := strings.Join(third.UserTexts(), "|"); !strings.Contains(joined, "the first message") || !strings.Contains(joined, "the second message") {
		t.Fatalf("the resumed turn does not carry the conversation: %q", joined)
	}
	noRejects(t, srv)
}

// bashScript answers the first main request with a Bash call of command
// and the one carrying its result with "done".
func bashScript(srv *strict.Server, command string) {
	args, _ := json.Marshal(map[string]string{"command": command, "description": "run it"})
	mainOnly(srv, func(r strict.Request) strict.Reply {
		if len(r.ToolResults()) == 0 {
			return strict.Reply{ToolCalls: []strict.Call{{ID: "toolu_bash1", Name: "Bash", Arguments: string(args)}}}
		}
		return strict.Reply{Text: "done"}
	})
}

// A Bash call asks permission; allowed, it runs and is reported as a
// command tool with its output.
func TestBashAllowed(t *testing.T) {
	srv := strict.NewAnthropic(t)
	h := newHome(t, srv)
	// touch needs permission (Claude Code lets read-only commands run
	// without asking).
	marker := filepath.Join(h.dir, "allowed")
	bashScript(srv, "touch "+marker+" && echo desk-bash-$((40+2))")
	c := h.start("")
	open(t, c, "")
	s := &sink{perm: func(req wire.PermissionRequest) wire.PermissionAnswer {
		return wire.PermissionAnswer{OptionID: option(req, wire.AllowOnce)}
	}}
	res := prompt(t, c, "run the command", s)
	noRejects(t, srv)
	if res.StopReason != wire.StopEndTurn {
		t.Fatalf("result %+v", res)
	}
	if len(s.perms) != 1 || s.perms[0].Kind != wire.ToolCommand || s.perms[0].ToolCallID != "toolu_bash1" {
		t.Fatalf("permission requests: %+v", s.perms)
	}
	var started, ended *wire.ToolEvent
	for i, ev := range s.tools {
		if ev.ID == "toolu_bash1" && ev.Status == wire.ToolInProgress {
			started = &s.tools[i]
		}
		if ev.ID == "toolu_bash1" && ev.Status == wire.ToolCompleted {
			ended = &s.tools[i]
		}
	}
	if started == nil || started.Kind != wire.ToolCommand || !strings.Contains(started.Title, "echo desk-bash") {
		t.Fatalf("no command tool start: %+v", s.tools)
	}
	if ended == nil || !strings.Contains(ended.Output, "desk-bash-42") {
		t.Fatalf("no completed tool with the output: %+v", s.tools)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}
}

// Denied, the command does not run.
func TestBashDenied(t *testing.T) {
	srv := strict.NewAnthropic(t)
	h := newHome(t, srv)
	marker := filepath.Join(h.dir, "marker")
	bashScript(srv, "touch "+marker)
	c := h.start("")
	open(t, c, "")
	s := &sink{perm: func(req wire.PermissionRequest) wire.PermissionAnswer {
		return wire.PermissionAnswer{OptionID: option(req, wire.RejectOnce)}
	}}
	prompt(t, c, "run the command", s)
	noRejects(t, srv)
	if len(s.perms) != 1 {
		t.Fatalf("permission requests: %+v", s.perms)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the denied command ran")
	}
	var failed bool
	for _, ev := range s.tools {
		failed = failed || (ev.ID == "toolu_bash1" && ev.Status == wire.ToolFailed)
	}
	if !failed {
		t.Fatalf("the denied call is not reported failed: %+v", s.tools)
	}
}

// Cancel mid-turn (a long command running) ends the turn within 2 s.
func TestCancelMidTurn(t *testing.T) {
	srv := strict.NewAnthropic(t)
	h := newHome(t, srv)
	bashScript(srv, "touch "+filepath.Join(h.dir, "started")+" && sleep 60")
	c := h.start("")
	open(t, c, "")
	running := make(chan struct{})
	var once sync.Once
	s := &sink{
		perm: func(req wire.PermissionRequest) wire.PermissionAnswer {
			once.Do(func() { close(running) })
			return wire.PermissionAnswer{OptionID: option(req, wire.AllowOnce)}
		},
	}
	type out struct {
		res wire.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := c.conn.Prompt(context.Background(), "sleep a while", s)
		done <- out{r, err}
	}()
	select {
	case <-running:
	case <-time.After(time.Minute):
		t.Fatal("the command never started")
	}
	time.Sleep(500 * time.Millisecond) // the command is running
	start := time.Now()
	if err := c.conn.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-done:
		if o.err != nil || o.res.StopReason != wire.StopCancelled {
			t.Fatalf("after Cancel: %+v %v", o.res, o.err)
		}
		t.Logf("stopped %v after Cancel", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("the turn did not stop within 2 s of Cancel")
	}
}

// Resuming an id Claude Code does not have fails with ErrCannotLoad.
func TestResumeUnknown(t *testing.T) {
	srv := strict.NewAnthropic(t)
	mainOnly(srv, func(strict.Request) strict.Reply { return strict.Reply{Text: "should not happen"} })
	h := newHome(t, srv)
	id := "5b0c8f43-8d7e-4c1e-9a53-2f0e6a1d9c44"
	c := h.start(id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.conn.Open(ctx, id)
	if err == nil {
		_, err = c.conn.Prompt(ctx, "hello", &sink{})
	}
	if !errors.Is(err, wire.ErrCannotLoad) {
		t.Fatalf("resume of an unknown id: %v, want ErrCannotLoad", err)
	}
	for _, r := range srv.Accepted() {
		if slices.Contains(r.ToolNames(), "Bash") {
			t.Fatal("a new conversation was started in its place")
		}
	}
}

// A child that prints garbage is a clear error, not a hang.
func TestGarbageOnStdout(t *testing.T) {
	h := &home{t: t, dir: t.TempDir()}
	h.cwd = h.dir
	c := h.startArgv([]string{"sh", "-c", "echo Welcome to not-claude; exec sleep 30"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.conn.Open(ctx, "")
	if err == nil {
		_, err = c.conn.Prompt(ctx, "hi", &sink{})
	}
	if err == nil || !strings.Contains(err.Error(), "not stream-json") || !strings.Contains(err.Error(), "Welcome to not-claude") {
		t.Fatalf("garbage on stdout: %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(fmt.Sprint("timed out instead of failing: ", err))
	}
}
