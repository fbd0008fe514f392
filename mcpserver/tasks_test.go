package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/mcpserver"
	"github.com/desk-runtime/desk/sandbox"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Tasks extension's messages, for the SDK client's custom methods.
type taskReq struct {
	sdk.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

type taskRes struct {
	sdk.ResultBase
	ResultType    string              `json:"resultType"`
	TaskID        string              `json:"taskId"`
	Status        string              `json:"status"`
	StatusMessage string              `json:"statusMessage"`
	InputRequests sdk.InputRequestMap `json:"inputRequests"`
	Result        *sdk.CallToolResult `json:"result"`
}

// taskClient connects the SDK's client at 2026-07-28, declaring the Tasks
// extension, with tasks/get, tasks/update and tasks/cancel registered.
func taskClient(t *testing.T, url, token string) *sdk.ClientSession {
	return taskClientWith(t, url, token, &sdk.ClientCapabilities{Extensions: map[string]any{mcpserver.TasksExtension: map[string]any{}}})
}

func taskClientWith(t *testing.T, url, token string, caps *sdk.ClientCapabilities) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "desk-task-test", Version: "1"}, &sdk.ClientOptions{Capabilities: caps})
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if err := sdk.AddSendingCustomMethod[*taskReq, *taskRes](c, m); err != nil {
			t.Fatal(err)
		}
	}
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func taskCall(t *testing.T, cs *sdk.ClientSession, method, id string, responses map[string]json.RawMessage) (*taskRes, error) {
	t.Helper()
	return sdk.CallCustomMethod[*taskReq, *taskRes](context.Background(), cs, method, &taskReq{TaskID: id, InputResponses: responses})
}

// startTask sends text to ses as a task and returns its id.
func startTask(t *testing.T, cs *sdk.ClientSession, ses, text string) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "session_send",
		Arguments: map[string]any{"session_id": ses, "text": text, "wait": true}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Meta[mcpserver.TaskIDMeta].(string)
	if id == "" || res.IsError {
		t.Fatalf("session_send as a task: %+v", res)
	}
	return id
}

// A desk turn as a task: created at once, polled to completion with its
// reply; another actor can neither read nor cancel it.
func TestTaskTurn(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cs := taskClient(t, w.mcpURL, w.tokA)
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script",
		"script": script(map[string]any{"text": "done as a task"})}, &ses)
	id := startTask(t, cs, ses.ID, "go")

	// On the wire: resultType "task" and the Task's fields at the top.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"session_send","arguments":{"session_id":"` + ses.ID + `","text":"again","wait":true},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"` + mcpserver.TasksExtension + `":{}}}}}}`
	h := http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"session_send"}}
	r := rawPost(t, w.mcpURL, w.tokA, h, body)
	for _, want := range []string{`"resultType":"task"`, `"taskId":"task.` + ses.ID, `"status":"working"`, `"ttlMs":null`, `"pollIntervalMs":500`} {
		if !strings.Contains(string(r.Body), want) {
			t.Fatalf("tools/call as a task: %d %s, want %s", r.StatusCode, r.Body, want)
		}
	}

	// Bob's token: the task is alice's session's, so desk refuses him.
	csB := taskClient(t, w.mcpURL, w.tokB)
	if _, err := taskCall(t, csB, "tasks/get", id, nil); err == nil || !strings.Contains(err.Error(), "not_found") && !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("bob's tasks/get of alice's task: %v", err)
	}
	if _, err := taskCall(t, csB, "tasks/cancel", id, nil); err == nil {
		t.Fatal("bob cancelled alice's task")
	}
	if _, err := taskCall(t, csB, "tasks/update", id, map[string]json.RawMessage{"approval:x": json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)}); err == nil {
		t.Fatal("bob's tasks/update of alice's task was accepted")
	}
	// Without the extension declared: -32021, and session_send blocks.
	plain := taskClientWith(t, w.mcpURL, w.tokA, &sdk.ClientCapabilities{})
	if _, err := taskCall(t, plain, "tasks/get", id, nil); err == nil || !strings.Contains(err.Error(), "-32021") && !strings.Contains(err.Error(), "Missing required client capability") {
		t.Fatalf("tasks/get without the extension: %v", err)
	}
	if _, err := taskCall(t, cs, "tasks/get", "task."+ses.ID+".qi_nothere", nil); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a task id naming no queued message: %v", err)
	}
	if _, err := taskCall(t, cs, "tasks/get", "task.nope", nil); err == nil || !strings.Contains(err.Error(), "not a desk task id") {
		t.Fatalf("a malformed task id: %v", err)
	}

	var last *taskRes
	eventually(t, "the task completed", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = r
		return r.Status == "completed"
	})
	var out struct{ Outcome, Reply string }
	raw, _ := json.Marshal(last.Result.StructuredContent)
	_ = json.Unmarshal(raw, &out)
	if last.ResultType != "complete" || out.Outcome != "completed" || out.Reply != "done as a task" || last.Result.IsError {
		t.Fatalf("completed task: %+v %s", last, raw)
	}
}

