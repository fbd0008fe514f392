// Package tools owns the agent's built-in tools: inspect, acquire,
// read_file, write_file, edit_file, apply_patch, list_files, delete_file,
// exec_command, write_stdin, execute_typescript, artifacts, request_user_input, clarify, list_extensions,
// load_extension and the thread tools (threads.go). Every tool is registered on every turn (the model
// decides; PawWork S-R) unless it is Optional and cannot work there
// (extensions.go), takes JSON
// arguments and returns a JSON result. A mistake the model can fix comes
// back as a result with a code (ENOENT, BAD_INPUT, FS_DENIED,
// NOT_CONFIGURED, …); a failure of the machine is a Go error.
//
// Each tool's arguments are one Go struct, the single source of the JSON
// Schema the model sees and of the decoding its Run uses; arguments are
// validated against that schema before a tool runs (see schema.go), and
// Check refuses a schema that is not valid JSON Schema 2020-12.
//
// Tools reach files only through the execution's guest file system (an
// fsjail.Jail) and the artifact service; they never build a host path from
// an argument, and never see a provider key.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/typescript"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/session"
)

// Result codes a model can act on.
const (
	CodeNotFound      = "ENOENT"
	CodeBadInput      = "BAD_INPUT"
	CodeDenied        = "FS_DENIED"
	CodeNotConfigured = "NOT_CONFIGURED"
	CodeImmutable     = "IMMUTABLE"
	CodeDeclined      = "DECLINED"
	CodeSandboxDenied = "SANDBOX_DENIED"
	CodeAmbiguous     = "AMBIGUOUS"
	CodeTooLarge      = "TOO_LARGE"
	CodeFetchFailed   = "FETCH_FAILED"
	CodeTooMany       = "TOO_MANY_SESSIONS"
	CodeTypeErrors    = "TYPECHECK_FAILED"
)

// Result is what a tool call produced.
type Result struct {
	// Value is the JSON result the model sees (an error result when Code
	// is set).
	Value any
	// Code marks a failure the model can fix.
	Code    string
	Message string
	// Facts are the final facts of the command record; Output its
	// bounded text output; Artifacts the ids it wrote.
	Facts     map[string]any
	Output    string
	Artifacts []string
	// Stop ends the execution after this call (a declined plan).
	Stop string
}

// Fail is a result that reports a fixable mistake.
func Fail(code, format string, args ...any) *Result {
	msg := fmt.Sprintf(format, args...)
	return &Result{Code: code, Message: msg, Value: map[string]any{"error": map[string]string{"code": code, "message": msg}}}
}

// JSON returns the model-facing encoding of the result.
func (r *Result) JSON() string {
	b, err := json.Marshal(r.Value)
	if err != nil {
		return `{"error":{"code":"INTERNAL","message":"unencodable result"}}`
	}
	return string(b)
}

// Env is what a tool may use during one execution.
type Env struct {
	Store     Store
	Home      layout.Home
	Workspace *desk.Workspace
	Session   *desk.Session
	Execution *desk.Execution
	Settings  *desk.AgentSettings
	View      session.View
	Jail      *fsjail.Jail
	Artifacts desk.ArtifactService
	Paths     desk.ArtifactPaths
	Selection desk.SelectionService
	// Sandbox runs exec_command; nil when no sandbox is available.
	Sandbox sandbox.Runner
	// TypeScript is the toolchain of execute_typescript; nil when there
	// is none, and TypeScriptAbsent then says why.
	TypeScript       *typescript.Toolchain
	TypeScriptAbsent string
	// Procs holds the execution's long-running command sessions
	// (exec_command with yield_time_ms, write_stdin); nil outside one.
	Procs *Procs
	HTTP  *http.Client
	// Submit queues work through the execution service (a report
	// request to a thread); nil outside a desk that runs executions.
	Submit desk.Submitter
	// Dispatch records and sends asks to other sessions (the ask tool);
	// nil where there is none, and ask is not declared.
	Dispatch desk.DispatchService
	// Search answers acquire search; nil when no provider is configured.
	Search func(ctx context.Context, query string, limit int) ([]SearchHit, error)
	// Ask asks the user (request_user_input); it returns the answers and
	// whether they are the defaults.
	Ask func(ctx context.Context, commandID string, qs []desk.InputQuestion) (map[string]string, bool, error)
	// Propose shows a plan card and waits for the decision: approved,
	// declined or revised (with notes).
	Propose func(ctx context.Context, commandID string, card json.RawMessage) (status, notes string, err error)
	// Emit records a live event of the execution.
	Emit func(typ string, data any)
	// ForcePlan is set when the turn's message started with /plan.
	ForcePlan bool
	// SurfaceKind is the kind of surface the turn runs on (orchestrator
	// when empty); it decides which thread tools are declared.
	SurfaceKind string
	// Thread is the handler thread the turn runs on; nil on the
	// orchestrator surface.
	Thread *desk.Thread
	// Wake asks the dispatcher to look at the queues now (after a thread
	// tool queued work); nil leaves it to the next poll.
	Wake func()
}

