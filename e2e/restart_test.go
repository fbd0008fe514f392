package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlite"
)

// The restart tests run the real desk binary against a model server on
// loopback, stop it (SIGTERM) or kill it (SIGKILL) while a turn waits on a
// person, start it again on the same DESK_HOME, answer, and check that the
// turn completes without the model being asked again for the step that
// asked, and that the API, `desk exec show` and the web UI show the wait
// after the restart as they do a live one.
//
// chatModel wraps the strict Chat Completions server of
// internal/modeltest/strict (every request desk sends is checked against
// OpenAI's published request schema and the conversation rules, so a
// resumed turn must send a request the real API accepts) with a script
// and a record of the turn requests, kept apart from title requests.
type chatModel struct {
	t      *testing.T
	srv    *strict.Server
	script func(req chatRequest) chatAnswer
	// release ends the requests that hold (a model call in flight, a
	// hanging title call) when the test ends.
	release chan struct{}

	mu     sync.Mutex
	turns  []chatRequest // turn requests, in order, as they arrive
	titles int           // title requests
	// holdTitles, when set, makes title requests hang.
	holdTitles bool
}

// chatRequest is one accepted Chat Completions request.
type chatRequest struct{ *strict.ChatRequest }

// last is the request's last message.
func (r chatRequest) last() strict.ChatMessage { return r.Messages[len(r.Messages)-1] }

// toolResult is the text of the result of the tool call named callID.
func (r chatRequest) toolResult(callID string) (string, bool) {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == callID {
			return m.Text, true
		}
	}
	return "", false
}

// chatAnswer is one streamed answer: text, or tool calls. Hold makes the
// request hang until the test ends (a model call in flight).
type chatAnswer struct {
	Text  string
	Calls []chatCall
	Hold  bool
}

type chatCall struct {
	ID, Name string
	Args     any
}

func newChatModel(t *testing.T, script func(req chatRequest) chatAnswer) *chatModel {
	m := &chatModel{t: t, script: script, release: make(chan struct{}), srv: strict.NewOpenAI(t)}
	m.srv.Respond(m.respond)
	t.Cleanup(func() {
		close(m.release)
		for _, r := range m.srv.Rejected() {
			t.Errorf("the strict server refused a request of desk: %d %s", r.Status, r.Error)
		}
	})
	return m
}

// spec is the DESK_MODEL of the server.
func (m *chatModel) spec() string { return "openai-compatible:" + m.srv.BaseURL() + "#restart-model" }

func (m *chatModel) respond(r strict.Request) strict.Reply {
	req := chatRequest{r.Chat}
	title := len(req.Messages) > 0 && req.Messages[0].Role == "system" && strings.Contains(req.Messages[0].Text, "Write a title")
	m.mu.Lock()
	hold := title && m.holdTitles
	if title {
		m.titles++
	} else {
		m.turns = append(m.turns, req)
	}
	m.mu.Unlock()
	usage := strict.Usage{Input: 100, Output: 10}
	if title {
		if hold {
			<-m.release
		}
		return strict.Reply{Text: "Restarted turns", Usage: usage}
	}
	ans := m.script(req)
	if ans.Hold {
		<-m.release
	}
	reply := strict.Reply{Text: ans.Text, Usage: usage}
	for _, c := range ans.Calls {
		args, _ := json.Marshal(c.Args)
		reply.ToolCalls = append(reply.ToolCalls, strict.Call{ID: c.ID, Name: c.Name, Arguments: string(args)})
	}
	return reply
}

// requests returns the turn requests so far.
func (m *chatModel) requests() []chatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]chatRequest(nil), m.turns...)
}

func (m *chatModel) titleRequests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.titles
}

// asking answers the user's message with calls and the request that
// carries their results with a reply quoting the first result.
func asking(calls ...chatCall) func(req chatRequest) chatAnswer {
	return func(req chatRequest) chatAnswer {
		if req.last().Role == "user" {
			return chatAnswer{Calls: calls}
		}
		res, _ := req.toolResult(calls[0].ID)
		return chatAnswer{Text: "finished after: " + res}
	}
}

