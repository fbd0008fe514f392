package agent

import (
	"context"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/conversation"
	"github.com/desk-runtime/desk/selection"
)

// Store is what the tool-loop agent reads and writes: what its tools need,
// the gate's records (the conversation service's), selection items it
// collects, and its own: the transcript, commands, usage, script cursors,
// title jobs and leases of a turn.
type Store interface {
	tools.Store
	conversation.Store
	selection.ItemStore
	UpdateCommand(ctx context.Context, c *desk.Command) error
	AppendMessage(ctx context.Context, m *desk.Message) error
	ListMessages(ctx context.Context, surfaceID string, beforeSeq int64, limit int) ([]*desk.Message, error)
	ListCommands(ctx context.Context, executionIDs []string) ([]*desk.Command, error)
	ListBindings(ctx context.Context, sessionID string) ([]*desk.Group, error)
	ListPlans(ctx context.Context, executionID string) ([]*desk.Plan, error)
	ListInputRequests(ctx context.Context, sessionID string) ([]*desk.InputRequest, error)
	ListApprovals(ctx context.Context, sessionID string, pendingOnly bool) ([]*desk.Approval, error)
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetSessionAgent(ctx context.Context, sessionID string) (*desk.SessionAgent, error)
	GetAgentSettings(ctx context.Context, workspaceID string) (*desk.AgentSettings, error)
	EndTitleJob(ctx context.Context, sessionID string) error
	CreateCommand(ctx context.Context, c *desk.Command) error
	BeginTitleJob(ctx context.Context, sessionID, firstMessage string, at time.Time) (int, error)
	ThreadBySurface(ctx context.Context, surfaceID string) (*desk.Thread, error)
	SetAutoTitle(ctx context.Context, sessionID, title string) (bool, error)
	ReleaseLeases(ctx context.Context, executionID string) error
	RecordUsage(ctx context.Context, u *desk.ModelUsage) error
	NextThreadScriptStep(ctx context.Context, threadID string) (int, error)
	NextScriptStep(ctx context.Context, sessionID string) (int, error)
	LoadedExtensions(ctx context.Context, surfaceID string) ([]*desk.LoadedExtension, error)
	ListUnreachableItems(ctx context.Context, workspaceID string) ([]*desk.Item, error)
	ListTitleJobs(ctx context.Context) ([]*desk.TitleJob, error)
	ListThreads(ctx context.Context, sessionID, groupID string) ([]*desk.Thread, error)
	LastTurnUsage(ctx context.Context, surfaceID string) (*desk.ModelUsage, error)
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	GetMessage(ctx context.Context, id string) (*desk.Message, error)
	DecideApproval(ctx context.Context, id, status, optionID, by, reason string, at time.Time) (*desk.Approval, error)
	CountArtifacts(ctx context.Context, sessionID string) (int, error)
	AnswerInputRequest(ctx context.Context, id, status string, answers map[string]string, at time.Time) (*desk.InputRequest, error)
	ActiveExecution(ctx context.Context, surfaceID string) (*desk.Execution, error)
	GetProfile(ctx context.Context, workspaceID, name string) (*desk.Profile, error)
}
