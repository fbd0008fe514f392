package desk

import (
	"context"
	"encoding/json"
	"time"
)

// Transcript roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	// RoleMarker is a marker message: a change of the session's agent
	// (Message.Marker), recorded where it takes effect and never sent to
	// a model.
	RoleMarker = "marker"
)

// Message is one message of a surface's transcript. Assistant messages
// carry the tool calls they made; tool messages carry a call's result. The
// world block an execution attaches to the latest user message is never
// stored here.
//
// The transcript is a tree: ParentID is the message this one follows on
// its branch (empty for a root). An edited user message (EditOf names the
// original) starts a new branch from the original's parent; the original
// branch is kept as it was. The active branch is the one that holds the
// surface's newest message.
type Message struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	SurfaceID   string          `json:"surface_id"`
	ExecutionID string          `json:"execution_id,omitempty"`
	Seq         int64           `json:"seq"`
	ParentID    string          `json:"parent_id"`
	EditOf      string          `json:"edit_of,omitempty"`
	Role        string          `json:"role"`
	Text        string          `json:"text"`
	ToolCalls   []MessageCall   `json:"tool_calls,omitempty"`
	ToolCallID  string          `json:"tool_call_id,omitempty"`
	ToolName    string          `json:"tool_name,omitempty"`
	IsError     bool            `json:"is_error,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	Commands    []*Command      `json:"commands,omitempty"` // filled when listing: the calls' records
	Meta        json.RawMessage `json:"meta,omitempty"`
}

// MessageCall is one tool call of an assistant message.
type MessageCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Command statuses (svvy's command records).
const (
	CommandRequested = "requested"
	CommandWaiting   = "waiting"
	CommandRunning   = "running"
	CommandSucceeded = "succeeded"
	CommandFailed    = "failed"
	CommandDeclined  = "declined"
	CommandCancelled = "cancelled"
	// CommandUnknown is a call that was running when its desk died: its
	// outcome is not known, and it is never run again (unless the tool is
	// read-only); the model is told so in a synthesized result.
	CommandUnknown = "unknown"
)

// Command is the record of one tool call: what ran, where, what state it
// reached, how long it took and its useful outcome.
type Command struct {
	ID          string          `json:"id"`
	ExecutionID string          `json:"execution_id"`
	SessionID   string          `json:"session_id"`
	SurfaceID   string          `json:"surface_id"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	Status      string          `json:"status"`
	StartedAt   *time.Time      `json:"started_at,omitempty"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	// Output is the bounded text output (a command's stdout and stderr, a
	// fetch's text); the full output of big results is kept as an artifact.
	Output    string          `json:"output,omitempty"`
	Facts     json.RawMessage `json:"facts,omitempty"`
	Artifacts []string        `json:"artifacts,omitempty"`
	Error     string          `json:"error,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	// Result is what the model was given for the call, kept when the call
	// finishes: a turn continued after a restart gives the model the same
	// results without running finished calls again. It is the tool
	// message's text, so it is not repeated in the API.
	Result *CommandResult `json:"-"`
}

// CommandResult is the tool result of a finished call.
type CommandResult struct {
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
	// Stop ends the turn after this step (a declined plan).
	Stop string `json:"stop,omitempty"`
}

// Approval statuses.
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalCancelled = "cancelled"
)

