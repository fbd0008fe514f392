package agui

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/desk-runtime/desk"
)

// Services are what a run reads and acts through; each is the door-facing
// service the other doors use, so visibility and every rule hold here as
// there.
type Services struct {
	Exec         desk.ExecutionService
	Conversation desk.ConversationService
	Sessions     desk.SessionService
	Artifacts    desk.ArtifactService
}

// Emit sends one event. id is its place in the run's stream (its SSE id);
// zero marks the framing every connection opens with, which is no place.
type Emit func(id int64, ev Event) error

// perEvent is how many AG-UI events one desk event may become: an event's
// stream id is its desk seq times perEvent plus its index among them, so
// ids grow with the log and Last-Event-ID names an exact place.
const perEvent = 64

// maxSnapshotArtifacts bounds the artifacts listed in a state snapshot.
const maxSnapshotArtifacts = 200

// Run is one AG-UI run, ready to stream.
type Run struct {
	svc     Services
	session *desk.Session
	in      *RunAgentInput
	item    string // the queue row the run's message is, when it submitted one
	exe     string // the execution, once known
	from    int64  // where the log is read from
	cut     int64  // events at or before this seq belong to an earlier run
	after   int64  // the client has every event up to this stream id
	byExec  bool   // the log is read by execution (the execution was known at start)
}

// Start acts on a request before its stream opens: it validates the
// input, answers the interrupts its resume entries name, or submits its
// newest user message (once per runId: the runId is the submit's
// idempotency key). sessionID is the session a per-session route names
// ("" on /v1/agui). after is the client's Last-Event-ID (0: none).
// Errors are ordinary API errors, and a refused request changes nothing.
func Start(ctx context.Context, svc Services, sessionID string, in *RunAgentInput, after int64) (*Run, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	if sessionID != "" && in.ThreadID != sessionID {
		return nil, desk.Errorf(desk.EINVALID, "threadId %q is not this route's session %s", in.ThreadID, sessionID)
	}
	x, err := svc.Sessions.Get(ctx, in.ThreadID)
	if err != nil {
		return nil, err
	}
	r := &Run{svc: svc, session: x, in: in, after: after}
	if len(in.Resume) > 0 {
		if err := r.resume(ctx); err != nil {
			return nil, err
		}
		return r, nil
	}
	text, err := in.prompt()
	if err != nil {
		return nil, err
	}
	if text == "" {
		return nil, desk.Errorf(desk.EINVALID, "messages has no user message: a run needs one, or resume entries that answer interrupts")
	}
	if len(in.Tools) > 0 {
		names := make([]string, len(in.Tools))
		for i, t := range in.Tools {
			names[i] = t.Name
		}
		return nil, desk.Errorf(desk.EINVALID, "tools (%s): desk runs its own tools in its sandbox and cannot call tools the client offers; send the run without them", strings.Join(names, ", "))
	}
	res, err := svc.Exec.Submit(ctx, x.ID, desk.SubmitInput{Text: text, IdempotencyKey: "agui:" + in.RunID, Channel: "agui"})
	if err != nil {
		return nil, err
	}
	r.item = res.Item.ID
	if res.Item.ExecutionID != "" {
		// A repeated runId whose message already started: read its
		// execution from the beginning, so the stream is the same one.
		r.exe, r.byExec = res.Item.ExecutionID, true
		return r, nil
	}
	r.from = res.EventsAfter
	return r, nil
}

// resume answers the interrupts the input's resume entries name; the run
// then continues their execution after the latest of them.
func (r *Run) resume(ctx context.Context) error {
	type answer struct {
		kind, id string
		entry    Resume
	}
	var todo []answer
	for i, e := range r.in.Resume {
		kind, id, seq, err := parseInterruptID(e.InterruptID)
		if err != nil {
			return err
		}
		exe, err := r.interruptExecution(ctx, kind, id)
		if err != nil {
			return desk.Errorf(desk.EINVALID, "resume[%d]: %s", i, desk.ErrorMessage(err))
		}
		if r.exe != "" && exe != r.exe {
			return desk.Errorf(desk.EINVALID, "resume answers interrupts of two executions (%s and %s); answer one run's interrupts at a time", r.exe, exe)
		}
		r.exe = exe
		r.cut = max(r.cut, seq)
		todo = append(todo, answer{kind, id, e})
	}
	// Check every payload before answering any, so a bad entry changes
	// nothing.
	for i, a := range todo {
		if err := checkPayload(a.kind, a.entry); err != nil {
			return desk.Errorf(desk.EINVALID, "resume[%d].payload: %s", i, desk.ErrorMessage(err))
		}
	}
	for _, a := range todo {
		if err := r.answer(ctx, a.kind, a.id, a.entry); err != nil {
			return err
		}
	}
	r.byExec = true
	return nil
}

// interruptExecution finds the execution an interrupt belongs to, in the
// run's session (an id of another session is not found).
func (r *Run) interruptExecution(ctx context.Context, kind, id string) (string, error) {
	switch kind {
	case kindApproval:
		aps, err := r.svc.Conversation.Approvals(ctx, r.session.ID, false)
		if err != nil {
			return "", err
		}
		for _, a := range aps {
			if a.ID == id {
				return a.ExecutionID, nil
			}
		}
	case kindInput:
		reqs, err := r.svc.Conversation.InputRequests(ctx, r.session.ID)
		if err != nil {
			return "", err
		}
		for _, q := range reqs {
			if q.ID == id {
				return q.ExecutionID, nil
			}
		}
	case kindPlan:
		p, err := r.svc.Conversation.Plan(ctx, id)
		if err != nil {
			return "", err
		}
		if p.SessionID == r.session.ID {
			return p.ExecutionID, nil
		}
	}
	return "", desk.Errorf(desk.ENOTFOUND, "%s %s is not in session %s", kind, id, r.session.ID)
}

