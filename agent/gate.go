package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/execution"
)

// Decisions (approvals, input answers, plan decisions) are rows in the
// store; a waiting tool call polls its row and is woken early when the
// decision arrives through this process. Another desk process on the same
// database reaches the row the same way, only a poll later.
const decisionPoll = 250 * time.Millisecond

func (a *Agent) wake(id string) {
	if ch, ok := a.waiters.LoadAndDelete(id); ok {
		close(ch.(chan struct{}))
	}
}

// waitFor polls until done reports true, ctx ends, or the deadline passes
// (zero: never). It reports whether done did.
func (a *Agent) waitFor(ctx context.Context, id string, deadline time.Time, done func() (bool, error)) (bool, error) {
	var expire <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expire = t.C
	}
	for {
		ch := make(chan struct{})
		a.waiters.Store(id, ch)
		ok, err := done()
		if err != nil || ok {
			a.waiters.Delete(id)
			return ok, err
		}
		select {
		case <-ch:
		case <-time.After(decisionPoll):
		case <-expire:
			a.waiters.Delete(id)
			return false, nil
		case <-ctx.Done():
			a.waiters.Delete(id)
			return false, ctx.Err()
		}
	}
}

// A wait on a person that ends because desk is shutting down (closing)
// is kept, not withdrawn: it returns execution.ErrSuspended and the next
// desk process continues the turn from it.

// takenOver reports whether another desk process adopted the turn's
// execution (it took this one for dead): the wait is that process's now,
// so this one neither withdraws it nor acts on its answer.
func (tr *turn) takenOver() bool {
	x, err := tr.a.store.GetExecution(context.Background(), tr.t.Execution.ID)
	return err == nil && x.Owner != tr.t.Execution.Owner
}

// gate decides whether a gated call may start, by the workspace's approval
// mode: user (a person decides), auto-review (a reviewer decides and gives
// its reason), full-access (no gate).
func (tr *turn) gate(cmd *desk.Command, summary string) (bool, string, error) {
	switch tr.settings.ApprovalMode {
	case desk.ApprovalModeFullAccess:
		return true, "", nil
	case desk.ApprovalModeAutoReview:
		if tr.t.Resumed {
			// A decision taken before the restart stands.
			if aps, err := tr.a.store.ListApprovals(tr.ctx, tr.x.ID, false); err == nil {
				for _, ap := range aps {
					if ap.CommandID == cmd.ID && ap.DecidedBy == "auto-review" {
						return ap.Status == desk.ApprovalApproved, ap.Reason, nil
					}
				}
			}
		}
		ok, reason := tr.review(cmd.Tool, summary)
		now := desk.Now()
		status := desk.ApprovalApproved
		if !ok {
			status = desk.ApprovalDenied
		}
		ap := &desk.Approval{ID: desk.NewID("apr"), SessionID: tr.x.ID, ExecutionID: tr.t.Execution.ID, CommandID: cmd.ID, Tool: cmd.Tool,
			Summary: summary, Status: status, DecidedBy: "auto-review", Reason: reason, CreatedAt: now, DecidedAt: &now}
		if err := tr.a.store.CreateApproval(tr.ctx, ap); err != nil {
			return false, "", err
		}
		tr.a.archive(tr.x.WorkspaceID, &archive.ApprovalRequested{Envelope: tr.envelope(), ApprovalID: ap.ID, Tool: ap.Tool, Summary: summary})
		tr.a.archive(tr.x.WorkspaceID, &archive.ApprovalResolved{Envelope: tr.envelope(), ApprovalID: ap.ID, Decision: decisionWord(status), Reason: reason})
		return ok, reason, nil
	}
	ap, err := tr.pendingApproval(cmd, summary)
	if err != nil {
		return false, "", err
	}
	var got *desk.Approval
	_, err = tr.a.waitFor(tr.ctx, ap.ID, time.Time{}, func() (bool, error) {
		cur, err := tr.a.store.GetApproval(context.Background(), ap.ID)
		if err != nil {
			return false, err
		}
		got = cur
		return cur.Status != desk.ApprovalPending, nil
	})
	if err != nil {
		if tr.closing() {
			return false, "", execution.ErrSuspended
		}
		if tr.takenOver() {
			return false, "", err
		}
		// Interrupted while waiting: the request is withdrawn.
		if _, derr := tr.a.store.DecideApproval(context.Background(), ap.ID, desk.ApprovalCancelled, "system", "the turn was interrupted", desk.Now()); derr == nil {
			tr.a.archive(tr.x.WorkspaceID, &archive.ApprovalResolved{Envelope: tr.envelope(), ApprovalID: ap.ID, Decision: "cancelled", Reason: "the turn was interrupted"})
		}
		return false, "", err
	}
	if tr.takenOver() {
		return false, "", fmt.Errorf("execution %s was adopted by another desk process; it runs the approved call", tr.t.Execution.ID)
	}
	why := got.Reason
	if why == "" {
		why = "by " + got.DecidedBy
	}
	return got.Status == desk.ApprovalApproved, why, nil
}

