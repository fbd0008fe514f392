package desk

import (
	"encoding/json"
	"time"
)

// Surface kinds: every session has one orchestrator surface; handler-thread
// surfaces are delegated conversations inside the same session.
const (
	SurfaceOrchestrator = "orchestrator"
	SurfaceHandler      = "handler"
)

// Surface is one conversation inside a session, with its own durable queue
// and at most one running execution.
type Surface struct {
	ID          string    `json:"id"`
	SessionID   string    `json:"session_id"`
	WorkspaceID string    `json:"workspace_id"`
	Kind        string    `json:"kind"`
	Title       string    `json:"title"`
	CreatedAt   time.Time `json:"created_at"`
	// AttachedUntil is when the last composer heartbeat expires; while it is
	// in the future, work from other origins waits (takeover).
	AttachedUntil time.Time `json:"attached_until"`
	// LastActivity is the last user submit or execution settle, the start
	// of the idle time takeover waits for.
	LastActivity time.Time `json:"last_activity"`
	// Held is set when a block is released: queued work waits for the next
	// submit or an explicit resume, so releasing starts nothing.
	Held bool `json:"held"`
	// ConsecutiveFailures counts failed executions since the last success.
	ConsecutiveFailures int `json:"consecutive_failures"`
}

// Queue item kinds (svvy's surface queue).
const (
	QueueUserMessage       = "user_message"
	QueueInputAnswer       = "request_user_input_answer"
	QueueThreadFollowup    = "thread_followup"
	QueueThreadReport      = "thread_report_notification"
	QueueReportRequest     = "report_request"
	QueueInitialHandler    = "initial_handler_start"
	QueueStatusQueued      = "queued"
	QueueStatusDispatching = "dispatching"
	QueueStatusDelivered   = "delivered"
	QueueStatusFailed      = "failed"
	QueueStatusCancelled   = "cancelled"
)

// Queue priorities: a steered row first, then user-input answers, then
// everything else; FIFO by position within a priority.
const (
	PrioritySteered = 0
	PriorityAnswer  = 1
	PriorityNormal  = 2
)

// QueueItem is one durable row of a surface's queue.
type QueueItem struct {
	ID             string     `json:"id"`
	SurfaceID      string     `json:"surface_id"`
	SessionID      string     `json:"session_id"`
	WorkspaceID    string     `json:"workspace_id"`
	Kind           string     `json:"kind"`
	Status         string     `json:"status"`
	Priority       int        `json:"priority"`
	Position       int64      `json:"position"`
	Origin         Origin     `json:"origin"`
	Text           string     `json:"text"`
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	Channel        string     `json:"channel"`
	ConversationID string     `json:"conversation_id"`
	Approved       bool       `json:"approved"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	ClaimedBy      string     `json:"claimed_by,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	LeaseVersion   int64      `json:"lease_version"`
	Attempts       int        `json:"attempts"`
	ExecutionID    string     `json:"execution_id,omitempty"`
	Error          string     `json:"error,omitempty"`
	// EditOf names the user message this row's text revises: its turn
	// starts a new branch of the transcript from that message's parent.
	EditOf string `json:"edit_of,omitempty"`
}

// Execution phases (OpenAlice's execution manager): starting is admitted
// but not yet handed to the executor; running has been; stopping has been
// asked to stop; ended, failed and interrupted are terminal.
const (
	PhaseStarting    = "starting"
	PhaseRunning     = "running"
	PhaseStopping    = "stopping"
	PhaseEnded       = "ended"
	PhaseFailed      = "failed"
	PhaseInterrupted = "interrupted"
)

// PhaseActive reports whether an execution in phase p still occupies its
// surface.
func PhaseActive(p string) bool { return p == PhaseStarting || p == PhaseRunning || p == PhaseStopping }

