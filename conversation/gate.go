package conversation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/execution"
)

// Decisions (approvals, input answers, plan decisions) are rows in the
// store; a waiting call polls its row and is woken early when the
// decision arrives through this process (the door methods wake it).
// Another desk process on the same database reaches the row the same way,
// only a poll later.
const decisionPoll = 250 * time.Millisecond

// wake ends the current poll interval of the wait on decision id.
func (s *Service) wake(id string) {
	if ch, ok := s.waiters.LoadAndDelete(id); ok {
		close(ch.(chan struct{}))
	}
}

// await polls until done reports true, ctx ends, or the deadline passes
// (zero: never). It reports whether done did. It is the one wait of every
// decision, whichever executor asked for it.
func (s *Service) await(ctx context.Context, id string, deadline time.Time, done func() (bool, error)) (bool, error) {
	var expire <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expire = t.C
	}
	poll := time.NewTimer(decisionPoll)
	defer poll.Stop()
	for {
		ch := make(chan struct{})
		s.waiters.Store(id, ch)
		ok, err := done()
		if err != nil || ok {
			s.waiters.Delete(id)
			return ok, err
		}
		poll.Reset(decisionPoll)
		select {
		case <-ch:
		case <-poll.C:
		case <-expire:
			s.waiters.Delete(id)
			return false, nil
		case <-ctx.Done():
			s.waiters.Delete(id)
			return false, ctx.Err()
		}
	}
}

// GateOptions say how the executor's turns outlive a restart.
type GateOptions struct {
	// Resumes is set by an executor whose turns the next desk process
	// continues (execution.Resumer answers true): a wait that ends because
	// desk is shutting down is kept and the call returns
	// execution.ErrSuspended, and a wait whose execution another process
	// adopted is left to that process. Without it (an external runtime,
	// whose child dies with this process), an interrupted wait is always
	// withdrawn.
	Resumes bool
}

// Gate is one turn's door to a person: every approval, question and plan
// card the turn asks for goes through it.
type Gate struct {
	s *Service
	t *execution.Turn
	o GateOptions
}

// Gate returns the gate of turn t.
func (s *Service) Gate(t *execution.Turn, o GateOptions) *Gate {
	return &Gate{s: s, t: t, o: o}
}

// closing reports whether desk is shutting down under a turn that
// resumes: its wait is then kept, not withdrawn.
func (g *Gate) closing() bool {
	return g.o.Resumes && g.t.Closing != nil && g.t.Closing()
}

// takenOver reports whether another desk process adopted the turn's
// execution (it took this one for dead): the wait is that process's now,
// so this one neither withdraws it nor acts on its answer. Only a turn
// that resumes can be adopted and continued.
func (g *Gate) takenOver() bool {
	if !g.o.Resumes {
		return false
	}
	x, err := g.s.store.GetExecution(context.Background(), g.t.Execution.ID)
	return err == nil && x.Owner != g.t.Execution.Owner
}

// envelope addresses a turn's system record to the channel and
// conversation its message came from.
func (g *Gate) envelope() archive.Envelope {
	x, exe := g.t.Session, g.t.Execution
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, ExecutionID: exe.ID, SurfaceID: exe.SurfaceID, Actor: x.Actor, Kind: desk.OriginAgent}
	return archive.Envelope{At: time.Now(), Channel: g.t.Item.Channel, ConversationID: g.t.Item.ConversationID, Origin: &o, TurnID: exe.ID}
}

func (g *Gate) record(rec archive.Record) { g.s.record(g.t.Session.WorkspaceID, rec) }

// Approval is what Approve asks about.
type Approval struct {
	// Command is the call's record; Approve moves it to waiting while a
	// person decides.
	Command *desk.Command
	Summary string
	// Request is the call as a person reads it, with the executor's own
	// options; without options a person chooses from DefaultOptions.
	Request desk.ApprovalRequest
	// Mode is the workspace's approval mode.
	Mode string
	// Review decides in auto-review mode: whether the call may run, and
	// why. Each executor has its own reviewer (the agent's model or rule
	// set, a runtime's read-only kinds); the gate records its verdict.
	Review func() (bool, string)
}

// Approve decides whether a gated call may start, by the workspace's
// approval mode: user (a person decides; Approve waits for the decision),
// auto-review (the Review function decides, and its reason is recorded),
// full-access (no gate). It returns the verdict and its reason (for a
// person's decision without one, who decided). A turn continued after a
// restart finds the approval it asked for, pending or decided meanwhile,
// instead of asking again. When ctx ends first the request is withdrawn
// (unless the turn suspends or was adopted, see GateOptions) and ctx's
// error returned.
func (g *Gate) Approve(ctx context.Context, a Approval) (bool, string, error) {
	v, err := g.Decide(ctx, a)
	return v.Allowed, v.Why, err
}