// pendingApproval is the approval request of cmd, asked for now; a resumed
// turn finds the one it asked for before the restart (pending, or decided
// meanwhile) instead of asking again.
func (tr *turn) pendingApproval(cmd *desk.Command, summary string) (*desk.Approval, error) {
	if tr.t.Resumed {
		aps, err := tr.a.store.ListApprovals(tr.ctx, tr.x.ID, false)
		if err != nil {
			return nil, err
		}
		for i := len(aps) - 1; i >= 0; i-- {
			if ap := aps[i]; ap.CommandID == cmd.ID && ap.Status != desk.ApprovalCancelled {
				if cmd.Status != desk.CommandWaiting && ap.Status == desk.ApprovalPending {
					cmd.Status = desk.CommandWaiting
					if err := tr.a.store.UpdateCommand(tr.ctx, cmd); err != nil {
						return nil, err
					}
				}
				return ap, nil
			}
		}
	}
	ap := &desk.Approval{ID: desk.NewID("apr"), SessionID: tr.x.ID, ExecutionID: tr.t.Execution.ID, CommandID: cmd.ID, Tool: cmd.Tool,
		Summary: summary, Status: desk.ApprovalPending, CreatedAt: desk.Now()}
	// The request exists before the command says it waits, so whoever
	// sees a waiting command finds what it waits for.
	if err := tr.a.store.CreateApproval(tr.ctx, ap); err != nil {
		return nil, err
	}
	cmd.Status = desk.CommandWaiting
	if err := tr.a.store.UpdateCommand(tr.ctx, cmd); err != nil {
		return nil, err
	}
	tr.a.archive(tr.x.WorkspaceID, &archive.ApprovalRequested{Envelope: tr.envelope(), ApprovalID: ap.ID, Tool: ap.Tool, Summary: summary})
	return ap, nil
}

func decisionWord(status string) string {
	switch status {
	case desk.ApprovalApproved:
		return "approved"
	case desk.ApprovalDenied:
		return "denied"
	}
	return status
}

// review is auto-review: a reviewer model call decides when the session
// has a real model; otherwise the documented rule set does.
func (tr *turn) review(tool, summary string) (bool, string) {
	if tr.spec.Provider != "script" && tr.prov != nil {
		ok, reason, err := tr.modelReview(tool, summary)
		if err == nil {
			return ok, "reviewer: " + reason
		}
		tr.a.log.Warn("auto-review model call failed; using the rule set", "err", err)
	}
	return ruleReview(tool, summary)
}

func (tr *turn) modelReview(tool, summary string) (bool, string, error) {
	req := provider.Request{Model: tr.spec.Model, MaxTokens: 200,
		System:   `You review one action an AI agent wants to take in a sandboxed workspace. Approve ordinary work; deny actions that destroy data wholesale, exfiltrate secrets, or change the host. Answer with one line: APPROVE: <reason> or DENY: <reason>.`,
		Messages: []provider.Message{{Role: provider.RoleUser, Content: fmt.Sprintf("Tool: %s\nAction: %s", tool, summary)}}}
	ctx, cancel := context.WithTimeout(tr.ctx, time.Minute)
	defer cancel()
	resp, err := tr.prov.Stream(ctx, req, func(provider.Event) {})
	if err != nil {
		return false, "", err
	}
	tr.recordReview(resp)
	line := strings.TrimSpace(resp.Text)
	switch {
	case strings.HasPrefix(strings.ToUpper(line), "APPROVE"):
		return true, strings.TrimSpace(strings.TrimPrefix(line[7:], ":")), nil
	case strings.HasPrefix(strings.ToUpper(line), "DENY"):
		return false, strings.TrimSpace(strings.TrimPrefix(line[4:], ":")), nil
	}
	return false, "", fmt.Errorf("unreadable review %q", line)
}

