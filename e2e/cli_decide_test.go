package e2e

// Black-box tests of the decisions a turn waits on, through the real
// binary: `desk serve` in a child process, every command a child process
// of its own, script sessions whose exec_command waits for approval,
// whose blocking request_user_input waits for an answer and whose clarify
// plan card waits for a decision.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/desk-runtime/desk/internal/testwait"
)

// proc is one desk command line running as a child process.
type proc struct {
	cmd      *exec.Cmd
	out, err safeBuffer
	done     chan struct{}
	code     int
}

func (d *Desk) start(args ...string) *proc {
	d.t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = deskCmd(context.Background(), d.Env, append([]string{"--server", d.URL}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { p.cmd.Process.Kill(); <-p.done })
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		} else if err != nil {
			p.code = -1
		}
		close(p.done)
	}()
	return p
}

// wait waits for the process to exit and returns its status.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(90 * time.Second):
		t.Fatalf("%v did not exit\nstdout: %s\nstderr: %s", p.cmd.Args, p.out.String(), p.err.String())
	}
	return 0
}

// await waits until stderr matches re and returns the first submatch
// (or the whole match).
func (p *proc) await(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var m []string
	exited := false
	if !testwait.Poll(90*time.Second, func() bool {
		select {
		case <-p.done:
			exited = true
		default:
		}
		m = re.FindStringSubmatch(p.err.String())
		return m != nil || exited
	}) {
		t.Fatalf("%v: no %s on stderr in time\nstderr: %s", p.cmd.Args[3:], re, p.err.String())
	}
	if m == nil {
		t.Fatalf("%v exited %d before %s\nstdout: %s\nstderr: %s", p.cmd.Args[3:], p.code, re, p.out.String(), p.err.String())
	}
	return m[len(m)-1]
}

// run runs a command to completion: stdout, stderr, exit status.
func (d *Desk) run(args ...string) (string, string, int) {
	d.t.Helper()
	p := d.start(args...)
	code := p.wait(d.t)
	return p.out.String(), p.err.String(), code
}

