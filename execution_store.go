package desk

import (
	"context"
	"time"
)

// EnqueueOptions tune ExecutionStore.Enqueue.
type EnqueueOptions struct {
	// RejectIfBusy fails with EBUSY when the surface has an active
	// execution, atomically with the insert (multitask "reject").
	RejectIfBusy bool
	// UserWork is set for work a person submitted: it clears the surface's
	// hold and its user-cooldown blocks in the same transaction.
	UserWork bool
}

// QueueOp is a change to a queued row.
type QueueOp string

// Queue operations; each applies only while the row is still queued.
const (
	QueueSteer   QueueOp = "steer"
	QueueCancel  QueueOp = "cancel"
	QueueFront   QueueOp = "front"
	QueueBack    QueueOp = "back"
	QueueApprove QueueOp = "approve"
)

// ClaimRequest asks for the next admissible row of a surface.
type ClaimRequest struct {
	SurfaceID   string
	Owner       string
	ExecutionID string
	Now         time.Time
	LeaseUntil  time.Time
	// TakeoverIdle is how long an attached surface must be idle before work
	// from other origins is admitted without approval.
	TakeoverIdle time.Duration
	// OwnerStaleBefore: a workspace lease (a checkout-changing operation
	// under way) holds claims in that workspace back unless its owner
	// stopped or last beat before this time.
	OwnerStaleBefore time.Time
}

// SettleRequest ends an execution.
type SettleRequest struct {
	ExecutionID string
	Owner       string // the settling owner; a stale owner changes nothing
	Phase       string // ended, failed or interrupted
	Reason      string
	// Requeue puts the row back at the front of its queue instead of
	// finishing it (used when the executor never started).
	Requeue bool
	// ItemStatus is the queue row's final status (delivered or failed).
	ItemStatus string
	ItemError  string
	// FaultThreshold creates an execution-fault block when this many
	// executions in a row have failed (0: never).
	FaultThreshold int
	Now            time.Time
}

// Owner is one desk process that may own claims and executions.
type Owner struct {
	ID          string    `json:"id"`
	Host        string    `json:"host"`
	PID         int       `json:"pid"`
	StartedAt   time.Time `json:"started_at"`
	HeartbeatAt time.Time `json:"heartbeat_at"`
	StoppedAt   time.Time `json:"stopped_at"`
}

// ExecutionStore keeps surfaces, queues, executions, blocks, owners and the
// event log. Every state change writes its events in the same transaction.
type ExecutionStore interface {
	GetSurface(ctx context.Context, id string) (*Surface, error)
	ListSurfaces(ctx context.Context, sessionID string) ([]*Surface, error)
	// AttachSurface records a composer heartbeat until the given time.
	AttachSurface(ctx context.Context, id string, until time.Time) (*Surface, error)
	// ResumeSurface clears a hold left by a block release.
	ResumeSurface(ctx context.Context, id string) (*Surface, error)

	// Enqueue inserts it (assigning its position) unless its session
	// already has a row with the same idempotency key, which it returns
	// with created false and changes nothing.
	Enqueue(ctx context.Context, it *QueueItem, o EnqueueOptions) (*QueueItem, bool, error)
	GetQueueItem(ctx context.Context, id string) (*QueueItem, error)
	// ListQueue returns the session's rows in dispatch order; with
	// pending only queued and dispatching rows.
	ListQueue(ctx context.Context, sessionID string, pending bool) ([]*QueueItem, error)
	// UpdateQueued applies op to a row that is still queued; a claimed or
	// finished row is ECONFLICT.
	UpdateQueued(ctx context.Context, id string, op QueueOp) (*QueueItem, error)
	// SurfacesWithQueuedWork lists surfaces that have queued rows and no
	// active execution: candidates for a dispatcher.
	SurfacesWithQueuedWork(ctx context.Context, limit int) ([]string, error)

	// Claim atomically takes the next admissible row of the surface and
	// commits a starting execution for it; exactly one claimant wins. It
	// returns nil, nil, nil when nothing is admissible.
	Claim(ctx context.Context, r ClaimRequest) (*QueueItem, *Execution, error)
	// ExtendLeases moves the lease expiry of every row the owner holds.
	ExtendLeases(ctx context.Context, owner string, until time.Time) error
	// MarkRunning moves a starting execution of owner to running.
	MarkRunning(ctx context.Context, executionID, owner string, at time.Time) (*Execution, error)
	// AdoptExecution hands a running execution of a dead owner, and its
	// queue row's claim, to owner: the turn was waiting on a person when
	// its process died and continues in this one. It is ECONFLICT when the
	// execution is no longer running or no longer from's (another process
	// adopted or settled it first).
	AdoptExecution(ctx context.Context, executionID, from, owner string, now, leaseUntil time.Time) (*Execution, error)
	// RequestStop moves an active execution to stopping (once) and, when
	// cooldownUntil is set, creates a user-cooldown block on its surface.
	// A finished execution is returned unchanged.
	RequestStop(ctx context.Context, executionID string, in Interruption, cooldownUntil *time.Time) (*Execution, *Block, error)
	SetStopError(ctx context.Context, executionID, msg string) (*Execution, error)
	// Settle ends an active execution and its queue row in one
	// transaction. Settling an execution that is already over, or that
	// another owner holds, changes nothing and returns ECONFLICT.
	Settle(ctx context.Context, r SettleRequest) (*Execution, *Block, error)
	GetExecution(ctx context.Context, id string) (*Execution, error)
	ListExecutions(ctx context.Context, sessionID string, limit int) ([]*Execution, error)
	ActiveExecution(ctx context.Context, surfaceID string) (*Execution, error)
	ListActiveExecutions(ctx context.Context) ([]*Execution, error)

	ListBlocks(ctx context.Context, sessionID string, now time.Time) ([]*Block, error)
	GetBlock(ctx context.Context, id string, now time.Time) (*Block, error)
	// ReleaseBlock clears an active block and holds the surface, so the
	// release itself starts nothing.
	ReleaseBlock(ctx context.Context, id, by string, now time.Time) (*Block, error)

	RegisterOwner(ctx context.Context, o *Owner) error
	HeartbeatOwner(ctx context.Context, id string, at time.Time) error
	StopOwner(ctx context.Context, id string, at time.Time) error
	ListOwners(ctx context.Context) ([]*Owner, error)

	// AppendEvents writes events that are not part of a state change
	// (an executor's output), assigning their seq.
	AppendEvents(ctx context.Context, es []*Event) error
	ListEvents(ctx context.Context, f EventFilter) ([]*Event, error)
	// EventBounds returns the lowest retained and the highest assigned seq.
	EventBounds(ctx context.Context) (min, max int64, err error)
	PruneEvents(ctx context.Context, before time.Time) (int, error)
}
