package desk

import (
	"context"
	"time"
)

// ID prefixes of threads and thread groups.
const (
	PrefixThread      = "thr"
	PrefixThreadGroup = "tgr"
)

// Thread objective states: a handler works on an active objective; a
// conclusion episode marks it concluded, and an activating follow-up makes
// it active again for a new objective span.
const (
	ThreadActive    = "active"
	ThreadConcluded = "concluded"
)

// History modes of a thread's start.
const (
	// HistoryIsolated starts the handler with its prompt and the objective
	// only (the default).
	HistoryIsolated = "isolated"
	// HistoryForked adds a filtered block of the orchestrator's
	// conversation to the handler's first prompt-bearing item only.
	HistoryForked = "forked"
)

// Episode kinds and conclusion outcomes.
const (
	EpisodeUpdate     = "update"
	EpisodeConclusion = "conclusion"

	EpisodeDelivered = "delivered"
	EpisodeFailed    = "failed"
	EpisodeClosed    = "closed"
)

// ThreadGroup is durable topology: the threads one or more thread_start
// calls opened together. It is addressing only, never shared memory.
type ThreadGroup struct {
	ID          string    `json:"id"`
	SessionID   string    `json:"session_id"`
	WorkspaceID string    `json:"workspace_id"`
	CreatedAt   time.Time `json:"created_at"`
	// ThreadIDs are the group's threads in start order (filled on read).
	ThreadIDs []string `json:"thread_ids"`
}

// Thread is a handler surface of a session that owns one delegated
// objective (svvy's handler thread).
type Thread struct {
	ID          string `json:"id"`
	SessionID   string `json:"session_id"`
	WorkspaceID string `json:"workspace_id"`
	SurfaceID   string `json:"surface_id"`
	Title       string `json:"title"`
	Objective   string `json:"objective"`
	State       string `json:"state"`
	History     string `json:"history"`
	GroupID     string `json:"thread_group_id"`
	Worktree    string `json:"worktree,omitempty"`
	// Git is what the thread's /workspace has checked out, filled on
	// read. A handler thread's commands run in its session's /workspace,
	// so this is the session's branch (and worktree) when the thread is
	// read; nil when /workspace is not a git work tree.
	Git *GitInfo `json:"git,omitempty"`
	// CommandID is the thread_start call that opened it.
	CommandID string `json:"command_id,omitempty"`
	// LatestEpisode and EpisodeCount are filled on read.
	LatestEpisode *EpisodeSummary `json:"latest_episode"`
	EpisodeCount  int             `json:"episode_count"`
	CreatedAt     time.Time       `json:"created_at"`
	UpdatedAt     time.Time       `json:"updated_at"`
}

// Episode is the durable, human-readable result a handler thread reports
// to its orchestrator with thread_report.
type Episode struct {
	ID          string `json:"id"`
	ThreadID    string `json:"thread_id"`
	SessionID   string `json:"session_id"`
	WorkspaceID string `json:"workspace_id"`
	Kind        string `json:"kind"`
	Outcome     string `json:"outcome"`
	Title       string `json:"title"`
	Body        string `json:"body"`
	// Origin is stamped by the server from the execution that reported it.
	Origin      Origin   `json:"origin"`
	CommandID   string   `json:"command_id,omitempty"`
	ExecutionID string   `json:"execution_id,omitempty"`
	Artifacts   []string `json:"artifacts"`
	// NotificationID is the orchestrator's queue row that carries it.
	NotificationID string    `json:"notification_id,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
}

// EpisodeSummary is an episode without its body.
type EpisodeSummary struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	Outcome   string    `json:"outcome"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
}

// Summary is the episode without its body.
func (e *Episode) Summary() *EpisodeSummary {
	return &EpisodeSummary{ID: e.ID, Kind: e.Kind, Outcome: e.Outcome, Title: e.Title, CreatedAt: e.CreatedAt}
}

// ThreadStart is one thread to open: the thread row and its first
// prompt-bearing queue row (initial_handler_start) on its new surface.
type ThreadStart struct {
	Thread *Thread
	Item   *QueueItem
}

// ThreadStore keeps threads, thread groups and episodes. Each write is one
// transaction with its queue rows and events.
type ThreadStore interface {
	// StartThreads creates the group when newGroup (else g must exist in
	// the session), then for each start its handler surface, its thread
	// row and its initial_handler_start row, in one transaction. When a
	// thread of the same command already exists it changes nothing and
	// returns the threads that command started (created false).
	StartThreads(ctx context.Context, g *ThreadGroup, newGroup bool, starts []ThreadStart) (created bool, err error)
	GetThread(ctx context.Context, id string) (*Thread, error)
	ThreadBySurface(ctx context.Context, surfaceID string) (*Thread, error)
	// ListThreads lists a session's threads in start order; groupID ""
	// lists all of them.
	ListThreads(ctx context.Context, sessionID, groupID string) ([]*Thread, error)
	GetThreadGroup(ctx context.Context, id string) (*ThreadGroup, error)
	ListThreadGroups(ctx context.Context, sessionID string) ([]*ThreadGroup, error)
	// FollowupThreads queues each item (a thread_followup row on a
	// thread's surface) and, when activate, moves concluded targets back
	// to active, in one transaction.
	FollowupThreads(ctx context.Context, items []*QueueItem, activate bool) ([]*Thread, error)
	// RecordEpisode stores e, marks its thread concluded when e is a
	// conclusion, and queues n (the thread_report_notification row on the
	// orchestrator surface), in one transaction. An episode of the same
	// command already stored is returned instead (created false).
	RecordEpisode(ctx context.Context, e *Episode, n *QueueItem) (*Episode, bool, error)
	GetEpisode(ctx context.Context, id string) (*Episode, error)
	// ListEpisodes lists a thread's episodes in the order recorded.
	ListEpisodes(ctx context.Context, threadID string) ([]*Episode, error)
	// NextThreadScriptStep is a handler's durable script cursor.
	NextThreadScriptStep(ctx context.Context, threadID string) (int, error)
}
