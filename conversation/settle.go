package conversation

import (
	"context"
	"encoding/json"

	"github.com/desk-runtime/desk"
)

// A turn whose desk process died is settled here for any executor: its
// records are closed so nothing waits for ever and the next turn's request
// has a result for every call. The tool-loop agent decides first whether
// its turn can continue (agent/resume.go); a runtime's turn never can (its
// child died with the process), and the next turn reopens the native
// conversation.

// Texts of the results synthesized for calls that did not finish.
const (
	UnknownOutcome = "interrupted: outcome unknown — desk stopped while this call ran, and it was not run again; check its effects before relying on them"
	NotRun         = "interrupted: not run — desk stopped before this call started"
)

// Synthesized is the error result of a call that did not finish.
func Synthesized(code, msg string) *desk.CommandResult {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return &desk.CommandResult{Text: string(b), IsError: true}
}

// SettleCommand ends a command record of a dead turn with status and
// result r, its error line taken from r's error object.
func (s *Service) SettleCommand(ctx context.Context, c *desk.Command, status string, r *desk.CommandResult) error {
	c.Status, c.Result = status, r
	if c.FinishedAt == nil {
		now := desk.Now()
		c.FinishedAt = &now
	}
	if r != nil && c.Error == "" {
		var v struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal([]byte(r.Text), &v) == nil && v.Error.Message != "" {
			c.Error = v.Error.Code + ": " + v.Error.Message
		}
	}
	return s.store.UpdateCommand(ctx, c)
}

// MessageLister pages through a surface's transcript.
type MessageLister interface {
	ListMessages(ctx context.Context, surfaceID string, beforeSeq int64, limit int) ([]*desk.Message, error)
}

// SettleDeadTurn closes what the dead execution x left open: a call that
// was running gets the outcome unknown, calls not started are cancelled,
// the last step's calls get their results in the transcript, pending
// approvals and blocking questions are withdrawn. It is idempotent: a
// second run finds nothing open.
func (s *Service) SettleDeadTurn(ctx context.Context, x *desk.Execution) error {
	msgs, err := ExecutionMessages(ctx, s.store, x)
	if err != nil {
		return err
	}
	cmds, err := s.store.ListCommands(ctx, []string{x.ID})
	if err != nil {
		return err
	}
	now := desk.Now()
	settle := func(c *desk.Command, status string, r *desk.CommandResult) error {
		return s.SettleCommand(ctx, c, status, r)
	}
	for _, c := range cmds {
		switch c.Status {
		case desk.CommandRunning:
			if err := settle(c, desk.CommandUnknown, Synthesized("INTERRUPTED", UnknownOutcome)); err != nil {
				return err
			}
		case desk.CommandRequested, desk.CommandWaiting:
			if err := settle(c, desk.CommandCancelled, Synthesized("INTERRUPTED", NotRun)); err != nil {
				return err
			}
		}
	}
	// The last step's calls get their results in the transcript — the
	// recorded one of a call that finished, else the synthesized one — so
	// the next turn's request has a result for every call, and the model
	// is told which outcomes are unknown.
	if last := LastStep(msgs); last != nil {
		for i, c := range MatchCommands(last.ToolCalls, cmds) {
			r := Synthesized("INTERRUPTED", UnknownOutcome)
			if c != nil && c.Result != nil {
				r = c.Result
			}
			call := last.ToolCalls[i]
			tm := &desk.Message{ID: desk.NewID("msg"), SessionID: x.SessionID, SurfaceID: x.SurfaceID, ExecutionID: x.ID,
				Role: desk.RoleTool, Text: r.Text, ToolCallID: call.ID, ToolName: call.Name, IsError: r.IsError, CreatedAt: now}
			if err := s.store.AppendMessage(ctx, tm); err != nil {
				return err
			}
		}
	}
	const why = "desk restarted; the turn was interrupted"
	aps, err := s.store.ListApprovals(ctx, x.SessionID, true)
	if err != nil {
		return err
	}
	for _, ap := range aps {
		if ap.ExecutionID == x.ID {
			if _, err := s.store.DecideApproval(ctx, ap.ID, desk.ApprovalCancelled, "", "system", why, now); err != nil && !desk.IsCode(err, desk.ECONFLICT) {
				return err
			}
		}
	}
	rs, err := s.store.ListInputRequests(ctx, x.SessionID)
	if err != nil {
		return err
	}
	for _, r := range rs {
		// A non-blocking request's answer still becomes a queue row: it
		// outlives its turn by design.
		if r.ExecutionID == x.ID && r.Blocking && r.Status == desk.InputPending {
			if _, err := s.store.AnswerInputRequest(ctx, r.ID, desk.InputCancelled, nil, now); err != nil && !desk.IsCode(err, desk.ECONFLICT) {
				return err
			}
		}
	}
	return nil
}

// ExecutionMessages are the transcript messages of x, oldest first. An
// execution's messages are the newest of its surface while it is active,
// so they are read from the end, a page at a time.
func ExecutionMessages(ctx context.Context, st MessageLister, x *desk.Execution) ([]*desk.Message, error) {
	var out []*desk.Message
	before := int64(0)
	for {
		page, err := st.ListMessages(ctx, x.SurfaceID, before, 200)
		if err != nil {
			return nil, err
		}
		i := len(page) - 1
		for ; i >= 0 && page[i].ExecutionID == x.ID; i-- {
		}
		out = append(page[i+1:], out...)
		if i >= 0 || len(page) < 200 {
			return out, nil
		}
		before = page[0].Seq
	}
}

// LastStep is the execution's last assistant message when it made tool
// calls whose results are not in the transcript yet, else nil.
func LastStep(msgs []*desk.Message) *desk.Message {
	if len(msgs) == 0 {
		return nil
	}
	m := msgs[len(msgs)-1]
	if m.Role != desk.RoleAssistant || len(m.ToolCalls) == 0 {
		return nil
	}
	return m
}

// MatchCommands pairs each call with its record (the newest with its call
// id); a call without one gets nil.
func MatchCommands(calls []desk.MessageCall, cmds []*desk.Command) []*desk.Command {
	out := make([]*desk.Command, len(calls))
	for i, c := range calls {
		for j := len(cmds) - 1; j >= 0; j-- {
			if cmds[j].CallID == c.ID {
				out[i] = cmds[j]
				break
			}
		}
	}
	return out
}
