package desk

import "encoding/json"

// The HTTP API's bodies that are not a service's own type: request bodies
// and the envelopes of lists. They are declared once, here, because three
// parties speak them: httpapi decodes and writes them, the Go client sends
// and reads them, and the OpenAPI document (httpapi/openapi/*.json) is
// generated from them by reflection. A field without omitempty is required
// in the document; jsonschema tags carry what Go cannot say (enums,
// bounds); field comments become its descriptions.

// ErrorBody is every error answer of the HTTP API.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is an error's code and message.
type ErrorDetail struct {
	Code    string `json:"code" jsonschema:"enum=invalid,enum=unauthorized,enum=forbidden,enum=not_found,enum=conflict,enum=too_large,enum=busy,enum=blocked,enum=stale_plan,enum=unavailable,enum=internal,enum=insufficient_storage,enum=request_timeout"`
	Message string `json:"message"`
}

// Health answers GET /healthz.
type Health struct {
	Status  string `json:"status" jsonschema:"enum=ok"`
	Version string `json:"version"`
}

// OpenAPIDocument is the shape GET /v1/openapi.json promises; the document
// itself is described by the OpenAPI 3.1 specification.
type OpenAPIDocument struct {
	OpenAPI    string         `json:"openapi"`
	Info       map[string]any `json:"info,omitempty"`
	Paths      map[string]any `json:"paths"`
	Components map[string]any `json:"components,omitempty"`
}

// WorkspaceCreateRequest is the body of POST /v1/workspaces.
type WorkspaceCreateRequest struct {
	WorkspaceCreate
	// Template ("name" or "name@version") fills checkout/ from a
	// registered template and records the baseline for upgrades.
	Template string `json:"template,omitempty"`
}

// WorkspaceList lists workspaces.
type WorkspaceList struct {
	Workspaces []*Workspace `json:"workspaces"`
}

// ActorCreate is the body of POST /v1/workspaces/{ws}/actors.
type ActorCreate struct {
	Name string `json:"name"`
	Kind string `json:"kind" jsonschema:"enum=human,enum=agent"`
}

// ActorCreated answers an actor's creation; the token is shown only here.
type ActorCreated struct {
	Actor *Actor `json:"actor"`
	Token string `json:"token"`
}

// ActorList lists actors.
type ActorList struct {
	Actors []*Actor `json:"actors"`
}

// SessionCreateRequest is the body of POST /v1/workspaces/{ws}/sessions.
type SessionCreateRequest struct {
	// Actor is an actor id or name; default: the token's actor, or owner
	// for the admin token.
	Actor string `json:"actor,omitempty"`
	Title string `json:"title,omitempty" jsonschema:"maxLength=200"`
	// Model is one of the models GET /v1/models lists, or script; any
	// other is refused with 400 naming them; default: the server's
	// DESK_MODEL.
	Model string `json:"model,omitempty"`
	// Script is the script of a script session:
	// {"steps":[{"text"?, "tool_calls"?:[{"name","arguments"}], "delay_ms"?}]}.
	Script json.RawMessage `json:"script,omitempty" jsonschema:"type=object"`
	// Runtime names a registered runtime (GET /v1/runtimes) that runs the
	// session's turns instead of desk's agent; no model or script with it.
	// There is deliberately no argv here.
	Runtime string `json:"runtime,omitempty"`
	// Profile names one of the workspace's profiles (GET
	// /v1/workspaces/{ws}/profiles) the session is made from; the session
	// keeps a snapshot of it. Model, runtime and reasoning_effort given
	// here override the profile's.
	Profile string `json:"profile,omitempty"`
	// ReasoningEffort is low, medium or high, for a model the operator
	// declared as reasoning; refused (400) for any other.
	ReasoningEffort string `json:"reasoning_effort,omitempty" jsonschema:"enum=,enum=low,enum=medium,enum=high"`
}

