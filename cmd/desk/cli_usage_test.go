package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/desk-runtime/desk/internal/testwait"
)

// TestCLIUsageAndBudget: desk usage prints what a session's model calls
// reported (table and --json), desk usage --workspace the workspace's sum
// and budget, and desk workspace budget sets it (a negative one is refused).
func TestCLIUsageAndBudget(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "team")
	cl, err := client.New(c.url, c.token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	x, err := cl.CreateSession(ctx, ws.ID, client.SessionCreate{Model: "script",
		Script: json.RawMessage(`{"steps":[{"text":"hello","usage":{"input_tokens":321,"output_tokens":12,"cached_tokens":300}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	c.ok("send", x.ID, "hi")
	var u desk.SessionUsage
	testwait.Poll(30*time.Second, func() bool { c.json(&u, "usage", x.ID); return u.Total.Calls != 0 })
	want := desk.UsageTotals{Calls: 1, InputTokens: 321, OutputTokens: 12, CachedTokens: 300, TotalTokens: 333}
	if u.Total != want || len(u.Models) != 1 || u.Models[0].Model != "script" {
		t.Fatalf("usage --json = %+v", u)
	}
	if out := c.ok("usage", x.ID); !strings.Contains(out, "script") || !strings.Contains(out, "321") || !strings.Contains(out, "333") {
		t.Fatalf("usage table:\n%s", out)
	}
	var st desk.AgentSettings
	c.json(&st, "workspace", "budget", ws.ID, "1000")
	if st.TokenBudget != 1000 {
		t.Fatalf("workspace budget --json = %+v", st)
	}
	if got, err := cl.AgentSettings(ctx, ws.ID); err != nil || got.TokenBudget != 1000 {
		t.Fatalf("client AgentSettings = %+v %v", got, err)
	}
	c.fail(exitInvalid, "workspace", "budget", ws.ID, "--", "-5")
	c.fail(exitUsage, "workspace", "budget", ws.ID, "many")
	var wu desk.WorkspaceUsage
	c.json(&wu, "usage", "--workspace", ws.ID)
	if wu.TokenBudget != 1000 || wu.BudgetUsed != 333 || wu.Total != want || wu.Scope != desk.UsageScopeWorkspace {
		t.Fatalf("usage --workspace --json = %+v", wu)
	}
	if out := c.ok("usage", "--workspace", ws.ID); !strings.Contains(out, "token budget: 1000") || !strings.Contains(out, "workspace usage: 333") {
		t.Fatalf("usage --workspace:\n%s", out)
	}
	c.fail(exitUsage, "usage")
	c.fail(exitUsage, "usage", x.ID, "--workspace", ws.ID)
}
