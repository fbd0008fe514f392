package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/mcpserver"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// alternate sends each HTTP request of an MCP client to the next of nodes
// in turn (no stickiness of any kind), with the bearer token, and records
// what it saw.
type alternate struct {
	nodes []*url.URL
	token string

	mu        sync.Mutex
	n         int
	perNode   map[string]int
	sessionID []string // Mcp-Session-Id headers sent or received
	versions  map[string]int
}

func (a *alternate) RoundTrip(r *http.Request) (*http.Response, error) {
	a.mu.Lock()
	u := a.nodes[a.n%len(a.nodes)]
	a.n++
	a.perNode[u.Host]++
	a.versions[r.Header.Get("MCP-Protocol-Version")]++
	if s := r.Header.Get("Mcp-Session-Id"); s != "" {
		a.sessionID = append(a.sessionID, s)
	}
	a.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = u.Scheme, u.Host, u.Host
	r.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
			a.mu.Lock()
			a.sessionID = append(a.sessionID, s)
			a.mu.Unlock()
		}
	}
	return resp, err
}

// TestMCPStatelessAcrossTwoNodes: two real `desk serve` processes on one
// Postgres database, and the official MCP Go SDK client (v1.8.0, which
// speaks 2026-07-28) whose every HTTP request goes to the other node than
// the one before. Discovery, tools/list, a session_send that waits for the
// turn's reply, and resources/list all succeed, at 2026-07-28 and without
// any Mcp-Session-Id: any node answers any request, and the client goes on
// when a node is killed and another takes its place. A 2025-06-18 client
// (initialize, a session) still works against one node. Where a command
// sandbox exists, a turn runs as a Task (the Tasks extension) to completion
// through an approval answered via MRTR (tasks/get input_required,
// tasks/update), every request on the other node than the one before.
func TestMCPStatelessAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two-node test: skipped in -short mode")
	}
	pg := pgtest.DSN(t)
	home := t.TempDir() + "/home"
	opts := deskOpts{Home: home, Token: "mcp2", Env: []string{"DESK_POSTGRES=" + pg, "DESK_SHARED_HOME=1"}}
	a := startDesk(t, opts)
	b := startDesk(t, opts)

	var ws, ses struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "mcp"}, &ws)
	script := map[string]any{"steps": []map[string]any{{"text": "hello from the turn"}}}
	b.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": script}, &ses)

	ua, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	rt := &alternate{nodes: []*url.URL{ua, ub}, token: a.Token, perNode: map[string]int{}, versions: map[string]int{}}
	ctx := context.Background()
	c := sdk.NewClient(&sdk.Implementation{Name: "desk-e2e", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %q, want 2026-07-28", v)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) == 0 || tools.TTLMs <= 0 || tools.CacheScope != "public" {
		t.Fatalf("tools/list: %d tools, ttlMs %d, cacheScope %q", len(tools.Tools), tools.TTLMs, tools.CacheScope)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_send",
		Arguments: map[string]any{"session_id": ses.ID, "text": "hi", "wait": true}})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Outcome, Reply string }
	raw, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(raw, &out)
	if res.IsError || out.Outcome != "completed" || !strings.Contains(out.Reply, "hello from the turn") {
		t.Fatalf("session_send = error %v, %s", res.IsError, raw)
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rl.Resources) == 0 || rl.CacheScope != "private" {
		t.Fatalf("resources/list: %d resources, cacheScope %q", len(rl.Resources), rl.CacheScope)
	}
	rt.mu.Lock()
	if rt.perNode[ua.Host] < 2 || rt.perNode[ub.Host] < 2 {
		t.Errorf("requests per node: %v; want both nodes used", rt.perNode)
	}
	if len(rt.sessionID) > 0 {
		t.Errorf("Mcp-Session-Id seen at 2026-07-28: %v", rt.sessionID)
	}
	if rt.versions["2026-07-28"] < 4 {
		t.Errorf("MCP-Protocol-Version headers: %v", rt.versions)
	}
	rt.mu.Unlock()

	// Node A is killed and a new node takes its place (another port): the
	// same client session goes on without re-initializing, since no node
	// held anything of it.
	a.End(syscall.SIGKILL)
	a2 := a.Again()
	ua2, _ := url.Parse(a2.URL)
	rt.mu.Lock()
	rt.nodes[0] = ua2
	rt.mu.Unlock()
	for range 2 {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "sessions_list", Arguments: map[string]any{"workspace_id": ws.ID}}); err != nil {
			t.Fatalf("after node A restarted: %v", err)
		}
	}
	rt.mu.Lock()
	if rt.perNode[ua2.Host] == 0 {
		t.Errorf("the restarted node answered nothing: %v", rt.perNode)
	}
	rt.mu.Unlock()
	a = a2
	ua = ua2

	// A desk turn as a Task (the Tasks extension), through an approval
	// answered via MRTR (tasks/get: input_required with the approval as an
	// elicitation; tasks/update answers it), every request on the other
	// node than the one before.
	if _, err := sandbox.Detect(); err != nil {
		t.Logf("no command sandbox here, so no exec_command to approve; the task part is skipped: %v", err)
	} else {
		a.call("PATCH", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"approval_mode": "user"}, nil)
		var as struct{ ID string }
		appr := map[string]any{"steps": []map[string]any{
			{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}}},
			{"text": "ran it"}}}
		b.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": appr}, &as)
		runTaskAcrossNodes(t, rt, a.URL+"/mcp", as.ID)
	}

	// An old client: 2025-06-18, initialize and a session, on node A.
	one := &alternate{nodes: []*url.URL{ua}, token: a.Token, perNode: map[string]int{}, versions: map[string]int{}}
	old, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.URL + "/mcp", HTTPClient: &http.Client{Transport: one}},
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatalf("connect at 2025-06-18: %v", err)
	}
	defer old.Close()
	if v := old.InitializeResult().ProtocolVersion; v != "2025-06-18" {
		t.Fatalf("old client negotiated %q", v)
	}
	if old.ID() == "" {
		t.Fatal("old client has no Mcp-Session-Id")
	}
	if _, err := old.ListTools(ctx, nil); err != nil {
		t.Fatalf("tools/list at 2025-06-18: %v", err)
	}
}