// SearchHit is one search result.
type SearchHit struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet"`
}

// Call is one invocation.
type Call struct {
	CommandID string
	Args      json.RawMessage
	// Output streams a command's output as it arrives.
	Output func(stream string, chunk []byte)
}

// Tool is one built-in tool.
type Tool interface {
	Name() string
	Description() string
	// Schema is the JSON Schema of the arguments, generated from the
	// tool's argument struct.
	Schema() json.RawMessage
	// Gate reports whether the call needs approval in the user approval
	// mode, and what to show the person deciding.
	Gate(env *Env, args json.RawMessage) (bool, string)
	Run(ctx context.Context, env *Env, call *Call) (*Result, error)
}

// Prechecker is a gated tool that checks a call before its approval is
// asked for: a non-nil Result refuses the call (it fails with that
// result) without bothering the person who would decide. Precheck must
// be harmless without approval and may run again for the same call (a
// resumed turn).
type Prechecker interface {
	Precheck(ctx context.Context, env *Env, call *Call) (*Result, error)
}

// All returns every built-in tool, sorted by name, so the declaration the
// model sees is stable from turn to turn.
func All() []Tool {
	ts := []Tool{askTool{}, peerList{}, peerSessions{}, peerPath{}, peerAsk{}, inspect{}, acquire{}, readFile{}, writeFile{}, editFile{}, applyPatch{}, listFiles{}, deleteFile{},
		execCommand{}, writeStdin{}, executeTypeScript{}, artifactsTool{}, requestUserInput{}, clarify{}, listExtensions{}, loadExtension{},
		threadStart{}, threadFollowup{}, threadRequestReport{}, threadList{}, threadEpisodes{},
		threadCurrent{}, threadGroup{}, threadReport{}}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name() < ts[j].Name() })
	return ts
}

// ByName finds a tool.
func ByName(name string) Tool {
	for _, t := range All() {
		if t.Name() == name {
			return t
		}
	}
	return nil
}

// fsResult turns a file system error into a fixable result when the model
// caused it, or returns it as a machine failure.
func fsResult(err error, guest string) (*Result, error) {
	switch desk.ErrorCode(err) {
	case desk.ENOTFOUND:
		return Fail(CodeNotFound, "%s does not exist", guest), nil
	case desk.EFORBIDDEN:
		return Fail(CodeDenied, "%s", desk.ErrorMessage(err)), nil
	case desk.EINVALID:
		return Fail(CodeBadInput, "%s", desk.ErrorMessage(err)), nil
	case desk.ECONFLICT:
		if strings.Contains(desk.ErrorMessage(err), "immutable") {
			return Fail(CodeImmutable, "%s", desk.ErrorMessage(err)), nil
		}
		return Fail(CodeBadInput, "%s", desk.ErrorMessage(err)), nil
	case desk.ETOOLARGE, desk.ENOSPACE:
		return Fail(CodeTooLarge, "%s", desk.ErrorMessage(err)), nil
	}
	return nil, err
}

// Names are the names of every built-in tool, sorted (what a profile's
// tool set is checked against).
func Names() []string {
	var out []string
	for _, t := range All() {
		out = append(out, t.Name())
	}
	return out
}
