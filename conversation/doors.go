package conversation

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
)

// The doors' side of a turn's records: a person decides an approval,
// answers a question or decides a plan card here, and the gate waiting on
// it in this process is woken at once.

// session returns a session the caller may see.
func (s *Service) session(ctx context.Context, id string) (*desk.Session, error) {
	return desk.VisibleSession(ctx, s.store, id)
}

func caller(ctx context.Context) string {
	p, _ := desk.PrincipalFrom(ctx)
	if p.Admin {
		return desk.AdminActor
	}
	return p.ActorID
}

// DecideApproval answers an approval request with one of its options:
// decision is an option id, or the words approve (the first allow_once
// option) and deny (the first reject_once).
func (s *Service) DecideApproval(ctx context.Context, id, decision, reason string) (*desk.Approval, error) {
	ap, err := s.store.GetApproval(ctx, id)
	if err != nil {
		return nil, err
	}
	x, err := s.session(ctx, ap.SessionID)
	if err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "approval %s not found", id)
	}
	opt, err := chooseOption(ap, decision)
	if err != nil {
		return nil, err
	}
	status := desk.ApprovalDenied
	if desk.OptionAllows(opt.Kind) {
		status = desk.ApprovalApproved
	}
	out, err := s.store.DecideApproval(ctx, id, status, opt.ID, caller(ctx), reason, desk.Now())
	if err != nil {
		return nil, err
	}
	s.wake(id)
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, ExecutionID: ap.ExecutionID, Actor: caller(ctx), Kind: desk.OriginUser}
	s.record(x.WorkspaceID, &archive.ApprovalResolved{Envelope: archive.Envelope{At: time.Now(), Channel: "http", ConversationID: x.ID, Origin: &o},
		ApprovalID: id, Decision: decisionWord(status), Reason: reason})
	return shown(out), nil
}

// chooseOption is the option of ap that decision names: an option id
// first (an executor's ids are its own words and could be anything),
// then approve and deny.
func chooseOption(ap *desk.Approval, decision string) (desk.ApprovalOption, error) {
	opts := OptionsOf(ap)
	for _, o := range opts {
		if o.ID == decision {
			return o, nil
		}
	}
	// approve and deny prefer the option that is asked again next time.
	prefer := map[string][]string{
		"approve": {desk.OptionAllowOnce, desk.OptionAllowAlways},
		"deny":    {desk.OptionRejectOnce, desk.OptionRejectAlways},
	}[decision]
	for _, k := range prefer {
		if i := slices.IndexFunc(opts, func(o desk.ApprovalOption) bool { return o.Kind == k }); i >= 0 {
			return opts[i], nil
		}
	}
	ids := make([]string, 0, len(opts))
	for _, o := range opts {
		ids = append(ids, o.ID)
	}
	if decision == "" {
		return desk.ApprovalOption{}, desk.Errorf(desk.EINVALID, "option_id is required: one of %s (or decision approve or deny)", strings.Join(ids, ", "))
	}
	return desk.ApprovalOption{}, desk.Errorf(desk.EINVALID, "option %q is not one of approval %s's options: %s (or decision approve or deny)", decision, ap.ID, strings.Join(ids, ", "))
}

// Approvals lists a session's approvals.
func (s *Service) Approvals(ctx context.Context, sessionID string, pending bool) ([]*desk.Approval, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	aps, err := s.store.ListApprovals(ctx, x.ID, pending)
	for _, ap := range aps {
		shown(ap)
	}
	return aps, err
}

// shown fills what the doors show of ap: every option a person may
// choose (the gate's defaults when the executor offered none), and what
// it asks (its summary, for a request recorded before approvals had a
// readable shape).
func shown(ap *desk.Approval) *desk.Approval {
	if ap == nil {
		return nil
	}
	ap.Options = OptionsOf(ap)
	if ap.What == "" {
		ap.What = ap.Summary
	}
	return ap
}

// InputRequests lists a session's input requests.
func (s *Service) InputRequests(ctx context.Context, sessionID string) ([]*desk.InputRequest, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListInputRequests(ctx, x.ID)
}

