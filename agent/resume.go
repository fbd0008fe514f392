package agent

import (
	"context"
	"fmt"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/conversation"
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
	msgs, err := conversation.ExecutionMessages(ctx, a.store, x)
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
	last := conversation.LastStep(msgs)
	resume := false
	var stepCmds []*desk.Command
	if canResume && last != nil {
		stepCmds = conversation.MatchCommands(last.ToolCalls, cmds)
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
	settle := func(c *desk.Command, status string, r *desk.CommandResult) error {
		return a.conv.SettleCommand(ctx, c, status, r)
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
				if err := settle(c, desk.CommandUnknown, conversation.Synthesized("INTERRUPTED", conversation.UnknownOutcome)); err != nil {
					return false, err
				}
			default:
				// Ended without a result (stopped by the shutdown while
				// it ran): its outcome is not known either.
				if err := settle(c, desk.CommandUnknown, conversation.Synthesized("INTERRUPTED", conversation.UnknownOutcome)); err != nil {
					return false, err
				}
			}
		}
		return true, nil
	}
	// Nothing waits on a person: the turn ends, and everything it left
	// open is closed the way any executor's dead turn is.
	return false, a.conv.SettleDeadTurn(ctx, x)
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

// resume continues a turn adopted from a dead desk process at the step it
// waited in: the step's calls that finished keep their results, the call
// that waits re-enters its wait (the same approval, question or plan
// card), calls not started run, and the loop goes on with the next model
// call. The model is not asked again for the step that asked.
func (tr *turn) resume() (*execution.Outcome, error) {
	a, exe := tr.a, tr.t.Execution
	msgs, err := conversation.ExecutionMessages(tr.ctx, a.store, exe)
	if err != nil {
		return nil, err
	}
	last := conversation.LastStep(msgs)
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
	cmds := conversation.MatchCommands(last.ToolCalls, all)
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
