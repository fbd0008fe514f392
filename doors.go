package desk

import (
	"context"
	"net/url"
	"time"
)

// The service interfaces the doors (httpapi, web, mcpserver) are served
// through, and the request and result types that cross them. A door
// imports this package and never a service's, so it links neither the
// model SDKs nor the shell parser nor the store; each implementation
// checks that it satisfies its interface (var _ desk.X = (*Service)(nil)).

// ExecutionService is the execution model as the doors see it: the
// durable queue, executions, blocks, surfaces and the event stream.
type ExecutionService interface {
	Submit(ctx context.Context, sessionID string, in SubmitInput) (*SubmitResult, error)
	Queue(ctx context.Context, sessionID string, all bool) ([]*QueueItem, error)
	QueueOp(ctx context.Context, sessionID, itemID string, op QueueOp) (*QueueItem, error)
	Resume(ctx context.Context, sessionID, surfaceID string) (*Surface, error)
	Surfaces(ctx context.Context, sessionID string) ([]*Surface, error)
	Attach(ctx context.Context, sessionID, surfaceID string) (*Surface, error)
	Executions(ctx context.Context, sessionID string) ([]*Execution, error)
	Execution(ctx context.Context, id string) (*Execution, error)
	Interrupt(ctx context.Context, sessionID, executionID string) (*InterruptResult, error)
	Blocks(ctx context.Context, sessionID string) ([]*Block, error)
	ReleaseBlock(ctx context.Context, sessionID, blockID string) (*Block, error)
	SetLifecycle(ctx context.Context, sessionID, lifecycle string) (*Session, error)
	// ScopeEvents narrows an event filter to what the caller may see.
	ScopeEvents(ctx context.Context, f *EventFilter) error
	// Tail delivers every event matching f after f.AfterSeq in seq order,
	// then follows new ones until ctx ends or fn fails. When f.AfterSeq
	// is older than the retention window, gap is called first with what
	// was lost.
	Tail(ctx context.Context, f EventFilter, gap func(EventGap) error, fn func(*Event) error) error
}

// EventGap reports that a stream asked to resume after events that
// retention already removed.
type EventGap struct {
	Requested int64 `json:"requested"`
	Oldest    int64 `json:"oldest"`
}

// UsageService sums model usage and admits work a raised budget allows.
type UsageService interface {
	SessionUsage(ctx context.Context, sessionID string) (*SessionUsage, error)
	WorkspaceUsage(ctx context.Context, workspaceID string) (*WorkspaceUsage, error)
	// Wake looks for admissible work now (after a budget was raised).
	Wake()
}

// AgentService is the tool-loop agent as the doors show it: the context
// the next turn of a surface would send.
type AgentService interface {
	Context(ctx context.Context, x *Session, surface string) (*ContextView, error)
}

// ConversationService is a turn's records as the doors show them, whatever
// executor ran the turn: transcripts, and the decisions a turn waits for
// (approvals, input requests, plan cards), which a door's answer wakes.
type ConversationService interface {
	Transcript(ctx context.Context, surface string, before int64, limit int) ([]*Message, error)
	TranscriptTree(ctx context.Context, surface string) ([]*Message, error)
	Approvals(ctx context.Context, sessionID string, pending bool) ([]*Approval, error)
	DecideApproval(ctx context.Context, id, decision, reason string) (*Approval, error)
	InputRequests(ctx context.Context, sessionID string) ([]*InputRequest, error)
	AnswerInput(ctx context.Context, id string, answers map[string]string) (*InputRequest, *SubmitResult, error)
	DecidePlan(ctx context.Context, id, decision, notes string) (*Plan, error)
	// Plan is one plan card, visible exactly when its session is.
	Plan(ctx context.Context, id string) (*Plan, error)
	// Handler threads, their groups and episodes, visible exactly when
	// their session is.
	Thread(ctx context.Context, id string) (*Thread, error)
	Threads(ctx context.Context, sessionID, groupID string) ([]*Thread, error)
	ThreadGroups(ctx context.Context, sessionID string) ([]*ThreadGroup, error)
	Episodes(ctx context.Context, threadID string) ([]*Episode, error)
	Episode(ctx context.Context, id string) (*Episode, error)
}