// Verdict is the decision on a gated call.
type Verdict struct {
	Allowed bool
	// Why is the reason (for a person's decision without one, who
	// decided).
	Why string
	// Option is the option chosen ("" when no person chose: full-access
	// or auto-review). An executor answers its runtime with it.
	Option desk.ApprovalOption
}

// DefaultOptions are what a person chooses from when the executor offers
// no options of its own (desk's own agent): once, for the rest of the
// session, or not.
var DefaultOptions = []desk.ApprovalOption{
	{ID: "approve", Kind: desk.OptionAllowOnce, Label: "Approve"},
	{ID: "approve_always", Kind: desk.OptionAllowAlways, Label: "Approve for this session"},
	{ID: "deny", Kind: desk.OptionRejectOnce, Label: "Deny"},
}

// OptionsOf are the options a person chooses from for ap: the
// executor's own, plus a deny when it offered no way to refuse (the
// executor then answers its runtime "cancelled").
func OptionsOf(ap *desk.Approval) []desk.ApprovalOption {
	if len(ap.Options) == 0 {
		return DefaultOptions
	}
	for _, o := range ap.Options {
		if !desk.OptionAllows(o.Kind) {
			return ap.Options
		}
	}
	return append(slices.Clip(ap.Options), desk.ApprovalOption{ID: "deny", Kind: desk.OptionRejectOnce, Label: "Deny"})
}

// Decide is Approve with the option chosen. In user mode a request the
// session already answered with an "always" option (the same tool and
// the same command line or file) is answered the same way without asking
// again, whatever the executor remembers itself: a runtime child that
// restarted has forgotten its own "allow for this session".
func (g *Gate) Decide(ctx context.Context, a Approval) (Verdict, error) {
	switch a.Mode {
	case desk.ApprovalModeFullAccess:
		return Verdict{Allowed: true}, nil
	case desk.ApprovalModeAutoReview:
		ok, why, err := g.autoReview(ctx, a)
		return Verdict{Allowed: ok, Why: why}, err
	}
	if v, ok := g.standing(ctx, a); ok {
		return v, nil
	}
	ap, err := g.pendingApproval(ctx, a.Command, a.Summary, a.Request)
	if err != nil {
		return Verdict{}, err
	}
	var got *desk.Approval
	_, err = g.s.await(ctx, ap.ID, time.Time{}, func() (bool, error) {
		cur, err := g.s.store.GetApproval(context.Background(), ap.ID)
		if err != nil {
			return false, err
		}
		got = cur
		return cur.Status != desk.ApprovalPending, nil
	})
	if err != nil {
		if g.closing() {
			return Verdict{}, execution.ErrSuspended
		}
		if g.takenOver() {
			return Verdict{}, err
		}
		// Interrupted while waiting: the request is withdrawn.
		if _, derr := g.s.store.DecideApproval(context.Background(), ap.ID, desk.ApprovalCancelled, "", "system", "the turn was interrupted", desk.Now()); derr == nil {
			g.record(&archive.ApprovalResolved{Envelope: g.envelope(), ApprovalID: ap.ID, Decision: "cancelled", Reason: "the turn was interrupted"})
		}
		return Verdict{}, err
	}
	if g.takenOver() {
		return Verdict{}, fmt.Errorf("execution %s was adopted by another desk process; it runs the approved call", g.t.Execution.ID)
	}
	// Whoever decided (the door's DecideApproval) archived the decision.
	why := got.Reason
	if why == "" {
		why = "by " + got.DecidedBy
	}
	v := Verdict{Allowed: got.Status == desk.ApprovalApproved, Why: why}
	for _, o := range OptionsOf(got) {
		if o.ID == got.OptionID {
			v.Option = o
		}
	}
	return v, nil
}

// standing finds the session's "always" answer to the same request: an
// approval of the same tool and the same What, decided with an
// allow_always or reject_always option. The verdict carries the option
// of that kind the executor offers now (its ids may differ from call to
// call), or its allow_once / reject_once.
func (g *Gate) standing(ctx context.Context, a Approval) (Verdict, bool) {
	if a.Request.What == "" {
		return Verdict{}, false
	}
	aps, err := g.s.store.ListApprovals(ctx, g.t.Session.ID, false)
	if err != nil {
		return Verdict{}, false
	}
	for i := len(aps) - 1; i >= 0; i-- {
		ap := aps[i]
		if ap.Tool != a.Command.Tool || ap.What != a.Request.What || ap.OptionID == "" {
			continue
		}
		var kind string
		for _, o := range OptionsOf(ap) {
			if o.ID == ap.OptionID {
				kind = o.Kind
			}
		}
		if !desk.OptionLasts(kind) {
			continue
		}
		allowed := desk.OptionAllows(kind)
		v := Verdict{Allowed: allowed, Why: fmt.Sprintf("answered for this session by %s (approval %s)", ap.DecidedBy, ap.ID)}
		now := OptionsOf(&desk.Approval{ApprovalRequest: a.Request})
		once := desk.OptionRejectOnce
		if allowed {
			once = desk.OptionAllowOnce
		}
		for _, k := range []string{once, kind} {
			if j := slices.IndexFunc(now, func(o desk.ApprovalOption) bool { return o.Kind == k }); j >= 0 {
				v.Option = now[j]
			}
		}
		return v, true
	}
	return Verdict{}, false
}

