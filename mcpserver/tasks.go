package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Tasks extension (io.modelcontextprotocol/tasks) for a desk turn:
// session_send with wait, from a 2026-07-28 client that declares the
// extension on the request, is answered at once with a task instead of
// blocking; tasks/get reports the turn, tasks/update answers its approvals
// (MRTR: an approval is an elicitation in inputRequests), tasks/cancel
// interrupts exactly its execution.
//
// A task keeps no state of its own: its id names the session and the
// queued item the send created, and everything else is read from desk
// with the caller's own token on every request. So any node answers any
// task request, a task survives any node's restart (the turn is durable in
// desk), and a caller who cannot read the session cannot read, answer or
// cancel its task either: desk refuses them as it refuses the session.

// TasksExtension is the extension's identifier.
const TasksExtension = "io.modelcontextprotocol/tasks"

// TaskIDMeta is the _meta key under which a task answer repeats its taskId.
const TaskIDMeta = "desk/taskId"

// Task poll hints: desk turns take seconds; a task lives as long as its
// session, so its TTL is unlimited (null).
const taskPollInterval = 500 * time.Millisecond

// task is the extension's Task with its status-specific fields, the
// result of tools/call (resultType "task") and of tasks/get ("complete").
type task struct {
	sdk.ResultBase
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs"`
	InputRequests  sdk.InputRequestMap `json:"inputRequests,omitempty"`
	Result         *sdk.CallToolResult `json:"result,omitempty"`
	Error          *jsonrpc.Error      `json:"error,omitempty"`
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	sdk.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses sdk.InputResponseMap `json:"inputResponses,omitempty"`
}

// emptyTaskResult acknowledges tasks/update and tasks/cancel.
type emptyTaskResult struct {
	sdk.ResultBase
	ResultType string `json:"resultType"`
}

// taskID names a session's queued item; parseTaskID undoes it.
func taskID(ses, item string) string { return "task." + ses + "." + item }

func parseTaskID(id string) (ses, item string, err error) {
	parts := strings.Split(id, ".")
	if len(parts) != 3 || parts[0] != "task" || parts[1] == "" || parts[2] == "" {
		return "", "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("taskId %q is not a desk task id", id)}
	}
	return parts[1], parts[2], nil
}

// approvalKey is the inputRequests key of an approval: unique over the
// task's lifetime, as the extension requires, since approval ids are.
func approvalKey(id string) string { return "approval:" + id }

// inputKey names a blocking question's input request in a task's
// inputRequests and inputResponses.
func inputKey(id string) string { return "input:" + id }

// wantsTask reports whether a tools/call should become a task: a
// session_send with wait, whose request declares the extension.
func wantsTask(req sdk.Request) (*sessionSendArgs, bool) {
	r, ok := req.(*sdk.CallToolRequest)
	if !ok || r.Params == nil || r.Params.Name != "session_send" {
		return nil, false
	}
	// Only the stateless revision: 2025-11-25 had tasks of another shape.
	if r.ProtocolVersion() < StatelessVersion {
		return nil, false
	}
	caps := r.ClientCapabilities()
	if caps == nil || caps.Extensions == nil {
		return nil, false
	}
	if _, ok := caps.Extensions[TasksExtension]; !ok {
		return nil, false
	}
	var in sessionSendArgs
	if json.Unmarshal(r.Params.Arguments, &in) != nil || !in.Wait || in.SessionID == "" {
		return nil, false
	}
	return &in, true
}

// createTask queues the message and answers the task at once (the queued
// item is durable before the answer, so tasks/get resolves at once).
func (b *backend) createTask(ctx context.Context, in *sessionSendArgs) (sdk.Result, error) {
	res, err := caller(ctx).Send(ctx, in.SessionID, client.SubmitInput{Text: in.Text, Surface: in.Surface})
	if err != nil {
		// As the tool would: desk's refusal is a tool error, not a task.
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: toolError(err).Error()}}}, nil
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	id := taskID(in.SessionID, res.Item.ID)
	// The id rides in _meta too: a client library that decodes every
	// tools/call answer as a CallToolResult (the Go SDK v1.8.0 does) keeps
	// _meta and drops the task's own fields.
	return &task{ResultBase: sdk.ResultBase{Meta: sdk.Meta{TaskIDMeta: id}}, ResultType: "task", TaskID: id, Status: "working",
		StatusMessage: "queued " + res.Item.ID, CreatedAt: now, LastUpdatedAt: now,
		PollIntervalMs: taskPollInterval.Milliseconds()}, nil
}

// execOf is the execution that runs the queued item, or nil while none
// has started.
func execOf(ctx context.Context, ses, item string) (*desk.Execution, error) {
	exes, err := caller(ctx).Executions(ctx, ses)
	if err != nil {
		return nil, err
	}
	for _, x := range exes {
		if x.QueueItemID == item {
			return x, nil
		}
	}
	return nil, nil
}

