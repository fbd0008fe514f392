package template

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the template service calls; Store
// documents each method's contract; the application passes its whole store.
type Store interface {
	RunningStore
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
}

// RunningStore is what RefuseRunning needs: the active executions.
type RunningStore interface {
	ListActiveExecutions(ctx context.Context) ([]*desk.Execution, error)
}
