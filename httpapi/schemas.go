package httpapi

import (
	"reflect"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/httpapi/agui"
)

// component is one schema of the OpenAPI document's components: its name
// (what the route table's Body and Resp say), the file of openapi/ it is
// written to, and the Go type it is generated from.
type component struct {
	Name, File string
	Type       reflect.Type
}

// components lists every body schema the routes name; the schemas of the
// types they reference are generated with them, under their Go names,
// into the file of the first component that reaches them. The files are
// written by TestOpenAPIComponents (go generate ./httpapi) and served as
// they are committed.
var components = []component{
	// agent.json
	{"AbsentTool", "agent", reflect.TypeFor[desk.AbsentTool]()},
	{"AgentSettings", "agent", reflect.TypeFor[desk.AgentSettings]()},
	{"AgentSettingsPatch", "agent", reflect.TypeFor[desk.AgentSettingsPatch]()},
	{"Approval", "agent", reflect.TypeFor[desk.Approval]()},
	{"ApprovalDecision", "agent", reflect.TypeFor[desk.ApprovalDecision]()},
	{"ApprovalList", "agent", reflect.TypeFor[desk.ApprovalList]()},
	{"Budget", "agent", reflect.TypeFor[desk.ContextBudget]()},
	{"Command", "agent", reflect.TypeFor[desk.Command]()},
	{"ContextView", "agent", reflect.TypeFor[desk.ContextView]()},
	{"ExternalInstruction", "agent", reflect.TypeFor[desk.Instruction]()},
	{"Focus", "agent", reflect.TypeFor[desk.Focus]()},
	{"InputAnswer", "agent", reflect.TypeFor[desk.InputAnswer]()},
	{"InputAnswered", "agent", reflect.TypeFor[desk.InputAnswerResult]()},
	{"InputOption", "agent", reflect.TypeFor[desk.InputOption]()},
	{"InputQuestion", "agent", reflect.TypeFor[desk.InputQuestion]()},
	{"InputRequest", "agent", reflect.TypeFor[desk.InputRequest]()},
	{"InputRequestList", "agent", reflect.TypeFor[desk.InputRequestList]()},
	{"LoadedExtension", "agent", reflect.TypeFor[desk.LoadedExtension]()},
	{"Message", "agent", reflect.TypeFor[desk.Message]()},
	{"MessageCall", "agent", reflect.TypeFor[desk.MessageCall]()},
	{"MessageEdit", "agent", reflect.TypeFor[desk.MessageEdit]()},
	{"MessageList", "agent", reflect.TypeFor[desk.MessageList]()},
	{"ModelList", "agent", reflect.TypeFor[desk.ModelList]()},
	{"Plan", "agent", reflect.TypeFor[desk.Plan]()},
	{"PlanDecision", "agent", reflect.TypeFor[desk.PlanDecision]()},
	{"SandboxLimits", "agent", reflect.TypeFor[desk.SandboxLimits]()},
	{"SandboxLimitsPatch", "agent", reflect.TypeFor[desk.SandboxLimitsPatch]()},
	{"World", "agent", reflect.TypeFor[desk.World]()},
	{"WorldGroup", "agent", reflect.TypeFor[desk.WorldGroup]()},
	// agui.json
	{"AGUIRunInput", "agui", reflect.TypeFor[agui.RunAgentInput]()},
	{"AGUIEventStream", "agui", reflect.TypeFor[aguiEventStream]()},
	// core.json
	{"Actor", "core", reflect.TypeFor[desk.Actor]()},
	{"ActorCreate", "core", reflect.TypeFor[desk.ActorCreate]()},
	{"ActorCreated", "core", reflect.TypeFor[desk.ActorCreated]()},
	{"ActorList", "core", reflect.TypeFor[desk.ActorList]()},
	{"ArchiveDays", "core", reflect.TypeFor[desk.ArchiveDays]()},
	{"ArchiveFile", "core", reflect.TypeFor[desk.ArchiveFile]()},
	{"Artifact", "core", reflect.TypeFor[desk.Artifact]()},
	{"ArtifactList", "core", reflect.TypeFor[desk.ArtifactList]()},
	{"BindingsPut", "core", reflect.TypeFor[desk.BindingsPut]()},
	{"Dispatch", "core", reflect.TypeFor[desk.Dispatch]()},
	{"DispatchList", "core", reflect.TypeFor[desk.DispatchList]()},
	{"Error", "core", reflect.TypeFor[desk.ErrorBody]()},
	{"EventStream", "core", reflect.TypeFor[eventStream]()},
	{"GitInfo", "core", reflect.TypeFor[desk.GitInfo]()},
	{"Group", "core", reflect.TypeFor[desk.Group]()},
	{"GroupCreate", "core", reflect.TypeFor[desk.GroupCreate]()},
	{"GroupList", "core", reflect.TypeFor[desk.GroupList]()},
	{"GroupWithItems", "core", reflect.TypeFor[desk.GroupWithItems]()},
	{"GuestEntry", "core", reflect.TypeFor[desk.GuestEntry]()},
	{"GuestList", "core", reflect.TypeFor[desk.GuestList]()},
	{"Health", "core", reflect.TypeFor[desk.Health]()},
	{"Item", "core", reflect.TypeFor[desk.Item]()},
	{"ItemCreate", "core", reflect.TypeFor[desk.ItemCreateRequest]()},
	{"LogEntry", "core", reflect.TypeFor[desk.LogEntry]()},
	{"LogList", "core", reflect.TypeFor[desk.LogList]()},
	{"LogSeen", "core", reflect.TypeFor[desk.LogSeen]()},
	{"LogUnread", "core", reflect.TypeFor[desk.LogUnread]()},
	{"NDJSON", "core", reflect.TypeFor[ndjson]()},
	{"OpenAPI", "core", reflect.TypeFor[desk.OpenAPIDocument]()},
	{"Origin", "core", reflect.TypeFor[desk.Origin]()},
	{"PressureRequest", "core", reflect.TypeFor[desk.PressureRequest]()},
	{"ReclaimAction", "core", reflect.TypeFor[desk.ReclaimAction]()},
	{"ReclaimReport", "core", reflect.TypeFor[desk.ReclaimReport]()},
	{"Session", "core", reflect.TypeFor[desk.Session]()},
	{"SessionCreate", "core", reflect.TypeFor[desk.SessionCreateRequest]()},
	{"SessionList", "core", reflect.TypeFor[desk.SessionList]()},
	{"SessionPatch", "core", reflect.TypeFor[desk.SessionPatch]()},
	{"Workspace", "core", reflect.TypeFor[desk.Workspace]()},
	{"WorkspaceCreate", "core", reflect.TypeFor[desk.WorkspaceCreateRequest]()},
	{"WorkspaceList", "core", reflect.TypeFor[desk.WorkspaceList]()},
	// execution.json
	{"Block", "execution", reflect.TypeFor[desk.Block]()},
	{"BlockList", "execution", reflect.TypeFor[desk.BlockList]()},
	{"Event", "execution", reflect.TypeFor[desk.Event]()},
	{"Execution", "execution", reflect.TypeFor[desk.Execution]()},
	{"ExecutionEvent", "execution", reflect.TypeFor[desk.ExecutionEvent]()},
	{"ExecutionList", "execution", reflect.TypeFor[desk.ExecutionList]()},
	{"Interrupt", "execution", reflect.TypeFor[desk.Interrupt]()},
	{"InterruptResult", "execution", reflect.TypeFor[desk.InterruptResult]()},
	{"Interruption", "execution", reflect.TypeFor[desk.Interruption]()},
	{"MessageSubmit", "execution", reflect.TypeFor[desk.MessageSubmit]()},
	{"QueueItem", "execution", reflect.TypeFor[desk.QueueItem]()},
	{"QueueList", "execution", reflect.TypeFor[desk.QueueList]()},
	{"QueueMove", "execution", reflect.TypeFor[desk.QueueMove]()},
	{"QueueResume", "execution", reflect.TypeFor[desk.QueueResume]()},
	{"Resolution", "execution", reflect.TypeFor[desk.Resolution]()},
	{"ResolveRequest", "execution", reflect.TypeFor[desk.ResolveRequest]()},
	{"SubmitResult", "execution", reflect.TypeFor[desk.SubmitResult]()},
	{"Surface", "execution", reflect.TypeFor[desk.Surface]()},
	{"SurfaceList", "execution", reflect.TypeFor[desk.SurfaceList]()},
	// files.json
	{"ActorToken", "files", reflect.TypeFor[desk.ActorToken]()},
	{"DeleteReport", "files", reflect.TypeFor[desk.DeleteReport]()},
	{"ErrorDetail", "files", reflect.TypeFor[desk.ErrorDetail]()},
	{"FileEntry", "files", reflect.TypeFor[desk.FileEntry]()},
	{"FileList", "files", reflect.TypeFor[desk.FileList]()},
	{"FileStats", "files", reflect.TypeFor[desk.FileStats]()},
	{"FileUpload", "files", reflect.TypeFor[desk.FileUpload]()},
	{"FolderUsage", "files", reflect.TypeFor[desk.FolderUsage]()},
	{"GCAction", "files", reflect.TypeFor[desk.GCAction]()},
	{"GCReport", "files", reflect.TypeFor[desk.GCReport]()},
	{"HostPath", "files", reflect.TypeFor[desk.HostPath]()},
	{"ImportResult", "files", reflect.TypeFor[desk.ImportResult]()},
	{"WorkspacePatch", "files", reflect.TypeFor[desk.WorkspacePatchRequest]()},
	// lifecycle.json
	{"AskRequest", "lifecycle", reflect.TypeFor[desk.AskInput]()},
	{"AskResult", "lifecycle", reflect.TypeFor[desk.AskResult]()},
	{"CatalogEntry", "lifecycle", reflect.TypeFor[desk.CatalogEntry]()},
	{"CatalogList", "lifecycle", reflect.TypeFor[desk.CatalogList]()},
	{"LifecycleResult", "lifecycle", reflect.TypeFor[desk.LifecycleResult]()},
	{"OffboardRequest", "lifecycle", reflect.TypeFor[desk.OffboardInput]()},
	{"PurgeRequest", "lifecycle", reflect.TypeFor[desk.PurgeRequest]()},
	// login.json
	{"BrowserSessionsRevoked", "login", reflect.TypeFor[desk.BrowserSessionsRevoked]()},
	{"LoginLink", "login", reflect.TypeFor[desk.LoginLink]()},
	// runtimes.json
	{"Runtime", "runtimes", reflect.TypeFor[desk.Runtime]()},
	{"RuntimeCreate", "runtimes", reflect.TypeFor[desk.RuntimeCreate]()},
	{"RuntimeList", "runtimes", reflect.TypeFor[desk.RuntimeList]()},
	{"Profile", "runtimes", reflect.TypeFor[desk.Profile]()},
	{"ProfileCreate", "runtimes", reflect.TypeFor[desk.ProfileCreate]()},
	{"ProfileList", "runtimes", reflect.TypeFor[desk.ProfileList]()},
	// template.json
	{"AbsorbApply", "template", reflect.TypeFor[desk.AbsorbApply]()},
	{"AbsorbEntry", "template", reflect.TypeFor[desk.AbsorbEntry]()},
	{"AbsorbExclusion", "template", reflect.TypeFor[desk.AbsorbExclusion]()},
	{"AbsorbPlan", "template", reflect.TypeFor[desk.AbsorbPlan]()},
	{"AbsorbResult", "template", reflect.TypeFor[desk.AbsorbResult]()},
	{"TemplateCreate", "template", reflect.TypeFor[desk.TemplateCreate]()},
	{"TemplateFile", "template", reflect.TypeFor[desk.TemplateFile]()},
	{"TemplateList", "template", reflect.TypeFor[desk.TemplateList]()},
	{"TemplateVersion", "template", reflect.TypeFor[desk.TemplateVersion]()},
	{"UpgradeApply", "template", reflect.TypeFor[desk.UpgradeApply]()},
	{"UpgradeEntry", "template", reflect.TypeFor[desk.UpgradeEntry]()},
	{"UpgradePlan", "template", reflect.TypeFor[desk.UpgradePlan]()},
	{"UpgradeResult", "template", reflect.TypeFor[desk.UpgradeResult]()},
	// routines.json
	{"Routine", "routines", reflect.TypeFor[desk.Routine]()},
	{"RoutineCreate", "routines", reflect.TypeFor[desk.RoutineCreate]()},
	{"RoutineList", "routines", reflect.TypeFor[desk.RoutineList]()},
	{"RoutineRun", "routines", reflect.TypeFor[desk.RoutineRun]()},
	{"RoutineRunList", "routines", reflect.TypeFor[desk.RoutineRunList]()},
	{"RoutineUpdate", "routines", reflect.TypeFor[desk.RoutineUpdate]()},
	// inbox.json
	{"Inbox", "inbox", reflect.TypeFor[desk.Inbox]()},
	{"InboxItem", "inbox", reflect.TypeFor[desk.InboxItem]()},
	// webhooks.json
	{"Webhook", "webhooks", reflect.TypeFor[desk.Webhook]()},
	{"WebhookAttempt", "webhooks", reflect.TypeFor[desk.WebhookAttempt]()},
	{"WebhookCreate", "webhooks", reflect.TypeFor[desk.WebhookCreate]()},
	{"WebhookCreated", "webhooks", reflect.TypeFor[desk.WebhookCreated]()},
	{"WebhookDelivery", "webhooks", reflect.TypeFor[desk.WebhookDelivery]()},
	{"WebhookDeliveryList", "webhooks", reflect.TypeFor[desk.WebhookDeliveryList]()},
	{"WebhookList", "webhooks", reflect.TypeFor[desk.WebhookList]()},
	// threads.json
	{"Episode", "threads", reflect.TypeFor[desk.Episode]()},
	{"EpisodeList", "threads", reflect.TypeFor[desk.EpisodeList]()},
	{"EpisodeSummary", "threads", reflect.TypeFor[desk.EpisodeSummary]()},
	{"Thread", "threads", reflect.TypeFor[desk.Thread]()},
	{"ThreadGroup", "threads", reflect.TypeFor[desk.ThreadGroup]()},
	{"ThreadGroupList", "threads", reflect.TypeFor[desk.ThreadGroupList]()},
	{"ThreadList", "threads", reflect.TypeFor[desk.ThreadList]()},
	// ui.json
	{"Draft", "ui", reflect.TypeFor[desk.Draft]()},
	{"DraftPut", "ui", reflect.TypeFor[desk.DraftPut]()},
	{"SessionView", "ui", reflect.TypeFor[desk.SessionView]()},
	// usage.json
	{"ModelTotals", "usage", reflect.TypeFor[desk.ModelTotals]()},
	{"SessionUsage", "usage", reflect.TypeFor[desk.SessionUsage]()},
	{"UsageTotals", "usage", reflect.TypeFor[desk.UsageTotals]()},
	{"WorkspaceUsage", "usage", reflect.TypeFor[desk.WorkspaceUsage]()},
}

