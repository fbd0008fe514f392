package mcpserver

import (
	"context"

	"github.com/desk-runtime/desk"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Routine tools: an MCP host lists, creates, pauses, runs and deletes a
// workspace's routines through the same HTTP routes (and so the same
// actor scoping) as the CLI and the web UI.
type (
	routineArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace (ws_…)"`
		RoutineID   string `json:"routine_id" jsonschema:"the routine (rtn_…)"`
	}
	routineCreateArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace to create the routine in"`
		desk.RoutineCreate
	}
	routineUpdateArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace (ws_…)"`
		RoutineID   string `json:"routine_id" jsonschema:"the routine (rtn_…)"`
		desk.RoutineUpdate
	}
	routineRunsArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace (ws_…)"`
		RoutineID   string `json:"routine_id" jsonschema:"the routine (rtn_…)"`
		Limit       int    `json:"limit,omitempty" jsonschema:"at most this many runs, newest first (default 100)"`
	}
	routinesOut struct {
		Routines []*desk.Routine `json:"routines"`
	}
	routineRunsOut struct {
		Runs []*desk.RoutineRun `json:"runs"`
	}
	deletedOut struct {
		Deleted string `json:"deleted"`
	}
)

func (b *backend) addRoutineTools(s *sdk.Server) {
	addTool(s, "routines_list", "List a workspace's routines (prompts submitted on a schedule) with their schedule, state and next run time.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in workspaceArgs) (routinesOut, error) {
			rs, err := caller(ctx).ListRoutines(ctx, in.WorkspaceID)
			return routinesOut{nonNil(rs)}, err
		})
	addTool(s, "routine_create", `Create a routine: prompt submitted on schedule (cron "0 9 * * 1-5" read in time_zone, "@hourly" or "@every 30s") to session_id, or to a new session per run when session_id is empty; overlap skip (default) or queue.`,
		func(ctx context.Context, _ *sdk.CallToolRequest, in routineCreateArgs) (*desk.Routine, error) {
			return caller(ctx).CreateRoutine(ctx, in.WorkspaceID, in.RoutineCreate)
		})
	addTool(s, "routine_update", "Change a routine: the fields given change, the others stay; enabled false pauses it, true resumes it.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in routineUpdateArgs) (*desk.Routine, error) {
			return caller(ctx).UpdateRoutine(ctx, in.WorkspaceID, in.RoutineID, in.RoutineUpdate)
		})
	addTool(s, "routine_run", "Run a routine now, by hand (a paused one too); the overlap policy holds, so a run may come back skipped.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in routineArgs) (*desk.RoutineRun, error) {
			return caller(ctx).RunRoutine(ctx, in.WorkspaceID, in.RoutineID)
		})
	addTool(s, "routine_runs", "List a routine's runs, newest first, with their trigger, status, session, execution and error.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in routineRunsArgs) (routineRunsOut, error) {
			rs, err := caller(ctx).RoutineRuns(ctx, in.WorkspaceID, in.RoutineID, in.Limit)
			return routineRunsOut{nonNil(rs)}, err
		})
	addTool(s, "routine_delete", "Delete a routine and its run history; runs already submitted go on.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in routineArgs) (deletedOut, error) {
			return deletedOut{in.RoutineID}, caller(ctx).DeleteRoutine(ctx, in.WorkspaceID, in.RoutineID)
		})
}