// restartToken is the admin token of the desks these tests restart, the
// same across restarts.
const restartToken = "restart-admin-token"

// call makes an API request and decodes the answer into out (if not nil).
func (d *Desk) call(method, path string, body, out any) int {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+d.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			d.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		d.t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// webPage fetches a page of the web UI, signed in with the admin token.
func (d *Desk) webPage(path string) string {
	d.t.Helper()
	req, _ := http.NewRequest("GET", d.URL+path, nil)
	req.AddCookie(webSignIn(d.t, d.URL, d.Token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		d.t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	return string(b)
}

func (d *Desk) execution(id string) *desk.Execution {
	var x desk.Execution
	d.call("GET", "/v1/executions/"+id, nil, &x)
	return &x
}

func (d *Desk) commands(ses string) []*desk.Command {
	var v struct{ Messages []*desk.Message }
	d.call("GET", "/v1/sessions/"+ses+"/messages", nil, &v)
	var out []*desk.Command
	for _, m := range v.Messages {
		out = append(out, m.Commands...)
	}
	return out
}

// restartWait bounds every wait of these tests: generous, since the
// machine may be loaded.
const restartWait = 90 * time.Second

// settled waits for the execution to settle.
func (d *Desk) settled(id string) *desk.Execution {
	d.t.Helper()
	var x *desk.Execution
	testwait.Until(d.t, restartWait, func() bool {
		x = d.execution(id)
		return x.Terminal()
	}, "execution "+id+" to settle")
	return x
}

// restartWorld is one desk home with a workspace and a session on the
// model server.
type restartWorld struct {
	t     *testing.T
	home  string
	env   []string
	model *chatModel
	ws    desk.Workspace
	ses   desk.Session
}

func newRestartWorld(t *testing.T, model *chatModel, settings map[string]any, env ...string) (*restartWorld, *Desk) {
	t.Helper()
	w := &restartWorld{t: t, home: t.TempDir(), model: model, env: append([]string{"DESK_MODEL=" + model.spec(), "OPENAI_COMPATIBLE_API_KEY=test-key"}, env...)}
	d := w.start()
	d.call("POST", "/v1/workspaces", map[string]string{"name": "restarts"}, &w.ws)
	d.call("PATCH", "/v1/workspaces/"+w.ws.ID+"/agent", settings, nil)
	d.call("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{}, &w.ses)
	return w, d
}

func (w *restartWorld) start() *Desk {
	return startDesk(w.t, deskOpts{Home: w.home, Token: restartToken, Env: w.env})
}

func (w *restartWorld) send(d *Desk, text string) string {
	w.t.Helper()
	var res desk.SubmitResult
	d.call("POST", "/v1/sessions/"+w.ses.ID+"/messages", map[string]string{"text": text}, &res)
	if res.Item == nil {
		w.t.Fatalf("submit: %+v", res)
	}
	return res.Item.ID
}

// item is the session's queue row id.
func (w *restartWorld) item(d *Desk, id string) *desk.QueueItem {
	w.t.Helper()
	var v struct{ Items []*desk.QueueItem }
	d.call("GET", "/v1/sessions/"+w.ses.ID+"/queue?all=true", nil, &v)
	for _, it := range v.Items {
		if it.ID == id {
			return it
		}
	}
	w.t.Fatalf("no queue row %s", id)
	return nil
}

// executionOf waits for the queue row's execution.
func (w *restartWorld) executionOf(d *Desk, item string) string {
	w.t.Helper()
	var id string
	testwait.Until(w.t, restartWait, func() bool {
		id = w.item(d, item).ExecutionID
		return id != ""
	}, "row "+item+" to be taken")
	return id
}

var signals = []struct {
	name string
	sig  syscall.Signal
}{{"SIGTERM", syscall.SIGTERM}, {"kill-9", syscall.SIGKILL}}

// checkWaiting checks, after the restart, that the execution is the same
// one, still running (the phase a live wait shows), with the command
// waiting on a person as the API and the CLI show it.
func checkWaiting(t *testing.T, d *Desk, exe string) {
	t.Helper()
	x := d.execution(exe)
	if x.Phase != desk.PhaseRunning {
		t.Fatalf("execution after the restart: %s (%s), want running", x.Phase, x.Reason)
	}
	var shown desk.Execution
	d.json(&shown, "exec", "show", exe)
	if shown.Phase != desk.PhaseRunning || shown.ID != exe {
		t.Fatalf("desk exec show after the restart: %+v", shown)
	}
	found := false
	for _, e := range x.Events {
		if e.Type == "execution.resumed" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no execution.resumed event after the restart: %+v", x.Events)
	}
}

// TestRestartApprovalWait: a turn waiting for an approval survives SIGTERM
// and kill -9; approved after the restart, the command runs and the turn
// completes, with two model requests in all (the asking step is not sent
// again). A follow-up sent while it waits queues behind it.
func TestRestartApprovalWait(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	for _, s := range signals {
		t.Run(s.name, func(t *testing.T) { approvalRestart(t, s.sig) })
	}
}

// TestRestartApprovalWaitPostgres is the kill -9 case on Postgres.
func TestRestartApprovalWaitPostgres(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	approvalRestart(t, syscall.SIGKILL, "DESK_POSTGRES="+pgtest.DSN(t))
}

func approvalRestart(t *testing.T, sig syscall.Signal, env ...string) {
	model := newChatModel(t, func(req chatRequest) chatAnswer {
		if req.last().Role == "user" && strings.Contains(req.last().Text, "follow-up") {
			return chatAnswer{Text: "follow-up answered"}
		}
		return asking(chatCall{ID: "call_approve", Name: "exec_command", Args: map[string]string{"command": "echo approved-after-restart"}})(req)
	})
	w, d := newRestartWorld(t, model, map[string]any{"approval_mode": "user"}, env...)
	exe := w.executionOf(d, w.send(d, "run the command"))
	var pend struct{ Approvals []*desk.Approval }
	testwait.Until(t, restartWait, func() bool {
		d.call("GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &pend)
		return len(pend.Approvals) == 1
	}, "the approval request")
	ap := pend.Approvals[0]
	d.End(sig)

	d = w.start()
	checkWaiting(t, d, exe)
	d.call("GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &pend)
	if len(pend.Approvals) != 1 || pend.Approvals[0].ID != ap.ID || pend.Approvals[0].Status != desk.ApprovalPending {
		t.Fatalf("pending approvals after the restart: %+v (want %s)", pend.Approvals, ap.ID)
	}
	cmds := d.commands(w.ses.ID)
	if len(cmds) != 1 || cmds[0].Status != desk.CommandWaiting {
		t.Fatalf("commands after the restart: %+v", cmds)
	}
	// The web UI shows the approval card, as for a live wait.
	if page := d.webPage("/w/" + w.ws.ID + "/s/" + w.ses.ID); !strings.Contains(page, `id="apr-`+ap.ID+`"`) {
		t.Fatalf("the session page after the restart has no card for %s", ap.ID)
	}
	// One execution per surface: a follow-up queues behind the
	// waiting turn.
	follow := w.send(d, "a follow-up")
	testwait.Never(t, time.Second, func() bool { return w.item(d, follow).Status != desk.QueueStatusQueued },
		"the follow-up left the queue while the turn waits")

	d.call("POST", "/v1/approvals/"+ap.ID, map[string]string{"decision": "approve"}, nil)
	x := d.settled(exe)
	if x.Phase != desk.PhaseEnded {
		t.Fatalf("the turn after approval: %s (%s)", x.Phase, x.Reason)
	}
	cmds = d.commands(w.ses.ID)
	if cmds[0].Status != desk.CommandSucceeded || strings.TrimSpace(cmds[0].Output) != "approved-after-restart" {
		t.Fatalf("the approved command: %+v", cmds[0])
	}
	fx := d.settled(w.executionOf(d, follow))
	if fx.Phase != desk.PhaseEnded || !fx.StartedAt.After(*x.FinishedAt) && !fx.StartedAt.Equal(*x.FinishedAt) {
		t.Fatalf("the follow-up: %+v (the turn finished %v)", fx, x.FinishedAt)
	}
	reqs := model.requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests: %d, want 3 (ask, after the result, the follow-up)", len(reqs))
	}
	if res, ok := reqs[1].toolResult("call_approve"); !ok || !strings.Contains(res, "approved-after-restart") {
		t.Fatalf("the second request's tool result: %q", res)
	}
	d.Stop()
}

// TestRestartInputWait: a blocking request_user_input survives SIGTERM and
// kill -9; answered after the restart, the answer reaches the model in the
// step after the one that asked, which is not sent again. Its deadline is
// the one set before the restart.
func TestRestartInputWait(t *testing.T) {
	t.Parallel()
	question := map[string]any{"questions": []map[string]any{{"id": "color", "question": "Which color?",
		"options": []map[string]any{{"label": "red", "recommended": true}, {"label": "blue"}}}}}
	for _, s := range signals {
		t.Run(s.name, func(t *testing.T) {
			model := newChatModel(t, asking(chatCall{ID: "call_ask", Name: "request_user_input", Args: question}))
			w, d := newRestartWorld(t, model, map[string]any{"blocking_input": true}, "DESK_INPUT_WAIT=10m")
			exe := w.executionOf(d, w.send(d, "ask me"))
			r := waitQuestion(t, w, d)
			if r.Deadline == nil || r.Deadline.Before(time.Now().Add(9*time.Minute)) {
				t.Fatalf("deadline of a blocking request: %v", r.Deadline)
			}
			d.End(s.sig)

			d = w.start()
			checkWaiting(t, d, exe)
			if rs := inputRequests(w, d); len(rs) != 1 || rs[0].Status != desk.InputPending || !rs[0].Deadline.Equal(*r.Deadline) {
				t.Fatalf("the question after the restart: %+v (deadline before %v)", rs, r.Deadline)
			}
			if page := d.webPage("/w/" + w.ws.ID + "/s/" + w.ses.ID); !strings.Contains(page, `id="inp-`+r.ID+`"`) {
				t.Fatalf("the session page after the restart has no card for %s", r.ID)
			}
			d.call("POST", "/v1/input-requests/"+r.ID+"/answer", map[string]any{"answers": map[string]string{"color": "blue"}}, nil)
			x := d.settled(exe)
			if x.Phase != desk.PhaseEnded {
				t.Fatalf("the turn after the answer: %s (%s)", x.Phase, x.Reason)
			}
			reqs := model.requests()
			if len(reqs) != 2 {
				t.Fatalf("model requests: %d, want 2", len(reqs))
			}
			if res, _ := reqs[1].toolResult("call_ask"); !strings.Contains(res, `"blue"`) || !strings.Contains(res, `"defaulted":false`) {
				t.Fatalf("the answer the model got: %q", res)
			}
			d.Stop()
		})
	}
}

// inputRequests lists the session's input requests.
func inputRequests(w *restartWorld, d *Desk) []*desk.InputRequest {
	var rs struct {
		InputRequests []*desk.InputRequest `json:"input_requests"`
	}
	d.call("GET", "/v1/sessions/"+w.ses.ID+"/input-requests", nil, &rs)
	return rs.InputRequests
}

// waitQuestion waits for the session's one input request.
func waitQuestion(t *testing.T, w *restartWorld, d *Desk) *desk.InputRequest {
	t.Helper()
	var rs []*desk.InputRequest
	testwait.Until(t, restartWait, func() bool {
		rs = inputRequests(w, d)
		return len(rs) == 1
	}, "the question")
	return rs[0]
}

// TestRestartInputDeadlinePassed: the deadline of a blocking question
// passes while desk is down; after the restart the defaults stand at once
// (as when the deadline passes live) and the turn completes.
func TestRestartInputDeadlinePassed(t *testing.T) {
	t.Parallel()
	question := map[string]any{"questions": []map[string]any{{"id": "size", "question": "Which size?",
		"options": []map[string]any{{"label": "small", "recommended": true}, {"label": "large"}}}}}
	model := newChatModel(t, asking(chatCall{ID: "call_ask", Name: "request_user_input", Args: question}))
	w, d := newRestartWorld(t, model, map[string]any{"blocking_input": true}, "DESK_INPUT_WAIT=4s")
	exe := w.executionOf(d, w.send(d, "ask me"))
	r := waitQuestion(t, w, d)
	d.Kill()
	// The deadline passes while desk is down: a condition on the clock.
	passed := r.Deadline.Add(500 * time.Millisecond)
	testwait.Until(t, time.Until(passed)+restartWait, func() bool { return time.Now().After(passed) }, "the question's deadline to pass")

	d = w.start()
	x := d.settled(exe)
	if x.Phase != desk.PhaseEnded {
		t.Fatalf("the turn: %s (%s)", x.Phase, x.Reason)
	}
	if rs := inputRequests(w, d); len(rs) != 1 || rs[0].Status != desk.InputDefaulted || rs[0].Answers["size"] != "small" {
		t.Fatalf("the question after its deadline: %+v", rs)
	}
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests: %d, want 2", len(reqs))
	}
	if res, _ := reqs[1].toolResult("call_ask"); !strings.Contains(res, `"defaulted":true`) || !strings.Contains(res, "small") {
		t.Fatalf("the model's result: %q", res)
	}
	d.Stop()
}

// TestRestartPlanWait: a plan card waiting for its decision survives
// SIGTERM and kill -9; approved after the restart, the plan is pinned
// (the next request carries it) and the turn completes.
func TestRestartPlanWait(t *testing.T) {
	t.Parallel()
	plan := map[string]any{"plan": map[string]any{"title": "Survive the restart", "steps": []string{"wait", "continue"}}}
	for _, s := range signals {
		t.Run(s.name, func(t *testing.T) {
			model := newChatModel(t, asking(chatCall{ID: "call_plan", Name: "clarify", Args: plan}))
			w, d := newRestartWorld(t, model, map[string]any{"approval_mode": "user"})
			exe := w.executionOf(d, w.send(d, "/plan do it carefully"))
			var p desk.Plan
			testwait.Until(t, restartWait, func() bool {
				for _, e := range d.execution(exe).Events {
					if e.Type == "plan.proposed" {
						return json.Unmarshal(e.Data, &p) == nil
					}
				}
				return false
			}, "the plan card")
			d.End(s.sig)

			d = w.start()
			checkWaiting(t, d, exe)
			if page := d.webPage("/w/" + w.ws.ID + "/s/" + w.ses.ID); !strings.Contains(page, `id="pln-`+p.ID+`"`) {
				t.Fatalf("the session page after the restart has no card for %s", p.ID)
			}
			d.call("POST", "/v1/plans/"+p.ID+"/approve", nil, nil)
			x := d.settled(exe)
			if x.Phase != desk.PhaseEnded {
				t.Fatalf("the turn after approval: %s (%s)", x.Phase, x.Reason)
			}
			reqs := model.requests()
			if len(reqs) != 2 {
				t.Fatalf("model requests: %d, want 2", len(reqs))
			}
			if res, _ := reqs[1].toolResult("call_plan"); !strings.Contains(res, "approved") {
				t.Fatalf("the plan decision the model got: %q", res)
			}
			pinned := false
			for _, m := range reqs[1].Messages {
				if strings.Contains(m.Text, "Survive the restart") && m.Role != "assistant" && m.Role != "tool" {
					pinned = true
				}
			}
			if !pinned {
				t.Fatal("the approved plan is not pinned in the request after the restart")
			}
			d.Stop()
		})
	}
}

// TestRestartCommandUnknown: a command running when desk is killed ends
// unknown, is not run again after the restart, and the execution is
// interrupted (owner-restarted); the next turn's model request carries a
// result that says so.
func TestRestartCommandUnknown(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	model := newChatModel(t, func(req chatRequest) chatAnswer {
		if strings.Contains(req.last().Text, "next message") {
			return chatAnswer{Text: "noted"}
		}
		return chatAnswer{Calls: []chatCall{{ID: "call_sleep", Name: "exec_command", Args: map[string]string{"command": "echo run >> \"$DESK_ARTIFACTS/runs.txt\"; sleep 30"}}}}
	})
	w, d := newRestartWorld(t, model, map[string]any{"approval_mode": "full-access"})
	exe := w.executionOf(d, w.send(d, "sleep a while"))
	var marker string
	testwait.Until(t, restartWait, func() bool {
		cmds := d.commands(w.ses.ID)
		if len(cmds) == 1 && cmds[0].Status == desk.CommandRunning {
			marker = filepath.Join(layout.Home{Root: w.home}.Abs(w.ws.ID, layout.SessionRel(w.ses.Actor, w.ses.ID)), "runs.txt")
			b, _ := os.ReadFile(marker)
			return string(b) == "run\n"
		}
		return false
	}, "the command to run")
	d.Kill()

	d = w.start()
	x := d.settled(exe)
	if x.Phase != desk.PhaseInterrupted || x.Reason != "owner-restarted" {
		t.Fatalf("the execution after the crash: %s (%s)", x.Phase, x.Reason)
	}
	// Watched for as long as running it again would take.
	testwait.Never(t, 2*time.Second, func() bool {
		b, _ := os.ReadFile(marker)
		return string(b) != "run\n" || len(model.requests()) != 1
	}, "the interrupted command ran again or its turn was re-sent")
	cmds := d.commands(w.ses.ID)
	if len(cmds) != 1 || cmds[0].Status != desk.CommandUnknown || cmds[0].FinishedAt == nil || !strings.Contains(cmds[0].Error, "outcome unknown") {
		t.Fatalf("the command after the crash: %+v", cmds)
	}
	if b, _ := os.ReadFile(marker); string(b) != "run\n" {
		t.Fatalf("the command ran again: %q", b)
	}
	if n := len(model.requests()); n != 1 {
		t.Fatalf("model requests: %d, want 1 (the interrupted turn is never re-sent)", n)
	}
	// The next turn starts fresh; the dangling call has a result that
	// tells the model its outcome is unknown.
	next := d.settled(w.executionOf(d, w.send(d, "next message")))
	if next.Phase != desk.PhaseEnded {
		t.Fatalf("the next turn: %s (%s)", next.Phase, next.Reason)
	}
	reqs := model.requests()
	if res, ok := reqs[len(reqs)-1].toolResult("call_sleep"); !ok || !strings.Contains(res, "outcome unknown") {
		t.Fatalf("the next request's result for the interrupted call: %q %v", res, ok)
	}
	d.Stop()
}

// TestRestartTitleJob: a title job in flight when desk is killed is
// retried once at the next start; a session renamed meanwhile keeps its
// name.
func TestRestartTitleJob(t *testing.T) {
	t.Parallel()
	model := newChatModel(t, func(chatRequest) chatAnswer { return chatAnswer{Text: "hello"} })
	model.holdTitles = true
	w, d := newRestartWorld(t, model, map[string]any{})
	d.settled(w.executionOf(d, w.send(d, "a conversation about restarts")))
	testwait.Until(t, restartWait, func() bool { return model.titleRequests() == 1 }, "the title request")
	// A second session, renamed by a person while its title job hangs.
	var other desk.Session
	d.call("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{}, &other)
	var res desk.SubmitResult
	d.call("POST", "/v1/sessions/"+other.ID+"/messages", map[string]string{"text": "another one"}, &res)
	testwait.Until(t, restartWait, func() bool { return model.titleRequests() == 2 }, "the second title request")
	d.call("PATCH", "/v1/sessions/"+other.ID, map[string]string{"title": "Named by hand"}, nil)
	d.Kill()

	model.mu.Lock()
	model.holdTitles = false
	model.mu.Unlock()
	d = w.start()
	var x desk.Session
	testwait.Until(t, restartWait, func() bool {
		d.call("GET", "/v1/sessions/"+w.ses.ID, nil, &x)
		return x.Title != ""
	}, "the retried title")
	if x.Title != "Restarted turns" {
		t.Fatalf("title after the retry: %q", x.Title)
	}
	d.call("GET", "/v1/sessions/"+other.ID, nil, &x)
	if x.Title != "Named by hand" {
		t.Fatalf("the renamed session's title: %q", x.Title)
	}
	// The job is gone: another restart asks for no title.
	n := model.titleRequests()
	d.Stop()
	d = w.start()
	testwait.Never(t, time.Second, func() bool { return model.titleRequests() != n }, "a title request after a clean restart")
	if model.titleRequests() != n {
		t.Fatalf("title requests after a clean restart: %d, want %d", model.titleRequests(), n)
	}
	d.Stop()
}

// TestRestartReadOnlyRerun: in a step that waits for an approval, calls
// that were running when desk died are settled by their tool's
// declaration: a read-only one (list_files) runs again, any other
// (write_file) ends unknown and the model is told so; the gated call runs
// once approved, and the model is asked once more in all.
func TestRestartReadOnlyRerun(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	calls := []chatCall{
		{ID: "call_exec", Name: "exec_command", Args: map[string]string{"command": "echo gated"}},
		{ID: "call_list", Name: "list_files", Args: map[string]string{"path": "/"}},
		{ID: "call_write", Name: "write_file", Args: map[string]string{"path": "/scratch/note.txt", "content": "x"}},
	}
	model := newChatModel(t, asking(calls...))
	w, d := newRestartWorld(t, model, map[string]any{"approval_mode": "user"})
	exe := w.executionOf(d, w.send(d, "three things"))
	testwait.Until(t, restartWait, func() bool {
		done := 0
		for _, c := range d.commands(w.ses.ID) {
			if c.Status == desk.CommandWaiting || c.Status == desk.CommandSucceeded {
				done++
			}
		}
		return done == 3
	}, "the approval and the other calls' results")
	d.Kill()

	// Make the record say what a crash while they ran leaves: running,
	// with no result.
	st, err := sqlite.Open(context.Background(), layout.Home{Root: w.home}.DB())
	if err != nil {
		t.Fatal(err)
	}
	cs, err := st.ListCommands(context.Background(), []string{exe})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.Tool != "exec_command" {
			c.Status, c.Result, c.FinishedAt, c.Output, c.Facts = desk.CommandRunning, nil, nil, "", nil
			if err := st.UpdateCommand(context.Background(), c); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()

	d = w.start()
	checkWaiting(t, d, exe)
	var pend struct{ Approvals []*desk.Approval }
	d.call("GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &pend)
	if len(pend.Approvals) != 1 {
		t.Fatalf("pending approvals after the restart: %+v", pend.Approvals)
	}
	d.call("POST", "/v1/approvals/"+pend.Approvals[0].ID, map[string]string{"decision": "approve"}, nil)
	if x := d.settled(exe); x.Phase != desk.PhaseEnded {
		t.Fatalf("the turn: %s (%s)", x.Phase, x.Reason)
	}
	status := map[string]string{}
	for _, c := range d.commands(w.ses.ID) {
		status[c.Tool] = c.Status
	}
	if status["exec_command"] != desk.CommandSucceeded || status["list_files"] != desk.CommandSucceeded || status["write_file"] != desk.CommandUnknown {
		t.Fatalf("statuses after the restart: %v", status)
	}
	reqs := model.requests()
	if len(reqs) != 2 {
		t.Fatalf("model requests: %d, want 2", len(reqs))
	}
	if res, _ := reqs[1].toolResult("call_write"); !strings.Contains(res, "interrupted: outcome unknown") {
		t.Fatalf("the write's result: %q", res)
	}
	if res, _ := reqs[1].toolResult("call_list"); strings.Contains(res, "interrupted") || !strings.Contains(res, "scratch") {
		t.Fatalf("the listing's result: %q", res)
	}
	if res, _ := reqs[1].toolResult("call_exec"); !strings.Contains(res, "gated") {
		t.Fatalf("the approved command's result: %q", res)
	}
	d.Stop()
}

// TestRestartModelCallInFlight: a turn whose model call was in flight when
// desk was killed is interrupted (owner-restarted) and its request is never
// sent again.
func TestRestartModelCallInFlight(t *testing.T) {
	t.Parallel()
	model := newChatModel(t, func(chatRequest) chatAnswer { return chatAnswer{Hold: true} })
	w, d := newRestartWorld(t, model, map[string]any{})
	exe := w.executionOf(d, w.send(d, "think hard"))
	testwait.Until(t, restartWait, func() bool { return len(model.requests()) == 1 }, "the model call")
	d.Kill()

	d = w.start()
	x := d.settled(exe)
	if x.Phase != desk.PhaseInterrupted || x.Reason != "owner-restarted" {
		t.Fatalf("the execution after the crash: %s (%s)", x.Phase, x.Reason)
	}
	testwait.Never(t, 2*time.Second, func() bool { return len(model.requests()) != 1 }, "the interrupted model call was sent again")
	if n := len(model.requests()); n != 1 {
		t.Fatalf("model requests: %d, want 1", n)
	}
	d.Stop()
}

// freezeIdle stops process d (SIGSTOP) at a moment it holds no SQLite
// write lock on db: frozen inside a write (a heartbeat, a group commit) it
// would hold the lock, and the peer would wait out its busy timeout instead
// of taking over, which is SQLite's nature, not the takeover's. On Postgres
// (no db file) one stop is enough.
func freezeIdle(t *testing.T, d *Desk, db string) {
	t.Helper()
	frozen := testwait.Poll(10*time.Second, func() bool {
		if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(db); err != nil || writable(t, db) {
			return true
		}
		if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		return false
	})
	if !frozen {
		t.Fatal("the process always held the database's write lock when stopped")
	}
}

// writable reports whether a write transaction on db can start at once.
func writable(t *testing.T, db string) bool {
	t.Helper()
	conn, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, err := conn.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		return false
	}
	_, _ = c.ExecContext(t.Context(), "ROLLBACK")
	return true
}

// TestRestartTakeoverByPeer: a desk process that stops answering (frozen
// past the owner TTL) while its turn waits for an approval is taken for
// dead by a peer on the same database, which adopts the execution. When
// the frozen process wakes, it lets go without withdrawing the approval,
// and the approved command runs once, in the peer.
func TestRestartTakeoverByPeer(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working sandbox here: %v", err)
	}
	model := newChatModel(t, asking(chatCall{ID: "call_peer", Name: "exec_command", Args: map[string]string{"command": "echo ran-once"}}))
	// Two processes on one home on purpose (one server per home otherwise).
	w, a := newRestartWorld(t, model, map[string]any{"approval_mode": "user"}, sharedHomeEnv+"=1")
	exe := w.executionOf(a, w.send(a, "run it"))
	var pend struct{ Approvals []*desk.Approval }
	testwait.Until(t, restartWait, func() bool {
		a.call("GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &pend)
		return len(pend.Approvals) == 1
	}, "the approval request")
	ap := pend.Approvals[0]
	ownerA := a.execution(exe).Owner
	freezeIdle(t, a, layout.Home{Root: w.home}.DB())
	b := w.start()
	testwait.Until(t, restartWait, func() bool { return b.execution(exe).Owner != ownerA }, "the peer to adopt the execution")
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The woken process notices it lost the execution within a poll; it
	// must not touch the approval meanwhile.
	testwait.Never(t, 3*time.Second, func() bool {
		b.call("GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &pend)
		return len(pend.Approvals) != 1 || pend.Approvals[0].ID != ap.ID || b.execution(exe).Terminal()
	}, "the approval or its execution changed after the old owner woke")
	b.call("GET", "/v1/sessions/"+w.ses.ID+"/approvals?pending=true", nil, &pend)
	if len(pend.Approvals) != 1 || pend.Approvals[0].ID != ap.ID {
		t.Fatalf("the approval after the takeover: %+v", pend.Approvals)
	}
	b.call("POST", "/v1/approvals/"+ap.ID, map[string]string{"decision": "approve"}, nil)
	if x := b.settled(exe); x.Phase != desk.PhaseEnded {
		t.Fatalf("the turn: %s (%s)", x.Phase, x.Reason)
	}
	cmds := b.commands(w.ses.ID)
	if len(cmds) != 1 || cmds[0].Status != desk.CommandSucceeded || strings.TrimSpace(cmds[0].Output) != "ran-once" {
		t.Fatalf("the command: %d records, first %+v", len(cmds), *cmds[0])
	}
	if n := len(model.requests()); n != 2 {
		t.Fatalf("model requests: %d, want 2", n)
	}
	a.Stop()
	b.Stop()
}
