package main

// Following a turn for desk send: the reply on stdout as it streams, and on
// stderr what the turn is doing that a person must know about — queued
// behind another turn, waiting for an approval, an answer or a plan
// decision, and the command that gives it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// errFollowTimeout ends following when --timeout is reached.
var errFollowTimeout = errors.New("desk send --timeout reached")

// follower follows one queued message's turn through the session's events.
type follower struct {
	ctx    context.Context
	c      *client.Client
	ses    string
	res    *desk.SubmitResult
	json   bool
	out    io.Writer // the reply (or the events, with --json)
	info   io.Writer // what the turn waits on, tool calls, the outcome
	exe    string    // the execution that took the message, once known
	queued bool      // the message waited behind another turn
	// waits are the decisions the turn (or, while the message is queued,
	// the turn ahead of it) waits on now: id → "exe_… is waiting for …";
	// the newest one is what a --timeout reports.
	waits map[string]string
	last  string
	wrote bool // reply text went to out
	final *desk.Execution
}

// follow prints the turn until it settles (or ctx ends, or timeout > 0
// passes) and returns the error whose exit status says how it ended.
func (f *follower) follow(ctx context.Context, timeout time.Duration) error {
	f.ctx, f.exe = ctx, f.res.ExecutionID
	f.waits = map[string]string{}
	if f.exe == "" && f.res.Item != nil && f.res.Item.Status == desk.QueueStatusQueued {
		f.queued = true
		f.sayQueued(ctx)
	}
	fctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeoutCause(ctx, timeout, errFollowTimeout)
		defer cancel()
	}
	err := f.c.Events(fctx, client.EventFilter{Session: f.ses}, f.res.EventsAfter, f.event)
	if errors.Is(err, errTurnDone) {
		return f.outcome()
	}
	if fctx.Err() != nil && errors.Is(context.Cause(fctx), errFollowTimeout) {
		return f.timedOut(timeout)
	}
	return err
}

// event handles one event of the session.
func (f *follower) event(e *desk.Event) error {
	if f.json {
		b, _ := json.Marshal(e)
		fmt.Fprintf(f.out, "%s\n", b)
	}
	if e.Type == "gap" && f.exe != "" {
		// Events were dropped: the turn may have settled unseen.
		if x, err := f.c.Execution(f.ctx, f.exe); err == nil && x.Terminal() {
			f.final = x
			return errTurnDone
		}
		return nil
	}
	if strings.HasPrefix(e.Type, "execution.") {
		var x desk.Execution
		if json.Unmarshal(e.Data, &x) != nil || x.QueueItemID != f.res.Item.ID {
			return nil
		}
		if f.exe == "" {
			if f.queued {
				fmt.Fprintf(f.info, "[%s started: your message is being answered]\n", x.ID)
			}
			f.waits = map[string]string{} // what the turn ahead waited on
		}
		f.exe = x.ID
		if x.Terminal() {
			f.final = &x
			return errTurnDone
		}
		return nil
	}
	mine := f.exe != "" && e.ExecutionID == f.exe
	switch {
	case e.Type == "assistant.delta" && mine && !f.json:
		var d struct{ Text string }
		if json.Unmarshal(e.Data, &d) == nil && d.Text != "" {
			fmt.Fprint(f.out, d.Text)
			f.wrote = true
		}
	case strings.HasPrefix(e.Type, "command.") && mine && !f.json:
		// A tool call's settled state, on stderr so stdout stays the
		// reply.
		var c desk.Command
		if json.Unmarshal(e.Data, &c) == nil && c.FinishedAt != nil {
			// As desk watch shows it: what ran, how long, how it ended
			// (a command that exited non-zero is a failure, ✗).
			t := newTrace(io.Discard, false)
			fmt.Fprintf(f.info, "[%s]\n", strings.TrimSpace(t.commandLine(&c)))
			if tail := failureTail(&c); tail != "" {
				for _, l := range strings.Split(tail, "\n") {
					fmt.Fprintf(f.info, "  │ %s\n", l)
				}
			}
		}
	case mine:
		f.decision(e)
	case f.exe == "" && e.ExecutionID != "":
		// Our message is still queued: a turn ahead of it that waits on
		// a person is why.
		if line, id := waitLine(e); line != "" {
			f.wait(id, fmt.Sprintf("%s is %s", e.ExecutionID, line))
		} else if id := resolvedID(e); id != "" {
			delete(f.waits, id)
		}
	}
	return nil
}