// Approval is a request to let one gated tool call start.
type Approval struct {
	ID          string     `json:"id"`
	SessionID   string     `json:"session_id"`
	ExecutionID string     `json:"execution_id"`
	CommandID   string     `json:"command_id"`
	Tool        string     `json:"tool"`
	Summary     string     `json:"summary"` // the command or the write, shown to the person deciding
	Status      string     `json:"status"`
	DecidedBy   string     `json:"decided_by,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	// ApprovalRequest is the request as a person reads it, the same
	// shape whichever executor asked (the original request stays in the
	// command record's arguments).
	ApprovalRequest
	// OptionID is the option chosen, once decided by one.
	OptionID string `json:"option_id,omitempty"`
}

// Approval option kinds (ACP's words; every executor's options map onto
// them).
const (
	OptionAllowOnce    = "allow_once"
	OptionAllowAlways  = "allow_always"
	OptionRejectOnce   = "reject_once"
	OptionRejectAlways = "reject_always"
)

// ApprovalRequest is what a gated call asks, readable by a person: what
// (the command line, or the file changed), where, why, and the answers
// the executor offers.
type ApprovalRequest struct {
	// What is the command line as a person reads it, or the file an edit
	// changes; never the executor's JSON.
	What string `json:"what,omitempty"`
	// Diff is the change of an edit, when the executor reports it.
	Diff string `json:"diff,omitempty"`
	// Cwd is where a command runs.
	Cwd string `json:"cwd,omitempty"`
	// Why is the executor's reason for asking.
	Why string `json:"why,omitempty"`
	// Options are the executor's own answers, with their exact ids.
	Options []ApprovalOption `json:"options,omitempty"`
}

// ApprovalOption is one answer an executor offers to an approval.
type ApprovalOption struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"` // allow_once, allow_always, reject_once or reject_always
	Label string `json:"label"`
}

// OptionAllows reports whether choosing an option of kind lets the call run.
func OptionAllows(kind string) bool { return kind == OptionAllowOnce || kind == OptionAllowAlways }

// OptionLasts reports whether an option of kind stands for the rest of
// the session (the same request is answered the same way, unasked).
func OptionLasts(kind string) bool { return kind == OptionAllowAlways || kind == OptionRejectAlways }

// Input request statuses.
const (
	InputPending   = "pending"
	InputAnswered  = "answered"
	InputDefaulted = "defaulted"
	InputCancelled = "cancelled"
)

// InputQuestion is one question of request_user_input (svvy shape).
type InputQuestion struct {
	ID       string        `json:"id"`
	Question string        `json:"question"`
	Options  []InputOption `json:"options,omitempty"`
	Default  string        `json:"default,omitempty"`
}

// InputOption is one answer option; exactly one per question is recommended.
type InputOption struct {
	Label       string `json:"label"`
	Recommended bool   `json:"recommended,omitempty"`
}

// InputRequest is a question the agent asked the user.
type InputRequest struct {
	ID          string            `json:"id"`
	SessionID   string            `json:"session_id"`
	SurfaceID   string            `json:"surface_id"`
	ExecutionID string            `json:"execution_id"`
	CommandID   string            `json:"command_id"`
	Questions   []InputQuestion   `json:"questions"`
	Blocking    bool              `json:"blocking"`
	Status      string            `json:"status"`
	Answers     map[string]string `json:"answers,omitempty"` // question id → answer
	// Deadline is when a blocking request stops waiting and its defaults
	// stand; it is kept, so a restart does not move it.
	Deadline   *time.Time `json:"deadline,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	AnsweredAt *time.Time `json:"answered_at,omitempty"`
}

// Plan statuses.
const (
	PlanProposed = "proposed"
	PlanApproved = "approved"
	PlanDeclined = "declined"
	PlanRevised  = "revised"
)

// Plan is a plan card the agent presented.
type Plan struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	ExecutionID string          `json:"execution_id"`
	CommandID   string          `json:"command_id"`
	Card        json.RawMessage `json:"card"` // {"title","steps":[…],"notes"?}
	Status      string          `json:"status"`
	Notes       string          `json:"notes,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	DecidedAt   *time.Time      `json:"decided_at,omitempty"`
}

// Approval modes of a workspace.
const (
	ApprovalModeUser       = "user"
	ApprovalModeAutoReview = "auto-review"
	ApprovalModeFullAccess = "full-access"
)

// CheckApprovalMode refuses anything but the three approval modes. PATCH
// of the agent settings and an import both call it, so both refuse with
// the same message.
func CheckApprovalMode(mode string) error {
	switch mode {
	case ApprovalModeUser, ApprovalModeAutoReview, ApprovalModeFullAccess:
		return nil
	}
	return Errorf(EINVALID, "approval_mode %q must be user, auto-review or full-access", mode)
}

// CheckTokenBudget refuses a negative token budget (0 is none). PATCH of
// the agent settings and an import both call it.
func CheckTokenBudget(n int64) error {
	if n < 0 {
		return Errorf(EINVALID, "token_budget %d must not be negative (0 or null for no budget)", n)
	}
	return nil
}

