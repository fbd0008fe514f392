package gc

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/selection"
)

// Store is the part of Store the collector calls; Store
// documents each method's contract; the application passes its whole store.
type Store interface {
	// ItemStore deletes the unreachable items (selection.Collect).
	selection.ItemStore
	ListWorkspaces(ctx context.Context) ([]*desk.Workspace, error)
	ListSessions(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error)
	GetArtifact(ctx context.Context, id string) (*desk.Artifact, error)
	ListArtifacts(ctx context.Context, sessionID string) ([]*desk.Artifact, error)
	UpdateArtifact(ctx context.Context, a *desk.Artifact, expectRevision int64) error
	ListPendingArtifacts(ctx context.Context) ([]*desk.Artifact, error)
	ListDeletingArtifacts(ctx context.Context) ([]*desk.Artifact, error)
	ListUnreachableItems(ctx context.Context, workspaceID string) ([]*desk.Item, error)
}