// AppLogService is desk's own log as the doors show it.
type AppLogService interface {
	List(ctx context.Context, f LogFilter) ([]*LogEntry, error)
	LastSeq(ctx context.Context) (int64, error)
	MarkSeen(ctx context.Context, viewer string, seq int64) (int64, error)
	Unread(ctx context.Context, viewer string) (*LogUnread, error)
	Tail(ctx context.Context, f LogFilter, fn func(*LogEntry) error) error
	// ParseQuery reads a log filter from a request's query (the log's own
	// query language: level, min_level, source, q, after_seq, limit, ...).
	ParseQuery(v url.Values) (LogFilter, error)
}

// UIService is the client state the doors keep: composer drafts per
// surface and the open holds that decide whether a finished turn leaves
// its session unread.
type UIService interface {
	Draft(ctx context.Context, sessionID, surfaceID string) (*Draft, error)
	SaveDraft(ctx context.Context, sessionID, surfaceID, text string) (*Draft, error)
	OpenSession(ctx context.Context, sessionID, viewer string) (*Session, error)
	Leave(ctx context.Context, sessionID, viewer string) error
	// HoldTTL is how long one open hold lasts without renewal.
	HoldTTL() time.Duration
}

// LifecycleService owns the workspace catalog and a workspace's departure
// and return: offboard, restore, purge, the cross-workspace ask, and the
// admission check that refuses work for a workspace that is not active.
type LifecycleService interface {
	Catalog(ctx context.Context) ([]*CatalogEntry, error)
	CatalogEntry(ctx context.Context, ws string) (*CatalogEntry, error)
	Offboard(ctx context.Context, ws string, in OffboardInput) (*OffboardResult, error)
	Restore(ctx context.Context, ws string) (*LifecycleResult, error)
	// Purge needs the workspace id typed again as confirmation.
	Purge(ctx context.Context, ws, confirm string) (*LifecycleResult, error)
	Ask(ctx context.Context, in AskInput) (*AskResult, error)
	Admit(ctx context.Context, ref LifecycleRef) error
}

// LifecycleRef names what a request is about, so Admit can find the
// workspace.
type LifecycleRef struct {
	Workspace, Session, Group, Execution string
}

// LifecycleResult answers offboard, restore and purge.
type LifecycleResult struct {
	Workspace *CatalogEntry `json:"workspace"`
	// Changed is false when the workspace already was where the
	// operation leads (a repeated offboard, restore or purge).
	Changed bool `json:"changed"`
	// Path is where the workspace's directory now is ("" once purged).
	Path string `json:"path,omitempty"`
}

// OffboardResult answers Offboard.
type OffboardResult = LifecycleResult

// OffboardInput is the input of Offboard.
type OffboardInput struct {
	Reason string `json:"reason"`
	Notes  string `json:"notes,omitempty"`
	// Successors maps a session of the workspace to the session (of any
	// workspace) that carries its work on.
	Successors map[string]string `json:"successors,omitempty"`
	// HeldLease says the caller already holds the workspace's lease (see
	// lifecycle's Guard) and Offboard must not take it again: absorb
	// offboards its source under the leases it took for both workspaces.
	HeldLease bool `json:"-"`
}

// AskInput is a cross-workspace ask: a prompt for whatever answers for
// the target now.
type AskInput struct {
	Target ResolveTarget `json:"target"`
	Prompt string        `json:"prompt"`
	// Reconstruct prefixes the prompt, when the target has to be
	// reconstructed, with the preamble telling the new worker what it is.
	Reconstruct bool `json:"reconstruct,omitempty"`
	// Subject, Reply and FromSession make the ask a dispatch with reply
	// ownership: reply caller sends the target's answer back to
	// FromSession as a dispatch_reply queue row; none (the default) sends
	// nothing back.
	Subject     string `json:"subject,omitempty" jsonschema:"maxLength=200"`
	Reply       string `json:"reply,omitempty" jsonschema:"enum=caller,enum=none"`
	FromSession string `json:"from_session,omitempty"`
	// IdempotencyKey makes a repeated ask queue nothing new on the
	// target; the dispatch service sets it (never a client: an ask through
	// the API is a dispatch, whose id is its key).
	IdempotencyKey string `json:"-"`
}