// autoReview records the reviewer's verdict as a decided approval. A
// verdict taken before a restart stands.
func (g *Gate) autoReview(ctx context.Context, a Approval) (bool, string, error) {
	cmd := a.Command
	if g.t.Resumed {
		if aps, err := g.s.store.ListApprovals(ctx, g.t.Session.ID, false); err == nil {
			for _, ap := range aps {
				if ap.CommandID == cmd.ID && ap.DecidedBy == "auto-review" {
					return ap.Status == desk.ApprovalApproved, ap.Reason, nil
				}
			}
		}
	}
	ok, reason := a.Review()
	now := desk.Now()
	status := desk.ApprovalApproved
	if !ok {
		status = desk.ApprovalDenied
	}
	ap := &desk.Approval{ID: desk.NewID("apr"), SessionID: g.t.Session.ID, ExecutionID: g.t.Execution.ID, CommandID: cmd.ID, Tool: cmd.Tool,
		Summary: a.Summary, Status: status, DecidedBy: "auto-review", Reason: reason, CreatedAt: now, DecidedAt: &now, ApprovalRequest: a.Request}
	if err := g.s.store.CreateApproval(ctx, ap); err != nil {
		return false, "", err
	}
	env := g.envelope()
	g.record(&archive.ApprovalRequested{Envelope: env, ApprovalID: ap.ID, Tool: ap.Tool, Summary: a.Summary})
	g.record(&archive.ApprovalResolved{Envelope: env, ApprovalID: ap.ID, Decision: decisionWord(status), Reason: reason})
	return ok, reason, nil
}