// An approval raised during the task's turn reaches the client as an
// input_required task (an elicitation in inputRequests), and tasks/update
// answers it; an answer keyed for another approval is ignored.
func TestTaskApprovalThroughMRTR(t *testing.T) {
	apptest.Parallel(t)
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no command sandbox here, so no exec_command to approve: %v", err)
	}
	w := newWorld(t)
	ctx := context.Background()
	if err := w.admin.Do(ctx, "PATCH", "/v1/workspaces/"+w.ws+"/agent", strings.NewReader(`{"approval_mode":"user"}`), "application/json", nil); err != nil {
		t.Fatal(err)
	}
	cs := taskClient(t, w.mcpURL, w.tokA)
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script", "script": script(
		map[string]any{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}}},
		map[string]any{"text": "ran it"})}, &ses)
	id := startTask(t, cs, ses.ID, "run it")
	var pending *taskRes
	eventually(t, "input_required", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		pending = r
		return r.Status == "input_required"
	})
	if len(pending.InputRequests) != 1 {
		t.Fatalf("inputRequests = %+v", pending.InputRequests)
	}
	var key string
	for k, v := range pending.InputRequests {
		key = k
		if e, ok := v.(*sdk.ElicitParams); !ok || !strings.Contains(e.Message, "echo hi") {
			t.Fatalf("inputRequests[%s] = %#v", k, v)
		}
	}
	// An answer under a key that is not outstanding changes nothing.
	if _, err := taskCall(t, cs, "tasks/update", id, map[string]json.RawMessage{"approval:apr_other": json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)}); err != nil {
		t.Fatal(err)
	}
	if r, _ := taskCall(t, cs, "tasks/get", id, nil); r.Status != "input_required" {
		t.Fatalf("after an unrelated answer: %s", r.Status)
	}
	if _, err := taskCall(t, cs, "tasks/update", id, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)}); err != nil {
		t.Fatal(err)
	}
	var last *taskRes
	eventually(t, "the task completed", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = r
		return r.Status == "completed"
	})
	raw, _ := json.Marshal(last.Result.StructuredContent)
	if !strings.Contains(string(raw), "ran it") {
		t.Fatalf("completed: %s", raw)
	}
}

// tasks/cancel interrupts exactly the task's execution.
func TestTaskCancel(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cs := taskClient(t, w.mcpURL, w.tokA)
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script",
		"script": script(map[string]any{"text": strings.Repeat("slow ", 50), "delay_ms": 60000})}, &ses)
	id := startTask(t, cs, ses.ID, "take your time")
	eventually(t, "the turn running", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		return err == nil && strings.Contains(r.StatusMessage, "exe_")
	})
	if _, err := taskCall(t, cs, "tasks/cancel", id, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the task cancelled", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		return err == nil && r.Status == "cancelled"
	})
}

// desk mcp (stdio) serves the Tasks extension too: a turn as a task, to
// completion, over one stdio connection at 2026-07-28.
func TestStdioTask(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mcpserver.RunStdio(ctx, w.clientA, inR, outW, mcpserver.Options{Version: "test"})
		outW.Close()
	}()
	defer func() { cancel(); inW.Close(); <-done }()
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-task-test", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Extensions: map[string]any{mcpserver.TasksExtension: map[string]any{}}}})
	if err := sdk.AddSendingCustomMethod[*taskReq, *taskRes](c, "tasks/get"); err != nil {
		t.Fatal(err)
	}
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script",
		"script": script(map[string]any{"text": "stdio task done"})}, &ses)
	id := startTask(t, cs, ses.ID, "go")
	var last *taskRes
	eventually(t, "the stdio task completed", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		last = r
		return r.Status == "completed"
	})
	raw, _ := json.Marshal(last.Result.StructuredContent)
	if !strings.Contains(string(raw), "stdio task done") {
		t.Fatalf("stdio task result: %s", raw)
	}
}

// A blocking question raised during the task's turn reaches the client
// as an MRTR input request (one string per question), and the answer in
// tasks/update is the question's answer; a non-string answer is refused.
func TestTaskQuestionThroughMRTR(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	if err := w.admin.Do(ctx, "PATCH", "/v1/workspaces/"+w.ws+"/agent", strings.NewReader(`{"blocking_input":true}`), "application/json", nil); err != nil {
		t.Fatal(err)
	}
	cs := taskClient(t, w.mcpURL, w.tokA)
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script", "script": script(
		map[string]any{"tool_calls": []map[string]any{{"name": "request_user_input", "arguments": map[string]any{"questions": []map[string]any{
			{"id": "color", "question": "Which colour?", "options": []map[string]any{{"label": "red", "recommended": true}, {"label": "blue"}}}}}}}},
		map[string]any{"text": "painted"})}, &ses)
	id := startTask(t, cs, ses.ID, "paint it")
	var pending *taskRes
	eventually(t, "input_required", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		pending = r
		return r.Status == "input_required"
	})
	var key string
	for k, v := range pending.InputRequests {
		key = k
		e, ok := v.(*sdk.ElicitParams)
		if !ok || !strings.HasPrefix(k, "input:") || !strings.Contains(e.Message, "Which colour?") {
			t.Fatalf("inputRequests[%s] = %#v", k, v)
		}
	}
	if _, err := taskCall(t, cs, "tasks/update", id, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"color":7}}`)}); err == nil || !strings.Contains(err.Error(), "must be a string") {
		t.Fatalf("a numeric answer: %v", err)
	}
	if _, err := taskCall(t, cs, "tasks/update", id, map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"color":"blue"}}`)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the task completed", func() bool {
		r, err := taskCall(t, cs, "tasks/get", id, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status == "completed"
	})
	reqs, err := w.admin.InputRequests(ctx, ses.ID)
	if err != nil || len(reqs) != 1 || reqs[0].Answers["color"] != "blue" {
		t.Fatalf("the question's answer: %+v %v", reqs, err)
	}
}
