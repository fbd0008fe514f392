package acpagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// errTurnDone ends the event stream once the turn settled.
var errTurnDone = errors.New("turn done")

// Options of a desk approval, as the editor sees them.
const (
	optApprove = "approve"
	optDeny    = "deny"
)

// turn follows one prompt's execution through the session's events and
// reports it to the editor.
type turn struct {
	a   *agent
	ses string
	sid acp.SessionId
	res *desk.SubmitResult
	exe string // the execution that took the message, once known

	calls     map[string]*call // by the model's call id
	byCommand map[string]*call // by command record id
	final     *desk.Execution

	mu   sync.Mutex
	asks map[string]context.CancelFunc // approval id → its open permission request
	wg   sync.WaitGroup
}

// call is one tool call as reported to the editor.
type call struct {
	id     string
	output string
}

// follow reports the turn until it settles. A cancel (session/cancel, or
// the request's own cancellation while the connection lives) interrupts
// the execution and waits for it to settle, ending with the cancelled
// stop reason.
func (t *turn) follow(req context.Context, cancelled <-chan struct{}) (acp.PromptResponse, error) {
	ctx, stop := context.WithCancel(t.a.ctx)
	defer stop()
	defer t.closeAsks()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-cancelled:
		case <-req.Done():
			if t.a.ctx.Err() != nil {
				return // the editor went away: the durable turn goes on
			}
		case <-ctx.Done():
			return
		}
		close(stopped)
	}()
	var interrupted bool
	events := make(chan error, 1)
	go func() {
		events <- t.a.c.Events(ctx, client.EventFilter{Session: t.ses}, t.res.EventsAfter, t.event)
	}()
	var err error
	for done := false; !done; {
		select {
		case err = <-events:
			done = true
		case <-stopped:
			stopped = nil
			interrupted = true
			t.stop()
			// Wait for the turn to settle, but not forever.
			go func() {
				select {
				case <-ctx.Done():
				case <-time.After(stopWait):
					stop()
				}
			}()
		}
	}
	if !errors.Is(err, errTurnDone) {
		if interrupted {
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		if t.a.ctx.Err() != nil {
			return acp.PromptResponse{}, acp.NewRequestCancelled(map[string]any{"error": "the connection closed"})
		}
		return acp.PromptResponse{}, rpcError(err)
	}
	x := t.final
	switch x.Phase {
	case desk.PhaseEnded:
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	case desk.PhaseInterrupted:
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	if strings.Contains(x.Reason, "DESK_MAX_STEPS") {
		return acp.PromptResponse{StopReason: acp.StopReasonMaxTurnRequests}, nil
	}
	return acp.PromptResponse{}, &acp.RequestError{Code: -32603, Message: fmt.Sprintf("Internal error: the turn %s failed: %s", x.ID, x.Reason),
		Data: map[string]any{"execution_id": x.ID, "reason": x.Reason}}
}

// stop interrupts the turn's execution, or withdraws the queued message
// when none has started (and interrupts the one that started meanwhile).
func (t *turn) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), stopWait)
	defer cancel()
	exe := t.execution()
	item := t.res.Item.ID
	if exe == "" {
		if _, err := t.a.c.QueueOp(ctx, t.ses, item, "cancel"); err == nil {
			t.a.log.Info("cancelled the queued message", "session", t.ses, "queued_item", item)
			return
		}
		if xs, err := t.a.c.Executions(ctx, t.ses); err == nil {
			for _, x := range xs {
				if x.QueueItemID == item {
					exe = x.ID
				}
			}
		}
		if exe == "" {
			return
		}
	}
	if _, err := t.a.c.Interrupt(ctx, t.ses, exe); err != nil {
		t.a.log.Warn("could not interrupt the cancelled turn", "execution", exe, "err", err)
		return
	}
	t.a.log.Info("interrupted the cancelled turn", "session", t.ses, "execution", exe)
}

func (t *turn) execution() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.exe
}