// AgentSettings are a workspace's settings for its agents.
type AgentSettings struct {
	ApprovalMode string `json:"approval_mode"`
	// Network lets commands reach the network (off by default).
	Network bool `json:"network"`
	// BlockingInput makes request_user_input wait (up to 5 minutes) for
	// the answer instead of returning the defaults at once.
	BlockingInput bool `json:"blocking_input"`
	// TokenBudget is the workspace's token budget (input plus output
	// tokens of every model call); 0 means none. A turn that would start
	// while the workspace's usage is at or past it gets a budget block.
	TokenBudget int64 `json:"token_budget"`
	// ExternalInstructions puts the checkout's AGENTS.md and CLAUDE.md
	// into the agent's system prompt (on by default).
	ExternalInstructions bool `json:"external_instructions"`
	// Sandbox bounds each command the agent runs; zero fields take the
	// defaults (docs/agent.md, "Sandbox limits").
	Sandbox SandboxLimits `json:"sandbox"`
	// GitWritable lets the agent write the hooks and config of
	// /workspace's git repository (off by default: they are read-only in
	// the sandbox and to the file tools). Host-side git runs neither
	// either way.
	GitWritable bool `json:"git_writable"`
}

// SandboxLimits bound one command of an agent (sandbox.Limits has
// the same fields and enforces them). Zero means the default.
type SandboxLimits struct {
	Processes   int   `json:"processes"`
	MemoryBytes int64 `json:"memory_bytes"`
	CPUSeconds  int   `json:"cpu_seconds"`
	TmpBytes    int64 `json:"tmp_bytes"`
	OutputBytes int64 `json:"output_bytes"`
}

// CheckSandboxLimits refuses a limit that is negative or, unless it is 0
// (the default), below the least a command can do useful work with: 8
// processes, 16 MiB of memory, 1 s of CPU, 1 MiB of /tmp, 64 KiB of
// output. PATCH /v1/workspaces/{ws}/agent and an import check with it.
func CheckSandboxLimits(l SandboxLimits) error {
	for _, f := range []struct {
		name     string
		v, least int64
		unit     string
	}{
		{"processes", int64(l.Processes), 8, "processes"},
		{"memory_bytes", l.MemoryBytes, 16 << 20, "bytes"},
		{"cpu_seconds", int64(l.CPUSeconds), 1, "seconds"},
		{"tmp_bytes", l.TmpBytes, 1 << 20, "bytes"},
		{"output_bytes", l.OutputBytes, 64 << 10, "bytes"},
	} {
		if f.v < 0 || (f.v != 0 && f.v < f.least) {
			return Errorf(EINVALID, "sandbox.%s %d is below the minimum %d %s (0 restores the default)", f.name, f.v, f.least, f.unit)
		}
	}
	return nil
}

// LoadedExtension is an extension (a skill of the checkout) a surface's
// agent loaded with load_extension: from the step after the load on, its
// instructions are part of the surface's binding, for the rest of the
// surface's conversation.
type LoadedExtension struct {
	SurfaceID string `json:"surface_id"`
	SessionID string `json:"session_id"`
	Name      string `json:"name"`
	// Path is the guest path of the skill's SKILL.md when it was loaded;
	// Digest its sha256 then ("sha256:<hex>").
	Path   string `json:"path"`
	Digest string `json:"digest"`
	// ExecutionID and CommandID name the load_extension call that loaded it.
	ExecutionID string    `json:"execution_id"`
	CommandID   string    `json:"command_id"`
	LoadedAt    time.Time `json:"loaded_at"`
}

// SessionAgent is a session's agent configuration: its model and, for the
// script model, its script and cursor; and how it is titled.
type SessionAgent struct {
	Model        string          `json:"model"`
	Script       json.RawMessage `json:"script,omitempty"`
	ScriptCursor int             `json:"script_cursor"`
	// TitleSource is "auto" until a person renames the session, then
	// "manual" for good.
	TitleSource string          `json:"title_source"`
	Focus       json.RawMessage `json:"focus,omitempty"` // {"url","title"}
}