func (b *backend) getTask(ctx context.Context, p *taskParams) (*task, error) {
	ses, item, err := parseTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	x, err := execOf(ctx, ses, item)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	t := &task{ResultType: "complete", TaskID: p.TaskID, Status: "working", CreatedAt: now, LastUpdatedAt: now,
		PollIntervalMs: taskPollInterval.Milliseconds(), StatusMessage: "queued"}
	if x == nil {
		// No execution yet: the queued item says whether one will come.
		q, err := caller(ctx).Queue(ctx, ses, true)
		if err != nil {
			return nil, err
		}
		for _, it := range q {
			if it.ID != item {
				continue
			}
			switch it.Status {
			case desk.QueueStatusCancelled:
				t.Status, t.StatusMessage = "cancelled", "the queued message was cancelled before its turn started"
			case desk.QueueStatusDelivered:
				// Its execution is older than the newest 100 the session
				// lists: the result is no longer reachable through a task.
				t.Status = "failed"
				t.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
					Message: "the task's turn is no longer among its session's newest executions; read the transcript instead"}
			case desk.QueueStatusFailed:
				out := &sendOut{QueuedItem: it, Outcome: "failed", Reason: "the queued message could not be delivered"}
				raw, _ := json.Marshal(out)
				t.Status, t.Result = "completed", &sdk.CallToolResult{IsError: true, StructuredContent: out,
					Content: []sdk.Content{&sdk.TextContent{Text: string(raw)}}}
			}
			return t, nil
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("task %q not found", p.TaskID)}
	}
	t.CreatedAt = x.RequestedAt.UTC().Format(time.RFC3339Nano)
	t.StatusMessage = x.ID + " " + x.Phase
	if !x.Terminal() {
		aprs, err := caller(ctx).Approvals(ctx, ses, true)
		if err != nil {
			return nil, err
		}
		for _, a := range aprs {
			if a.ExecutionID != x.ID {
				continue
			}
			if t.InputRequests == nil {
				t.InputRequests = sdk.InputRequestMap{}
			}
			props := map[string]*jsonschema.Schema{
				"decision": {Type: "string", Enum: []any{"approve", "deny"}},
				"reason":   {Type: "string"},
			}
			if len(a.Options) > 0 {
				// The executor's own answers (allow always, reject once,
				// …) by their exact ids; option_id wins over decision.
				ids := make([]any, len(a.Options))
				var labels []string
				for i, o := range a.Options {
					ids[i] = o.ID
					labels = append(labels, o.ID+" = "+o.Label)
				}
				props["option_id"] = &jsonschema.Schema{Type: "string", Enum: ids, Description: strings.Join(labels, "; ")}
			}
			what := a.What
			if what == "" {
				what = a.Summary
			}
			t.InputRequests[approvalKey(a.ID)] = &sdk.ElicitParams{
				Message:         fmt.Sprintf("Approve %s: %s", a.Tool, what),
				RequestedSchema: &jsonschema.Schema{Type: "object", Properties: props},
			}
		}
		// Blocking questions hold the turn too: each is one form, a
		// string per question.
		reqs, err := caller(ctx).InputRequests(ctx, ses)
		if err != nil {
			return nil, err
		}
		for _, q := range reqs {
			if q.ExecutionID != x.ID || !q.Blocking || q.Status != desk.InputPending {
				continue
			}
			if t.InputRequests == nil {
				t.InputRequests = sdk.InputRequestMap{}
			}
			props := map[string]*jsonschema.Schema{}
			var lines []string
			for _, qq := range q.Questions {
				p := &jsonschema.Schema{Type: "string", Description: qq.Question}
				if qq.Default != "" {
					p.Default, _ = json.Marshal(qq.Default)
				}
				for _, o := range qq.Options {
					p.Examples = append(p.Examples, o.Label)
				}
				props[qq.ID] = p
				lines = append(lines, qq.Question)
			}
			t.InputRequests[inputKey(q.ID)] = &sdk.ElicitParams{Message: strings.Join(lines, "\n"),
				RequestedSchema: &jsonschema.Schema{Type: "object", Properties: props}}
		}
		if t.InputRequests != nil {
			t.Status, t.StatusMessage = "input_required", x.ID+" waits for an answer"
		}
		return t, nil
	}
	out := &sendOut{ExecutionID: x.ID, Outcome: x.Outcome, Reason: x.Reason}
	if out.Outcome == "" {
		out.Outcome = desk.OutcomeOf(x.Phase)
	}
	if x.Interruption != nil && out.Outcome != "completed" {
		t.Status = "cancelled"
		return t, nil
	}
	ms, err := caller(ctx).Transcript(ctx, ses, client.TranscriptOptions{Limit: 500})
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.ExecutionID == x.ID && m.Role == "assistant" && m.Text != "" {
			out.Reply = m.Text
		}
	}
	raw, _ := json.Marshal(out)
	t.Status = "completed"
	t.Result = &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(raw)}}, StructuredContent: out,
		IsError: out.Outcome != "completed"}
	return t, nil
}