// Interruption records who interrupted an execution and why.
type Interruption struct {
	By     string    `json:"by"` // actor id, "admin", or "system"
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// Execution is one agent turn on one surface.
type Execution struct {
	ID          string `json:"id"`
	SessionID   string `json:"session_id"`
	SurfaceID   string `json:"surface_id"`
	WorkspaceID string `json:"workspace_id"`
	QueueItemID string `json:"queue_item_id"`
	Phase       string `json:"phase"`
	// Outcome is set once the execution settled: completed, failed or
	// aborted (interrupted), the one terminal word a client needs.
	Outcome      string           `json:"outcome,omitempty"`
	Origin       Origin           `json:"origin"`
	RequestedAt  time.Time        `json:"requested_at"`
	StartedAt    *time.Time       `json:"started_at,omitempty"`
	FinishedAt   *time.Time       `json:"finished_at,omitempty"`
	Reason       string           `json:"reason,omitempty"`
	Interruption *Interruption    `json:"interruption,omitempty"`
	StopError    string           `json:"stop_error,omitempty"`
	Owner        string           `json:"owner"`
	Events       []ExecutionEvent `json:"events,omitempty"`
	// Usage sums the execution's model calls (filled when one execution
	// is read).
	Usage *UsageTotals `json:"usage,omitempty"`
	// LeaseVersion counts the claims of the execution: the claim that
	// started it, and one more for each takeover by another process. The
	// writes of the execution are fenced by it (see Fence); it is the
	// store's, not part of the API.
	LeaseVersion int64 `json:"-"`
}

// Outcomes of a settled execution, one per terminal phase.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeAborted   = "aborted"
)

// OutcomeOf maps a phase to its outcome ("" while active).
func OutcomeOf(phase string) string {
	switch phase {
	case PhaseEnded:
		return OutcomeCompleted
	case PhaseFailed:
		return OutcomeFailed
	case PhaseInterrupted:
		return OutcomeAborted
	}
	return ""
}

// Terminal reports whether the execution has settled.
func (e *Execution) Terminal() bool { return !PhaseActive(e.Phase) }

// ExecutionEvent is one event of an execution, as kept in the event log.
type ExecutionEvent struct {
	Seq  int64           `json:"seq"`
	At   time.Time       `json:"at"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Block kinds.
const (
	BlockUserCooldown   = "user-cooldown"
	BlockExecutionFault = "execution-fault"
	// BlockBudget holds back all work of a surface while its workspace
	// has used its token budget; changing the budget releases it.
	BlockBudget = "budget"
)

// Block is an admission block on a surface.
type Block struct {
	ID         string     `json:"id"`
	SurfaceID  string     `json:"surface_id"`
	SessionID  string     `json:"session_id"`
	Kind       string     `json:"kind"`
	Reason     string     `json:"reason"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	ReleasedAt *time.Time `json:"released_at,omitempty"`
	ReleasedBy string     `json:"released_by,omitempty"`
	Active     bool       `json:"active"`
	// Budget and Used are a budget block's token budget and the
	// workspace's usage when it blocked.
	Budget int64 `json:"budget,omitempty"`
	Used   int64 `json:"used,omitempty"`
}

// Event is one entry of the live event log: queue, execution, artifact and
// block changes, each written in the transaction that made the change and
// delivered only after it commits.
type Event struct {
	Seq         int64           `json:"seq"`
	At          time.Time       `json:"at"`
	Type        string          `json:"type"`
	WorkspaceID string          `json:"workspace_id"`
	SessionID   string          `json:"session_id,omitempty"`
	SurfaceID   string          `json:"surface_id,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
	Data        json.RawMessage `json:"data,omitempty"`
	// ActorID is the owning actor of the session, for filtering what an
	// actor token may see; it is not sent to clients.
	ActorID string `json:"-"`
}

// EventFilter selects events.
type EventFilter struct {
	AfterSeq    int64
	WorkspaceID string
	SessionID   string
	ActorID     string // only events of this actor's sessions
	ExecutionID string
	Limit       int
}
