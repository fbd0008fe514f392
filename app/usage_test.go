package app_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// usageOf is a script step's usage.
func usageOf(step map[string]any, in, out, cached int) map[string]any {
	step["usage"] = map[string]int{"input_tokens": in, "output_tokens": out, "cached_tokens": cached}
	return step
}

func (w *agentWorld) sessionUsage(ses string) desk.SessionUsage {
	w.T.Helper()
	var u desk.SessionUsage
	w.Must(200, "GET", "/v1/sessions/"+ses+"/usage", nil, &u)
	return u
}

func (w *agentWorld) activeBlocks(ses string) []desk.Block {
	w.T.Helper()
	var bs struct{ Blocks []desk.Block }
	w.Must(200, "GET", "/v1/sessions/"+ses+"/blocks", nil, &bs)
	var out []desk.Block
	for _, b := range bs.Blocks {
		if b.Active {
			out = append(out, b)
		}
	}
	return out
}

// TestUsageAndBudget: a turn against a model that reports usage records
// exactly those counts (session, workspace, execution, and the context
// budget switches to them); with the workspace's token budget used up the
// next turn is refused admission with a budget block naming the budget and
// the usage; raising the budget releases the block and the held-back turn
// runs.
func TestUsageAndBudget(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	// Bad budgets are refused, naming the field, and change nothing.
	for _, bad := range []any{-1, "lots", 1.5} {
		r := w.Admin("PATCH", "/v1/workspaces/"+w.ws.ID+"/agent", map[string]any{"token_budget": bad})
		if r.Status != 400 || !strings.Contains(r.ErrorMessage(), "token_budget") {
			t.Fatalf("token_budget %v = %d %s", bad, r.Status, r.Body)
		}
	}
	if st := w.settings(map[string]any{}); st.TokenBudget != 0 {
		t.Fatalf("a refused budget was stored: %+v", st)
	}
	if st := w.settings(map[string]any{"token_budget": 2000}); st.TokenBudget != 2000 {
		t.Fatalf("budget not set: %+v", st)
	}
	x := w.script(
		usageOf(calls(tc("write_file", map[string]any{"path": "/artifacts/a.md", "content": "# a\n"})), 1000, 50, 600),
		usageOf(says("done"), 1100, 20, 1000),
		usageOf(says("second turn"), 1200, 5, 0),
	)
	first := w.settled(w.send(x.ID, "first").ExecutionID)
	oneTerminal(t, first, desk.PhaseEnded)

	// The counts are the ones the model reported, per session, execution
	// and workspace.
	want := desk.UsageTotals{Calls: 2, InputTokens: 2100, OutputTokens: 70, CachedTokens: 1600, TotalTokens: 2170}
	u := w.sessionUsage(x.ID)
	if u.SessionID != x.ID || u.Total != want || len(u.Models) != 1 || u.Models[0].Model != "script" || u.Models[0].UsageTotals != want {
		t.Fatalf("session usage %+v", u)
	}
	if first.Usage == nil || *first.Usage != want {
		t.Fatalf("execution usage %+v", first.Usage)
	}
	var wu desk.WorkspaceUsage
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/usage", nil, &wu)
	if wu.Scope != desk.UsageScopeWorkspace || wu.Total != want || wu.TokenBudget != 2000 || wu.BudgetUsed != 2170 {
		t.Fatalf("workspace usage %+v", wu)
	}
	// The context budget starts from the last call's reported counts.
	var cv agent.ContextView
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/context", nil, &cv)
	if cv.Budget.Source != agent.BudgetProvider || cv.Budget.UsedTokens != 1120 {
		t.Fatalf("context budget %+v", cv.Budget)
	}

	// Past the budget: the next turn waits behind a budget block.
	res := w.send2(x.ID, "second")
	var blk desk.Block
	eventually(t, "a budget block", func() bool {
		bs := w.activeBlocks(x.ID)
		if len(bs) == 1 {
			blk = bs[0]
		}
		return len(bs) == 1
	})
	if blk.Kind != desk.BlockBudget || blk.Budget != 2000 || blk.Used != 2170 || !strings.Contains(blk.Reason, "2170") || !strings.Contains(blk.Reason, "2000") {
		t.Fatalf("budget block %+v", blk)
	}
	if it := w.item(x.ID, res.Item.ID); it.Status != desk.QueueStatusQueued || it.ExecutionID != "" {
		t.Fatalf("the turn past the budget was not held back: %+v", it)
	}
	// It is not released by hand, only by the budget.
	if r := w.Admin("POST", "/v1/sessions/"+x.ID+"/blocks/"+blk.ID+"/release", nil); r.Status != 409 || !strings.Contains(r.ErrorMessage(), "desk workspace budget") {
		t.Fatalf("manual release of a budget block = %d %s", r.Status, r.Body)
	}

	// Raising the budget releases it and the held-back turn runs.
	w.settings(map[string]any{"token_budget": 10000})
	var second desk.Execution
	eventually(t, "the held-back turn to run", func() bool {
		it := w.item(x.ID, res.Item.ID)
		if it.ExecutionID == "" {
			return false
		}
		second = w.settled(it.ExecutionID)
		return true
	})
	oneTerminal(t, second, desk.PhaseEnded)
	if len(w.activeBlocks(x.ID)) != 0 {
		t.Fatal("the budget block is still active")
	}
	var bs struct{ Blocks []desk.Block }
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/blocks", nil, &bs)
	if len(bs.Blocks) != 1 || bs.Blocks[0].ReleasedBy != "budget" {
		t.Fatalf("blocks after the raise: %+v", bs.Blocks)
	}
	if second.Usage == nil || second.Usage.TotalTokens != 1205 {
		t.Fatalf("second execution usage %+v", second.Usage)
	}
	// null clears the budget.
	if st := w.settings(map[string]any{"token_budget": nil}); st.TokenBudget != 0 {
		t.Fatalf("null did not clear the budget: %+v", st)
	}
}

