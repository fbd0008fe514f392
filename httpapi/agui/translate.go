package agui

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
)

// translator turns one execution's desk events into AG-UI events. It is
// fed the execution's events from the start on every connection, so what
// it makes of an event (message ids, which calls were announced) is the
// same each time, and Last-Event-ID names the same place.
//
// Text and tool arguments go out as TEXT_MESSAGE_CHUNK and
// TOOL_CALL_CHUNK: AG-UI clients open and close the message or call a
// chunk belongs to themselves, so a stream resumed in the middle of one
// is still well formed.
type translator struct {
	r     *Run
	step  int               // assistant messages finished so far
	texts bool              // the current step streamed text
	calls map[string]string // call id → tool, for calls announced
	index map[int]string    // streaming index → call id, this step
	done  map[string]bool   // calls whose result went out
	cmds  map[string]string // command record id → call id
}

func newTranslator(r *Run) *translator {
	return &translator{r: r, calls: map[string]string{}, index: map[int]string{}, done: map[string]bool{}, cmds: map[string]string{}}
}

func (t *translator) messageID() string {
	return fmt.Sprintf("%s-m%d", t.r.exe, t.step)
}

// event is what e becomes, and whether the run ends with it.
func (t *translator) event(ctx context.Context, e *desk.Event) ([]Event, bool) {
	if strings.HasPrefix(e.Type, "execution.") {
		return t.execution(e)
	}
	if t.r.exe == "" || e.ExecutionID != t.r.exe {
		return nil, false
	}
	switch {
	case e.Type == "assistant.delta":
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.Text == "" {
			return nil, false
		}
		t.texts = true
		return []Event{{"type": "TEXT_MESSAGE_CHUNK", "messageId": t.messageID(), "role": "assistant", "delta": d.Text}}, false
	case e.Type == "assistant.message":
		var d struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(e.Data, &d)
		var out []Event
		if !t.texts && d.Text != "" {
			out = append(out, Event{"type": "TEXT_MESSAGE_CHUNK", "messageId": t.messageID(), "role": "assistant", "delta": d.Text})
		}
		t.step++
		t.texts = false
		clear(t.index)
		return out, false
	case e.Type == "tool.call_started":
		var d struct {
			Index  int    `json:"index"`
			CallID string `json:"call_id"`
			Tool   string `json:"tool"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.CallID == "" {
			return nil, false
		}
		t.index[d.Index] = d.CallID
		if _, seen := t.calls[d.CallID]; seen {
			return nil, false
		}
		t.calls[d.CallID] = d.Tool
		return []Event{t.chunk(d.CallID, "")}, false
	case e.Type == "tool.args_delta":
		var d struct {
			Index int    `json:"index"`
			Delta string `json:"delta"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.Delta == "" {
			return nil, false
		}
		id := t.index[d.Index]
		if id == "" {
			return nil, false
		}
		return []Event{t.chunk(id, d.Delta)}, false
	case strings.HasPrefix(e.Type, "command."):
		var c desk.Command
		if json.Unmarshal(e.Data, &c) != nil || c.CallID == "" {
			return nil, false
		}
		return t.command(&c), false
	case e.Type == "approval.requested":
		var ap desk.Approval
		if json.Unmarshal(e.Data, &ap) != nil || !t.pendingApproval(ctx, ap.ID) {
			return nil, false
		}
		return t.interrupt(approvalInterrupt(&ap, e.Seq, t.callOf(ap.CommandID))), true
	case e.Type == "input.requested":
		var q desk.InputRequest
		if json.Unmarshal(e.Data, &q) != nil || !q.Blocking || !t.pendingInput(ctx, q.ID) {
			return nil, false
		}
		return t.interrupt(inputInterrupt(&q, e.Seq)), true
	case e.Type == "plan.proposed":
		var p desk.Plan
		if json.Unmarshal(e.Data, &p) != nil || !t.pendingPlan(ctx, p.ID) {
			return nil, false
		}
		return t.interrupt(planInterrupt(&p, e.Seq)), true
	}
	return nil, false
}

// chunk is a piece of a tool call's arguments. Every chunk names its
// tool: a client that reconnected in the middle of a call opens it again
// from whichever chunk comes first.
func (t *translator) chunk(callID, delta string) Event {
	ev := Event{"type": "TOOL_CALL_CHUNK", "toolCallId": callID, "toolCallName": t.calls[callID], "parentMessageId": t.messageID()}
	if delta != "" {
		ev["delta"] = delta
	}
	return ev
}

// callOf is the call id of a command record, when its call was announced.
func (t *translator) callOf(commandID string) string {
	return t.cmds[commandID]
}

// command reports a command record: its call, when it was not streamed
// (a runtime's calls, or a model that does not stream arguments), and its
// result once it finished.
func (t *translator) command(c *desk.Command) []Event {
	var out []Event
	t.cmds[c.ID] = c.CallID
	if _, seen := t.calls[c.CallID]; !seen {
		t.calls[c.CallID] = c.Tool
		args := string(c.Arguments)
		if args == "" || args == "null" {
			args = "{}"
		}
		out = append(out, t.chunk(c.CallID, args))
	}
	if c.FinishedAt == nil || t.done[c.CallID] {
		return out
	}
	t.done[c.CallID] = true
	content := c.Output
	if c.Error != "" {
		content = strings.TrimSpace(content + "\n" + c.Error)
	}
	if content == "" {
		content = c.Status
	}
	return append(out, Event{"type": "TOOL_CALL_RESULT", "messageId": t.r.exe + "-r-" + c.CallID, "toolCallId": c.CallID,
		"role": "tool", "content": content})
}

// execution reports the run's own execution starting and ending.
func (t *translator) execution(e *desk.Event) ([]Event, bool) {
	var x desk.Execution
	if json.Unmarshal(e.Data, &x) != nil {
		return nil, false
	}
	if t.r.exe == "" {
		if t.r.item == "" || x.QueueItemID != t.r.item {
			return nil, false
		}
		t.r.exe = x.ID
	}
	if x.ID != t.r.exe || !x.Terminal() {
		return nil, false
	}
	switch x.Phase {
	case desk.PhaseEnded:
		return []Event{{"type": "RUN_FINISHED", "threadId": t.r.in.ThreadID, "runId": t.r.in.RunID,
			"outcome": map[string]any{"type": "success"}, "result": map[string]any{"execution_id": x.ID}}}, true
	case desk.PhaseInterrupted:
		return []Event{{"type": "RUN_FINISHED", "threadId": t.r.in.ThreadID, "runId": t.r.in.RunID,
			"outcome": map[string]any{"type": "cancelled"}}}, true
	}
	msg := x.Reason
	if msg == "" {
		msg = "the turn failed"
	}
	return []Event{{"type": "RUN_ERROR", "message": msg, "code": "execution_failed"}}, true
}

func (t *translator) interrupt(in Event) []Event {
	return []Event{{"type": "RUN_FINISHED", "threadId": t.r.in.ThreadID, "runId": t.r.in.RunID,
		"outcome": map[string]any{"type": "interrupt", "interrupts": []Event{in}}}}
}

// pendingApproval reports whether an approval still waits: an event read
// again on a later connection may have been answered since.
func (t *translator) pendingApproval(ctx context.Context, id string) bool {
	aps, err := t.r.svc.Conversation.Approvals(ctx, t.r.session.ID, true)
	if err != nil {
		return true // ask: answering a decided one changes nothing
	}
	for _, a := range aps {
		if a.ID == id {
			return true
		}
	}
	return false
}

func (t *translator) pendingInput(ctx context.Context, id string) bool {
	reqs, err := t.r.svc.Conversation.InputRequests(ctx, t.r.session.ID)
	if err != nil {
		return true
	}
	for _, q := range reqs {
		if q.ID == id {
			return q.Status == "" || q.Status == desk.InputPending
		}
	}
	return false
}

func (t *translator) pendingPlan(ctx context.Context, id string) bool {
	p, err := t.r.svc.Conversation.Plan(ctx, id)
	if err != nil {
		return true
	}
	return p.Status == desk.PlanProposed
}

// planInterrupt is a plan card waiting for review as AG-UI's interrupt.
func planInterrupt(p *desk.Plan, seq int64) Event {
	var card struct {
		Title string `json:"title"`
	}
	_ = json.Unmarshal(p.Card, &card)
	return Event{"id": interruptID(kindPlan, p.ID, seq), "reason": "plan_review", "message": "Review the plan: " + card.Title,
		"responseSchema": map[string]any{"type": "object", "required": []any{"decision"}, "additionalProperties": false, "properties": map[string]any{
			"decision": map[string]any{"type": "string", "enum": []any{"approve", "decline", "revise"}},
			"notes":    map[string]any{"type": "string"}}},
		"metadata": map[string]any{"desk": map[string]any{"plan_id": p.ID, "execution_id": p.ExecutionID, "card": p.Card}}}
}

// approvalInterrupt is an approval as AG-UI's interrupt: the readable
// request, and a response schema offering exactly the approval's options.
func approvalInterrupt(ap *desk.Approval, seq int64, callID string) Event {
	ids := []any{}
	for _, o := range ap.Options {
		ids = append(ids, o.ID)
	}
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision": map[string]any{"type": "string", "enum": []any{"approve", "deny"}},
			"reason":   map[string]any{"type": "string"},
		},
		"additionalProperties": false,
	}
	if len(ids) > 0 {
		schema["properties"].(map[string]any)["option_id"] = map[string]any{"type": "string", "enum": ids}
	}
	what := ap.What
	if what == "" {
		what = ap.Summary
	}
	in := Event{"id": interruptID(kindApproval, ap.ID, seq), "reason": "tool_approval",
		"message": fmt.Sprintf("%s wants to run: %s", ap.Tool, what), "responseSchema": schema,
		"metadata": map[string]any{"desk": approvalMeta(ap, what)}}
	if callID != "" {
		in["toolCallId"] = callID
	}
	return in
}