// defaults are the recommended option of each question, or its default.
func defaults(qs []desk.InputQuestion) map[string]string {
	out := map[string]string{}
	for _, q := range qs {
		out[q.ID] = q.Default
		for _, o := range q.Options {
			if o.Recommended {
				out[q.ID] = o.Label
			}
		}
	}
	return out
}

// ask is request_user_input: non-blocking by default (the defaults at
// once; a later answer becomes a request_user_input_answer queue row), or
// blocking per workspace (wait up to InputWait, then the defaults).
func (tr *turn) ask(ctx context.Context, commandID string, qs []desk.InputQuestion) (map[string]string, bool, error) {
	r, err := tr.inputRequest(ctx, commandID, qs)
	if err != nil {
		return nil, false, err
	}
	def := defaults(r.Questions)
	if !r.Blocking {
		return def, true, nil
	}
	// A request recorded before deadlines were kept waits from its start.
	deadline := r.CreatedAt.Add(tr.a.opts.InputWait)
	if r.Deadline != nil {
		deadline = *r.Deadline
	}
	var got *desk.InputRequest
	ok, err := tr.a.waitFor(ctx, r.ID, deadline, func() (bool, error) {
		cur, err := tr.a.store.GetInputRequest(context.Background(), r.ID)
		if err != nil {
			return false, err
		}
		got = cur
		return cur.Status != desk.InputPending, nil
	})
	if err != nil {
		if tr.closing() {
			return nil, false, execution.ErrSuspended
		}
		if tr.takenOver() {
			return nil, false, err
		}
		tr.a.store.AnswerInputRequest(context.Background(), r.ID, desk.InputCancelled, nil, desk.Now())
		return nil, false, err
	}
	if !ok {
		// The deadline passed without an answer: the defaults stand.
		if cur, err := tr.a.store.AnswerInputRequest(context.Background(), r.ID, desk.InputDefaulted, def, desk.Now()); err == nil {
			tr.a.archive(tr.x.WorkspaceID, &archive.UserInputSubmitted{Envelope: tr.envelope(), RequestID: r.ID, Answer: "(no answer: the defaults were used)"})
			return cur.Answers, true, nil
		}
		got, _ = tr.a.store.GetInputRequest(context.Background(), r.ID)
	}
	if got.Status == desk.InputAnswered {
		return got.Answers, false, nil
	}
	return def, true, nil
}

// inputRequest records the questions of the call commandID. A blocking
// request carries its deadline (now plus InputWait), so the timeout
// survives a restart; a resumed turn finds the request it made before the
// restart instead of asking again.
func (tr *turn) inputRequest(ctx context.Context, commandID string, qs []desk.InputQuestion) (*desk.InputRequest, error) {
	if tr.t.Resumed {
		rs, err := tr.a.store.ListInputRequests(ctx, tr.x.ID)
		if err != nil {
			return nil, err
		}
		for i := len(rs) - 1; i >= 0; i-- {
			if r := rs[i]; r.CommandID == commandID && r.Status != desk.InputCancelled {
				return r, nil
			}
		}
	}
	now := desk.Now()
	r := &desk.InputRequest{ID: desk.NewID("inp"), SessionID: tr.x.ID, SurfaceID: tr.t.Execution.SurfaceID, ExecutionID: tr.t.Execution.ID,
		CommandID: commandID, Questions: qs, Blocking: tr.settings.BlockingInput, Status: desk.InputPending, CreatedAt: now}
	if r.Blocking {
		d := now.Add(tr.a.opts.InputWait)
		r.Deadline = &d
	}
	if err := tr.a.store.CreateInputRequest(ctx, r); err != nil {
		return nil, err
	}
	var texts []string
	for _, q := range qs {
		texts = append(texts, q.Question)
	}
	tr.a.archive(tr.x.WorkspaceID, &archive.UserInputRequested{Envelope: tr.envelope(), RequestID: r.ID, Questions: texts})
	return r, nil
}