// ok runs a command that must exit 0 and returns its stdout.
func (d *Desk) ok(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.run(args...)
	if code != 0 {
		d.t.Fatalf("desk %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// fail runs a command that must exit with code and returns its stderr.
func (d *Desk) fail(code int, args ...string) string {
	d.t.Helper()
	out, errOut, got := d.run(args...)
	if got != code {
		d.t.Fatalf("desk %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, code, out, errOut)
	}
	return errOut
}

func (d *Desk) json(v any, args ...string) {
	d.t.Helper()
	out := d.ok(append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		d.t.Fatalf("desk --json %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// workspace creates a workspace; blocking makes its questions wait for an
// answer.
func (d *Desk) workspace(name string, blocking bool) string {
	d.t.Helper()
	var ws desk.Workspace
	d.json(&ws, "workspace", "create", name)
	if blocking {
		var st desk.AgentSettings
		d.json(&st, "workspace", "agent", ws.ID, "--blocking-input")
		if !st.BlockingInput || st.ApprovalMode != desk.ApprovalModeUser {
			d.t.Fatalf("workspace agent --blocking-input: %+v", st)
		}
		if out := d.ok("workspace", "agent", ws.ID); !strings.Contains(out, "blocking input: yes") || !regexp.MustCompile(`approval mode: +user`).MatchString(out) || !regexp.MustCompile(`git writable: +no`).MatchString(out) {
			d.t.Fatalf("workspace agent:\n%s", out)
		}
		// The .git carve-out's opt-in, on and off again.
		for _, on := range []bool{true, false} {
			d.json(&st, "workspace", "agent", ws.ID, fmt.Sprintf("--git-writable=%v", on))
			if st.GitWritable != on || !st.BlockingInput {
				d.t.Fatalf("workspace agent --git-writable=%v: %+v", on, st)
			}
		}
	}
	return ws.ID
}

// scriptSession creates a script session whose script is the given steps.
func (d *Desk) scriptSession(ws string, steps ...string) string {
	d.t.Helper()
	f := filepath.Join(d.t.TempDir(), "script.json")
	if err := os.WriteFile(f, []byte(`{"steps":[`+strings.Join(steps, ",")+`]}`), 0o644); err != nil {
		d.t.Fatal(err)
	}
	var s desk.Session
	d.json(&s, "session", "create", ws, "--model", "script", "--script", f)
	return s.ID
}

func execStep(command string) string {
	return fmt.Sprintf(`{"tool_calls":[{"name":"exec_command","arguments":{"command":%q}}]}`, command)
}

func textStep(text string) string { return fmt.Sprintf(`{"text":%q}`, text) }

func planStep(title string, steps ...string) string {
	b, _ := json.Marshal(map[string]any{"tool_calls": []any{map[string]any{"name": "clarify",
		"arguments": map[string]any{"plan": map[string]any{"title": title, "steps": steps}}}}})
	return string(b)
}

var (
	approvalWait = regexp.MustCompile(`\[waiting for approval (apr_[0-9A-Za-z]+) to run ` + "`" + `[^` + "`" + `]*` + "`" + `; answer with desk approve apr_[0-9A-Za-z]+ or desk deny apr_[0-9A-Za-z]+\]`)
	inputWait    = regexp.MustCompile(`\[waiting for an answer to (inp_[0-9A-Za-z]+) `)
	planWait     = regexp.MustCompile(`\[waiting for a decision on plan (pln_[0-9A-Za-z]+) `)
)

// TestBinaryApproveDeny: exec_command in a workspace with the default
// approval mode waits; desk send says so with the command and the way to
// answer; desk approve lets it run and the turn goes on, desk deny refuses
// it with the reason and the turn goes on too.
func TestBinaryApproveDeny(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	ws := d.workspace("approvals", false)

	ses := d.scriptSession(ws, execStep("echo approved-ran"), textStep("It ran."))
	send := d.start("send", ses, "run it")
	apr := send.await(t, approvalWait)
	if !strings.Contains(send.err.String(), "to run `echo approved-ran`; answer with desk approve "+apr+" or desk deny "+apr) {
		t.Fatalf("waiting message: %s", send.err.String())
	}
	if out := d.ok("approvals", "ls", ses); !strings.Contains(out, apr) || !strings.Contains(out, "pending") || !strings.Contains(out, "echo approved-ran") {
		t.Fatalf("approvals ls:\n%s", out)
	}
	if out := d.ok("approve", apr); out != "approved "+apr+": exec_command `echo approved-ran`\n" {
		t.Fatalf("approve: %q", out)
	}
	if code := send.wait(t); code != exitOK {
		t.Fatalf("send exit %d\nstderr: %s", code, send.err.String())
	}
	if send.out.String() != "It ran.\n" || !strings.Contains(send.err.String(), "[✓ exec_command  echo approved-ran") ||
		!strings.Contains(send.err.String(), "["+apr+" approved by admin; the turn goes on]") {
		t.Fatalf("send after approve: out=%q err=%s", send.out.String(), send.err.String())
	}
	// Decided once; pending lists are empty, --all keeps it.
	if msg := d.fail(exitConflict, "approve", apr); !strings.Contains(msg, apr) {
		t.Fatalf("second approve: %s", msg)
	}
	if out := d.ok("approvals", "ls", ses); !strings.Contains(out, "no approval waits") {
		t.Fatalf("approvals ls after the decision:\n%s", out)
	}
	var all []desk.Approval
	d.json(&all, "approvals", "ls", ses, "--all")
	if len(all) != 1 || all[0].ID != apr || all[0].Status != desk.ApprovalApproved {
		t.Fatalf("approvals ls --all: %+v", all)
	}

	ses = d.scriptSession(ws, execStep("rm -rf /workspace/old"), textStep("I left it."))
	send = d.start("send", ses, "clean up")
	apr = send.await(t, approvalWait)
	var denied desk.Approval
	d.json(&denied, "deny", apr, "--reason", "keep the old files")
	if denied.Status != desk.ApprovalDenied || denied.Reason != "keep the old files" {
		t.Fatalf("deny --json: %+v", denied)
	}
	if code := send.wait(t); code != exitOK {
		t.Fatalf("send exit %d after deny\nstderr: %s", code, send.err.String())
	}
	if send.out.String() != "I left it.\n" || !strings.Contains(send.err.String(), "[■ exec_command") {
		t.Fatalf("send after deny: out=%q err=%s", send.out.String(), send.err.String())
	}
	// An id of another kind is turned into the right command.
	if msg := d.fail(exitUsage, "approve", "inp_01ARZ3NDEKTSV4RRFFQ69G5FAV"); !strings.Contains(msg, "desk answer inp_01ARZ3NDEKTSV4RRFFQ69G5FAV") {
		t.Fatalf("approve of a question id: %s", msg)
	}
}

// TestBinaryAnswer: a blocking question waits; desk inputs ls shows its ids
// and options, wrong answers are refused naming every wrong id, and desk
// answer (an option label in any case) lets the turn go on.
func TestBinaryAnswer(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	ws := d.workspace("questions", true)
	ask := `{"tool_calls":[{"name":"request_user_input","arguments":{"questions":[
		{"id":"colour","question":"Which colour?","options":[{"label":"Red","recommended":true},{"label":"Blue"}]},
		{"id":"size","question":"Which size?","default":"M"}]}}]}`
	ses := d.scriptSession(ws, ask, textStep("Thanks."))
	send := d.start("send", ses, "make a shirt")
	inp := send.await(t, inputWait)
	if !strings.Contains(send.err.String(), "(colour: Which colour?; size: Which size?); answer with desk answer "+inp+" colour=Red size=M]") {
		t.Fatalf("waiting message: %s", send.err.String())
	}
	out := d.ok("inputs", "ls", ses)
	for _, want := range []string{inp, "colour: Which colour?", `"Red" (recommended), "Blue"`, "size: Which size?", `default: "M"`, "answer with: desk answer " + inp + " colour=Red size=M"} {
		if !strings.Contains(out, want) {
			t.Fatalf("inputs ls lacks %q:\n%s", want, out)
		}
	}
	if msg := d.fail(exitInvalid, "answer", inp, "shade=dark", "fit=loose"); !strings.Contains(msg, `"fit", "shade"`) || !strings.Contains(msg, "its questions: colour, size") {
		t.Fatalf("unknown ids: %s", msg)
	}
	d.fail(exitUsage, "answer", inp)
	d.fail(exitUsage, "answer", inp, "colour")
	d.fail(exitUsage, "answer", inp, "--answers", "[1]")
	var res client.InputAnswered
	d.json(&res, "answer", inp, "colour=blue")
	if r := res.InputRequest; r == nil || r.Status != desk.InputAnswered || r.Answers["colour"] != "Blue" || r.Answers["size"] != "M" {
		t.Fatalf("answer --json: %+v", res.InputRequest)
	}
	if code := send.wait(t); code != exitOK || send.out.String() != "Thanks.\n" {
		t.Fatalf("send after answer: exit %d out=%q err=%s", code, send.out.String(), send.err.String())
	}
	if out := d.ok("inputs", "ls", ses); !strings.Contains(out, "no question waits") {
		t.Fatalf("inputs ls after the answer:\n%s", out)
	}
	d.fail(exitConflict, "answer", inp, `{"colour":"Red"}`)

	// A non-blocking question: the turn goes on with the defaults, send
	// says how to answer later, and the answer is queued as a new message.
	ws = d.workspace("later", false)
	ses = d.scriptSession(ws, ask, textStep("Red it is, for now."), textStep("Blue, then."))
	out, errOut, code := d.run("send", ses, "make a shirt")
	m := regexp.MustCompile(`\[asked (inp_[0-9A-Za-z]+); the turn goes on with the defaults, and an answer later becomes a new message: desk answer inp_[0-9A-Za-z]+ colour=Red size=M\]`).FindStringSubmatch(errOut)
	if code != exitOK || out != "Red it is, for now.\n" || m == nil {
		t.Fatalf("send with a non-blocking question: exit %d out=%q err=%s", code, out, errOut)
	}
	out = d.ok("answer", m[1], "colour=Blue")
	if !regexp.MustCompile(`(?m)^answered ` + m[1] + `: colour="Blue" size="M"\nqueued q_[0-9A-Za-z]+: the answers go to the agent as a new message\n$`).MatchString(out) {
		t.Fatalf("answer of a non-blocking question:\n%s", out)
	}
}

// TestBinaryPlan: a plan card waits; approve carries it out, revise gets a
// new card the send also reports, decline stops the turn.
func TestBinaryPlan(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	ws := d.workspace("plans", false)

	ses := d.scriptSession(ws, planStep("Tidy up", "list", "remove"), textStep("Tidied."))
	send := d.start("send", ses, "/plan tidy up")
	pln := send.await(t, planWait)
	if !strings.Contains(send.err.String(), `"Tidy up": 1. list 2. remove; answer with desk plan approve `+pln) {
		t.Fatalf("waiting message: %s", send.err.String())
	}
	if out := d.ok("plan", "approve", pln); out != "approved plan "+pln+" \"Tidy up\"\n" {
		t.Fatalf("plan approve: %q", out)
	}
	if code := send.wait(t); code != exitOK || send.out.String() != "Tidied.\n" {
		t.Fatalf("send after plan approve: exit %d out=%q err=%s", code, send.out.String(), send.err.String())
	}

	ses = d.scriptSession(ws, planStep("First try", "a", "b", "c"), planStep("Second try", "a"), textStep("Done in one step."))
	send = d.start("send", ses, "/plan do it")
	first := send.await(t, planWait)
	d.fail(exitUsage, "plan", "revise", first)
	var revised desk.Plan
	d.json(&revised, "plan", "revise", first, "--notes", "one step is enough")
	if revised.Status != desk.PlanRevised || revised.Notes != "one step is enough" {
		t.Fatalf("plan revise --json: %+v", revised)
	}
	second := send.await(t, regexp.MustCompile(`\[waiting for a decision on plan (pln_[0-9A-Za-z]+) "Second try"`))
	if second == first {
		t.Fatalf("the revised card kept its id %s", first)
	}
	d.ok("plan", "approve", second)
	if code := send.wait(t); code != exitOK || send.out.String() != "Done in one step.\n" {
		t.Fatalf("send after revise and approve: exit %d out=%q err=%s", code, send.out.String(), send.err.String())
	}

	ses = d.scriptSession(ws, planStep("Risky", "drop everything"), textStep("never said"))
	send = d.start("send", ses, "/plan be bold")
	pln = send.await(t, planWait)
	if out := d.ok("plan", "decline", pln); !strings.Contains(out, "declined plan "+pln) {
		t.Fatalf("plan decline: %q", out)
	}
	code := send.wait(t)
	if strings.Contains(send.out.String(), "never said") {
		t.Fatalf("the turn went on after the decline: %q", send.out.String())
	}
	if code != exitOK {
		t.Fatalf("send after decline: exit %d err=%s", code, send.err.String())
	}
	d.fail(exitConflict, "plan", "approve", pln)
}

// TestBinarySendQueuedBehindWaitingTurn: a message sent while another turn
// waits for approval says it is queued, where, and what the turn ahead waits
// on; once that is approved both turns stream to the end.
func TestBinarySendQueuedBehindWaitingTurn(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	ws := d.workspace("queue", false)
	ses := d.scriptSession(ws, execStep("echo first"), textStep("First done."), textStep("Second done."))
	first := d.start("send", ses, "first")
	apr := first.await(t, approvalWait)

	second := d.start("send", ses, "second")
	exe := second.await(t, regexp.MustCompile(`\[queued q_[0-9A-Za-z]+ at position 1 behind the running execution (exe_[0-9A-Za-z]+); your message runs after it\]`))
	want := "[ahead of your message, " + exe + " is waiting for approval " + apr + " to run `echo first`"
	second.await(t, regexp.MustCompile(regexp.QuoteMeta(want)))
	if second.out.String() != "" {
		t.Fatalf("the queued send printed the other turn's reply: %q", second.out.String())
	}

	d.ok("approve", apr)
	if code := first.wait(t); code != exitOK || first.out.String() != "First done.\n" {
		t.Fatalf("first send: exit %d out=%q err=%s", code, first.out.String(), first.err.String())
	}
	if code := second.wait(t); code != exitOK || second.out.String() != "Second done.\n" {
		t.Fatalf("second send: exit %d out=%q err=%s", code, second.out.String(), second.err.String())
	}
	if !regexp.MustCompile(`\[exe_[0-9A-Za-z]+ started: your message is being answered\]`).MatchString(second.err.String()) {
		t.Fatalf("second send never said its turn started: %s", second.err.String())
	}
}

// TestBinaryExitStatuses: every status of the documented table, each from
// a real case through the binary, and the table in the docs is the one the
// code has.
func TestBinaryExitStatuses(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{Env: []string{"DESK_MAX_ARTIFACT_BYTES=4096"}})
	ws := d.workspace("exits", false)
	plain := d.scriptSession(ws, textStep("hi"))

	// 0: done.
	if out := d.ok("send", plain, "hello"); out != "hi\n" {
		t.Fatalf("send: %q", out)
	}
	// 1: anything else — here the local output file cannot be made.
	d.fail(exitError, "workspace", "export", ws, "-o", filepath.Join(t.TempDir(), "no-such-dir", "ws.tar"))
	// 2: usage.
	d.fail(exitUsage, "aprove", "apr_01ARZ3NDEKTSV4RRFFQ69G5FAV") // mistyped
	d.fail(exitUsage, "approve")
	d.fail(exitUsage, "send", plain, "x", "--timeout", "-1s")
	// 3: invalid — a file whose name lies about its bytes (an answer with
	// an id the question lacks is in TestBinaryAnswer).
	fake := filepath.Join(t.TempDir(), "fake.png")
	os.WriteFile(fake, []byte("hello"), 0o644)
	d.fail(exitInvalid, "artifact", "put", plain, fake)
	// 4: unauthorized.
	d.fail(exitAuth, "--token", "wrong", "approvals", "ls", plain)
	// 5: not found.
	d.fail(exitNotFound, "approve", "apr_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	d.fail(exitNotFound, "plan", "approve", "pln_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	d.fail(exitNotFound, "inputs", "ls", "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	// 6: conflict — a decided approval, in TestBinaryApproveDeny, and a
	// second decision here.
	waits := d.scriptSession(ws, execStep("echo wait"), textStep("ok"))
	send := d.start("send", waits, "go")
	apr := send.await(t, approvalWait)
	// 10: waiting — --timeout passes while the turn waits for a person;
	// the message names what it waits on and the way to answer.
	msg := d.fail(exitWaiting, "send", waits, "again", "--timeout", "2s")
	if !strings.Contains(msg, "your message") || !strings.Contains(msg, "waiting for approval "+apr) || !strings.Contains(msg, "desk approve "+apr) {
		t.Fatalf("send --timeout while queued behind a waiting turn: %s", msg)
	}
	// 9: interrupted.
	var xs []desk.Execution
	d.json(&xs, "exec", "ls", waits)
	var running string
	for _, x := range xs {
		if desk.PhaseActive(x.Phase) {
			running = x.ID
		}
	}
	// The execution id alone names the turn (issue 28: no session needed).
	d.ok("interrupt", running)
	if code := send.wait(t); code != exitInterrupted || !strings.Contains(send.err.String(), "interrupted") {
		t.Fatalf("send of an interrupted turn: exit %d, stderr %s", code, send.err.String())
	}
	d.fail(exitConflict, "deny", apr)

	// 10 again, the turn itself waiting.
	waits2 := d.scriptSession(ws, execStep("echo later"), textStep("ok"))
	msg = d.fail(exitWaiting, "send", waits2, "go", "--timeout", "8s")
	if !strings.Contains(msg, "the turn exe_") || !strings.Contains(msg, "is waiting for approval apr_") {
		t.Fatalf("send --timeout while the turn waits: %s", msg)
	}
	// 7: unreachable.
	d.fail(exitUnavailable, "--server", "127.0.0.1:1", "approvals", "ls", plain)
	// 8: turn failed — the script has no step left.
	if msg := d.fail(exitTurnFailed, "send", plain, "once more"); !strings.Contains(msg, "failed") {
		t.Fatalf("failed turn: %s", msg)
	}
	// 11: too large.
	big := filepath.Join(t.TempDir(), "big.txt")
	os.WriteFile(big, []byte(strings.Repeat("x", 8192)), 0o644)
	d.fail(exitTooLarge, "artifact", "put", plain, big)
	// 12: refused background start.
	out, code := run(t, cleanEnv("DESK_HOME="+t.TempDir(), "CLAUDECODE=1"), "start")
	if code != exitRefused || !strings.Contains(out, "refusing") {
		t.Fatalf("start in a managed environment: exit %d\n%s", code, out)
	}

	// The documented table lists exactly these statuses.
	doc, err := os.ReadFile("../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\d+) \| ([^|]+) \|`)
	got := map[int]string{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		var n int
		fmt.Sscan(m[1], &n)
		got[n] = strings.TrimSpace(m[2])
	}
	want := map[int]string{exitOK: "done", exitError: "anything else", exitUsage: "usage", exitInvalid: "invalid",
		exitAuth: "unauthorized or forbidden", exitNotFound: "not found", exitConflict: "conflict or busy",
		exitUnavailable: "unreachable or unavailable", exitTurnFailed: "turn failed", exitInterrupted: "interrupted",
		exitWaiting: "waiting", exitTooLarge: "too large or disk full", exitRefused: "refused background start"}
	if len(got) != len(want) {
		t.Fatalf("docs/troubleshooting.md lists statuses %v, want %v", got, want)
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("docs/troubleshooting.md: status %d is %q, the code's is %q", n, got[n], w)
		}
	}
}