type e2eTaskReq struct {
	sdk.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

type e2eTaskRes struct {
	sdk.ResultBase
	Status        string              `json:"status"`
	StatusMessage string              `json:"statusMessage"`
	InputRequests sdk.InputRequestMap `json:"inputRequests"`
	Result        *sdk.CallToolResult `json:"result"`
}

// runTaskAcrossNodes drives session_send with wait as a task to
// completion with the SDK's client (tasks/* as its custom methods),
// answering the turn's approval through tasks/update.
func runTaskAcrossNodes(t *testing.T, rt *alternate, endpoint, ses string) {
	t.Helper()
	ctx := context.Background()
	c := sdk.NewClient(&sdk.Implementation{Name: "desk-e2e-tasks", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Extensions: map[string]any{mcpserver.TasksExtension: map[string]any{}}}})
	for _, m := range []string{"tasks/get", "tasks/update"} {
		if err := sdk.AddSendingCustomMethod[*e2eTaskReq, *e2eTaskRes](c, m); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_send", Arguments: map[string]any{"session_id": ses, "text": "run it", "wait": true}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Meta[mcpserver.TaskIDMeta].(string)
	if id == "" {
		t.Fatalf("session_send did not become a task: %+v", res)
	}
	get := func() *e2eTaskRes {
		r, err := sdk.CallCustomMethod[*e2eTaskReq, *e2eTaskRes](ctx, cs, "tasks/get", &e2eTaskReq{TaskID: id})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		return r
	}
	var r *e2eTaskRes
	testwait.Until(t, time.Minute, func() bool { r = get(); return r.Status == "input_required" }, "the task's approval (input_required)")
	answers := map[string]json.RawMessage{}
	for k := range r.InputRequests {
		answers[k] = json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)
	}
	if len(answers) != 1 {
		t.Fatalf("inputRequests: %+v", r.InputRequests)
	}
	if _, err := sdk.CallCustomMethod[*e2eTaskReq, *e2eTaskRes](ctx, cs, "tasks/update", &e2eTaskReq{TaskID: id, InputResponses: answers}); err != nil {
		t.Fatalf("tasks/update: %v", err)
	}
	testwait.Until(t, time.Minute, func() bool { r = get(); return r.Status == "completed" }, "the task completed")
	raw, _ := json.Marshal(r.Result.StructuredContent)
	if !strings.Contains(string(raw), "ran it") || !strings.Contains(string(raw), `"outcome":"completed"`) {
		t.Fatalf("completed task: %s", raw)
	}
}