// TitleJob is a session's pending automatic title.
type TitleJob struct {
	SessionID    string
	FirstMessage string
	Attempts     int
	CreatedAt    time.Time
}

// AgentStore keeps transcripts, command records, approvals, input requests,
// plans and web-item leases.
type AgentStore interface {
	// AppendMessage assigns the message the next seq of its surface and
	// links it to the surface's newest message; a message with EditOf set
	// keeps the ParentID it was given (empty: a new root).
	AppendMessage(ctx context.Context, m *Message) error
	// ListMessages pages back through the active branch (the path from the
	// surface's newest message to its root), oldest first.
	ListMessages(ctx context.Context, surfaceID string, beforeSeq int64, limit int) ([]*Message, error)
	// ListMessageTree is every message of a surface, all branches, by seq.
	ListMessageTree(ctx context.Context, surfaceID string) ([]*Message, error)
	GetMessage(ctx context.Context, id string) (*Message, error)
	CountMessages(ctx context.Context, surfaceID string) (int, error)

	CreateCommand(ctx context.Context, c *Command) error
	// UpdateCommand replaces the row's arguments (an external runtime may
	// announce a call before its input is known), status, times, output,
	// facts, artifacts, error and result.
	UpdateCommand(ctx context.Context, c *Command) error
	ListCommands(ctx context.Context, executionIDs []string) ([]*Command, error)

	CreateApproval(ctx context.Context, a *Approval) error
	// DecideApproval records a decision on a pending approval; a decided
	// one is ECONFLICT.
	DecideApproval(ctx context.Context, id, status, optionID, by, reason string, at time.Time) (*Approval, error)
	GetApproval(ctx context.Context, id string) (*Approval, error)
	ListApprovals(ctx context.Context, sessionID string, pendingOnly bool) ([]*Approval, error)

	CreateInputRequest(ctx context.Context, r *InputRequest) error
	AnswerInputRequest(ctx context.Context, id, status string, answers map[string]string, at time.Time) (*InputRequest, error)
	GetInputRequest(ctx context.Context, id string) (*InputRequest, error)
	ListInputRequests(ctx context.Context, sessionID string) ([]*InputRequest, error)

	CreatePlan(ctx context.Context, p *Plan) error
	DecidePlan(ctx context.Context, id, status, notes string, at time.Time) (*Plan, error)
	GetPlan(ctx context.Context, id string) (*Plan, error)
	// ListPlans lists an execution's plan cards, oldest first.
	ListPlans(ctx context.Context, executionID string) ([]*Plan, error)

	LeaseItem(ctx context.Context, itemID, executionID string) error
	HasLease(ctx context.Context, itemID, executionID string) (bool, error)
	ReleaseLeases(ctx context.Context, executionID string) error

	GetSessionAgent(ctx context.Context, sessionID string) (*SessionAgent, error)
	SetSessionAgent(ctx context.Context, sessionID string, a *SessionAgent) error
	// NextScriptStep returns the script cursor and advances it durably.
	NextScriptStep(ctx context.Context, sessionID string) (int, error)
	// SetAutoTitle sets the title only while the session is auto-titled.
	SetAutoTitle(ctx context.Context, sessionID, title string) (bool, error)

	// A title job lives from a session's first message until its title is
	// set. BeginTitleJob records a try (a new job, or the retry of one
	// whose desk died) and returns the tries begun so far.
	BeginTitleJob(ctx context.Context, sessionID, firstMessage string, at time.Time) (int, error)
	ListTitleJobs(ctx context.Context) ([]*TitleJob, error)
	EndTitleJob(ctx context.Context, sessionID string) error

	GetAgentSettings(ctx context.Context, workspaceID string) (*AgentSettings, error)
	SetAgentSettings(ctx context.Context, workspaceID string, s *AgentSettings) error

	// LoadExtension records a surface's load of an extension; it reports
	// false, and changes nothing, when the surface already loaded one of
	// that name.
	LoadExtension(ctx context.Context, e *LoadedExtension) (bool, error)
	// LoadedExtensions lists a surface's loaded extensions in load order.
	LoadedExtensions(ctx context.Context, surfaceID string) ([]*LoadedExtension, error)
}