func checkPayload(kind string, e Resume) error {
	if e.Status == "cancelled" {
		return nil
	}
	switch kind {
	case kindApproval:
		var a ApprovalAnswer
		if err := strictJSON(e.Payload, &a); err != nil {
			return err
		}
		if a.OptionID == "" && a.Decision == "" {
			return desk.Errorf(desk.EINVALID, "an approval is resolved with option_id (one of the interrupt's options) or decision (approve or deny)")
		}
	case kindInput:
		var a InputAnswer
		if err := strictJSON(e.Payload, &a); err != nil {
			return err
		}
	case kindPlan:
		var a PlanAnswer
		if err := strictJSON(e.Payload, &a); err != nil {
			return err
		}
		switch a.Decision {
		case "approve", "decline":
		case "revise":
			if strings.TrimSpace(a.Notes) == "" {
				return desk.Errorf(desk.EINVALID, "revise needs notes saying what to change")
			}
		default:
			return desk.Errorf(desk.EINVALID, "decision %q must be approve, decline or revise", a.Decision)
		}
	}
	return nil
}

func strictJSON(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return desk.Errorf(desk.EINVALID, "payload is required when status is resolved")
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return desk.Errorf(desk.EINVALID, "%v", err)
	}
	return nil
}

// answer decides one interrupt. One decided already (by this run's
// earlier connection, or in another door) is left as it is: the run
// goes on either way.
func (r *Run) answer(ctx context.Context, kind, id string, e Resume) error {
	var err error
	switch kind {
	case kindApproval:
		decision, reason := "deny", "cancelled in an AG-UI client"
		if e.Status == "resolved" {
			var a ApprovalAnswer
			_ = json.Unmarshal(e.Payload, &a)
			decision, reason = a.OptionID, a.Reason
			if decision == "" {
				decision = a.Decision
			}
			if reason == "" {
				reason = "answered in an AG-UI client"
			}
		}
		_, err = r.svc.Conversation.DecideApproval(ctx, id, decision, reason)
	case kindInput:
		var a InputAnswer
		if e.Status == "resolved" {
			_ = json.Unmarshal(e.Payload, &a)
		}
		_, _, err = r.svc.Conversation.AnswerInput(ctx, id, a.Answers)
	case kindPlan:
		a := PlanAnswer{Decision: "decline", Notes: "cancelled in an AG-UI client"}
		if e.Status == "resolved" {
			_ = json.Unmarshal(e.Payload, &a)
		}
		_, err = r.svc.Conversation.DecidePlan(ctx, id, a.Decision, a.Notes)
	}
	if desk.IsCode(err, desk.ECONFLICT) {
		return nil // decided already
	}
	return err
}

// Stream sends the run: RUN_STARTED and a STATE_SNAPSHOT (the framing
// every connection opens with), then the execution's events after the
// client's Last-Event-ID, until the run finishes, fails or is
// interrupted. The execution itself does not depend on the stream: a
// client that goes away leaves it running.
func (r *Run) Stream(ctx context.Context, emit Emit) error {
	started := Event{"type": "RUN_STARTED", "threadId": r.in.ThreadID, "runId": r.in.RunID}
	if r.in.ParentRunID != "" {
		started["parentRunId"] = r.in.ParentRunID
	}
	if err := emit(0, started); err != nil {
		return err
	}
	if err := emit(0, Event{"type": "STATE_SNAPSHOT", "snapshot": r.snapshot(ctx)}); err != nil {
		return err
	}
	f := desk.EventFilter{SessionID: r.session.ID, AfterSeq: r.from}
	if r.byExec {
		f = desk.EventFilter{ExecutionID: r.exe, AfterSeq: 0}
	}
	if err := r.svc.Exec.ScopeEvents(ctx, &f); err != nil {
		return err
	}
	t := newTranslator(r)
	err := r.svc.Exec.Tail(ctx, f, func(desk.EventGap) error { return nil }, func(e *desk.Event) error {
		evs, done := t.event(ctx, e)
		for k, ev := range evs {
			id := e.Seq*perEvent + int64(k) + 1
			if e.Seq <= r.cut || id <= r.after {
				continue
			}
			if err := emit(id, ev); err != nil {
				return err
			}
		}
		if done {
			return errRunDone
		}
		return nil
	})
	if errors.Is(err, errRunDone) {
		return nil
	}
	return err
}

var errRunDone = errors.New("run done")

// snapshot is the state the run starts from: the session, its artifacts
// and the execution when known.
func (r *Run) snapshot(ctx context.Context) map[string]any {
	s := map[string]any{"session_id": r.session.ID, "workspace_id": r.session.WorkspaceID}
	if r.exe != "" {
		s["execution_id"] = r.exe
	}
	if r.svc.Artifacts != nil {
		if as, err := r.svc.Artifacts.List(ctx, r.session.ID); err == nil {
			list := make([]map[string]any, 0, min(len(as), maxSnapshotArtifacts))
			for _, a := range as[:min(len(as), maxSnapshotArtifacts)] {
				list = append(list, map[string]any{"id": a.ID, "name": a.Name, "size": a.Size, "media_type": a.MediaType})
			}
			s["artifacts"] = list
		}
	}
	return s
}