// AnswerInput answers an input request. A blocking request's waiting call
// gets the answers; a non-blocking one's answers become a
// request_user_input_answer row of the surface's queue.
func (s *Service) AnswerInput(ctx context.Context, id string, answers map[string]string) (*desk.InputRequest, *desk.SubmitResult, error) {
	r, err := s.store.GetInputRequest(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	x, err := s.session(ctx, r.SessionID)
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
	full := Defaults(r.Questions)
	for k, v := range answers {
		for _, o := range known[k].Options {
			if strings.EqualFold(strings.TrimSpace(v), o.Label) {
				v = o.Label
			}
		}
		full[k] = v
	}
	out, err := s.store.AnswerInputRequest(ctx, id, desk.InputAnswered, full, desk.Now())
	if err != nil {
		return nil, nil, err
	}
	s.wake(id)
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: caller(ctx), Kind: desk.OriginUser}
	s.record(x.WorkspaceID, &archive.UserInputSubmitted{Envelope: archive.Envelope{At: time.Now(), Channel: "http", ConversationID: x.ID, Origin: &o},
		RequestID: id, Answer: answerText(r.Questions, full)})
	if r.Blocking {
		return out, nil, nil
	}
	if s.submit == nil {
		return out, nil, desk.Errorf(desk.EUNAVAILABLE, "answers cannot be queued on this desk")
	}
	res, err := s.submit.Submit(ctx, x.ID, desk.SubmitInput{Kind: desk.QueueInputAnswer, Surface: r.SurfaceID,
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
func (s *Service) DecidePlan(ctx context.Context, id, decision, notes string) (*desk.Plan, error) {
	p, err := s.store.GetPlan(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.session(ctx, p.SessionID); err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "plan %s not found", id)
	}
	status := map[string]string{"approve": desk.PlanApproved, "decline": desk.PlanDeclined, "revise": desk.PlanRevised}[decision]
	if status == "" {
		return nil, desk.Errorf(desk.EINVALID, "decision %q must be approve, decline or revise", decision)
	}
	if status == desk.PlanRevised && strings.TrimSpace(notes) == "" {
		return nil, desk.Errorf(desk.EINVALID, "revise needs notes saying what to change")
	}
	out, err := s.store.DecidePlan(ctx, id, status, notes, desk.Now())
	if err != nil {
		return nil, err
	}
	s.wake(id)
	return out, nil
}

// Plan is one plan card; a plan of a session the caller cannot see is
// not found.
func (s *Service) Plan(ctx context.Context, id string) (*desk.Plan, error) {
	p, err := s.store.GetPlan(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.session(ctx, p.SessionID); err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "plan %s not found", id)
	}
	return p, nil
}

// Transcript is a surface's messages with tool calls folded into the
// assistant messages that made them (tool-result messages are not listed:
// their results are in the command records).
func (s *Service) Transcript(ctx context.Context, surface string, before int64, limit int) ([]*desk.Message, error) {
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	ms, err := s.store.ListMessages(ctx, surface, before, limit)
	if err != nil {
		return nil, err
	}
	return s.fold(ctx, ms)
}

// TranscriptTree is every branch of a surface's transcript by seq, folded
// as Transcript folds the active branch; each message names its parent.
func (s *Service) TranscriptTree(ctx context.Context, surface string) ([]*desk.Message, error) {
	ms, err := s.store.ListMessageTree(ctx, surface)
	if err != nil {
		return nil, err
	}
	return s.fold(ctx, ms)
}

// fold drops tool-result messages and attaches each assistant message's
// command records.
func (s *Service) fold(ctx context.Context, ms []*desk.Message) ([]*desk.Message, error) {
	var exes []string
	seen := map[string]bool{}
	for _, m := range ms {
		if m.ExecutionID != "" && !seen[m.ExecutionID] {
			seen[m.ExecutionID] = true
			exes = append(exes, m.ExecutionID)
		}
	}
	cmds, err := s.store.ListCommands(ctx, exes)
	if err != nil {
		return nil, err
	}
	byCall := map[string]*desk.Command{}
	for _, c := range cmds {
		byCall[c.ExecutionID+"/"+c.CallID] = c
	}
	out := make([]*desk.Message, 0, len(ms))
	for _, m := range ms {
		if m.Role == desk.RoleTool {
			continue
		}
		for _, c := range m.ToolCalls {
			if cmd := byCall[m.ExecutionID+"/"+c.ID]; cmd != nil {
				m.Commands = append(m.Commands, cmd)
			}
		}
		out = append(out, m)
	}
	return out, nil
}