// updateTask answers the task's outstanding approvals from inputResponses
// keyed approval:<id>. Keys not outstanding for this task's execution are
// ignored, as the extension asks: an answer can reach only an approval of
// the task it names, and the task only if the caller can read its session.
func (b *backend) updateTask(ctx context.Context, p *taskParams) (*emptyTaskResult, error) {
	ses, item, err := parseTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	x, err := execOf(ctx, ses, item)
	if err != nil {
		return nil, err
	}
	if x == nil || x.Terminal() {
		return &emptyTaskResult{ResultType: "complete"}, nil
	}
	aprs, err := caller(ctx).Approvals(ctx, ses, true)
	if err != nil {
		return nil, err
	}
	for _, a := range aprs {
		if a.ExecutionID != x.ID {
			continue
		}
		r, ok := p.InputResponses[approvalKey(a.ID)].(*sdk.ElicitResult)
		if !ok {
			continue
		}
		decision, reason := "deny", "declined through MCP"
		if r.Action == "accept" {
			d, _ := r.Content["decision"].(string)
			if opt, _ := r.Content["option_id"].(string); opt != "" {
				ok := false
				for _, o := range a.Options {
					ok = ok || o.ID == opt
				}
				if !ok {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
						Message: fmt.Sprintf("inputResponses[%q]: option_id %q is not one of the approval's options", approvalKey(a.ID), opt)}
				}
				d = opt
			} else if d != "approve" && d != "deny" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
					Message: fmt.Sprintf("inputResponses[%q]: decision must be approve or deny, not %q", approvalKey(a.ID), d)}
			}
			decision, reason = d, ""
			if s, ok := r.Content["reason"].(string); ok {
				reason = s
			}
		}
		if _, err := caller(ctx).DecideApproval(ctx, a.ID, decision, reason); err != nil && desk.ErrorCode(err) != desk.ECONFLICT {
			return nil, err
		}
	}
	reqs, err := caller(ctx).InputRequests(ctx, ses)
	if err != nil {
		return nil, err
	}
	for _, q := range reqs {
		if q.ExecutionID != x.ID || q.Status != desk.InputPending {
			continue
		}
		r, ok := p.InputResponses[inputKey(q.ID)].(*sdk.ElicitResult)
		if !ok {
			continue
		}
		answers := map[string]string{}
		if r.Action == "accept" {
			for _, qq := range q.Questions {
				v, present := r.Content[qq.ID]
				if !present {
					continue
				}
				s, isStr := v.(string)
				if !isStr {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
						Message: fmt.Sprintf("inputResponses[%q].%s must be a string", inputKey(q.ID), qq.ID)}
				}
				answers[qq.ID] = s
			}
		}
		// Declined or cancelled: the defaults stand, as at the deadline.
		if _, err := caller(ctx).AnswerInput(ctx, q.ID, answers); err != nil && desk.ErrorCode(err) != desk.ECONFLICT {
			return nil, err
		}
	}
	return &emptyTaskResult{ResultType: "complete"}, nil
}

// cancelTask interrupts exactly the task's execution (or cancels its
// queued item before one started).
func (b *backend) cancelTask(ctx context.Context, p *taskParams) (*emptyTaskResult, error) {
	ses, item, err := parseTaskID(p.TaskID)
	if err != nil {
		return nil, err
	}
	x, err := execOf(ctx, ses, item)
	if err != nil {
		return nil, err
	}
	exe := ""
	if x != nil {
		if x.Terminal() {
			return &emptyTaskResult{ResultType: "complete"}, nil
		}
		exe = x.ID
	}
	b.stopTurn(ctx, ses, item, exe, b.logger)
	return &emptyTaskResult{ResultType: "complete"}, nil
}

// requireTasks refuses a tasks/* request whose _meta does not declare the
// extension, with -32021 and the capability it needs, as the extension
// asks of a server whose method needs a capability the client lacks.
func requireTasks(p *taskParams) error {
	caps, _ := p.GetMeta()["io.modelcontextprotocol/clientCapabilities"].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	if _, ok := ext[TasksExtension]; ok {
		return nil
	}
	return &jsonrpc.Error{Code: sdk.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability: " + TasksExtension,
		Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`)}
}

// addTasks registers the extension's methods and advertises it.
func (b *backend) addTasks(s *sdk.Server) {
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(sdk.AddReceivingCustomMethod(s, "tasks/get", func(ctx context.Context, _ *sdk.ServerSession, p *taskParams) (*task, error) {
		if err := requireTasks(p); err != nil {
			return nil, err
		}
		return b.getTask(ctx, p)
	}))
	must(sdk.AddReceivingCustomMethod(s, "tasks/update", func(ctx context.Context, _ *sdk.ServerSession, p *taskParams) (*emptyTaskResult, error) {
		if err := requireTasks(p); err != nil {
			return nil, err
		}
		return b.updateTask(ctx, p)
	}))
	must(sdk.AddReceivingCustomMethod(s, "tasks/cancel", func(ctx context.Context, _ *sdk.ServerSession, p *taskParams) (*emptyTaskResult, error) {
		if err := requireTasks(p); err != nil {
			return nil, err
		}
		return b.cancelTask(ctx, p)
	}))
}
