package execution

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the execution service calls; Store
// documents each method's contract; the application passes its whole store.
type Store interface {
	desk.ExecutionStore
	GetMessage(ctx context.Context, id string) (*desk.Message, error)
	GetAgentSettings(ctx context.Context, workspaceID string) (*desk.AgentSettings, error)
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	UpdateSession(ctx context.Context, id string, u desk.SessionUpdate) (*desk.Session, error)
	SumUsage(ctx context.Context, f desk.UsageFilter) (*desk.UsageSum, error)
}
