package workspace

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the workspace and browser session
// services call; Store documents each method's contract; the
// application passes its whole store.
type Store interface {
	desk.BrowserSessionStore
	CreateWorkspace(ctx context.Context, w *desk.Workspace, owner *desk.Actor, allowDuplicateName bool) error
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	ListWorkspaces(ctx context.Context) ([]*desk.Workspace, error)
	CreateActor(ctx context.Context, a *desk.Actor, tokenHash string) error
	GetActor(ctx context.Context, id string) (*desk.Actor, error)
	ActorByName(ctx context.Context, workspaceID, name string) (*desk.Actor, error)
	ListActors(ctx context.Context, workspaceID string) ([]*desk.Actor, error)
	ActorByTokenHash(ctx context.Context, tokenHash string) (*desk.Actor, error)
}
