package e2e

// The real Claude Code as an MCP host of desk: `claude -p` with desk's
// MCP server in --mcp-config (streamable HTTP at /mcp with the admin
// bearer token in its headers, and stdio `desk mcp`), talking to the strict Anthropic Messages server, whose
// scripted answer calls desk's session_send tool the way Claude Code
// exposes it (mcp__desk__session_send). The message must land in the desk
// session, and the tool's result must reach the model in Claude Code's
// next request.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/internal/testwait"
)

func claudeBinary(t *testing.T) string {
	return npmbin.Find(t, "claude", "Claude Code (@anthropic-ai/claude-code)")
}

// claudeEnv is an offline environment for Claude Code: its own home and
// config dir, the model API at base, and no telemetry, update checks or
// other traffic.
func claudeEnv(t *testing.T, base string) []string {
	home := t.TempDir()
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL=" + base,
		"ANTHROPIC_API_KEY=dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1",
		// MCP tools are declared to the model directly, not deferred
		// behind ToolSearch (measured with 2.1.332: without it no request
		// declares mcp__desk__session_send, only ToolSearch).
		"ENABLE_TOOL_SEARCH=false",
		// A slow start of `desk mcp` under load must not leave Claude Code
		// running without desk's tools.
		"MCP_TIMEOUT=120000",
	}
}

// TestClaudeCodeAsMCPHost runs the real Claude Code against desk's MCP
// server through both doors: streamable HTTP at the running desk's /mcp
// (the bearer token in the config's headers) and stdio (`desk mcp`, which
// Claude Code starts, with DESK_SERVER and DESK_TOKEN).
func TestClaudeCodeAsMCPHost(t *testing.T) {
	t.Parallel()
	bin := claudeBinary(t)
	// The desk session has a model of its own (a second strict server),
	// so a message sent to it is taken and answered like any other.
	deskModel := strict.NewAnthropic(t)
	deskModel.Respond(func(strict.Request) strict.Reply { return strict.Reply{Text: "received"} })
	d := newModelDesk(t, deskModel, "DESK_MODEL=anthropic:claude-sonnet-4-5", "ANTHROPIC_BASE_URL="+deskModel.BaseURL(),
		"ANTHROPIC_API_KEY=sk-ant-dummy-key-for-tests")
	for _, door := range []string{"http", "stdio"} {
		t.Run(door, func(t *testing.T) {
			server := map[string]any{"type": "http", "url": d.c.BaseURL + "/mcp",
				"headers": map[string]string{"Authorization": "Bearer " + d.c.Token}}
			if door == "stdio" {
				server = map[string]any{"type": "stdio", "command": deskBin, "args": []string{"mcp"},
					"env": map[string]string{"DESK_SERVER": d.c.BaseURL, "DESK_TOKEN": d.c.Token}}
			}
			claudeSends(t, bin, d, server, "hello from Claude Code over MCP ("+door+")")
		})
	}
}

// claudeSends runs `claude -p` with server as its MCP server "desk", scripted
// to call session_send with text, and checks both ends.
func claudeSends(t *testing.T, bin string, d *modelDesk, server map[string]any, sent string) {
	const tool = "mcp__desk__session_send"
	model := strict.NewAnthropic(t)
	model.Respond(func(r strict.Request) strict.Reply {
		// Claude Code makes side calls of its own (a title, a quota
		// check) without desk's tools; they get plain text.
		if !slices.Contains(r.ToolNames(), tool) {
			return strict.Reply{Text: "ok"}
		}
		if len(r.ToolResults()) == 0 {
			args, _ := json.Marshal(map[string]string{"session_id": d.ses.ID, "text": sent})
			return strict.Reply{ToolCalls: []strict.Call{{ID: "toolu_desk_send", Name: tool, Arguments: string(args)}}}
		}
		return strict.Reply{Text: "Sent it."}
	})

	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"desk": server}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "Send a greeting to my desk session.",
		"--mcp-config", string(cfg), "--strict-mcp-config",
		"--allowedTools", tool, "--output-format", "json", "--model", "claude-sonnet-4-5")
	cmd.Dir = t.TempDir()
	cmd.Env = claudeEnv(t, model.BaseURL())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	if rj := model.Rejected(); len(rj) > 0 {
		t.Fatalf("the strict server refused Claude Code's request: %d %s\n%s", rj[0].Status, rj[0].Error, rj[0].Body)
	}
	var declared bool
	for _, r := range model.Accepted() {
		declared = declared || slices.Contains(r.ToolNames(), tool)
	}
	if !declared {
		t.Fatalf("no request of Claude Code declared %s (desk's MCP server not connected, or its tools deferred); claude: %s", tool, out)
	}

	// The tool's result reached Claude Code: its next request answers the
	// call with desk's result (the queued item), not an error.
	var result string
	var found bool
	for _, r := range model.Accepted() {
		if res, ok := r.ToolResults()["toolu_desk_send"]; ok {
			result, found = res, true
		}
	}
	if !found {
		t.Fatalf("no request carried the tool_result of the session_send call; claude: %s", out)
	}
	// It is desk's structured result, first in the text (Claude Code may
	// append reminders of its own after it).
	var sendRes struct {
		ExecutionID string `json:"execution_id"`
		QueuedItem  struct {
			SessionID string `json:"session_id"`
			Text      string `json:"text"`
		} `json:"queued_item"`
	}
	if err := json.NewDecoder(strings.NewReader(result)).Decode(&sendRes); err != nil ||
		sendRes.QueuedItem.SessionID != d.ses.ID || sendRes.QueuedItem.Text != sent || sendRes.ExecutionID == "" {
		t.Fatalf("the tool_result is not desk's session_send result (%v): %q", err, result)
	}
	var final struct {
		Result  string `json:"result"`
		IsError bool   `json:"is_error"`
	}
	if err := json.Unmarshal(out, &final); err != nil || final.IsError || final.Result != "Sent it." {
		t.Fatalf("claude's final answer: %+v (%v)\n%s", final, err, out)
	}

	// The message arrived in the desk session (a message once the session
	// takes it; the desk's own model answers it).
	var msgs struct{ Messages []desk.Message }
	arrived := testwait.Poll(60*time.Second, func() bool {
		d.c.Must(t, 200, "GET", "/v1/sessions/"+d.ses.ID+"/messages?limit=100", nil, &msgs)
		for _, m := range msgs.Messages {
			if m.Role == desk.RoleUser && m.Text == sent {
				return true
			}
		}
		return false
	})
	if !arrived {
		t.Fatalf("the desk session has no user message %q: %+v\ntool result: %s", sent, msgs.Messages, result)
	}
}
