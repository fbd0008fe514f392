package mcpserver

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Profile tools: an MCP host lists and writes a workspace's agent
// profiles and switches a session's agent for its next turn, through the
// same HTTP routes (and checks) as the CLI and the web UI.
type (
	profileArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace (ws_…)"`
		Name        string `json:"name" jsonschema:"the profile's name"`
	}
	profilePutArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace (ws_…)"`
		Name        string `json:"name" jsonschema:"the profile's name (created, or replaced when it exists)"`
		desk.ProfileSpec
	}
	profilesOut struct {
		Profiles []*desk.Profile `json:"profiles"`
	}
	sessionSetArgs struct {
		SessionID       string  `json:"session_id" jsonschema:"the session (ses_…)"`
		Profile         *string `json:"profile,omitempty" jsonschema:"a profile of the session's workspace"`
		Model           *string `json:"model,omitempty" jsonschema:"a model the server offers"`
		ReasoningEffort *string `json:"reasoning_effort,omitempty" jsonschema:"low, medium, high, or empty for the model's default (a reasoning model only)"`
	}
)

func (b *backend) addProfileTools(s *sdk.Server) {
	addTool(s, "profiles_list", "List a workspace's agent profiles (desk's defaults included): executor, model, reasoning effort, approval mode, instructions, tools.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in workspaceArgs) (profilesOut, error) {
			ps, err := caller(ctx).ListProfiles(ctx, in.WorkspaceID)
			return profilesOut{nonNil(ps)}, err
		})
	addTool(s, "profile_put", "Create or replace an agent profile; a field naming an undeclared model, an unregistered runtime or an unknown tool is refused, naming it.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in profilePutArgs) (*desk.Profile, error) {
			return caller(ctx).PutProfile(ctx, in.WorkspaceID, in.Name, client.ProfileCreate{ProfileSpec: in.ProfileSpec})
		})
	addTool(s, "profile_delete", "Delete an agent profile (sessions made from it keep their snapshot).",
		func(ctx context.Context, _ *sdk.CallToolRequest, in profileArgs) (deletedOut, error) {
			return deletedOut{in.Name}, caller(ctx).DeleteProfile(ctx, in.WorkspaceID, in.Name)
		})
	addTool(s, "session_set", "Change a session's profile, model or reasoning effort from its next turn on (recorded in its transcript).",
		func(ctx context.Context, _ *sdk.CallToolRequest, in sessionSetArgs) (*desk.Session, error) {
			return caller(ctx).UpdateSession(ctx, in.SessionID, client.SessionPatch{Profile: in.Profile, Model: in.Model, ReasoningEffort: in.ReasoningEffort})
		})
}