// event handles one event of the session (from the events goroutine).
func (t *turn) event(e *desk.Event) error {
	if e.Type == "gap" {
		// Events were dropped: the turn may have settled unseen.
		if exe := t.execution(); exe != "" {
			if x, err := t.a.c.Execution(t.a.ctx, exe); err == nil && x.Terminal() {
				t.final = x
				return errTurnDone
			}
		}
		return nil
	}
	if strings.HasPrefix(e.Type, "execution.") {
		var x desk.Execution
		if json.Unmarshal(e.Data, &x) != nil || x.QueueItemID != t.res.Item.ID {
			return nil
		}
		t.mu.Lock()
		t.exe = x.ID
		t.mu.Unlock()
		if x.Terminal() {
			t.final = &x
			return errTurnDone
		}
		return nil
	}
	if exe := t.execution(); exe == "" || e.ExecutionID != exe {
		return nil
	}
	switch {
	case e.Type == "assistant.delta":
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Text != "" {
			t.update(acp.UpdateAgentMessageText(d.Text))
		}
	case e.Type == "tool.call_started":
		var d struct {
			CallID string `json:"call_id"`
			Tool   string `json:"tool"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.CallID != "" && t.calls[d.CallID] == nil {
			t.calls[d.CallID] = &call{id: d.CallID}
			t.update(acp.StartToolCall(acp.ToolCallId(d.CallID), d.Tool, acp.WithStartKind(toolKind(d.Tool)), acp.WithStartStatus(acp.ToolCallStatusPending)))
		}
	case strings.HasPrefix(e.Type, "command."):
		var c desk.Command
		if json.Unmarshal(e.Data, &c) != nil || c.CallID == "" {
			return nil
		}
		t.command(&c)
	case e.Type == "tool.output":
		var d struct {
			CommandID string `json:"command_id"`
			Text      string `json:"text"`
		}
		if json.Unmarshal(e.Data, &d) == nil && t.byCommand[d.CommandID] != nil {
			k := t.byCommand[d.CommandID]
			k.output += d.Text
			t.update(acp.UpdateToolCall(acp.ToolCallId(k.id), acp.WithUpdateContent(textContent(k.output))))
		}
	case e.Type == "plan.proposed":
		var p desk.Plan
		if json.Unmarshal(e.Data, &p) == nil {
			if entries := planEntries(p.Card); len(entries) > 0 {
				t.update(acp.UpdatePlan(entries...))
			}
		}
	case e.Type == "approval.requested":
		var ap desk.Approval
		if json.Unmarshal(e.Data, &ap) == nil && ap.Status == desk.ApprovalPending {
			t.ask(&ap)
		}
	case e.Type == "approval.resolved":
		var ap desk.Approval
		if json.Unmarshal(e.Data, &ap) == nil {
			t.resolved(ap.ID)
		}
	}
	return nil
}

// command reports a command record's state: the tool call's start when it
// was not announced while streaming, then its status, input and output.
func (t *turn) command(c *desk.Command) {
	k := t.calls[c.CallID]
	status := commandStatus(c.Status)
	if k == nil {
		k = &call{id: c.CallID}
		t.calls[c.CallID] = k
		t.byCommand[c.ID] = k
		t.update(acp.StartToolCall(acp.ToolCallId(c.CallID), title(c.Tool, c.Arguments), acp.WithStartKind(toolKind(c.Tool)),
			acp.WithStartStatus(status), acp.WithStartRawInput(raw(c.Arguments))))
		if c.FinishedAt == nil {
			return
		}
	}
	t.byCommand[c.ID] = k
	opts := []acp.ToolCallUpdateOpt{acp.WithUpdateStatus(status), acp.WithUpdateTitle(title(c.Tool, c.Arguments)), acp.WithUpdateRawInput(raw(c.Arguments))}
	if c.FinishedAt != nil {
		out := c.Output
		if c.Error != "" {
			out = strings.TrimSpace(out + "\n" + c.Error)
		}
		if out != "" {
			k.output = out
			opts = append(opts, acp.WithUpdateContent(textContent(out)))
		}
		opts = append(opts, acp.WithUpdateRawOutput(map[string]any{"status": c.Status, "output": c.Output, "error": c.Error}))
	}
	t.update(acp.UpdateToolCall(acp.ToolCallId(k.id), opts...))
}

func (t *turn) update(u acp.SessionUpdate) {
	if err := t.a.conn.SessionUpdate(t.a.ctx, acp.SessionNotification{SessionId: t.sid, Update: u}); err != nil {
		t.a.log.Warn("could not send a session update", "session", t.ses, "err", err)
	}
}

// ask puts a desk approval to the editor as session/request_permission,
// in its own goroutine so the turn's events go on meanwhile; the chosen
// option decides the approval. An approval decided elsewhere (the web UI,
// the CLI) withdraws the request.
func (t *turn) ask(ap *desk.Approval) {
	ctx, cancel := context.WithCancel(t.a.ctx)
	t.mu.Lock()
	if _, dup := t.asks[ap.ID]; dup {
		t.mu.Unlock()
		cancel()
		return
	}
	t.asks[ap.ID] = cancel
	t.mu.Unlock()
	callID := ""
	if k := t.byCommand[ap.CommandID]; k != nil {
		callID = k.id
	}
	if callID == "" {
		callID = ap.CommandID
	}
	tc := acp.ToolCallUpdate{
		ToolCallId: acp.ToolCallId(callID),
		Title:      acp.Ptr(ap.Tool + ": " + ap.Summary),
		Kind:       acp.Ptr(toolKind(ap.Tool)),
		Status:     acp.Ptr(acp.ToolCallStatusPending),
	}
	req := acp.RequestPermissionRequest{SessionId: t.sid, ToolCall: tc, Options: []acp.PermissionOption{
		{OptionId: optApprove, Name: "Approve", Kind: acp.PermissionOptionKindAllowOnce},
		{OptionId: optDeny, Name: "Deny", Kind: acp.PermissionOptionKindRejectOnce},
	}}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer cancel()
		resp, err := t.a.conn.RequestPermission(ctx, req)
		if err != nil {
			if ctx.Err() == nil {
				t.a.log.Warn("the permission request failed", "approval", ap.ID, "err", err)
			}
			return
		}
		sel := resp.Outcome.Selected
		if sel == nil {
			return // the editor cancelled the request: the approval waits on
		}
		decision := ""
		switch string(sel.OptionId) {
		case optApprove:
			decision = "approve"
		case optDeny:
			decision = "deny"
		default:
			t.a.log.Warn("the editor chose an option desk did not offer", "approval", ap.ID, "option", sel.OptionId)
			return
		}
		if _, err := t.a.c.DecideApproval(ctx, ap.ID, decision, "answered in the editor (ACP)"); err != nil {
			t.a.log.Warn("could not decide the approval", "approval", ap.ID, "err", err)
			return
		}
		t.a.log.Info("approval decided in the editor", "approval", ap.ID, "decision", decision)
	}()
}

func (t *turn) resolved(id string) {
	t.mu.Lock()
	cancel := t.asks[id]
	t.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// closeAsks withdraws the turn's open permission requests and waits for
// their goroutines.
func (t *turn) closeAsks() {
	t.mu.Lock()
	for _, c := range t.asks {
		c()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// replay is a stored message as session/update notifications: the user's
// text, the assistant's text and its tool calls with their records'
// final state. Tool results are folded into their calls.
func replay(m *desk.Message) []acp.SessionUpdate {
	var us []acp.SessionUpdate
	switch m.Role {
	case "user":
		if m.Text != "" {
			us = append(us, acp.UpdateUserMessageText(m.Text))
		}
	case "assistant":
		if m.Text != "" {
			us = append(us, acp.UpdateAgentMessageText(m.Text))
		}
		for _, c := range m.ToolCalls {
			status := acp.ToolCallStatusPending
			var rec *desk.Command
			for _, r := range m.Commands {
				if r.CallID == c.ID {
					rec = r
				}
			}
			opts := []acp.ToolCallStartOpt{acp.WithStartKind(toolKind(c.Name)), acp.WithStartRawInput(raw(c.Arguments))}
			if rec != nil {
				status = commandStatus(rec.Status)
				out := strings.TrimSpace(rec.Output + "\n" + rec.Error)
				if out != "" {
					opts = append(opts, acp.WithStartContent(textContent(out)))
				}
			}
			opts = append(opts, acp.WithStartStatus(status))
			us = append(us, acp.StartToolCall(acp.ToolCallId(c.ID), title(c.Name, c.Arguments), opts...))
		}
	}
	return us
}

// commandStatus maps a command record's status onto ACP's.
func commandStatus(s string) acp.ToolCallStatus {
	switch s {
	case desk.CommandRequested, desk.CommandWaiting:
		return acp.ToolCallStatusPending
	case desk.CommandRunning:
		return acp.ToolCallStatusInProgress
	case desk.CommandSucceeded:
		return acp.ToolCallStatusCompleted
	}
	return acp.ToolCallStatusFailed // failed, declined, cancelled, unknown
}

// toolKind maps desk's tools onto ACP's kinds, for the editor's icons.
func toolKind(tool string) acp.ToolKind {
	switch tool {
	case "exec_command":
		return acp.ToolKindExecute
	case "read_file", "list_files", "inspect":
		return acp.ToolKindRead
	case "write_file", "edit_file", "apply_patch", "artifacts":
		return acp.ToolKindEdit
	case "delete_file":
		return acp.ToolKindDelete
	case "acquire":
		return acp.ToolKindFetch
	case "clarify", "request_user_input":
		return acp.ToolKindThink
	}
	return acp.ToolKindOther
}

// title is a tool call's one-line title: the command for exec_command,
// the path for file tools, else the tool's name.
func title(tool string, args json.RawMessage) string {
	var a struct {
		Command string `json:"command"`
		Path    string `json:"path"`
	}
	_ = json.Unmarshal(args, &a)
	switch {
	case a.Command != "":
		return tool + ": " + a.Command
	case a.Path != "":
		return tool + ": " + a.Path
	}
	return tool
}

func raw(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func textContent(s string) []acp.ToolCallContent {
	return []acp.ToolCallContent{acp.ToolContent(acp.TextBlock(s))}
}

// planEntries are a plan card's steps as ACP plan entries.
func planEntries(card json.RawMessage) []acp.PlanEntry {
	var c struct {
		Steps []string `json:"steps"`
	}
	if json.Unmarshal(card, &c) != nil {
		return nil
	}
	var es []acp.PlanEntry
	for _, s := range c.Steps {
		es = append(es, acp.PlanEntry{Content: s, Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending})
	}
	return es
}
