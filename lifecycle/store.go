package lifecycle

import (
	"context"
	"time"

	"github.com/desk-runtime/desk"
)

// Store is the part of Store the lifecycle service and its guard
// call; Store documents each method's contract; the application passes
// its whole store.
type Store interface {
	ListApprovals(ctx context.Context, sessionID string, pendingOnly bool) ([]*desk.Approval, error)
	ListInputRequests(ctx context.Context, sessionID string) ([]*desk.InputRequest, error)
	ListQueue(ctx context.Context, sessionID string, pending bool) ([]*desk.QueueItem, error)
	GetExecution(ctx context.Context, id string) (*desk.Execution, error)
	ListActiveExecutions(ctx context.Context) ([]*desk.Execution, error)
	ListOwners(ctx context.Context) ([]*desk.Owner, error)
	ListCatalog(ctx context.Context) ([]*desk.CatalogEntry, error)
	GetCatalogEntry(ctx context.Context, workspaceID string) (*desk.CatalogEntry, error)
	TransitionWorkspace(ctx context.Context, workspaceID, from, to string, ch desk.CatalogChange, at time.Time) (*desk.CatalogEntry, error)
	AcquireWorkspaceLeases(ctx context.Context, r desk.LeaseRequest) error
	ReleaseWorkspaceLeases(ctx context.Context, leaseID string) error
	PutLifecycleJournal(ctx context.Context, j *desk.LifecycleJournal) error
	ListLifecycleJournals(ctx context.Context) ([]*desk.LifecycleJournal, error)
	DeleteLifecycleJournal(ctx context.Context, id string) error
	PurgeWorkspaceRows(ctx context.Context, workspaceID string, at time.Time) error
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetSession(ctx context.Context, id string) (*desk.Session, error)
	ListSessions(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error)
	UpdateSession(ctx context.Context, id string, u desk.SessionUpdate) (*desk.Session, error)
	GetGroup(ctx context.Context, id string) (*desk.Group, error)
}
