// Package desk holds desk's domain: the types every other package speaks
// (workspaces, actors, sessions, artifacts, selection groups, origins), the
// error taxonomy, id generation, and the Store interface that the storage
// adapters implement.
//
// It imports nothing of desk's own and never touches the disk, the network or
// a database; adapters and services depend on it, never the other way round.
package desk

import (
	"context"
	"time"
)

// Origin is the server-stamped provenance of a durable record: who produced
// it, in which session and execution. It is built from the authenticated
// caller and the running execution, never from a request body.
type Origin struct {
	WorkspaceID string `json:"workspace_id"`
	SessionID   string `json:"session_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	SurfaceID   string `json:"surface_id,omitempty"`
	CommandID   string `json:"command_id,omitempty"`
	// Actor is the acting actor's id, or "admin" for the admin token.
	Actor string `json:"actor"`
	// Kind says which door the record came through: OriginUser for a person
	// or program calling the API, OriginAgent for a tool call of an
	// execution, OriginSystem for desk itself.
	Kind string `json:"kind"`
}

// Origin kinds.
const (
	OriginUser   = "user"
	OriginAgent  = "agent"
	OriginSystem = "system"
)

// AdminActor is the Origin.Actor value for requests made with the admin token.
const AdminActor = "admin"

// Principal is the authenticated caller of a request.
type Principal struct {
	Admin       bool
	WorkspaceID string // actor principals only
	ActorID     string // actor principals only
	ActorKind   string // actor principals only: human or agent
}

// CanSeeActor reports whether p may see data owned by the given actor of the
// given workspace.
func (p Principal) CanSeeActor(workspaceID, actorID string) bool {
	return p.Admin || (p.WorkspaceID == workspaceID && p.ActorID == actorID)
}

// SessionReader reads one session row; every store satisfies it.
type SessionReader interface {
	GetSession(ctx context.Context, id string) (*Session, error)
}

// VisibleSession is the one visibility rule of a session for every
// service: the caller must be authenticated, and a session of another actor
// answers not_found, never forbidden, so its existence does not leak.
// Threads, queue rows, approvals and transcripts are visible exactly when
// their session is.
func VisibleSession(ctx context.Context, st SessionReader, id string) (*Session, error) {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return nil, Errorf(EUNAUTHORIZED, "no credentials")
	}
	x, err := st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	if !p.CanSeeActor(x.WorkspaceID, x.Actor) {
		return nil, Errorf(ENOTFOUND, "session %s not found", id)
	}
	return x, nil
}

// CanSeeWorkspace reports whether p may see the workspace at all.
func (p Principal) CanSeeWorkspace(workspaceID string) bool {
	return p.Admin || p.WorkspaceID == workspaceID
}

type principalKey struct{}

// WithPrincipal returns a context carrying the authenticated caller.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller stored in ctx; ok is false when the
// request was not authenticated, which services treat as forbidden.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// RequireAdmin refuses a caller that is not the admin: unauthorized
// without credentials, forbidden with an actor token. what completes
// "only the admin token may …".
func RequireAdmin(ctx context.Context, what string) error {
	p, ok := PrincipalFrom(ctx)
	if !ok {
		return Errorf(EUNAUTHORIZED, "no credentials")
	}
	if !p.Admin {
		return Errorf(EFORBIDDEN, "only the admin token may %s", what)
	}
	return nil
}

// Now returns the current time truncated to microseconds in UTC, the
// precision both stores keep, so values round-trip through either exactly.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

type originKey struct{}

// WithOrigin returns a context whose writes are attributed to o: the agent
// stamps its tool calls' artifacts with the execution, surface and command
// that made them. Only server code calls it; nothing a request carries can.
func WithOrigin(ctx context.Context, o Origin) context.Context {
	return context.WithValue(ctx, originKey{}, o)
}

// OriginFrom returns the origin set by WithOrigin, if any.
func OriginFrom(ctx context.Context) (Origin, bool) {
	o, ok := ctx.Value(originKey{}).(Origin)
	return o, ok
}
