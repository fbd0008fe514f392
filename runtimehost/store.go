package runtimehost

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/conversation"
)

// Store is what the runtime host reads and writes: the session, its
// workspace and runtime, the turn's transcript and command records, and
// the decision records its gate keeps (the conversation service's).
type Store interface {
	conversation.Store
	UpdateCommand(ctx context.Context, c *desk.Command) error
	SetSessionNativeID(ctx context.Context, sessionID, nativeID string) error
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	GetRuntime(ctx context.Context, name string) (*desk.Runtime, error)
	AppendMessage(ctx context.Context, m *desk.Message) error
	GetAgentSettings(ctx context.Context, workspaceID string) (*desk.AgentSettings, error)
	CreatePlan(ctx context.Context, p *desk.Plan) error
	CreateCommand(ctx context.Context, c *desk.Command) error
}
