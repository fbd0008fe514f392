package desk

import (
	"context"
	"io"
	"os"
	"time"
)

// WorkspaceService creates workspaces and actors and authenticates tokens.
type WorkspaceService interface {
	// CreateWorkspace refuses a name another workspace has (ECONFLICT)
	// unless in.AllowDuplicateName; see WorkspaceCreate.
	CreateWorkspace(ctx context.Context, in WorkspaceCreate) (*Workspace, error)
	GetWorkspace(ctx context.Context, id string) (*Workspace, error)
	// ListWorkspaces lists the users' workspaces; the workspace manager
	// is listed apart (Manager).
	ListWorkspaces(ctx context.Context) ([]*Workspace, error)
	// Manager returns the workspace manager, making it on first use
	// (admin only).
	Manager(ctx context.Context) (*Workspace, error)
	// CreateActor returns the actor and its token; the token is shown once
	// and only its hash is kept.
	CreateActor(ctx context.Context, workspaceID, name, kind string) (*Actor, string, error)
	ListActors(ctx context.Context, workspaceID string) ([]*Actor, error)
	// ResolveActor finds an actor of the workspace by id or name.
	ResolveActor(ctx context.Context, workspaceID, idOrName string) (*Actor, error)
	// Authenticate maps a bearer token to its principal.
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// SessionCreate is the input of SessionService.Create.
type SessionCreate struct {
	WorkspaceID string
	Actor       string // id or name; empty means the caller's own actor (or the owner, for admin)
	Title       string
	Model       string // empty: the server's default
	Script      []byte // the script of a "script" session (JSON)
	Runtime     string // a registered runtime's name; empty: desk's own agent
	// Profile names the workspace's profile the session is made from
	// (its model or runtime, reasoning effort, …); Model, Runtime and
	// ReasoningEffort given with it override the profile's.
	Profile         string
	ReasoningEffort string // low, medium, high; "" the model's default
}

// SessionService owns sessions, their artifacts, their bindings to
// selection groups and the guest file system view of them.
type SessionService interface {
	Create(ctx context.Context, in SessionCreate) (*Session, error)
	Get(ctx context.Context, id string) (*Session, error)
	List(ctx context.Context, f SessionFilter) ([]*Session, error)
	Update(ctx context.Context, id string, u SessionUpdate) (*Session, error)
	// Delete removes the session with its artifacts, bindings and scratch;
	// selection groups are the workspace's and stay (S-K, S-L).
	Delete(ctx context.Context, id string) error

	SetBindings(ctx context.Context, sessionID string, groupIDs []string) ([]*Group, error)
	Bindings(ctx context.Context, sessionID string) ([]*Group, error)

	// Resolve answers where a follow-up aimed at a target goes.
	Resolve(ctx context.Context, t ResolveTarget) (*Resolution, error)

	// GuestList and GuestOpen read the guest file system as an execution of
	// the session would see it.
	GuestList(ctx context.Context, sessionID, guestPath string) ([]GuestEntry, error)
	GuestOpen(ctx context.Context, sessionID, guestPath string) (*os.File, GuestEntry, error)
}

// GuestEntry is a file or directory of the guest file system.
type GuestEntry struct {
	Path     string    `json:"path"`
	Name     string    `json:"name"`
	Type     string    `json:"type"` // "file" or "dir"
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
	ReadOnly bool      `json:"read_only"`
}

// ArtifactPut is the input of ArtifactService.Create and Update.
type ArtifactPut struct {
	Name      string // Create only; sanitized
	Immutable bool   // Create only
	MediaType string // a hint; the bytes decide
	Body      io.Reader
	// Size is the expected length, or -1 when unknown. A body that ends
	// early or runs long is refused and nothing is kept.
	Size int64
}

// ArtifactService owns artifact bytes and rows together.
type ArtifactService interface {
	Create(ctx context.Context, sessionID string, in ArtifactPut) (*Artifact, error)
	Get(ctx context.Context, sessionID, id string) (*Artifact, error)
	List(ctx context.Context, sessionID string) ([]*Artifact, error)
	// Open returns the current bytes, streamed from where they are kept
	// (an *os.File when that is the node's disk, so sendfile applies);
	// the caller closes them.
	Open(ctx context.Context, sessionID, id string) (*Artifact, io.ReadSeekCloser, error)
	Update(ctx context.Context, sessionID, id string, in ArtifactPut) (*Artifact, error)
	Revert(ctx context.Context, sessionID, id string) (*Artifact, error)
	Delete(ctx context.Context, sessionID, id string) error
}

// ItemCreate is the input of SelectionService.AddItem: exactly one of Text,
// URL or Body.
type ItemCreate struct {
	Name      string
	Text      *string
	URL       string
	Title     string
	Body      io.Reader
	MediaType string
}

// SelectionService owns selection groups and their web items.
type SelectionService interface {
	CreateGroup(ctx context.Context, workspaceID, name string) (*Group, error)
	GetGroup(ctx context.Context, id string) (*Group, []*Item, error)
	ListGroups(ctx context.Context, workspaceID string) ([]*Group, error)
	DeleteGroup(ctx context.Context, id string) error
	AddItem(ctx context.Context, groupID string, in ItemCreate) (*Item, error)
	RemoveItem(ctx context.Context, groupID, itemID string) error
}

// ReclaimAction is one thing storage reclamation did.
type ReclaimAction struct {
	Kind        string `json:"kind"` // "scratch", "temp_file", "item", "revision"
	WorkspaceID string `json:"workspace_id"`
	Target      string `json:"target"` // an id or a workspace-relative path
	Bytes       int64  `json:"bytes"`
}

// ReclaimReport says what reclamation freed. It never lists an artifact:
// artifacts are deleted only by an explicit delete (S-P).
type ReclaimReport struct {
	Level          string          `json:"level"`
	ReclaimedBytes int64           `json:"reclaimed_bytes"`
	Actions        []ReclaimAction `json:"actions"`
}

// Pressure levels.
const (
	PressureSoft     = "soft"
	PressureCritical = "critical"
)

// Multitask strategies of a submit to a busy surface.
const (
	MultitaskEnqueue   = "enqueue"
	MultitaskReject    = "reject"
	MultitaskInterrupt = "interrupt"
)

// SubmitInput is one message sent to a session.
type SubmitInput struct {
	Text           string
	Surface        string // default: the orchestrator surface
	IdempotencyKey string
	Multitask      string // enqueue (default), reject or interrupt
	Channel        string // default: the door's name
	ConversationID string // default: the session id
	Kind           string // default: user_message
	EditOf         string // the committed user message this one revises (edit and resend)
}

// SubmitResult is the committed queue row, and the execution that took it
// when the message started at once. Whichever of the process's dispatchers
// claimed the row (the submit's own claim or one already awake for the
// surface), ExecutionID names that execution; it is empty only when the
// row waits behind other work, a block or a lease, and Item then shows it
// queued with its position.
type SubmitResult struct {
	Item        *QueueItem `json:"queued_item"`
	ExecutionID string     `json:"execution_id,omitempty"`
	// Created is false when an idempotency key matched an earlier row.
	Created bool `json:"created"`
	// EventsAfter is an event id older than every event this submit
	// caused: follow GET /v1/events with Last-Event-ID set to it to see the
	// whole turn.
	EventsAfter int64 `json:"events_after"`
}

// InterruptResult answers an interrupt.
type InterruptResult struct {
	Stopped bool `json:"stopped"`
	// Pending is set when the executor has not confirmed the stop in
	// time: the execution stays stopping and its surface occupied.
	Pending   bool       `json:"pending,omitempty"`
	Execution *Execution `json:"execution"`
}

// ResolveTarget names what a follow-up is aimed at.
type ResolveTarget struct {
	Kind        string `json:"kind"` // session, artifact or workspace
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id,omitempty"` // where to reconstruct an unknown target
}

// Resolutions of a follow-up (OpenAlice conversation control).
const (
	ResolveExact         = "exact"
	ResolveUnavailable   = "unavailable"
	ResolveReconstructed = "reconstructed"
)

// Resolution answers where a follow-up goes.
type Resolution struct {
	Resolution string `json:"resolution"`
	// Reason says why a target is unavailable: retired-session,
	// departed-workspace, purged-workspace, unknown-workspace or
	// unknown-target.
	Reason    string  `json:"reason,omitempty"`
	SessionID string  `json:"session_id,omitempty"`
	Signature string  `json:"signature,omitempty"`
	Origin    *Origin `json:"origin,omitempty"` // the target's preserved, attributed origin
	// Created is set when this resolution made the reconstructed session;
	// a later resolution of the same target continues that session.
	Created bool `json:"created,omitempty"`
}
