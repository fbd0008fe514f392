package desk

import "context"

// Store is desk's durable metadata. Every method is atomic on its own. The
// SQLite and Postgres adapters implement it, and store/storetest holds the
// one conformance suite both must pass.
//
// Methods return *Error values with ENOTFOUND and ECONFLICT where the
// contract names them; anything else is a machine failure.
type Store interface {
	ExecutionStore
	AgentStore
	FilesStore
	TransferStore
	LifecycleStore
	UIStore
	UsageStore
	RuntimeStore
	ThreadStore
	BrowserSessionStore
	LoginLinkStore
	LeaderStore
	RoutineStore
	DispatchStore
	WebhookStore
	InboxStore
	ProfileStore

	// Workspaces.
	// CreateWorkspace inserts w and its owner. Unless allowDuplicateName,
	// it fails with ECONFLICT when a workspace that is not purged has
	// w.Name, checked in the same transaction as the insert so that of two
	// concurrent creates with one name exactly one succeeds.
	CreateWorkspace(ctx context.Context, w *Workspace, owner *Actor, allowDuplicateName bool) error
	GetWorkspace(ctx context.Context, id string) (*Workspace, error)
	ListWorkspaces(ctx context.Context) ([]*Workspace, error)

	// Actors and their tokens. Only a token's SHA-256 is stored.
	CreateActor(ctx context.Context, a *Actor, tokenHash string) error
	GetActor(ctx context.Context, id string) (*Actor, error)
	ActorByName(ctx context.Context, workspaceID, name string) (*Actor, error)
	ListActors(ctx context.Context, workspaceID string) ([]*Actor, error)
	ActorByTokenHash(ctx context.Context, tokenHash string) (*Actor, error)

	// Sessions. Sessions being deleted are invisible to GetSession and
	// ListSessions; ListDeletingSessions finds them for recovery.
	CreateSession(ctx context.Context, s *Session) error
	GetSession(ctx context.Context, id string) (*Session, error)
	// SessionBySignature finds a session by its signature ("@…").
	SessionBySignature(ctx context.Context, sig string) (*Session, error)
	ListSessions(ctx context.Context, f SessionFilter) ([]*Session, error)
	UpdateSession(ctx context.Context, id string, u SessionUpdate) (*Session, error)
	// MarkSessionDeleting hides the session at once; PurgeSession then
	// removes its rows (artifacts, bindings) and the session row itself.
	MarkSessionDeleting(ctx context.Context, id string) error
	PurgeSession(ctx context.Context, id string) error
	ListDeletingSessions(ctx context.Context) ([]*Session, error)

	// Artifacts. Rows being deleted are invisible except to recovery.
	CreateArtifact(ctx context.Context, a *Artifact) error
	GetArtifact(ctx context.Context, id string) (*Artifact, error)
	ArtifactByPath(ctx context.Context, sessionID, relPath string) (*Artifact, error)
	ListArtifacts(ctx context.Context, sessionID string) ([]*Artifact, error)
	CountArtifacts(ctx context.Context, sessionID string) (int, error)
	// UpdateArtifact replaces the row's content fields (everything but id,
	// session, name, path and created_at) if its revision is still
	// expectRevision; otherwise it fails with ECONFLICT.
	UpdateArtifact(ctx context.Context, a *Artifact, expectRevision int64) error
	// SetArtifactPending records or clears (pending == "") the file being
	// installed as the artifact's content.
	SetArtifactPending(ctx context.Context, id, pending string) error
	ListPendingArtifacts(ctx context.Context) ([]*Artifact, error)
	MarkArtifactDeleting(ctx context.Context, id string) error
	DeleteArtifact(ctx context.Context, id string) error
	ListDeletingArtifacts(ctx context.Context) ([]*Artifact, error)

	// Selection groups, items and session bindings.
	CreateGroup(ctx context.Context, g *Group) error
	GetGroup(ctx context.Context, id string) (*Group, error)
	ListGroups(ctx context.Context, workspaceID string) ([]*Group, error)
	DeleteGroup(ctx context.Context, id string) error
	// AddItem creates the item and appends it to the group in one step.
	AddItem(ctx context.Context, groupID string, it *Item) error
	GetItem(ctx context.Context, id string) (*Item, error)
	ListGroupItems(ctx context.Context, groupID string) ([]*Item, error)
	// RemoveGroupItem drops the item from the group; the item row stays
	// until collection finds it unreachable.
	RemoveGroupItem(ctx context.Context, groupID, itemID string) error
	// ListUnreachableItems returns items that no group references and no
	// execution leases.
	ListUnreachableItems(ctx context.Context, workspaceID string) ([]*Item, error)
	// DeleteItemIfUnreachable deletes the item row only if it is still
	// unreachable, reporting whether it did.
	DeleteItemIfUnreachable(ctx context.Context, id string) (bool, error)
	SetBindings(ctx context.Context, sessionID string, groupIDs []string) error
	ListBindings(ctx context.Context, sessionID string) ([]*Group, error)

	AppLogStore

	Close() error
}
