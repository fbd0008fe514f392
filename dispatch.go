package desk

import (
	"context"
	"time"
)

// PrefixDispatch is the id prefix of dispatches.
const PrefixDispatch = "dsp"

// Reply ownership of a dispatch (OpenAlice's dispatch snapshot): who gets
// the target's reply. caller: it comes back to the asking surface as a
// dispatch_reply queue row, in order with the surface's other work; none:
// nothing comes back.
const (
	ReplyCaller = "caller"
	ReplyNone   = "none"
)

// Dispatch statuses. A dispatch is pending until its prompt is queued on
// the target, dispatched until the target's turn settles, then replied
// (the reply row is queued on the caller), settled (reply none: nothing to
// send) or failed (the target's turn failed or its prompt was refused; a
// caller that owns the reply still gets a row saying so).
const (
	DispatchPending    = "pending"
	DispatchDispatched = "dispatched"
	DispatchReplied    = "replied"
	DispatchSettled    = "settled"
	DispatchFailed     = "failed"
)

// QueueDispatchReply is the queue kind of a dispatch's reply on the
// caller's surface.
const QueueDispatchReply = "dispatch_reply"

// Dispatch is one ask of one actor or agent to another target: an
// immutable snapshot of who asked (the caller's origin), where it went
// (the execution target), what about (the subject) and who owns the reply,
// plus what became of it.
type Dispatch struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	// Caller is who asked: a person or program through the API, or an
	// agent's turn (its session, surface and execution).
	Caller Origin `json:"caller"`
	// Target is what was asked for, as given; TargetSessionID and
	// TargetWorkspaceID are where it resolved.
	Target            ResolveTarget `json:"target"`
	TargetSessionID   string        `json:"target_session_id"`
	TargetWorkspaceID string        `json:"target_workspace_id"`
	Subject           string        `json:"subject"`
	Text              string        `json:"text"`
	Reply             string        `json:"reply" jsonschema:"enum=caller,enum=none"`
	// ReplySurfaceID is the caller's surface the reply goes to (reply
	// caller).
	ReplySurfaceID string `json:"reply_surface_id,omitempty"`

	Status string `json:"status" jsonschema:"enum=pending,enum=dispatched,enum=replied,enum=settled,enum=failed"`
	// QueueItemID is the target's queue row, ExecutionID the turn that
	// took it.
	QueueItemID string `json:"queued_item_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	// ReplyItemID is the caller's dispatch_reply row; ReplyText what it
	// carried.
	ReplyItemID string     `json:"reply_item_id,omitempty"`
	ReplyText   string     `json:"reply_text,omitempty"`
	Error       string     `json:"error,omitempty"`
	SettledAt   *time.Time `json:"settled_at,omitempty"`
}

// Terminal reports whether nothing more happens to d.
func (d *Dispatch) Terminal() bool {
	return d.Status == DispatchReplied || d.Status == DispatchSettled || d.Status == DispatchFailed
}

// DispatchInput is one ask: the target (an @signature, a session id or a
// workspace id), a subject, the text and who owns the reply. FromSession
// is the session whose orchestrator surface gets a caller reply when the
// caller is not an agent's turn (an API client asking on a session's
// behalf).
type DispatchInput struct {
	Target      ResolveTarget `json:"target"`
	Subject     string        `json:"subject,omitempty" jsonschema:"maxLength=200"`
	Text        string        `json:"text"`
	Reply       string        `json:"reply,omitempty" jsonschema:"enum=caller,enum=none"`
	FromSession string        `json:"from_session,omitempty"`
	// Reconstruct prefixes the text, when the target has to be
	// reconstructed, with the preamble telling the new worker what it is.
	Reconstruct bool `json:"reconstruct,omitempty"`
	// ID, when set, is the dispatch's id: an agent's tool call derives it
	// from its command, so a call run again after a restart finds its
	// dispatch instead of asking twice. Never from a client.
	ID string `json:"-"`
}

// DispatchFilter selects dispatches: by the caller's or the target's
// session or workspace; empty selects all the caller may see.
type DispatchFilter struct {
	WorkspaceID string
	SessionID   string
	Limit       int
}

// DispatchList is a page of dispatches, newest first.
type DispatchList struct {
	Dispatches []*Dispatch `json:"dispatches"`
}

// DispatchService creates dispatches and answers what became of them.
type DispatchService interface {
	Dispatch(ctx context.Context, in DispatchInput) (*Dispatch, *AskResult, error)
	Get(ctx context.Context, id string) (*Dispatch, error)
	List(ctx context.Context, f DispatchFilter) ([]*Dispatch, error)
}

// DispatchStore keeps dispatches.
type DispatchStore interface {
	// CreateDispatch inserts d.
	CreateDispatch(ctx context.Context, d *Dispatch) error
	GetDispatch(ctx context.Context, id string) (*Dispatch, error)
	// ListDispatches lists by f, newest first; a workspace or session
	// matches the caller's or the target's.
	ListDispatches(ctx context.Context, f DispatchFilter) ([]*Dispatch, error)
	// OpenDispatches lists the dispatches that are not terminal, oldest
	// first.
	OpenDispatches(ctx context.Context, limit int) ([]*Dispatch, error)
	// MarkDispatched records where a pending dispatch went (the target's
	// session, workspace and queue row); it reports false when the
	// dispatch was not pending any more.
	MarkDispatched(ctx context.Context, id, sessionID, workspaceID, queueItemID string) (bool, error)
	// DeletePendingDispatch removes a dispatch whose prompt was refused
	// before anything was queued; one that is not pending stays.
	DeletePendingDispatch(ctx context.Context, id string) error
	// SettleDispatch moves an open dispatch to status (replied, settled
	// or failed) with the execution, reply text and error, queuing reply
	// (may be nil) on the caller's surface in the same transaction. Of
	// two nodes settling one dispatch, one wins; the other gets false.
	SettleDispatch(ctx context.Context, d *Dispatch, reply *QueueItem) (bool, error)
}