// send2 submits without waiting for a claim (the row may stay queued).
func (w *agentWorld) send2(ses, text string) desk.SubmitResult {
	w.T.Helper()
	var res desk.SubmitResult
	w.Must(202, "POST", "/v1/sessions/"+ses+"/messages", map[string]string{"text": text}, &res)
	return res
}

// TestUsageActorScope: an actor token sees its own sessions' usage only
// (another's session is not found, the workspace sum covers its own
// sessions), and the workspace's budget figures.
func TestUsageActorScope(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"token_budget": 100000})
	x := w.script(usageOf(says("admin's"), 700, 7, 0))
	w.settled(w.send(x.ID, "hi").ExecutionID)
	_, tok := w.newActor("bob")
	var bx desk.Session
	w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", tok, map[string]any{"model": "script",
		"script": map[string]any{"steps": []any{usageOf(says("bob's"), 40, 2, 0)}}}).Decode(t, &bx)
	var sub desk.SubmitResult
	w.Req("POST", "/v1/sessions/"+bx.ID+"/messages", tok, map[string]string{"text": "hi"}).Decode(t, &sub)
	eventually(t, "bob's turn to be recorded", func() bool { return w.sessionUsage(bx.ID).Total.Calls == 1 })

	if r := w.Req("GET", "/v1/sessions/"+x.ID+"/usage", tok, nil); r.Status != 404 {
		t.Fatalf("bob read the admin's session usage: %d %s", r.Status, r.Body)
	}
	var wu desk.WorkspaceUsage
	w.Req("GET", "/v1/workspaces/"+w.ws.ID+"/usage", tok, nil).Decode(t, &wu)
	if wu.Scope != desk.UsageScopeActor || wu.ActorID == "" || wu.Total.Calls != 1 || wu.Total.TotalTokens != 42 ||
		len(wu.Models) != 1 || wu.TokenBudget != 100000 || wu.BudgetUsed != 749 {
		t.Fatalf("bob's workspace usage %+v", wu)
	}
	var all desk.WorkspaceUsage
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/usage", nil, &all)
	if all.Scope != desk.UsageScopeWorkspace || all.Total.Calls != 2 || all.Total.TotalTokens != 749 {
		t.Fatalf("admin's workspace usage %+v", all)
	}
	// Another workspace is not found for bob.
	var other desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	if r := w.Req("GET", "/v1/workspaces/"+other.ID+"/usage", tok, nil); r.Status != 404 && r.Status != 403 {
		t.Fatalf("bob read another workspace's usage: %d %s", r.Status, r.Body)
	}
}

// reporting is a model that reports usage on every call and answers the
// title and auto-review calls as a real model would.
type reporting struct {
	mu    sync.Mutex
	turns int
}

func (p *reporting) ContextWindow(string) int { return 100000 }

func (p *reporting) Stream(ctx context.Context, req provider.Request, fn func(provider.Event)) (*provider.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case strings.HasPrefix(req.System, "Write a title"):
		return &provider.Response{Text: "Usage title", StopReason: "end", Usage: provider.Usage{InputTokens: 20, OutputTokens: 3}}, nil
	case strings.HasPrefix(req.System, "You review"):
		return &provider.Response{Text: "APPROVE: ordinary write", StopReason: "end", Usage: provider.Usage{InputTokens: 50, OutputTokens: 4}}, nil
	}
	p.turns++
	if p.turns == 1 {
		args := json.RawMessage(`{"path":"/workspace/notes.txt","content":"hi\n"}`)
		return &provider.Response{ToolCalls: []provider.ToolCall{{ID: "call_1", Name: "write_file", Arguments: args}}, StopReason: "tool_calls",
			Usage: provider.Usage{InputTokens: 300, OutputTokens: 30, CachedTokens: 100}}, nil
	}
	return &provider.Response{Text: "written", StopReason: "end", Usage: provider.Usage{InputTokens: 400, OutputTokens: 10, CachedTokens: 300}}, nil
}

// TestUsageCountsReviewAndTitleCalls: the auto-review call is the turn's
// (on the execution), the title call the session's; both count.
func TestUsageCountsReviewAndTitleCalls(t *testing.T) {
	apptest.Parallel(t)
	model := &reporting{}
	w := newAgentWorld(t, func(c *app.Config) {
		c.Agent.Providers = func(provider.Spec) (provider.Provider, error) { return model, nil }
		c.Models = []string{"openai:test-model"}
	})
	w.settings(map[string]any{"approval_mode": desk.ApprovalModeAutoReview})
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "openai:test-model"}, &x)
	exe := w.settled(w.send(x.ID, "write a note").ExecutionID)
	oneTerminal(t, exe, desk.PhaseEnded)
	turn := desk.UsageTotals{Calls: 3, InputTokens: 750, OutputTokens: 44, CachedTokens: 400, TotalTokens: 794}
	if exe.Usage == nil || *exe.Usage != turn {
		t.Fatalf("execution usage %+v, want %+v (two steps and the review)", exe.Usage, turn)
	}
	var u desk.SessionUsage
	eventually(t, "the title call to be recorded", func() bool { u = w.sessionUsage(x.ID); return u.Total.Calls == 4 })
	if u.Total.TotalTokens != 817 || len(u.Models) != 1 || u.Models[0].Model != "openai:test-model" {
		t.Fatalf("session usage %+v", u)
	}
}
