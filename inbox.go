package desk

import (
	"context"
	"time"
)

// Inbox item kinds: what is waiting on a person.
const (
	InboxApproval      = "approval"
	InboxQuestion      = "question"
	InboxPlan          = "plan"
	InboxRoutineFailed = "routine_failed"
)

// InboxItem is one thing waiting on the caller. Exactly one of Approval,
// Question, Plan and RoutineRun is set, by Kind.
type InboxItem struct {
	Kind         string `json:"kind"`
	ID           string `json:"id"`
	WorkspaceID  string `json:"workspace_id"`
	SessionID    string `json:"session_id,omitempty"`
	SessionTitle string `json:"session_title,omitempty"`
	SurfaceID    string `json:"surface_id,omitempty"`
	// Summary is one line for people: the command to approve, the first
	// question, the plan's title, the routine's name and error.
	Summary   string    `json:"summary"`
	CreatedAt time.Time `json:"created_at"`
	// AgeSeconds is how long it has waited, when the inbox was read.
	AgeSeconds int64         `json:"age_seconds"`
	Approval   *Approval     `json:"approval,omitempty"`
	Question   *InputRequest `json:"question,omitempty"`
	Plan       *Plan         `json:"plan,omitempty"`
	RoutineRun *RoutineRun   `json:"routine_run,omitempty"`
}

// Inbox is everything waiting on the caller across the sessions and
// routines it can see, oldest first.
type Inbox struct {
	Items []*InboxItem `json:"items"`
	// Counts is the number of items by kind.
	Counts map[string]int `json:"counts"`
}

// InboxService reads the caller's inbox.
type InboxService interface {
	Inbox(ctx context.Context) (*Inbox, error)
}

// InboxFilter narrows the inbox queries to one actor's sessions and
// routines in one workspace; the zero filter (the admin's) is everything.
type InboxFilter struct {
	WorkspaceID string
	ActorID     string
}

// InboxStore finds what is pending across sessions, each kind oldest
// first and at most limit.
type InboxStore interface {
	PendingApprovals(ctx context.Context, f InboxFilter, limit int) ([]*Approval, error)
	PendingInputRequests(ctx context.Context, f InboxFilter, limit int) ([]*InputRequest, error)
	ProposedPlans(ctx context.Context, f InboxFilter, limit int) ([]*Plan, error)
	// FailedRoutineRuns lists, per routine, its latest finished run when
	// that run failed: a routine stays in the inbox until a run of it
	// succeeds (or it is deleted).
	FailedRoutineRuns(ctx context.Context, f InboxFilter, limit int) ([]*RoutineRun, error)
}
