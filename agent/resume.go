package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/execution"
)

// ReadOnly names the tools whose calls may run again when desk died while
// they ran: they only read, so running them twice is harmless. Any other
// call that was running gets the outcome unknown and is never re-run. The
// agent asks this set, not the tools package, so declaring a tool
// read-only is a decision made here, beside the recovery it allows.
var ReadOnly = map[string]bool{
	"read_file":  true,
	"list_files": true,
	"inspect":    true,
}

// reentrant tools wait on a person through records keyed by their call
// (the input request, the plan card): running such a call again finds its
// record instead of asking twice, so a resumed turn re-enters their wait.
var reentrant = map[string]bool{
	"request_user_input": true,
	"clarify":            true,
}

// Texts of the results synthesized for calls that did not finish.
const (
	unknownOutcome = "interrupted: outcome unknown — desk stopped while this call ran, and it was not run again; check its effects before relying on them"
	notRun         = "interrupted: not run — desk stopped before this call started"
)

func synthesized(code, msg string) *desk.CommandResult {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return &desk.CommandResult{Text: string(b), IsError: true}
}

// RecoverTurn settles the records of an execution whose desk process died
// (execution.Resumer). A call that was running gets the outcome unknown
// and a result saying so, unless its tool is read-only or re-entrant (it
// runs again when the turn continues). The turn can continue when its
// last step is recorded (the assistant message with its calls) and one of
// those calls waits on a person: an approval, a blocking question, or a
// plan card still pending (or decided while the call had not started).
// Otherwise — the model call was in flight, or a tool ran with nobody to
// wait for — the execution is interrupted and everything left open is
// closed: waiting calls are cancelled, pending approvals and questions
// withdrawn, and the last step's calls get their results in the
// transcript.
func (a *Agent) RecoverTurn(ctx context.Context, x *desk.Execution, canResume bool) (bool, error) {
	msgs, err := a.executionMessages(ctx, x)
	if err != nil {
		return false, err
	}
	cmds, err := a.store.ListCommands(ctx, []string{x.ID})
	if err != nil {
		return false, err
	}
	waits, err := a.personWaits(ctx, x)
	if err != nil {
		return false, err
	}
	last := lastStep(msgs)
	resume := false
	var stepCmds []*desk.Command
	if canResume && last != nil {
		stepCmds = matchCommands(last.ToolCalls, cmds)
		for _, c := range stepCmds {
			if c == nil || c.Result != nil {
				continue
			}
			pending, asked := waits[c.ID]
			// Waiting on a person, or decided while the call had not
			// started yet (or can find its decision again): the step
			// goes on from the decision.
			if asked && (pending || c.Status == desk.CommandRequested || c.Status == desk.CommandWaiting || reentrant[c.Tool]) {
				resume = true
			}
		}
	}
	now := desk.Now()
	settle := func(c *desk.Command, status string, r *desk.CommandResult) error {
		c.Status, c.Result = status, r
		if c.FinishedAt == nil {
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
		return a.store.UpdateCommand(ctx, c)
	}
	if resume {
		for _, c := range stepCmds {
			if c == nil || c.Result != nil {
				continue
			}
			switch c.Status {
			case desk.CommandRequested, desk.CommandWaiting:
				// Not started, or waiting: it runs (or waits) again.
			case desk.CommandRunning:
				if ReadOnly[c.Tool] || reentrant[c.Tool] {
					c.Status, c.StartedAt = desk.CommandRequested, nil
					if err := a.store.UpdateCommand(ctx, c); err != nil {
						return false, err
					}
					continue
				}
				if err := settle(c, desk.CommandUnknown, synthesized("INTERRUPTED", unknownOutcome)); err != nil {
					return false, err
				}
			default:
				// Ended without a result (stopped by the shutdown while
				// it ran): its outcome is not known either.
				if err := settle(c, desk.CommandUnknown, synthesized("INTERRUPTED", unknownOutcome)); err != nil {
					return false, err
				}
			}
		}
		return true, nil
	}
	for _, c := range cmds {
		switch c.Status {
		case desk.CommandRunning:
			if err := settle(c, desk.CommandUnknown, synthesized("INTERRUPTED", unknownOutcome)); err != nil {
				return false, err
			}
		case desk.CommandRequested, desk.CommandWaiting:
			if err := settle(c, desk.CommandCancelled, synthesized("INTERRUPTED", notRun)); err != nil {
				return false, err
			}
		}
	}
	// The last step's calls get their results in the transcript — the
	// recorded one of a call that finished, else the synthesized one — so
	// the next turn's request has a result for every call, and the model
	// is told which outcomes are unknown.
	if last := lastStep(msgs); last != nil {
		for i, c := range matchCommands(last.ToolCalls, cmds) {
			r := synthesized("INTERRUPTED", unknownOutcome)
			if c != nil && c.Result != nil {
				r = c.Result
			}
			call := last.ToolCalls[i]
			tm := &desk.Message{ID: desk.NewID("msg"), SessionID: x.SessionID, SurfaceID: x.SurfaceID, ExecutionID: x.ID,
				Role: desk.RoleTool, Text: r.Text, ToolCallID: call.ID, ToolName: call.Name, IsError: r.IsError, CreatedAt: now}
			if err := a.store.AppendMessage(ctx, tm); err != nil {
				return false, err
			}
		}
	}
	const why = "desk restarted; the turn was interrupted"
	aps, err := a.store.ListApprovals(ctx, x.SessionID, true)
	if err != nil {
		return false, err
	}
	for _, ap := range aps {
		if ap.ExecutionID == x.ID {
			if _, err := a.store.DecideApproval(ctx, ap.ID, desk.ApprovalCancelled, "system", why, now); err != nil && !desk.IsCode(err, desk.ECONFLICT) {
				return false, err
			}
		}
	}
	rs, err := a.store.ListInputRequests(ctx, x.SessionID)
	if err != nil {
		return false, err
	}
	for _, r := range rs {
		// A non-blocking request's answer still becomes a queue row: it
		// outlives its turn by design.
		if r.ExecutionID == x.ID && r.Blocking && r.Status == desk.InputPending {
			if _, err := a.store.AnswerInputRequest(ctx, r.ID, desk.InputCancelled, nil, now); err != nil && !desk.IsCode(err, desk.ECONFLICT) {
				return false, err
			}
		}
	}
	return false, nil
}

// personWaits maps the commands of x that asked a person — an approval,
// a blocking question, a plan card — to whether the answer is still
// pending. Withdrawn requests do not count.
func (a *Agent) personWaits(ctx context.Context, x *desk.Execution) (map[string]bool, error) {
	out := map[string]bool{}
	aps, err := a.store.ListApprovals(ctx, x.SessionID, false)
	if err != nil {
		return nil, err
	}
	for _, ap := range aps {
		if ap.ExecutionID == x.ID && ap.Status != desk.ApprovalCancelled {
			out[ap.CommandID] = out[ap.CommandID] || ap.Status == desk.ApprovalPending
		}
	}
	rs, err := a.store.ListInputRequests(ctx, x.SessionID)
	if err != nil {
		return nil, err
	}
	for _, r := range rs {
		if r.ExecutionID == x.ID && r.Blocking && r.Status != desk.InputCancelled {
			out[r.CommandID] = out[r.CommandID] || r.Status == desk.InputPending
		}
	}
	ps, err := a.store.ListPlans(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		out[p.CommandID] = out[p.CommandID] || p.Status == desk.PlanProposed
	}
	return out, nil
}

// executionMessages are the transcript messages of x, oldest first. An
// execution's messages are the newest of its surface while it is active,
// so they are read from the end, a page at a time.
func (a *Agent) executionMessages(ctx context.Context, x *desk.Execution) ([]*desk.Message, error) {
	var out []*desk.Message
	before := int64(0)
	for {
		page, err := a.store.ListMessages(ctx, x.SurfaceID, before, 200)
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

// lastStep is the execution's last assistant message when it made tool
// calls whose results are not in the transcript yet, else nil.
func lastStep(msgs []*desk.Message) *desk.Message {
	if len(msgs) == 0 {
		return nil
	}
	m := msgs[len(msgs)-1]
	if m.Role != desk.RoleAssistant || len(m.ToolCalls) == 0 {
		return nil
	}
	return m
}

// matchCommands pairs each call with its record (the newest with its call
// id); a call without one gets nil.
func matchCommands(calls []desk.MessageCall, cmds []*desk.Command) []*desk.Command {
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

// resume continues a turn adopted from a dead desk process at the step it
// waited in: the step's calls that finished keep their results, the call
// that waits re-enters its wait (the same approval, question or plan
// card), calls not started run, and the loop goes on with the next model
// call. The model is not asked again for the step that asked.
func (tr *turn) resume() (*execution.Outcome, error) {
	a, exe := tr.a, tr.t.Execution
	msgs, err := a.executionMessages(tr.ctx, exe)
	if err != nil {
		return nil, err
	}
	last := lastStep(msgs)
	if last == nil {
		return nil, fmt.Errorf("execution %s cannot continue: its last step is not in the transcript", exe.ID)
	}
	steps := 0
	for _, m := range msgs {
		if m.Role == desk.RoleAssistant {
			steps++
		}
	}
	all, err := a.store.ListCommands(tr.ctx, []string{exe.ID})
	if err != nil {
		return nil, err
	}
	cmds := matchCommands(last.ToolCalls, all)
	for i, c := range cmds {
		if c == nil {
			// The step was recorded but the record of this call was not:
			// it never started.
			call := last.ToolCalls[i]
			c = &desk.Command{ID: desk.NewID("cmd"), ExecutionID: exe.ID, SessionID: tr.x.ID, SurfaceID: exe.SurfaceID, CallID: call.ID,
				Tool: call.Name, Arguments: normJSON(call.Arguments), Status: desk.CommandRequested, CreatedAt: desk.Now()}
			if err := a.store.CreateCommand(tr.ctx, c); err != nil {
				return nil, err
			}
			cmds[i] = c
		}
		if c.Result != nil && c.Result.Stop != "" {
			tr.stopped = c.Result.Stop
		}
	}
	// A plan approved earlier in the turn stays pinned.
	ps, err := a.store.ListPlans(tr.ctx, exe.ID)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.Status == desk.PlanApproved {
			tr.plan, tr.planned = p.Card, true
		}
	}
	tr.t.Emit("turn.resumed", map[string]any{"step": steps, "message_id": last.ID})
	if out, err := tr.step(last, cmds); out != nil || err != nil {
		return out, err
	}
	return tr.loop(steps)
}