// propose shows a plan card and waits for the decision. An approved plan
// is pinned to the execution and re-injected before every step.
func (tr *turn) propose(ctx context.Context, commandID string, card json.RawMessage) (string, string, error) {
	p, err := tr.planCard(ctx, commandID, card)
	if err != nil {
		return "", "", err
	}
	var got *desk.Plan
	_, err = tr.a.waitFor(ctx, p.ID, time.Time{}, func() (bool, error) {
		cur, err := tr.a.store.GetPlan(context.Background(), p.ID)
		if err != nil {
			return false, err
		}
		got = cur
		return cur.Status != desk.PlanProposed, nil
	})
	if err != nil {
		if tr.closing() {
			return "", "", execution.ErrSuspended
		}
		return "", "", err
	}
	if got.Status == desk.PlanApproved {
		tr.mu.Lock()
		tr.plan, tr.planned = got.Card, true
		tr.mu.Unlock()
		tr.t.Emit("plan.pinned", map[string]any{"plan_id": p.ID})
	}
	return got.Status, got.Notes, nil
}

// planCard records the plan card of the call commandID; a resumed turn finds
// the card it showed before the restart.
func (tr *turn) planCard(ctx context.Context, commandID string, card json.RawMessage) (*desk.Plan, error) {
	if tr.t.Resumed {
		ps, err := tr.a.store.ListPlans(ctx, tr.t.Execution.ID)
		if err != nil {
			return nil, err
		}
		for i := len(ps) - 1; i >= 0; i-- {
			if ps[i].CommandID == commandID {
				return ps[i], nil
			}
		}
	}
	p := &desk.Plan{ID: desk.NewID("pln"), SessionID: tr.x.ID, ExecutionID: tr.t.Execution.ID, CommandID: commandID, Card: card,
		Status: desk.PlanProposed, CreatedAt: desk.Now()}
	if err := tr.a.store.CreatePlan(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}

// session returns a session the caller may see.
func (a *Agent) session(ctx context.Context, id string) (*desk.Session, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	x, err := a.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if !p.CanSeeActor(x.WorkspaceID, x.Actor) {
		return nil, desk.Errorf(desk.ENOTFOUND, "session %s not found", id)
	}
	return x, nil
}

func caller(ctx context.Context) string {
	p, _ := desk.PrincipalFrom(ctx)
	if p.Admin {
		return desk.AdminActor
	}
	return p.ActorID
}

// DecideApproval answers an approval request: approve or deny.
func (a *Agent) DecideApproval(ctx context.Context, id, decision, reason string) (*desk.Approval, error) {
	ap, err := a.store.GetApproval(ctx, id)
	if err != nil {
		return nil, err
	}
	x, err := a.session(ctx, ap.SessionID)
	if err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "approval %s not found", id)
	}
	status := map[string]string{"approve": desk.ApprovalApproved, "deny": desk.ApprovalDenied}[decision]
	if status == "" {
		return nil, desk.Errorf(desk.EINVALID, "decision %q must be approve or deny", decision)
	}
	out, err := a.store.DecideApproval(ctx, id, status, caller(ctx), reason, desk.Now())
	if err != nil {
		return nil, err
	}
	a.wake(id)
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, ExecutionID: ap.ExecutionID, Actor: caller(ctx), Kind: desk.OriginUser}
	a.archive(x.WorkspaceID, &archive.ApprovalResolved{Envelope: archive.Envelope{At: time.Now(), Channel: "http", ConversationID: x.ID, Origin: &o},
		ApprovalID: id, Decision: decisionWord(status), Reason: reason})
	return out, nil
}

// Approvals lists a session's approvals.
func (a *Agent) Approvals(ctx context.Context, sessionID string, pending bool) ([]*desk.Approval, error) {
	x, err := a.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return a.store.ListApprovals(ctx, x.ID, pending)
}

// InputRequests lists a session's input requests.
func (a *Agent) InputRequests(ctx context.Context, sessionID string) ([]*desk.InputRequest, error) {
	x, err := a.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return a.store.ListInputRequests(ctx, x.ID)
}