// SessionPatch is the body of PATCH /v1/sessions/{ses}; an absent field is
// left as it is.
type SessionPatch struct {
	Title    *string `json:"title,omitempty"`
	Pinned   *bool   `json:"pinned,omitempty"`
	Archived *bool   `json:"archived,omitempty"`
	Unread   *bool   `json:"unread,omitempty"`
	// Worktree binds the session to the git worktree of this name of the
	// workspace's checkout (made with git worktree add under
	// worktrees/<name> on the branch <name> when missing); "" binds it
	// back to the checkout. Seen from the session's next turn on.
	Worktree *string `json:"worktree,omitempty"`
	// Profile, Model and ReasoningEffort change the session's agent from
	// its next turn on (never the turn running now), recorded in the
	// transcript as a marker message. Profile takes the named profile's
	// snapshot (its model and reasoning effort too, unless given here);
	// model must be one GET /v1/models lists; reasoning_effort ("" for
	// the model's default) needs a model declared as reasoning. A
	// runtime session changes neither model nor effort.
	Profile         *string `json:"profile,omitempty"`
	Model           *string `json:"model,omitempty"`
	ReasoningEffort *string `json:"reasoning_effort,omitempty" jsonschema:"enum=,enum=low,enum=medium,enum=high"`
}

// ProfileList lists a workspace's profiles.
type ProfileList struct {
	Profiles []*Profile `json:"profiles"`
}

// ProfileCreate is the body of POST /v1/workspaces/{ws}/profiles and PUT
// /v1/workspaces/{ws}/profiles/{name} (whose path names it).
type ProfileCreate struct {
	Name string `json:"name,omitempty" jsonschema:"maxLength=64"`
	ProfileSpec
}

// SessionList lists sessions.
type SessionList struct {
	Sessions []*Session `json:"sessions"`
}

// PressureRequest is the body of the admin's storage pressure route.
type PressureRequest struct {
	Level string `json:"level" jsonschema:"enum=soft,enum=critical"`
}

// ArtifactList lists artifacts.
type ArtifactList struct {
	Artifacts []*Artifact `json:"artifacts"`
}

// GroupCreate is the body of POST /v1/workspaces/{ws}/groups.
type GroupCreate struct {
	Name string `json:"name"`
}

// GroupList lists selection groups.
type GroupList struct {
	Groups []*Group `json:"groups"`
}

// GroupWithItems is a selection group with its items.
type GroupWithItems struct {
	*Group
	Items []*Item `json:"items"`
}

// ItemCreateRequest is the JSON body of POST /v1/groups/{grp}/items:
// exactly one of text or url; any non-JSON content type adds raw bytes as
// a file item instead.
type ItemCreateRequest struct {
	Text  *string `json:"text,omitempty"`
	URL   string  `json:"url,omitempty" jsonschema:"format=uri"`
	Title string  `json:"title,omitempty"`
	Name  string  `json:"name,omitempty"`
}

// BindingsPut is the body of PUT /v1/sessions/{ses}/groups.
type BindingsPut struct {
	GroupIDs []string `json:"group_ids"`
}

// GuestList lists a directory of a session's guest file system.
type GuestList struct {
	Path    string       `json:"path"`
	Entries []GuestEntry `json:"entries"`
}

// ArchiveDays lists the days and files of a workspace's archive.
type ArchiveDays struct {
	Days  []string      `json:"days"`
	Files []ArchiveFile `json:"files"`
}

// LogList is a page of the app log.
type LogList struct {
	Entries []*LogEntry `json:"entries"`
	LastSeq int64       `json:"last_seq"`
}

// LogSeen marks the app log read up to a seq.
type LogSeen struct {
	Seq int64 `json:"seq"`
}

// MessageSubmit is the body of POST /v1/sessions/{ses}/messages.
type MessageSubmit struct {
	Text string `json:"text" jsonschema:"maxLength=1048576"`
	// Surface defaults to the orchestrator surface.
	Surface string `json:"surface,omitempty"`
	// IdempotencyKey: a repeat returns the first row and changes nothing
	// (also the Idempotency-Key header).
	IdempotencyKey string `json:"idempotency_key,omitempty" jsonschema:"maxLength=200"`
	// Multitask says what to do when the surface is busy: queue
	// (default), refuse with 409 busy, or interrupt the running execution
	// and run this next.
	Multitask string `json:"multitask,omitempty" jsonschema:"enum=enqueue,enum=reject,enum=interrupt"`
	// Channel is the archive channel; default the door's name (http).
	Channel string `json:"channel,omitempty"`
	// ConversationID is the archive conversation; default the session id.
	ConversationID string `json:"conversation_id,omitempty"`
}

