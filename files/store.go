package files

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the file service and the quota call;
// Store documents each method's contract; the application passes its
// whole store.
type Store interface {
	desk.FilesStore
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetActor(ctx context.Context, id string) (*desk.Actor, error)
	ListActors(ctx context.Context, workspaceID string) ([]*desk.Actor, error)
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	ListSessions(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error)
	ArtifactByPath(ctx context.Context, sessionID, relPath string) (*desk.Artifact, error)
	ListArtifacts(ctx context.Context, sessionID string) ([]*desk.Artifact, error)
	CountArtifacts(ctx context.Context, sessionID string) (int, error)
}
