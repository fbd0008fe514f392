package absorb

import (
	"context"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/template"
)

// Store is the part of Store the absorb service calls; Store
// documents each method's contract; the application passes its whole store.
type Store interface {
	// RunningStore refuses an absorb into a workspace with running
	// sessions (template.RefuseRunning).
	template.RunningStore
	GetCatalogEntry(ctx context.Context, workspaceID string) (*desk.CatalogEntry, error)
	MarkAbsorbed(ctx context.Context, source, target, commit string, at time.Time) error
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
}