// AnswerInput answers an input request. A blocking request's waiting tool
// gets the answers; a non-blocking one's answers become a
// request_user_input_answer row of the surface's queue.
func (a *Agent) AnswerInput(ctx context.Context, id string, answers map[string]string) (*desk.InputRequest, *desk.SubmitResult, error) {
	r, err := a.store.GetInputRequest(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	x, err := a.session(ctx, r.SessionID)
	if err != nil {
		return nil, nil, desk.Errorf(desk.ENOTFOUND, "input request %s not found", id)
	}
	known := map[string]desk.InputQuestion{}
	for _, q := range r.Questions {
		known[q.ID] = q
	}
	// Every wrong key is named at once, with the ids that would do, so a
	// person fixes the answer in one go.
	var unknown, empty, ids []string
	for qid, ans := range answers {
		if _, ok := known[qid]; !ok {
			unknown = append(unknown, strconv.Quote(qid))
		} else if strings.TrimSpace(ans) == "" {
			empty = append(empty, strconv.Quote(qid))
		}
	}
	for _, q := range r.Questions {
		ids = append(ids, q.ID)
	}
	sort.Strings(unknown)
	sort.Strings(empty)
	if len(unknown) > 0 {
		return nil, nil, desk.Errorf(desk.EINVALID, "input request %s has no question %s (its questions: %s)", id, strings.Join(unknown, ", "), strings.Join(ids, ", "))
	}
	if len(empty) > 0 {
		return nil, nil, desk.Errorf(desk.EINVALID, "the answer to %s is empty", strings.Join(empty, ", "))
	}
	if len(answers) == 0 {
		return nil, nil, desk.Errorf(desk.EINVALID, "answers are required: {\"answers\": {\"<question id>\": \"<answer>\"}}")
	}
	// Unanswered questions keep their default; an answer that names an
	// option but for case or spacing is that option's label.
	full := defaults(r.Questions)
	for k, v := range answers {
		for _, o := range known[k].Options {
			if strings.EqualFold(strings.TrimSpace(v), o.Label) {
				v = o.Label
			}
		}
		full[k] = v
	}
	out, err := a.store.AnswerInputRequest(ctx, id, desk.InputAnswered, full, desk.Now())
	if err != nil {
		return nil, nil, err
	}
	a.wake(id)
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: caller(ctx), Kind: desk.OriginUser}
	a.archive(x.WorkspaceID, &archive.UserInputSubmitted{Envelope: archive.Envelope{At: time.Now(), Channel: "http", ConversationID: x.ID, Origin: &o},
		RequestID: id, Answer: answerText(r.Questions, full)})
	if r.Blocking {
		return out, nil, nil
	}
	if a.submit == nil {
		return out, nil, desk.Errorf(desk.EUNAVAILABLE, "answers cannot be queued on this desk")
	}
	res, err := a.submit.Submit(ctx, x.ID, desk.SubmitInput{Kind: desk.QueueInputAnswer, Surface: r.SurfaceID,
		Text: "Answers to your questions (" + id + "):\n" + answerText(r.Questions, full), IdempotencyKey: "answer-" + id})
	return out, res, err
}

func answerText(qs []desk.InputQuestion, answers map[string]string) string {
	var b strings.Builder
	ids := make([]string, 0, len(qs))
	byID := map[string]string{}
	for _, q := range qs {
		ids = append(ids, q.ID)
		byID[q.ID] = q.Question
	}
	sort.Strings(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "- %s → %s\n", byID[id], answers[id])
	}
	return strings.TrimSpace(b.String())
}

// DecidePlan answers a plan card: approve, decline or revise (with notes).
func (a *Agent) DecidePlan(ctx context.Context, id, decision, notes string) (*desk.Plan, error) {
	p, err := a.store.GetPlan(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := a.session(ctx, p.SessionID); err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "plan %s not found", id)
	}
	status := map[string]string{"approve": desk.PlanApproved, "decline": desk.PlanDeclined, "revise": desk.PlanRevised}[decision]
	if status == "" {
		return nil, desk.Errorf(desk.EINVALID, "decision %q must be approve, decline or revise", decision)
	}
	if status == desk.PlanRevised && strings.TrimSpace(notes) == "" {
		return nil, desk.Errorf(desk.EINVALID, "revise needs notes saying what to change")
	}
	out, err := a.store.DecidePlan(ctx, id, status, notes, desk.Now())
	if err != nil {
		return nil, err
	}
	a.wake(id)
	return out, nil
}
