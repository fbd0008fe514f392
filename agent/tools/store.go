package tools

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Store is what the tools read and write beyond the services they are
// given: artifacts and selection items by path, handler threads with
// their episodes and queue rows, loaded extensions, and workspace leases.
type Store interface {
	ArtifactByPath(ctx context.Context, sessionID, relPath string) (*desk.Artifact, error)
	ListThreads(ctx context.Context, sessionID, groupID string) ([]*desk.Thread, error)
	GetThreadGroup(ctx context.Context, id string) (*desk.ThreadGroup, error)
	GetThread(ctx context.Context, id string) (*desk.Thread, error)
	ListGroupItems(ctx context.Context, groupID string) ([]*desk.Item, error)
	ListBindings(ctx context.Context, sessionID string) ([]*desk.Group, error)
	ListArtifacts(ctx context.Context, sessionID string) ([]*desk.Artifact, error)
	LeaseItem(ctx context.Context, itemID, executionID string) error
	GetArtifact(ctx context.Context, id string) (*desk.Artifact, error)
	StartThreads(ctx context.Context, g *desk.ThreadGroup, newGroup bool, starts []desk.ThreadStart) (created bool, err error)
	RecordEpisode(ctx context.Context, e *desk.Episode, n *desk.QueueItem) (*desk.Episode, bool, error)
	LoadedExtensions(ctx context.Context, surfaceID string) ([]*desk.LoadedExtension, error)
	LoadExtension(ctx context.Context, e *desk.LoadedExtension) (bool, error)
	ListQueue(ctx context.Context, sessionID string, pending bool) ([]*desk.QueueItem, error)
	ListMessages(ctx context.Context, surfaceID string, beforeSeq int64, limit int) ([]*desk.Message, error)
	ListEpisodes(ctx context.Context, threadID string) ([]*desk.Episode, error)
	HasLease(ctx context.Context, itemID, executionID string) (bool, error)
	GetItem(ctx context.Context, id string) (*desk.Item, error)
	FollowupThreads(ctx context.Context, items []*desk.QueueItem, activate bool) ([]*desk.Thread, error)
	// The workspace manager's peer tools read the other workspaces.
	ListWorkspaces(ctx context.Context) ([]*desk.Workspace, error)
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	ListSessions(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error)
}