// MessageEdit is the body of a message edit.
type MessageEdit struct {
	Text string `json:"text"`
}

// MessageList lists a transcript's messages.
type MessageList struct {
	Messages []*Message `json:"messages"`
}

// QueueMove moves a queued item to the front or the back of its queue.
type QueueMove struct {
	To string `json:"to" jsonschema:"enum=front,enum=back"`
}

// QueueResume resumes a paused queue.
type QueueResume struct {
	Surface string `json:"surface,omitempty"`
}

// QueueList lists a session's queue.
type QueueList struct {
	Items []*QueueItem `json:"items"`
}

// Interrupt is the (empty) body of an interrupt.
type Interrupt struct{}

// SurfaceList lists a session's surfaces.
type SurfaceList struct {
	Surfaces []*Surface `json:"surfaces"`
}

// ExecutionList lists executions.
type ExecutionList struct {
	Executions []*Execution `json:"executions"`
}

// BlockList lists a session's blocks.
type BlockList struct {
	Blocks []*Block `json:"blocks"`
}

// ResolveRequest asks where a follow-up to a target goes.
type ResolveRequest struct {
	Target ResolveTarget `json:"target"`
}

// ApprovalDecision decides an approval request.
//
// OptionID names one of the approval's options (its "options"); the older
// Decision words still work: approve chooses the first allow_once option,
// deny the first reject_once. Give one of the two.
type ApprovalDecision struct {
	Decision string `json:"decision,omitempty" jsonschema:"enum=approve,enum=deny"`
	OptionID string `json:"option_id,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Choice is the option the decision names: option_id, or the decision
// word, with a clear error when both disagree.
func (d ApprovalDecision) Choice() (string, error) {
	switch {
	case d.OptionID != "" && d.Decision != "" && d.OptionID != d.Decision:
		return "", Errorf(EINVALID, "give option_id or decision, not both (option_id %q, decision %q)", d.OptionID, d.Decision)
	case d.OptionID != "":
		return d.OptionID, nil
	}
	return d.Decision, nil
}

// ApprovalList lists approval requests.
type ApprovalList struct {
	Approvals []*Approval `json:"approvals"`
}

// InputAnswer answers an input request.
type InputAnswer struct {
	// Answers maps a question id to its answer; unanswered questions keep
	// their default.
	Answers map[string]string `json:"answers"`
}

// InputRequestList lists input requests.
type InputRequestList struct {
	InputRequests []*InputRequest `json:"input_requests"`
}

// PlanDecision accepts, rejects or revises a plan card.
type PlanDecision struct {
	Notes string `json:"notes,omitempty"`
}

// Focus is what the human is looking at in the browser.
type Focus struct {
	URL   string `json:"url,omitempty"`
	Title string `json:"title,omitempty"`
}

// AgentSettingsPatch is the body of PATCH of a workspace's agent
// settings; an absent field is left as it is.
type AgentSettingsPatch struct {
	ApprovalMode  *string `json:"approval_mode,omitempty" jsonschema:"enum=user,enum=auto-review,enum=full-access"`
	Network       *bool   `json:"network,omitempty"`
	BlockingInput *bool   `json:"blocking_input,omitempty"`
	// ExternalInstructions turns the external instruction files in the
	// system prompt on or off (seen from the next turn on).
	ExternalInstructions *bool `json:"external_instructions,omitempty"`
	// GitWritable lets the agent write /workspace's .git/hooks and
	// .git/config (from its next command on).
	GitWritable *bool `json:"git_writable,omitempty"`
	// TokenBudget sets the token budget; 0 or null clears it; negative is
	// refused. A change releases the budget blocks. Raw, so null (clear)
	// differs from absent.
	TokenBudget json.RawMessage     `json:"token_budget,omitempty" jsonschema:"oneof_type=integer;null"`
	Sandbox     *SandboxLimitsPatch `json:"sandbox,omitempty"`
}

// SandboxLimitsPatch changes some of a workspace's sandbox limits.
type SandboxLimitsPatch struct {
	Processes   *int   `json:"processes,omitempty"`
	MemoryBytes *int64 `json:"memory_bytes,omitempty"`
	CPUSeconds  *int   `json:"cpu_seconds,omitempty"`
	TmpBytes    *int64 `json:"tmp_bytes,omitempty"`
	OutputBytes *int64 `json:"output_bytes,omitempty"`
}

// ModelList answers GET /v1/models.
type ModelList struct {
	// Default is the default model (DESK_MODEL), the model of a session
	// created without one; empty when there is none.
	Default string `json:"default"`
	// Models is every model a session may choose, as the operator
	// declared it: the default first, then DESK_MODELS in order, then
	// script.
	Models []string `json:"models"`
	// Note says what to do when there is no default model; empty
	// otherwise.
	Note string `json:"note"`
}

// FileList is a listing of an actor's file area: entries in path order
// (each folder followed by its own entries), written as they are found.
type FileList struct {
	Entries []FileEntry `json:"entries"`
	FileListing
}

// DeleteReport is what a delete removed, written as it goes; a failure
// part-way is reported in error after what was already deleted.
type DeleteReport struct {
	Deleted []FileEntry  `json:"deleted"`
	ActorID string       `json:"actor"`
	Files   int64        `json:"files"`
	Dirs    int64        `json:"dirs"`
	Bytes   int64        `json:"bytes"`
	Error   *ErrorDetail `json:"error,omitempty"`
}

// WorkspacePatchRequest is the body of PATCH /v1/workspaces/{ws}; an
// absent field is left as it is.
type WorkspacePatchRequest struct {
	HostPaths   *[]HostPath `json:"host_paths,omitempty"`
	PrimaryRoot *string     `json:"primary_root,omitempty"`
}

// CatalogList lists the catalog.
type CatalogList struct {
	Workspaces []*CatalogEntry `json:"workspaces"`
}

// PurgeRequest confirms a purge by repeating the workspace id.
type PurgeRequest struct {
	Confirm string `json:"confirm"`
}

// RuntimeCreate registers a runtime.
type RuntimeCreate struct {
	Name     string `json:"name" jsonschema:"pattern=^[a-z0-9][a-z0-9._-]{0\\,62}$"`
	Protocol string `json:"protocol" jsonschema:"enum=acp,enum=codex-app-server,enum=claude-stream-json"`
	// Argv is the program and its arguments; argv[0] is resolved on the
	// desk host and must be an executable file.
	Argv []string `json:"argv" jsonschema:"minItems=1"`
	// Env names environment variables passed through from desk's
	// environment; values are never stored.
	Env []string `json:"env,omitempty"`
}

// RuntimeList lists registered runtimes.
type RuntimeList struct {
	Runtimes []*Runtime `json:"runtimes"`
}

// TemplateCreate registers a template version.
type TemplateCreate struct {
	Name    string         `json:"name"`
	Version string         `json:"version"`
	Files   []TemplateFile `json:"files" jsonschema:"minItems=1"`
}

// TemplateList lists registered template versions.
type TemplateList struct {
	Templates []*TemplateVersion `json:"templates"`
}

// ThreadList lists a session's handler threads.
type ThreadList struct {
	Threads []*Thread `json:"threads"`
}

// ThreadGroupList lists a session's thread groups.
type ThreadGroupList struct {
	ThreadGroups []*ThreadGroup `json:"thread_groups"`
}

// EpisodeList lists a thread's episodes.
type EpisodeList struct {
	Episodes []*Episode `json:"episodes"`
}

// DraftPut stores a composer draft.
type DraftPut struct {
	Text string `json:"text"`
}

// SessionView says who is viewing a session.
type SessionView struct {
	Viewer string `json:"viewer,omitempty"`
}

// InputAnswerResult answers an input request's answer: the request, and
// the queued item that resumes the turn when one was queued.
type InputAnswerResult struct {
	InputRequest *InputRequest `json:"input_request"`
	QueuedItem   *QueueItem    `json:"queued_item,omitempty"`
}
