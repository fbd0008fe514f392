package client

import (
	"context"

	"github.com/desk-runtime/desk"
)

// SessionUsage sums the tokens a session's model calls used, as the
// providers reported them, in total and per model.
func (c *Client) SessionUsage(ctx context.Context, ses string) (*desk.SessionUsage, error) {
	var out desk.SessionUsage
	if err := c.doJSON(ctx, "GET", "/v1/sessions/"+esc(ses)+"/usage", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkspaceUsage sums a workspace's model calls (an actor token: its own
// sessions), with the workspace's token budget and the usage it counts.
func (c *Client) WorkspaceUsage(ctx context.Context, ws string) (*desk.WorkspaceUsage, error) {
	var out desk.WorkspaceUsage
	if err := c.doJSON(ctx, "GET", "/v1/workspaces/"+esc(ws)+"/usage", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentSettings reads a workspace's agent settings.
func (c *Client) AgentSettings(ctx context.Context, ws string) (*desk.AgentSettings, error) {
	var out desk.AgentSettings
	if err := c.doJSON(ctx, "GET", "/v1/workspaces/"+esc(ws)+"/agent", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AgentSettingsPatch changes some agent settings; nil fields stay.
type AgentSettingsPatch struct {
	ApprovalMode  *string `json:"approval_mode,omitempty"`
	Network       *bool   `json:"network,omitempty"`
	BlockingInput *bool   `json:"blocking_input,omitempty"`
	// TokenBudget sets the token budget; 0 clears it.
	TokenBudget *int64 `json:"token_budget,omitempty"`
	// ExternalInstructions turns AGENTS.md / CLAUDE.md in the prompt on
	// or off.
	ExternalInstructions *bool `json:"external_instructions,omitempty"`
	// GitWritable lets the agent write /workspace's .git/hooks and
	// .git/config.
	GitWritable *bool `json:"git_writable,omitempty"`
}

// PatchAgentSettings changes a workspace's agent settings (admin). A
// changed token budget releases the workspace's budget blocks.
func (c *Client) PatchAgentSettings(ctx context.Context, ws string, p AgentSettingsPatch) (*desk.AgentSettings, error) {
	var out desk.AgentSettings
	if err := c.doJSON(ctx, "PATCH", "/v1/workspaces/"+esc(ws)+"/agent", p, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
