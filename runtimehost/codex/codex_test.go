package codex_test

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/runtimehost/codex"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

// recorder is a recording Sink; Permission answers with answer.
type recorder struct {
	mu     sync.Mutex
	text   strings.Builder
	tools  []wire.ToolEvent
	perms  []wire.PermissionRequest
	answer string
}

func (r *recorder) NativeID(string) {}
func (r *recorder) Text(d string)   { r.mu.Lock(); r.text.WriteString(d); r.mu.Unlock() }
func (r *recorder) Tool(ev wire.ToolEvent) {
	r.mu.Lock()
	r.tools = append(r.tools, ev)
	r.mu.Unlock()
}
func (r *recorder) Plan([]wire.PlanEntry) {}
func (r *recorder) Permission(ctx context.Context, req wire.PermissionRequest) (wire.PermissionAnswer, error) {
	r.mu.Lock()
	r.perms = append(r.perms, req)
	r.mu.Unlock()
	return wire.PermissionAnswer{OptionID: r.answer}, nil
}

func codexBin(t *testing.T) string { return npmbin.Find(t, "codex", "Codex (@openai/codex)") }

// start runs codex app-server against srv with home as CODEX_HOME and
// attaches the transport.
func refused(srv *strict.Responses) []string {
	var out []string
	for _, r := range srv.Rejected() {
		out = append(out, r.Error)
	}
	return out
}

func start(t *testing.T, bin string, srv *strict.Responses, home, cwd string, sandbox ...string) wire.Conn {
	t.Helper()
	mode := "danger-full-access"
	if len(sandbox) > 0 {
		mode = sandbox[0]
	}
	cmd := exec.Command(bin, "app-server",
		"-c", "model_provider=strict", "-c", "model_providers.strict.name=strict",
		"-c", "model_providers.strict.base_url="+srv.BaseURL(),
		"-c", "model_providers.strict.wire_api=responses",
		"-c", "model_providers.strict.env_key=STRICT_KEY",
		"-c", "model_providers.strict.request_max_retries=0",
		"-c", "model_providers.strict.stream_max_retries=0",
		"-c", "model=gpt-test", "-c", "approval_policy=on-request", "-c", "sandbox_mode="+mode)
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "STRICT_KEY=sk-test")
	cmd.Dir = cwd
	return attach(t, cmd, cwd)
}