// MessageMeta is what Message.Meta holds. Meta is free-form JSON in the
// store, so a new mark needs no migration; readers use the methods below.
type MessageMeta struct {
	// Interrupted marks a partial assistant message: its step was cut
	// short by an interrupt and Text is what had streamed until then. It
	// says who stopped the turn and why (the execution's Interruption).
	Interrupted *Interruption `json:"interrupted,omitempty"`
	// Reasoning is what the model thought before an assistant message,
	// kept apart from its text: shown labelled and collapsed, never as
	// the reply, and sent back to the provider as its API requires.
	Reasoning []MessageReasoning `json:"reasoning,omitempty"`
	// Marker marks a message that is no one's words: a change of the
	// session's agent (profile, model, reasoning effort) recorded where
	// it took effect. Markers are never sent to a model.
	Marker *SessionChange `json:"marker,omitempty"`
}

// MessageReasoning is one block of a model's reasoning: an Anthropic
// thinking block (Text and Signature) or redacted_thinking block (Data),
// or an OpenAI-compatible server's reasoning_content (Type "reasoning").
type MessageReasoning struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// meta decodes m's Meta (zero when absent or unreadable).
func (m *Message) meta() MessageMeta {
	var meta MessageMeta
	if len(m.Meta) > 0 {
		_ = json.Unmarshal(m.Meta, &meta)
	}
	return meta
}

func (m *Message) setMeta(meta MessageMeta) {
	b, _ := json.Marshal(meta)
	if string(b) == "{}" {
		m.Meta = nil
		return
	}
	m.Meta = b
}

// Reasoning returns the reasoning kept with an assistant message.
func (m *Message) Reasoning() []MessageReasoning { return m.meta().Reasoning }

// SetReasoning keeps r with an assistant message.
func (m *Message) SetReasoning(r []MessageReasoning) {
	meta := m.meta()
	meta.Reasoning = r
	m.setMeta(meta)
}

// Marker returns the session change a marker message records, or nil for
// an ordinary message.
func (m *Message) Marker() *SessionChange { return m.meta().Marker }

// SetMarker makes m the marker of a session change.
func (m *Message) SetMarker(c *SessionChange) {
	meta := m.meta()
	meta.Marker = c
	m.setMeta(meta)
}

// Interrupted returns who stopped the step of a partial assistant
// message, or nil for a complete message.
func (m *Message) Interrupted() *Interruption {
	if len(m.Meta) == 0 {
		return nil
	}
	var meta MessageMeta
	if json.Unmarshal(m.Meta, &meta) != nil {
		return nil
	}
	return meta.Interrupted
}

// MarkInterrupted records in m's Meta that its step was cut short by in
// (nil: by an interrupt whose author is unknown).
func (m *Message) MarkInterrupted(in *Interruption) {
	if in == nil {
		in = &Interruption{By: "system", At: Now(), Reason: "interrupted"}
	}
	var meta MessageMeta
	if len(m.Meta) > 0 {
		_ = json.Unmarshal(m.Meta, &meta)
	}
	meta.Interrupted = in
	b, _ := json.Marshal(meta)
	m.Meta = b
}

// InterruptedNote is what a model reads after a partial assistant message
// in a later request, so it knows its reply was cut off and by whom rather
// than taking the fragment for a finished answer.
func InterruptedNote(in *Interruption) string {
	return "[this reply was interrupted here: " + StoppedBy(in) + "; it is incomplete]"
}

// StoppedBy says in plain words who stopped a turn and why, for people
// (the run bar, the CLI) and for the model's next request.
func StoppedBy(in *Interruption) string {
	if in == nil {
		return "stopped"
	}
	who := in.By
	switch who {
	case "", "system":
		who = "desk"
	}
	why := ""
	switch {
	case in.Reason == "user-interrupt" || in.Reason == "interrupted" || in.Reason == "":
		why = ""
	case in.Reason == "session-deleted":
		why = "the session was deleted"
	case in.Reason == "owner-stopping" || in.Reason == "owner-restarted":
		why = "desk was shutting down"
	default:
		why = in.Reason
	}
	s := "stopped by " + who
	if why != "" {
		s += " (" + why + ")"
	}
	return s
}