// Ask statuses.
const (
	AskDispatched  = "dispatched"
	AskUnavailable = "unavailable"
)

// AskResult answers an ask.
type AskResult struct {
	Status string `json:"status"`
	// Resolution is exact, unavailable or reconstructed; Reason says why
	// an unavailable target is unavailable.
	Resolution string  `json:"resolution"`
	Reason     string  `json:"reason,omitempty"`
	SessionID  string  `json:"session_id,omitempty"`
	Signature  string  `json:"signature,omitempty"`
	Origin     *Origin `json:"origin,omitempty"`
	// QueuedItemID is the queue row of the prompt, ExecutionID the
	// execution that took it when the session was idle.
	QueuedItemID string `json:"queued_item_id,omitempty"`
	ExecutionID  string `json:"execution_id,omitempty"`
	// DispatchID is the dispatch the ask recorded (GET /v1/dispatches/{id}).
	DispatchID string `json:"dispatch_id,omitempty"`
}

// TemplateService registers workspace templates, creates workspaces from
// them and upgrades a workspace's managed template files.
type TemplateService interface {
	Add(ctx context.Context, name, version string, files []TemplateFile) (*TemplateVersion, error)
	List(ctx context.Context) ([]*TemplateVersion, error)
	CreateWorkspace(ctx context.Context, in WorkspaceCreate, ref string) (*Workspace, error)
	Plan(ctx context.Context, ws, to string) (*UpgradePlan, error)
	Apply(ctx context.Context, ws, to string, in UpgradeApply) (*UpgradeResult, error)
}

// AbsorbService plans and applies absorbing one workspace into another.
type AbsorbService interface {
	Plan(ctx context.Context, target, source string) (*AbsorbPlan, error)
	Apply(ctx context.Context, target, source string, in AbsorbApply) (*AbsorbResult, error)
}

// ArchiveService reads a workspace's channel archive (the NDJSON record
// of every conversation it had over its channels).
type ArchiveService interface {
	// ReadRaw delivers every record f matches, in order, as the line
	// exactly as stored without its '\n' (valid only during the
	// callback), and reports what it went through.
	ReadRaw(ctx context.Context, ws string, f ArchiveFilter, fn func(raw []byte) error) (ArchiveSummary, error)
	// Days lists the days ("YYYY-MM-DD", ascending) with an archive file.
	Days(ctx context.Context, ws string) ([]string, error)
	// List lists one day's archive files.
	List(ctx context.Context, ws, day string) ([]ArchiveFile, error)
}

// ArchiveFilter selects archive records. Empty ids and zero times select
// everything.
type ArchiveFilter struct {
	// Channel and Conversation match the records' exact ids.
	Channel      string
	Conversation string
	// From (inclusive) and To (exclusive) bound the records' `at`.
	From, To time.Time
}

// ArchiveSkipped is a line a reader did not deliver because it does not
// parse: a crash fragment, or anything else that is not a contract record.
type ArchiveSkipped struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Offset int64  `json:"offset"`
	Bytes  int    `json:"bytes"`
	Reason string `json:"reason"`
}

// ArchiveSummary reports what an archive read went through.
type ArchiveSummary struct {
	Files        int              `json:"files"`         // files opened
	Records      int              `json:"records"`       // records delivered to the callback
	SkippedTotal int              `json:"skipped_total"` // unparsable lines met
	Skipped      []ArchiveSkipped `json:"skipped"`       // the first ones (the archive package bounds how many)
}

// ArchiveFile describes one archive file.
type ArchiveFile struct {
	Day  string `json:"day"`
	File string `json:"file"` // slash path below the archive directory
	Name string `json:"name"`
	// Channel and Conversation are decoded from the name; both are empty
	// when the name was shortened (its records carry the exact ids).
	Channel      string `json:"channel,omitempty"`
	Conversation string `json:"conversation_id,omitempty"`
	Size         int64  `json:"size"`
}
