package session

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the session and artifact services call;
// Store documents each method's contract; the application passes its
// whole store.
type Store interface {
	GetAgentSettings(ctx context.Context, workspaceID string) (*desk.AgentSettings, error)
	ActiveExecution(ctx context.Context, surfaceID string) (*desk.Execution, error)
	GetArtifactTombstone(ctx context.Context, id string) (*desk.ArtifactTombstone, error)
	GetRuntime(ctx context.Context, name string) (*desk.Runtime, error)
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	CreateSession(ctx context.Context, s *desk.Session) error
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	SessionBySignature(ctx context.Context, sig string) (*desk.Session, error)
	ListSessions(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error)
	UpdateSession(ctx context.Context, id string, u desk.SessionUpdate) (*desk.Session, error)
	MarkSessionDeleting(ctx context.Context, id string) error
	PurgeSession(ctx context.Context, id string) error
	ListDeletingSessions(ctx context.Context) ([]*desk.Session, error)
	CreateArtifact(ctx context.Context, a *desk.Artifact) error
	GetArtifact(ctx context.Context, id string) (*desk.Artifact, error)
	ArtifactByPath(ctx context.Context, sessionID, relPath string) (*desk.Artifact, error)
	ListArtifacts(ctx context.Context, sessionID string) ([]*desk.Artifact, error)
	UpdateArtifact(ctx context.Context, a *desk.Artifact, expectRevision int64) error
	SetArtifactPending(ctx context.Context, id, pending string) error
	ListPendingArtifacts(ctx context.Context) ([]*desk.Artifact, error)
	MarkArtifactDeleting(ctx context.Context, id string) error
	DeleteArtifact(ctx context.Context, id string) error
	ListDeletingArtifacts(ctx context.Context) ([]*desk.Artifact, error)
	GetGroup(ctx context.Context, id string) (*desk.Group, error)
	SetBindings(ctx context.Context, sessionID string, groupIDs []string) error
	ListBindings(ctx context.Context, sessionID string) ([]*desk.Group, error)
	desk.ProfileStore
	AppendMessage(ctx context.Context, m *desk.Message) error
}