// enum lists the values of a string field. The values are the root's
// constants; they are listed here rather than in jsonschema tags on the
// types because mcpserver infers its tools' schemas from the same types
// with google/jsonschema-go, which refuses such tags.
type enum struct {
	Type   reflect.Type
	Field  string // the JSON name
	Values []string
}

// enums are the string fields of response types that hold one of a set
// of values.
var enums = []enum{
	{reflect.TypeFor[desk.Message](), "role", []string{"user", "assistant"}},
	{reflect.TypeFor[desk.Command](), "status", []string{"requested", "waiting", "running", "succeeded", "failed", "declined", "cancelled", "unknown"}},
	{reflect.TypeFor[desk.Approval](), "status", []string{"pending", "approved", "denied", "cancelled"}},
	{reflect.TypeFor[desk.ApprovalOption](), "kind", []string{"allow_once", "allow_always", "reject_once", "reject_always"}},
	{reflect.TypeFor[desk.InputRequest](), "status", []string{"pending", "answered", "defaulted", "cancelled"}},
	{reflect.TypeFor[desk.Plan](), "status", []string{"proposed", "approved", "declined", "revised"}},
	{reflect.TypeFor[desk.AgentSettings](), "approval_mode", []string{"user", "auto-review", "full-access"}},
	{reflect.TypeFor[desk.LogEntry](), "level", []string{"debug", "info", "warn", "error"}},
	{reflect.TypeFor[desk.Artifact](), "kind", []string{"empty", "pdf", "xlsx", "docx", "pptx", "zip", "png", "jpeg", "gif", "webp", "json", "html", "svg", "csv", "tsv", "markdown", "text", "binary"}},
	{reflect.TypeFor[desk.ContextBudget](), "level", []string{"neutral", "warn", "high"}},
	{reflect.TypeFor[desk.ContextBudget](), "source", []string{"provider", "estimate"}},
	{reflect.TypeFor[desk.Origin](), "kind", []string{"user", "agent", "system", "routine"}},
	{reflect.TypeFor[desk.Routine](), "overlap", []string{"skip", "queue"}},
	{reflect.TypeFor[desk.RoutineCreate](), "overlap", []string{"skip", "queue"}},
	{reflect.TypeFor[desk.RoutineUpdate](), "overlap", []string{"skip", "queue"}},
	{reflect.TypeFor[desk.RoutineRun](), "trigger", []string{"schedule", "manual"}},
	{reflect.TypeFor[desk.RoutineRun](), "status", []string{"running", "succeeded", "failed", "cancelled", "skipped"}},
	{reflect.TypeFor[desk.InboxItem](), "kind", []string{"approval", "question", "plan", "routine_failed"}},
	{reflect.TypeFor[desk.WebhookDelivery](), "status", []string{"pending", "delivered", "failed"}},
	{reflect.TypeFor[desk.WebhookDelivery](), "event", desk.WebhookEvents},
	{reflect.TypeFor[desk.AskResult](), "status", []string{"dispatched", "unavailable"}},
	{reflect.TypeFor[desk.AskResult](), "resolution", []string{"exact", "unavailable", "reconstructed"}},
	{reflect.TypeFor[desk.AskResult](), "reason", []string{"retired-session", "departed-workspace", "purged-workspace", "unknown-workspace", "unknown-target"}},
	{reflect.TypeFor[desk.Surface](), "kind", []string{"orchestrator", "handler"}},
	{reflect.TypeFor[desk.QueueItem](), "kind", []string{"user_message", "request_user_input_answer", "thread_followup", "thread_report_notification", "report_request", "initial_handler_start"}},
	{reflect.TypeFor[desk.QueueItem](), "status", []string{"queued", "dispatching", "delivered", "failed", "cancelled"}},
	{reflect.TypeFor[desk.Execution](), "phase", []string{"starting", "running", "stopping", "ended", "failed", "interrupted"}},
	{reflect.TypeFor[desk.Execution](), "outcome", []string{"completed", "failed", "aborted"}},
	{reflect.TypeFor[desk.Block](), "kind", []string{"user-cooldown", "execution-fault", "budget"}},
	{reflect.TypeFor[desk.HostPath](), "mode", []string{"ro", "rw"}},
	{reflect.TypeFor[desk.FileEntry](), "type", []string{"file", "dir", "link"}},
	{reflect.TypeFor[desk.GCAction](), "kind", []string{"scratch", "temp_file", "item", "revision", "missing", "found", "indexed", "unindexed"}},
	{reflect.TypeFor[desk.Item](), "kind", []string{"text", "url", "file"}},
	{reflect.TypeFor[desk.CatalogEntry](), "state", []string{"active", "offboarding", "departed", "restoring", "purging", "purged"}},
	{reflect.TypeFor[desk.GuestEntry](), "type", []string{"file", "dir"}},
	{reflect.TypeFor[desk.ReclaimAction](), "kind", []string{"scratch", "temp_file", "item", "revision"}},
	{reflect.TypeFor[desk.Resolution](), "resolution", []string{"exact", "unavailable", "reconstructed"}},
	{reflect.TypeFor[desk.Resolution](), "reason", []string{"retired-session", "departed-workspace", "purged-workspace", "unknown-workspace", "unknown-target"}},
	{reflect.TypeFor[desk.Session](), "lifecycle", []string{"active", "retired"}},
	{reflect.TypeFor[desk.UpgradeEntry](), "status", []string{"unchanged", "ready", "preserved", "conflict", "add", "remove"}},
	{reflect.TypeFor[desk.AbsorbEntry](), "status", []string{"ready", "duplicate", "conflict"}},
	{reflect.TypeFor[desk.AbsorbExclusion](), "reason", []string{"git", "desk-state", "template-managed", "env", "credential", "cache", "symlink", "not-a-regular-file"}},
	{reflect.TypeFor[desk.Thread](), "state", []string{"active", "concluded"}},
	{reflect.TypeFor[desk.Thread](), "history", []string{"isolated", "forked"}},
	{reflect.TypeFor[desk.Episode](), "kind", []string{"update", "conclusion"}},
	{reflect.TypeFor[desk.EpisodeSummary](), "kind", []string{"update", "conclusion"}},
	{reflect.TypeFor[desk.WorkspaceUsage](), "scope", []string{"workspace", "actor"}},
	{reflect.TypeFor[desk.Workspace](), "state", []string{"active", "offboarding", "departed", "restoring", "purging", "purged"}},
	{reflect.TypeFor[desk.Actor](), "kind", []string{"human", "agent"}},
}

// eventStream is a text/event-stream response: frames of an id, an event
// type and a JSON data line (an Event), so Last-Event-ID resumes.
type eventStream string

// aguiEventStream is AG-UI's text/event-stream response: each frame's data
// is one AG-UI 1.0 event (validated against @ag-ui/core in the tests).
type aguiEventStream string

// ndjson is an application/x-ndjson response: one archive record a line,
// as docs/archive.schema.json documents it.
type ndjson string
