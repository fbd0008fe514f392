package desk

import (
	"context"
	"time"
)

// PrefixRoutine and PrefixRoutineRun are the id prefixes of routines and
// their runs.
const (
	PrefixRoutine    = "rtn"
	PrefixRoutineRun = "rrun"
)

// OriginRoutine is the origin kind of work a routine started: its queue
// rows, executions and archive records.
const OriginRoutine = "routine"

// Routine overlap policies: what a tick does while the routine's previous
// run is still going.
const (
	RoutineOverlapSkip  = "skip"
	RoutineOverlapQueue = "queue"
)

// Routine run statuses. A run is running from its claim until its turn
// settles; skipped runs never submitted anything.
const (
	RoutineRunRunning   = "running"
	RoutineRunSucceeded = "succeeded"
	RoutineRunFailed    = "failed"
	RoutineRunCancelled = "cancelled"
	RoutineRunSkipped   = "skipped"
)

// Routine run triggers.
const (
	RoutineTriggerSchedule = "schedule"
	RoutineTriggerManual   = "manual"
)

// Routine is work a workspace starts on a schedule, without a person at
// the keyboard. Each run is an ordinary submit with origin kind routine,
// on the target session or on a new session made for the run.
type Routine struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	Name        string `json:"name"`
	// Schedule is a five-field cron expression ("0 9 * * 1-5"), a
	// descriptor ("@hourly") or an interval ("@every 30s").
	Schedule string `json:"schedule"`
	// TimeZone is the IANA zone a cron expression is read in; UTC when
	// empty.
	TimeZone string `json:"time_zone,omitempty"`
	// SessionID is the session every run submits to; empty means a new
	// session per run, titled from TitleTemplate.
	SessionID     string `json:"session_id,omitempty"`
	TitleTemplate string `json:"title_template,omitempty"`
	// Model and Runtime choose the agent of a new session per run.
	Model   string `json:"model,omitempty"`
	Runtime string `json:"runtime,omitempty"`
	Prompt  string `json:"prompt"`
	Overlap string `json:"overlap"`
	Enabled bool   `json:"enabled"`
	// Actor is the actor the runs act as (the creator's, or the
	// workspace owner for the admin).
	Actor string `json:"actor"`
	// NextRunAt is when the schedule fires next; it is durable, so a
	// restart neither loses nor repeats a tick.
	NextRunAt time.Time `json:"next_run_at"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// RoutineRun is one firing of a routine.
type RoutineRun struct {
	ID          string `json:"id"`
	RoutineID   string `json:"routine_id"`
	WorkspaceID string `json:"workspace_id"`
	Trigger     string `json:"trigger"`
	// ScheduledFor is the tick this run belongs to (the claim time for a
	// manual run).
	ScheduledFor time.Time  `json:"scheduled_for"`
	Status       string     `json:"status"`
	SessionID    string     `json:"session_id,omitempty"`
	QueueItemID  string     `json:"queue_item_id,omitempty"`
	ExecutionID  string     `json:"execution_id,omitempty"`
	Error        string     `json:"error,omitempty"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// RoutineCreate is the body of POST /v1/workspaces/{ws}/routines.
type RoutineCreate struct {
	Name          string `json:"name"`
	Schedule      string `json:"schedule"`
	TimeZone      string `json:"time_zone,omitempty"`
	SessionID     string `json:"session_id,omitempty"`
	TitleTemplate string `json:"title_template,omitempty"`
	Model         string `json:"model,omitempty"`
	Runtime       string `json:"runtime,omitempty"`
	Prompt        string `json:"prompt"`
	// Overlap defaults to skip.
	Overlap string `json:"overlap,omitempty"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
}

// RoutineUpdate is the body of PATCH /v1/workspaces/{ws}/routines/{rtn}:
// the fields it names change, the others stay.
type RoutineUpdate struct {
	Name          *string `json:"name,omitempty"`
	Schedule      *string `json:"schedule,omitempty"`
	TimeZone      *string `json:"time_zone,omitempty"`
	TitleTemplate *string `json:"title_template,omitempty"`
	Prompt        *string `json:"prompt,omitempty"`
	Overlap       *string `json:"overlap,omitempty"`
	Enabled       *bool   `json:"enabled,omitempty"`
}

// RoutineList lists a workspace's routines.
type RoutineList struct {
	Routines []*Routine `json:"routines"`
}

// RoutineRunList lists a routine's runs, newest first.
type RoutineRunList struct {
	Runs []*RoutineRun `json:"runs"`
}

// RoutineService owns routines: their schedules, their runs and the
// scheduler that fires them.
type RoutineService interface {
	Create(ctx context.Context, ws string, in RoutineCreate) (*Routine, error)
	Get(ctx context.Context, ws, id string) (*Routine, error)
	List(ctx context.Context, ws string) ([]*Routine, error)
	Update(ctx context.Context, ws, id string, u RoutineUpdate) (*Routine, error)
	Delete(ctx context.Context, ws, id string) error
	// RunNow fires the routine at once, by hand, whatever its schedule
	// and enabled flag say (the overlap policy still holds).
	RunNow(ctx context.Context, ws, id string) (*RoutineRun, error)
	Runs(ctx context.Context, ws, id string, limit int) ([]*RoutineRun, error)
}

// RoutineStore keeps routines and their runs.
type RoutineStore interface {
	CreateRoutine(ctx context.Context, r *Routine) error
	// GetRoutine fails with ENOTFOUND for an unknown id.
	GetRoutine(ctx context.Context, id string) (*Routine, error)
	ListRoutines(ctx context.Context, workspaceID string) ([]*Routine, error)
	// UpdateRoutine replaces the routine's editable fields and its next
	// run time.
	UpdateRoutine(ctx context.Context, r *Routine) error
	// DeleteRoutine removes the routine and its runs.
	DeleteRoutine(ctx context.Context, id string) error
	// DueRoutines lists the enabled routines whose next run is at or
	// before now.
	DueRoutines(ctx context.Context, now time.Time) ([]*Routine, error)
	// ClaimRoutineRun moves the routine's next run from expectNext to
	// next and inserts run, in one transaction, if next_run_at is still
	// expectNext: of several nodes claiming one tick exactly one gets
	// true. A nil expectNext claims unconditionally (a run by hand).
	ClaimRoutineRun(ctx context.Context, routineID string, expectNext *time.Time, next time.Time, run *RoutineRun) (bool, error)
	// UpdateRoutineRun writes run's status, session, queue item,
	// execution, error and finish time if the stored status is still
	// fromStatus (and, when fromExecution is not nil, the stored
	// execution id still *fromExecution), reporting whether it did.
	UpdateRoutineRun(ctx context.Context, run *RoutineRun, fromStatus string, fromExecution *string) (bool, error)
	GetRoutineRun(ctx context.Context, id string) (*RoutineRun, error)
	// ListRoutineRuns lists a routine's runs, newest first; status ""
	// means any.
	ListRoutineRuns(ctx context.Context, routineID, status string, limit int) ([]*RoutineRun, error)
	// RunningRoutineRuns lists every run still running, of any routine.
	RunningRoutineRuns(ctx context.Context) ([]*RoutineRun, error)
}