func attach(t *testing.T, cmd *exec.Cmd, cwd string) wire.Conn {
	t.Helper()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := codex.Transport{}.Attach(ctx, wire.Stdio{Stdin: in, Stdout: out}, wire.Options{Cwd: cwd})
	t.Cleanup(func() {
		if conn != nil {
			conn.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	if err != nil {
		return failed{err}
	}
	return conn
}

// failed is an Attach error as a Conn, so a test can assert on it.
type failed struct{ err error }

func (f failed) Open(context.Context, string) (string, error) { return "", f.err }
func (f failed) Prompt(context.Context, string, wire.Sink) (wire.Result, error) {
	return wire.Result{}, f.err
}
func (f failed) Cancel(context.Context) error { return f.err }
func (f failed) Close() error                 { return nil }

func turn(t *testing.T, c wire.Conn, text string, sink wire.Sink) wire.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := c.Prompt(ctx, text, sink)
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	return res
}

// TestTwoTurnsAcrossProcesses: the second turn's request holds the first
// turn; a fresh codex process resuming the thread id continues it; an
// unknown id fails with ErrCannotLoad.
func TestTwoTurnsAcrossProcesses(t *testing.T) {
	bin := codexBin(t)
	srv := strict.NewResponses(t, strict.Reply{Text: "first answer"}, strict.Reply{Text: "second answer"}, strict.Reply{Text: "third answer"})
	home, cwd := t.TempDir(), t.TempDir()
	c := start(t, bin, srv, home, cwd)
	ctx := context.Background()
	id, err := c.Open(ctx, "")
	if err != nil || id == "" {
		t.Fatalf("open: %q %v", id, err)
	}
	rec := &recorder{}
	if res := turn(t, c, "remember apples", rec); res.StopReason != wire.StopEndTurn || rec.text.String() != "first answer" {
		t.Fatalf("turn 1: %+v %q (refused %+v)", res, rec.text.String(), refused(srv))
	}
	turn(t, c, "what did I say?", &recorder{})
	reqs := srv.Accepted()
	if len(reqs) < 2 || !strings.Contains(strings.Join(reqs[1].UserTexts(), "|"), "remember apples") ||
		!strings.Contains(strings.Join(reqs[1].AssistantTexts(), "|"), "first answer") {
		t.Fatalf("second request lacks the first turn: %d requests (refused %q)", len(reqs), refused(srv))
	}
	c.Close()

	c2 := start(t, bin, srv, home, cwd)
	if got, err := c2.Open(ctx, id); err != nil || got != id {
		t.Fatalf("resume: %q %v", got, err)
	}
	turn(t, c2, "and now?", &recorder{})
	last := srv.Accepted()[len(srv.Accepted())-1]
	if !strings.Contains(strings.Join(last.UserTexts(), "|"), "remember apples") {
		t.Fatalf("the resumed thread lost the first turn: %q", last.UserTexts())
	}
	n := len(srv.Requests())
	_, err = c2.Open(ctx, "00000000-0000-7000-8000-000000000000")
	if !errors.Is(err, wire.ErrCannotLoad) {
		t.Fatalf("unknown thread: %v", err)
	}
	if len(srv.Requests()) != n {
		t.Fatal("the failed resume reached the model")
	}
}

// TestCommandApproval: an exec_command call asks for approval; accept
// runs it (a Tool span with its output), decline does not.
func TestCommandApproval(t *testing.T) {
	bin := codexBin(t)
	cwd := t.TempDir()
	for _, answer := range []string{"accept", "decline"} {
		t.Run(answer, func(t *testing.T) {
			marker := filepath.Join(cwd, answer+".txt")
			srv := strict.NewResponses(t,
				strict.Reply{ToolCalls: []strict.Call{{Name: "exec_command", Arguments: `{"cmd":"echo ran > ` + marker + ` && echo done-` + answer + `","sandbox_permissions":"require_escalated","justification":"the test asks"}`}}},
				strict.Reply{Text: "ok"})
			c := start(t, bin, srv, t.TempDir(), cwd, "read-only")
			if _, err := c.Open(context.Background(), ""); err != nil {
				t.Fatal(err)
			}
			rec := &recorder{answer: answer}
			turn(t, c, "run it", rec)
			if len(rec.perms) != 1 || rec.perms[0].Kind != wire.ToolCommand || rec.perms[0].Options[0].ID != "accept" {
				t.Fatalf("permission requests: %+v (refused %+v)", rec.perms, refused(srv))
			}
			_, statErr := os.Stat(marker)
			if answer == "accept" {
				var out string
				for _, ev := range rec.tools {
					if ev.Kind == wire.ToolCommand && ev.Status == wire.ToolCompleted {
						out = ev.Output
					}
				}
				if statErr != nil || !strings.Contains(out, "done-accept") {
					t.Fatalf("accepted command did not run: %v, tools %+v", statErr, rec.tools)
				}
			} else if statErr == nil {
				t.Fatal("the declined command ran")
			}
		})
	}
}

// TestCancelStopsTurn: Cancel mid-turn ends Prompt with StopCancelled
// within 2 s.
func TestCancelStopsTurn(t *testing.T) {
	bin := codexBin(t)
	srv := strict.NewResponses(t)
	release := make(chan struct{})
	defer close(release)
	srv.Respond(func(strict.ResponsesRequest) strict.Reply { <-release; return strict.Reply{Text: "late"} })
	c := start(t, bin, srv, t.TempDir(), t.TempDir())
	if _, err := c.Open(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan wire.Result, 1)
	go func() {
		res, _ := c.Prompt(context.Background(), "take your time", &recorder{})
		done <- res
	}()
	deadline := time.Now().Add(60 * time.Second)
	for len(srv.Requests()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	at := time.Now()
	if err := c.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res.StopReason != wire.StopCancelled {
			t.Fatalf("stop: %+v", res)
		}
		t.Logf("cancelled in %v", time.Since(at))
	case <-time.After(2 * time.Second):
		t.Fatal("the turn did not stop within 2 s")
	}
}

// TestGarbageOnStdout: a child that prints something else fails Attach
// with an error naming what it printed.
func TestGarbageOnStdout(t *testing.T) {
	c := attach(t, exec.Command("sh", "-c", "echo 'this is not json'; sleep 5"), t.TempDir())
	_, err := c.Open(context.Background(), "")
	if err == nil || !strings.Contains(err.Error(), "not a JSON-RPC message") || !strings.Contains(err.Error(), "this is not json") {
		t.Fatalf("err: %v", err)
	}
}