// decision reports a request for, or the outcome of, a person's decision
// in our turn.
func (f *follower) decision(e *desk.Event) {
	if line, id := waitLine(e); line != "" {
		fmt.Fprintf(f.info, "[%s]\n", line)
		f.waits[id], f.last = fmt.Sprintf("the turn %s is %s", f.exe, line), id
		return
	}
	if e.Type == "input.requested" {
		// A non-blocking question: the turn goes on with the defaults.
		var r desk.InputRequest
		if json.Unmarshal(e.Data, &r) == nil {
			fmt.Fprintf(f.info, "[asked %s; the turn goes on with the defaults, and an answer later becomes a new message: %s]\n", r.ID, answerHint(&r))
		}
		return
	}
	id := resolvedID(e)
	if id == "" {
		return
	}
	if _, waited := f.waits[id]; !waited {
		return
	}
	delete(f.waits, id)
	var d struct {
		Status    string `json:"status"`
		DecidedBy string `json:"decided_by"`
	}
	_ = json.Unmarshal(e.Data, &d)
	by := ""
	if d.DecidedBy != "" {
		by = " by " + d.DecidedBy
	}
	fmt.Fprintf(f.info, "[%s %s%s; the turn goes on]\n", id, d.Status, by)
}

// waitLine says what an event makes a turn wait for and how to answer it,
// with the id of the decision; "" for any other event.
func waitLine(e *desk.Event) (string, string) {
	switch e.Type {
	case "approval.requested":
		var a desk.Approval
		if json.Unmarshal(e.Data, &a) != nil || a.Status != desk.ApprovalPending {
			return "", ""
		}
		what := "to run " + backticked(approvalWhat(&a))
		if a.Tool != "exec_command" && a.Tool != "command" {
			what = "for " + a.Tool + " " + backticked(approvalWhat(&a))
		}
		if a.Cwd != "" {
			what += " in " + a.Cwd
		}
		if a.Why != "" {
			what += " (" + a.Why + ")"
		}
		line := fmt.Sprintf("waiting for approval %s %s; answer with desk approve %s or desk deny %s", a.ID, what, a.ID, a.ID)
		// The executor's other options (allow for this session …).
		var more []string
		for _, o := range a.Options {
			if o.Kind != desk.OptionAllowOnce && o.Kind != desk.OptionRejectOnce {
				more = append(more, fmt.Sprintf("desk approve %s --option %s (%s)", a.ID, o.ID, o.Label))
			}
		}
		if len(more) > 0 {
			line += ", or " + strings.Join(more, ", or ")
		}
		return line, a.ID
	case "input.requested":
		var r desk.InputRequest
		if json.Unmarshal(e.Data, &r) != nil || !r.Blocking || r.Status != desk.InputPending {
			return "", ""
		}
		var qs []string
		for _, q := range r.Questions {
			qs = append(qs, fmt.Sprintf("%s: %s", q.ID, q.Question))
		}
		return fmt.Sprintf("waiting for an answer to %s (%s); answer with %s", r.ID, strings.Join(qs, "; "), answerHint(&r)), r.ID
	case "plan.proposed":
		var p desk.Plan
		if json.Unmarshal(e.Data, &p) != nil {
			return "", ""
		}
		var c planCard
		_ = json.Unmarshal(p.Card, &c)
		steps := ""
		for i, s := range c.Steps {
			steps += fmt.Sprintf(" %d. %s", i+1, s)
		}
		return fmt.Sprintf("waiting for a decision on plan %s %q:%s; answer with desk plan approve %s, desk plan revise %s --notes TEXT or desk plan decline %s",
			p.ID, c.Title, steps, p.ID, p.ID, p.ID), p.ID
	}
	return "", ""
}

// resolvedID is the decision an approval.resolved, input.* or plan.*
// event settles.
func resolvedID(e *desk.Event) string {
	if e.Type != "approval.resolved" && !strings.HasPrefix(e.Type, "input.") && !strings.HasPrefix(e.Type, "plan.") {
		return ""
	}
	var d struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.ID
}