// approvalMeta is the approval as desk shows it, with only the fields it
// has.
func approvalMeta(ap *desk.Approval, what string) map[string]any {
	m := map[string]any{"approval_id": ap.ID, "execution_id": ap.ExecutionID, "tool": ap.Tool, "what": what}
	for k, v := range map[string]string{"cwd": ap.Cwd, "why": ap.Why, "diff": ap.Diff} {
		if v != "" {
			m[k] = v
		}
	}
	if len(ap.Options) > 0 {
		m["options"] = ap.Options
	}
	return m
}

// inputInterrupt is a blocking question as AG-UI's interrupt.
func inputInterrupt(q *desk.InputRequest, seq int64) Event {
	props := map[string]any{}
	var lines []string
	for _, qq := range q.Questions {
		p := map[string]any{"type": "string", "description": qq.Question}
		if len(qq.Options) > 0 {
			var labels []any
			for _, o := range qq.Options {
				labels = append(labels, o.Label)
			}
			p["examples"] = labels
		}
		props[qq.ID] = p
		lines = append(lines, qq.Question)
	}
	in := Event{"id": interruptID(kindInput, q.ID, seq), "reason": "input_required", "message": strings.Join(lines, "\n"),
		"responseSchema": map[string]any{"type": "object", "properties": map[string]any{
			"answers": map[string]any{"type": "object", "properties": props, "additionalProperties": false}}},
		"metadata": map[string]any{"desk": map[string]any{"input_request_id": q.ID, "execution_id": q.ExecutionID, "questions": q.Questions}}}
	if q.Deadline != nil {
		in["expiresAt"] = q.Deadline.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return in
}