// pendingApproval is the approval request of cmd, asked for now; a resumed
// turn finds the one it asked for before the restart (pending, or decided
// meanwhile) instead of asking again.
func (g *Gate) pendingApproval(ctx context.Context, cmd *desk.Command, summary string, req desk.ApprovalRequest) (*desk.Approval, error) {
	if g.t.Resumed {
		aps, err := g.s.store.ListApprovals(ctx, g.t.Session.ID, false)
		if err != nil {
			return nil, err
		}
		for i := len(aps) - 1; i >= 0; i-- {
			if ap := aps[i]; ap.CommandID == cmd.ID && ap.Status != desk.ApprovalCancelled {
				if cmd.Status != desk.CommandWaiting && ap.Status == desk.ApprovalPending {
					cmd.Status = desk.CommandWaiting
					if err := g.s.store.UpdateCommand(ctx, cmd); err != nil {
						return nil, err
					}
				}
				return ap, nil
			}
		}
	}
	ap := &desk.Approval{ID: desk.NewID("apr"), SessionID: g.t.Session.ID, ExecutionID: g.t.Execution.ID, CommandID: cmd.ID, Tool: cmd.Tool,
		Summary: summary, Status: desk.ApprovalPending, CreatedAt: desk.Now(), ApprovalRequest: req}
	// The request exists before the command says it waits, so whoever
	// sees a waiting command finds what it waits for.
	if err := g.s.store.CreateApproval(ctx, ap); err != nil {
		return nil, err
	}
	cmd.Status = desk.CommandWaiting
	if err := g.s.store.UpdateCommand(ctx, cmd); err != nil {
		return nil, err
	}
	g.record(&archive.ApprovalRequested{Envelope: g.envelope(), ApprovalID: ap.ID, Tool: ap.Tool, Summary: summary})
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

// Defaults are the recommended option of each question, or its default.
func Defaults(qs []desk.InputQuestion) map[string]string {
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

// Question is what Ask asks.
type Question struct {
	// CommandID is the asking call's record.
	CommandID string
	Questions []desk.InputQuestion
	// Blocking makes Ask wait for the answers, up to Wait (the
	// workspace's setting); otherwise the defaults are the answer at once.
	Blocking bool
	Wait     time.Duration
}

// Ask is request_user_input: non-blocking by default (the defaults at
// once; a later answer becomes a request_user_input_answer queue row), or
// blocking (wait up to q.Wait, then the defaults). It returns the answers
// and whether they are the defaults.
func (g *Gate) Ask(ctx context.Context, q Question) (map[string]string, bool, error) {
	r, err := g.inputRequest(ctx, q)
	if err != nil {
		return nil, false, err
	}
	def := Defaults(r.Questions)
	if !r.Blocking {
		return def, true, nil
	}
	// A request recorded before deadlines were kept waits from its start.
	deadline := r.CreatedAt.Add(q.Wait)
	if r.Deadline != nil {
		deadline = *r.Deadline
	}
	var got *desk.InputRequest
	ok, err := g.s.await(ctx, r.ID, deadline, func() (bool, error) {
		cur, err := g.s.store.GetInputRequest(context.Background(), r.ID)
		if err != nil {
			return false, err
		}
		got = cur
		return cur.Status != desk.InputPending, nil
	})
	if err != nil {
		if g.closing() {
			return nil, false, execution.ErrSuspended
		}
		if g.takenOver() {
			return nil, false, err
		}
		g.s.store.AnswerInputRequest(context.Background(), r.ID, desk.InputCancelled, nil, desk.Now())
		return nil, false, err
	}
	if !ok {
		// The deadline passed without an answer: the defaults stand.
		if cur, err := g.s.store.AnswerInputRequest(context.Background(), r.ID, desk.InputDefaulted, def, desk.Now()); err == nil {
			g.record(&archive.UserInputSubmitted{Envelope: g.envelope(), RequestID: r.ID, Answer: "(no answer: the defaults were used)"})
			return cur.Answers, true, nil
		}
		got, _ = g.s.store.GetInputRequest(context.Background(), r.ID)
	}
	if got.Status == desk.InputAnswered {
		return got.Answers, false, nil
	}
	return def, true, nil
}

// inputRequest records the questions of the call q.CommandID. A blocking
// request carries its deadline (now plus q.Wait), so the timeout survives
// a restart; a resumed turn finds the request it made before the restart
// instead of asking again.
func (g *Gate) inputRequest(ctx context.Context, q Question) (*desk.InputRequest, error) {
	x, exe := g.t.Session, g.t.Execution
	if g.t.Resumed {
		rs, err := g.s.store.ListInputRequests(ctx, x.ID)
		if err != nil {
			return nil, err
		}
		for i := len(rs) - 1; i >= 0; i-- {
			if r := rs[i]; r.CommandID == q.CommandID && r.Status != desk.InputCancelled {
				return r, nil
			}
		}
	}
	now := desk.Now()
	r := &desk.InputRequest{ID: desk.NewID("inp"), SessionID: x.ID, SurfaceID: exe.SurfaceID, ExecutionID: exe.ID,
		CommandID: q.CommandID, Questions: q.Questions, Blocking: q.Blocking, Status: desk.InputPending, CreatedAt: now}
	if r.Blocking {
		d := now.Add(q.Wait)
		r.Deadline = &d
	}
	if err := g.s.store.CreateInputRequest(ctx, r); err != nil {
		return nil, err
	}
	var texts []string
	for _, q := range q.Questions {
		texts = append(texts, q.Question)
	}
	g.record(&archive.UserInputRequested{Envelope: g.envelope(), RequestID: r.ID, Questions: texts})
	return r, nil
}

// Propose shows a plan card for the call commandID and waits for the
// decision; it returns the decided card. A resumed turn finds the card it
// showed before the restart. A card is never withdrawn: a turn that ends
// leaves it for the record.
func (g *Gate) Propose(ctx context.Context, commandID string, card json.RawMessage) (*desk.Plan, error) {
	p, err := g.planCard(ctx, commandID, card)
	if err != nil {
		return nil, err
	}
	var got *desk.Plan
	_, err = g.s.await(ctx, p.ID, time.Time{}, func() (bool, error) {
		cur, err := g.s.store.GetPlan(context.Background(), p.ID)
		if err != nil {
			return false, err
		}
		got = cur
		return cur.Status != desk.PlanProposed, nil
	})
	if err != nil {
		if g.closing() {
			return nil, execution.ErrSuspended
		}
		return nil, err
	}
	return got, nil
}

// planCard records the plan card of the call commandID; a resumed turn
// finds the card it showed before the restart.
func (g *Gate) planCard(ctx context.Context, commandID string, card json.RawMessage) (*desk.Plan, error) {
	exe := g.t.Execution
	if g.t.Resumed {
		ps, err := g.s.store.ListPlans(ctx, exe.ID)
		if err != nil {
			return nil, err
		}
		for i := len(ps) - 1; i >= 0; i-- {
			if ps[i].CommandID == commandID {
				return ps[i], nil
			}
		}
	}
	p := &desk.Plan{ID: desk.NewID("pln"), SessionID: g.t.Session.ID, ExecutionID: exe.ID, CommandID: commandID, Card: card,
		Status: desk.PlanProposed, CreatedAt: desk.Now()}
	if err := g.s.store.CreatePlan(ctx, p); err != nil {
		return nil, err
	}
	return p, nil
}