// sayQueued says where a message that did not start at once waits: its
// place in the queue and the turn it waits behind, and what that turn
// itself waits on.
func (f *follower) sayQueued(ctx context.Context) {
	it := f.res.Item
	pos := 0
	if items, err := f.c.Queue(ctx, f.ses, false); err == nil {
		n := 0
		for _, q := range items {
			if q.SurfaceID != it.SurfaceID || q.Status != desk.QueueStatusQueued {
				continue
			}
			n++
			if q.ID == it.ID {
				pos = n
			}
		}
		if pos == 0 {
			return // claimed meanwhile: the turn starts now
		}
	}
	where := fmt.Sprintf("queued %s", it.ID)
	if pos > 0 {
		where += fmt.Sprintf(" at position %d", pos)
	}
	var running *desk.Execution
	if xs, err := f.c.Executions(ctx, f.ses); err == nil {
		for _, x := range xs {
			if x.SurfaceID == it.SurfaceID && desk.PhaseActive(x.Phase) {
				running = x
				break
			}
		}
	}
	if running == nil {
		blocked := ""
		if bs, err := f.c.Blocks(ctx, f.ses); err == nil {
			for _, b := range bs {
				if b.Active && b.SurfaceID == it.SurfaceID {
					blocked = fmt.Sprintf(", held by block %s (%s: %s); desk blocks release %s %s lets it run", b.ID, b.Kind, b.Reason, f.ses, b.ID)
					break
				}
			}
		}
		fmt.Fprintf(f.info, "[%s%s; it starts when the session is free]\n", where, blocked)
		return
	}
	fmt.Fprintf(f.info, "[%s behind the %s execution %s; your message runs after it]\n", where, running.Phase, running.ID)
	if as, err := f.c.Approvals(ctx, f.ses, true); err == nil {
		for _, a := range as {
			if a.ExecutionID == running.ID {
				line, _ := waitLine(&desk.Event{Type: "approval.requested", Data: mustJSON(a)})
				f.wait(a.ID, fmt.Sprintf("%s is %s", running.ID, line))
			}
		}
	}
	if rs, err := f.c.InputRequests(ctx, f.ses); err == nil {
		for _, r := range rs {
			if r.ExecutionID == running.ID {
				if line, _ := waitLine(&desk.Event{Type: "input.requested", Data: mustJSON(r)}); line != "" {
					f.wait(r.ID, fmt.Sprintf("%s is %s", running.ID, line))
				}
			}
		}
	}
}

// wait records what the turn ahead of the message waits on, and says so
// unless it was said already (the listing and the event both report it).
func (f *follower) wait(id, what string) {
	if _, known := f.waits[id]; !known {
		fmt.Fprintf(f.info, "[ahead of your message, %s]\n", what)
	}
	f.waits[id], f.last = what, id
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// outcome ends a settled turn: 0 when it ended, 8 failed, 9 interrupted.
func (f *follower) outcome() error {
	x := f.final
	if !f.json {
		fmt.Fprintln(f.out)
		if x.Phase == desk.PhaseEnded {
			fmt.Fprintf(f.info, "%s %s: %s\n", x.ID, x.Phase, orDash(x.Reason))
		}
	}
	// A failed or interrupted turn is said once, by the error.
	switch x.Phase {
	case desk.PhaseFailed:
		return &codedError{exitTurnFailed, fmt.Sprintf("the turn %s failed: %s", x.ID, orDash(x.Reason))}
	case desk.PhaseInterrupted:
		why := orDash(x.Reason)
		if i := x.Interruption; i != nil {
			why = strings.TrimSpace(firstNonEmpty(i.Reason, x.Reason) + " (by " + i.By + ")")
		}
		return &codedError{exitInterrupted, fmt.Sprintf("the turn %s was interrupted: %s", x.ID, why)}
	}
	return nil
}

// timedOut ends a turn that has not settled within --timeout: exit 10,
// saying what it still waits on; the turn itself goes on.
func (f *follower) timedOut(d time.Duration) error {
	if f.wrote && !f.json {
		fmt.Fprintln(f.out)
	}
	what := f.waits[f.last]
	if what == "" {
		for _, w := range f.waits {
			what = w
			break
		}
	}
	var state string
	switch {
	case f.exe == "" && what != "":
		state = fmt.Sprintf("your message %s is still queued; ahead of it, %s", f.res.Item.ID, what)
	case f.exe == "":
		state = fmt.Sprintf("your message %s is still queued", f.res.Item.ID)
	case what != "":
		state = what
	default:
		state = fmt.Sprintf("the turn %s is still running", f.exe)
	}
	return &codedError{exitWaiting, fmt.Sprintf("stopped following after %s: %s; it goes on without desk send", d, state)}
}
