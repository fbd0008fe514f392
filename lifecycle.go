package desk

import (
	"context"
	"encoding/json"
	"time"
)

// CatalogEntry is a workspace's row in the catalog: every workspace ever
// created keeps one, whatever happened to it, and its id is never handed
// out again (the OpenAlice WorkspaceCatalog).
type CatalogEntry struct {
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	State       string    `json:"state"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	// OffboardedAt, RestoredAt and PurgedAt are the last time the
	// workspace departed, came back, and was purged.
	OffboardedAt *time.Time `json:"offboarded_at,omitempty"`
	RestoredAt   *time.Time `json:"restored_at,omitempty"`
	PurgedAt     *time.Time `json:"purged_at,omitempty"`
	// Reason and Notes are the last offboarding's; Successors maps a
	// retired session to the one that carries its work on.
	Reason     string            `json:"reason,omitempty"`
	Notes      string            `json:"notes,omitempty"`
	Successors map[string]string `json:"successors,omitempty"`
	// Handoff is the HANDOFF.md the last offboarding wrote.
	Handoff string `json:"handoff,omitempty"`
	// RetiredSessions are the sessions the last offboarding retired;
	// restore recalls exactly these (a session retired by hand before
	// stays retired).
	RetiredSessions []string `json:"retired_sessions,omitempty"`
	// AbsorbedInto names the workspace this one was absorbed into, with
	// the time and the target's import commit.
	AbsorbedInto string     `json:"absorbed_into,omitempty"`
	AbsorbedAt   *time.Time `json:"absorbed_at,omitempty"`
	ImportCommit string     `json:"import_commit,omitempty"`
}

// CatalogChange is what a lifecycle transition writes besides the state.
// Nil fields stay as they are.
type CatalogChange struct {
	Reason          *string
	Notes           *string
	Handoff         *string
	Successors      map[string]string
	RetiredSessions []string
	OffboardedAt    *time.Time
	RestoredAt      *time.Time
	PurgedAt        *time.Time
}

// Workspace lease operations: the checkout-changing operations that hold
// a workspace's one lease while they run.
const (
	OpOffboard        = "offboard"
	OpRestore         = "restore"
	OpPurge           = "purge"
	OpTemplateUpgrade = "template-upgrade"
	OpAbsorb          = "absorb"
)

// WorkspaceLease is the one lease of a workspace, held by one operation of
// one desk process (owner).
type WorkspaceLease struct {
	WorkspaceID string    `json:"workspace_id"`
	LeaseID     string    `json:"lease_id"`
	Op          string    `json:"op"`
	Owner       string    `json:"owner"`
	AcquiredAt  time.Time `json:"acquired_at"`
}

// LeaseRequest asks for the leases of several workspaces at once.
type LeaseRequest struct {
	LeaseID      string
	Op           string
	Owner        string
	WorkspaceIDs []string
	Now          time.Time
	// A lease whose owner stopped, is not registered, or last beat its
	// heart before StaleBefore is taken over; so is one whose owner is in
	// DeadOwners (the caller found its process gone).
	StaleBefore time.Time
	DeadOwners  []string
}

// LifecycleJournal records an interrupted-able lifecycle operation: it is
// written before the operation changes anything and deleted once the
// operation finished or was rolled back. Step and Data are the operation's
// own.
type LifecycleJournal struct {
	ID          string          `json:"id"`
	Op          string          `json:"op"`
	WorkspaceID string          `json:"workspace_id"`
	Owner       string          `json:"owner"`
	Step        string          `json:"step"`
	Data        json.RawMessage `json:"data,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// ArtifactTombstone is what a purge keeps of an artifact it deleted: its
// provenance, so follow-ups aimed at it resolve to a purged workspace.
type ArtifactTombstone struct {
	ID          string    `json:"id"`
	SessionID   string    `json:"session_id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	SHA256      string    `json:"sha256"`
	Origin      Origin    `json:"origin"`
	CreatedAt   time.Time `json:"created_at"`
	PurgedAt    time.Time `json:"purged_at"`
}

// LifecycleStore keeps the catalog, the workspace leases, the lifecycle
// journals and the tombstones a purge leaves.
type LifecycleStore interface {
	// ListCatalog returns every workspace ever created, oldest first.
	ListCatalog(ctx context.Context) ([]*CatalogEntry, error)
	GetCatalogEntry(ctx context.Context, workspaceID string) (*CatalogEntry, error)
	// TransitionWorkspace moves the workspace from state from to state to
	// (from == to only updates the catalog fields) and applies ch, in one
	// step. A workspace in another state is ECONFLICT naming that state.
	TransitionWorkspace(ctx context.Context, workspaceID, from, to string, ch CatalogChange, at time.Time) (*CatalogEntry, error)
	// MarkAbsorbed records that source was absorbed into target by the
	// target's import commit.
	MarkAbsorbed(ctx context.Context, source, target, commit string, at time.Time) error

	// AcquireWorkspaceLeases takes the lease of every workspace named,
	// all or nothing; a lease another live owner holds is ECONFLICT
	// "workspace <ws> is busy with <op>".
	AcquireWorkspaceLeases(ctx context.Context, r LeaseRequest) error
	// ReleaseWorkspaceLeases drops every lease taken under leaseID.
	ReleaseWorkspaceLeases(ctx context.Context, leaseID string) error
	ListWorkspaceLeases(ctx context.Context) ([]*WorkspaceLease, error)

	// PutLifecycleJournal inserts or replaces the journal with j.ID.
	PutLifecycleJournal(ctx context.Context, j *LifecycleJournal) error
	ListLifecycleJournals(ctx context.Context) ([]*LifecycleJournal, error)
	// DeleteLifecycleJournal deletes it; a missing journal is not an error.
	DeleteLifecycleJournal(ctx context.Context, id string) error

	// PurgeWorkspaceRows deletes the workspace's transcripts (messages,
	// commands, approvals, input requests, plans, events), queue rows,
	// blocks, artifacts (leaving tombstones), selection groups and items,
	// bindings, usage totals and tokens. It keeps the workspace row, the
	// actors, the sessions (retired identities), their surfaces and the
	// executions (provenance). Running it again changes nothing.
	PurgeWorkspaceRows(ctx context.Context, workspaceID string, at time.Time) error
	GetArtifactTombstone(ctx context.Context, id string) (*ArtifactTombstone, error)
}