// TestMCPTaskSurvivesNodeRestart: a task waits for its approval while
// both nodes are killed (so the one running its turn dies) and two new
// ones take their place; the task is polled, and its approval answered if
// asked again, through the new nodes alternately. The task reaches a
// terminal status (in the runs so far: completed, with the turn's reply —
// desk took the turn up again), and both nodes report the same one;
// completed means the reply is the turn's. Nothing of the task lived in a
// killed process.
func TestMCPTaskSurvivesNodeRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("two-node test: skipped in -short mode")
	}
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no command sandbox here, so no exec_command to approve: %v", err)
	}
	pg := pgtest.DSN(t)
	home := t.TempDir() + "/home"
	opts := deskOpts{Home: home, Token: "mcp3", Env: []string{"DESK_POSTGRES=" + pg, "DESK_SHARED_HOME=1",
		"DESK_OWNER_TTL=3s", "DESK_HEARTBEAT_TIMEOUT=2s"}}
	a := startDesk(t, opts)
	b := startDesk(t, opts)
	var ws, ses struct{ ID string }
	a.call("POST", "/v1/workspaces", map[string]any{"name": "mcp"}, &ws)
	a.call("PATCH", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"approval_mode": "user"}, nil)
	appr := map[string]any{"steps": []map[string]any{
		{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}}},
		{"text": "ran it"}}}
	b.call("POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]any{"model": "script", "script": appr}, &ses)

	ua, _ := url.Parse(a.URL)
	ub, _ := url.Parse(b.URL)
	rt := &alternate{nodes: []*url.URL{ua, ub}, token: a.Token, perNode: map[string]int{}, versions: map[string]int{}}
	ctx := context.Background()
	c := sdk.NewClient(&sdk.Implementation{Name: "desk-e2e-tasks", Version: "1"}, &sdk.ClientOptions{
		Capabilities: &sdk.ClientCapabilities{Extensions: map[string]any{mcpserver.TasksExtension: map[string]any{}}}})
	for _, m := range []string{"tasks/get", "tasks/update"} {
		if err := sdk.AddSendingCustomMethod[*e2eTaskReq, *e2eTaskRes](c, m); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: a.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "session_send", Arguments: map[string]any{"session_id": ses.ID, "text": "run it", "wait": true}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Meta[mcpserver.TaskIDMeta].(string)
	if id == "" {
		t.Fatalf("session_send did not become a task: %+v", res)
	}
	get := func() *e2eTaskRes {
		r, err := sdk.CallCustomMethod[*e2eTaskReq, *e2eTaskRes](ctx, cs, "tasks/get", &e2eTaskReq{TaskID: id})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		return r
	}
	var r *e2eTaskRes
	testwait.Until(t, time.Minute, func() bool { r = get(); return r.Status == "input_required" }, "the task's approval (input_required)")

	// Both nodes are killed, so whichever ran the turn died with it, and
	// two new ones take their place.
	a.End(syscall.SIGKILL)
	b.End(syscall.SIGKILL)
	a2, b2 := a.Again(), b.Again()
	ua2, _ := url.Parse(a2.URL)
	ub2, _ := url.Parse(b2.URL)
	rt.mu.Lock()
	rt.nodes[0], rt.nodes[1] = ua2, ub2
	rt.mu.Unlock()

	terminal := func(s string) bool { return s == "completed" || s == "cancelled" || s == "failed" }
	testwait.Until(t, time.Minute, func() bool {
		r = get()
		if r.Status == "input_required" {
			answers := map[string]json.RawMessage{}
			for k := range r.InputRequests {
				answers[k] = json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)
			}
			if _, err := sdk.CallCustomMethod[*e2eTaskReq, *e2eTaskRes](ctx, cs, "tasks/update", &e2eTaskReq{TaskID: id, InputResponses: answers}); err != nil {
				t.Fatalf("tasks/update: %v", err)
			}
		}
		return terminal(r.Status)
	}, "the task reached a terminal status after the nodes were replaced")
	// The next two polls go to the two nodes: the same answer.
	r1, r2 := get(), get()
	if r1.Status != r.Status || r2.Status != r.Status {
		t.Fatalf("terminal status differs between nodes: %s, %s, %s", r.Status, r1.Status, r2.Status)
	}
	if r.Status == "completed" {
		raw, _ := json.Marshal(r.Result.StructuredContent)
		if !strings.Contains(string(raw), "ran it") {
			t.Fatalf("completed task: %s", raw)
		}
	}
	t.Logf("task after the nodes were replaced: %s (%s)", r.Status, r.StatusMessage)
}
