package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool arguments. Each struct generates its tool's input schema (fields
// without omitempty are required) and is what the call decodes into; the
// names are the ones the HTTP API uses.
type (
	noArgs struct{}

	workspaceArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace (ws_…)"`
	}
	sessionCreateArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace to create the session in"`
		Title       string `json:"title,omitempty" jsonschema:"the session's title"`
		Model       string `json:"model,omitempty" jsonschema:"the session's model: one the server offers (GET /v1/models), e.g. anthropic:<model> or script; empty means the server's default"`
		Script      any    `json:"script,omitempty" jsonschema:"the script of a model=script session: {steps:[{text, tool_calls, delay_ms}]}"`
		Profile     string `json:"profile,omitempty" jsonschema:"a profile of the workspace the session is made from"`
		// ReasoningEffort is low, medium or high.
		ReasoningEffort string `json:"reasoning_effort,omitempty" jsonschema:"low, medium or high (a model declared as reasoning only)"`
	}
	sessionArgs struct {
		SessionID string `json:"session_id" jsonschema:"the session (ses_…)"`
	}
	sessionSendArgs struct {
		SessionID string `json:"session_id" jsonschema:"the session to send to"`
		Text      string `json:"text" jsonschema:"the message"`
		Surface   string `json:"surface,omitempty" jsonschema:"the surface to send to; default the orchestrator"`
		Wait      bool   `json:"wait,omitempty" jsonschema:"wait for the turn to end and return its reply; progress is notified meanwhile and cancelling the call interrupts the turn"`
	}
	transcriptArgs struct {
		SessionID string `json:"session_id" jsonschema:"the session"`
		Surface   string `json:"surface,omitempty" jsonschema:"the surface; default the orchestrator"`
	}
	interruptArgs struct {
		SessionID   string `json:"session_id" jsonschema:"the session"`
		ExecutionID string `json:"execution_id" jsonschema:"the execution to stop (exe_…)"`
	}
	artifactArgs struct {
		SessionID  string `json:"session_id" jsonschema:"the session"`
		ArtifactID string `json:"artifact_id" jsonschema:"the artifact (art_…)"`
	}
	artifactWriteArgs struct {
		SessionID string `json:"session_id" jsonschema:"the session"`
		Name      string `json:"name" jsonschema:"the artifact's file name; an artifact of that name gets a new revision"`
		Content   string `json:"content" jsonschema:"the artifact's text"`
	}
	filesListArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace"`
		Path        string `json:"path,omitempty" jsonschema:"folder (or file) to list; default /"`
		Depth       int    `json:"depth,omitempty" jsonschema:"levels to list: 1 by default, 0 for no limit"`
		Actor       string `json:"actor,omitempty" jsonschema:"whose file area (admin token only); default the caller's own"`
	}
	fileArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace"`
		Path        string `json:"path" jsonschema:"the file's path, e.g. /notes/todo.md"`
		Actor       string `json:"actor,omitempty" jsonschema:"whose file area (admin token only); default the caller's own"`
	}
	fileWriteArgs struct {
		WorkspaceID string `json:"workspace_id" jsonschema:"the workspace"`
		Path        string `json:"path" jsonschema:"the file's path; folders are created"`
		Content     string `json:"content" jsonschema:"the file's text"`
		Actor       string `json:"actor,omitempty" jsonschema:"whose file area (admin token only); default the caller's own"`
	}
	approvalsArgs struct {
		SessionID string `json:"session_id" jsonschema:"the session"`
		Pending   bool   `json:"pending,omitempty" jsonschema:"only the ones waiting for a decision"`
	}
	approvalAnswerArgs struct {
		ApprovalID string `json:"approval_id" jsonschema:"the approval (apr_…)"`
		Decision   string `json:"decision,omitempty" jsonschema:"approve or deny (or give option_id)"`
		OptionID   string `json:"option_id,omitempty" jsonschema:"the id of one of the approval's options (approvals_list shows them, with their kind allow_once, allow_always, reject_once or reject_always)"`
		Reason     string `json:"reason,omitempty" jsonschema:"why, shown with the decision"`
	}
	inputAnswerArgs struct {
		InputRequestID string            `json:"input_request_id" jsonschema:"the question (inp_…)"`
		Answers        map[string]string `json:"answers" jsonschema:"question id → answer"`
	}
)

// Tool results: always an object, so hosts get structured content.
type (
	workspacesOut struct {
		Workspaces []*desk.Workspace `json:"workspaces"`
	}
	sessionsOut struct {
		Sessions []*desk.Session `json:"sessions"`
	}
	messagesOut struct {
		Messages []*desk.Message `json:"messages"`
	}
	artifactsOut struct {
		Artifacts []*desk.Artifact `json:"artifacts"`
	}
	approvalsOut struct {
		Approvals []*desk.Approval `json:"approvals"`
	}
	inputsOut struct {
		InputRequests []*desk.InputRequest `json:"input_requests"`
	}
	artifactReadOut struct {
		Artifact *desk.Artifact `json:"artifact"`
		// Text is set for text artifacts, ContentBase64 for the others.
		Text          string `json:"text,omitempty"`
		ContentBase64 []byte `json:"content_base64,omitempty"`
	}
	filesListOut struct {
		Listing *desk.FileListing `json:"listing"`
		Entries []desk.FileEntry  `json:"entries"`
	}
	fileReadOut struct {
		Path          string `json:"path"`
		Size          int64  `json:"size"`
		ArtifactID    string `json:"artifact_id,omitempty"`
		Text          string `json:"text,omitempty"`
		ContentBase64 []byte `json:"content_base64,omitempty"`
	}
	sendOut struct {
		QueuedItem  *desk.QueueItem `json:"queued_item"`
		ExecutionID string          `json:"execution_id,omitempty"`
		// Set when wait was true: how the turn ended and its reply.
		Outcome string `json:"outcome,omitempty"`
		Reason  string `json:"reason,omitempty"`
		Reply   string `json:"reply,omitempty"`
	}
)

// maxReadBytes bounds what artifact_read and file_read return inline: a
// tool result lands in a model's context, so larger content is refused
// with a pointer to the resource (or the HTTP API) instead.
const maxReadBytes = 1 << 20

// schemaOpts describes what encoding/json does with bytes, where
// reflection would see arrays of integers: json.RawMessage (free-form JSON
// in desk's types) is any JSON value, and []byte a base64 string.
var schemaOpts = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[[]byte]():          {Type: "string", ContentEncoding: "base64"},
}}

// schemaFor is T's schema; a pointer type has its element's schema, since
// MCP requires tool schemas of type "object" (never "null").
func schemaFor[T any]() *jsonschema.Schema {
	rt := reflect.TypeFor[T]()
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	s, err := jsonschema.ForType(rt, schemaOpts)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: schema of %T: %v", *new(T), err))
	}
	return s
}

// addTool registers a typed tool with schemas generated from In and Out.
// An error from h becomes a tool error (isError) whose text names the
// desk error code and message, never partial data.
func addTool[In, Out any](s *sdk.Server, name, desc string, h func(context.Context, *sdk.CallToolRequest, In) (Out, error)) {
	t := &sdk.Tool{Name: name, Description: desc, InputSchema: schemaFor[In](), OutputSchema: schemaFor[Out]()}
	sdk.AddTool(s, t, func(ctx context.Context, req *sdk.CallToolRequest, in In) (*sdk.CallToolResult, Out, error) {
		out, err := h(ctx, req, in)
		if err != nil {
			var zero Out
			return nil, zero, toolError(err)
		}
		return nil, out, nil
	})
}

// toolError is the text of a refused or failed call: "code: message",
// the same words the HTTP API and the CLI use.
func toolError(err error) error {
	var de *desk.Error
	if errors.As(err, &de) {
		return de
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return desk.Errorf(desk.EUNAVAILABLE, "cancelled: %v", err)
	}
	return desk.Errorf(desk.EINTERNAL, "%v", err)
}

func (b *backend) addTools(s *sdk.Server) {
	addTool(s, "workspaces_list", "List the workspaces this token can see.",
		func(ctx context.Context, _ *sdk.CallToolRequest, _ noArgs) (workspacesOut, error) {
			ws, err := caller(ctx).ListWorkspaces(ctx)
			return workspacesOut{nonNil(ws)}, err
		})
	addTool(s, "sessions_list", "List a workspace's sessions, most recently updated first.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in workspaceArgs) (sessionsOut, error) {
			ss, err := caller(ctx).ListSessions(ctx, in.WorkspaceID, client.SessionFilter{})
			return sessionsOut{nonNil(ss)}, err
		})
	addTool(s, "session_create", "Create a desk session in a workspace (for the caller's own actor).",
		func(ctx context.Context, _ *sdk.CallToolRequest, in sessionCreateArgs) (*desk.Session, error) {
			sc := client.SessionCreate{Title: in.Title, Model: in.Model, Profile: in.Profile, ReasoningEffort: in.ReasoningEffort}
			if in.Script != nil {
				b, err := json.Marshal(in.Script)
				if err != nil {
					return nil, desk.Errorf(desk.EINVALID, "script: %v", err)
				}
				sc.Script = b
			}
			return caller(ctx).CreateSession(ctx, in.WorkspaceID, sc)
		})
	addTool(s, "session_send", "Queue a message on a session. With wait: true, wait for the turn and return its reply; progress notifications follow the turn and cancelling the call interrupts exactly that execution.",
		b.sessionSend)
	addTool(s, "session_transcript", "Read a session's transcript (the newest messages, oldest first).",
		func(ctx context.Context, _ *sdk.CallToolRequest, in transcriptArgs) (messagesOut, error) {
			ms, err := caller(ctx).Transcript(ctx, in.SessionID, client.TranscriptOptions{Surface: in.Surface, Limit: 500})
			return messagesOut{nonNil(ms)}, err
		})
	addTool(s, "session_interrupt", "Interrupt one execution of a session and wait until its executor stopped.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in interruptArgs) (*desk.InterruptResult, error) {
			return caller(ctx).Interrupt(ctx, in.SessionID, in.ExecutionID)
		})
	addTool(s, "artifacts_list", "List a session's artifacts, oldest first.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in sessionArgs) (artifactsOut, error) {
			as, err := caller(ctx).ListArtifacts(ctx, in.SessionID)
			return artifactsOut{nonNil(as)}, err
		})
	addTool(s, "artifact_read", "Read an artifact: its metadata and its text (base64 for binary kinds), up to 1 MiB.",
		b.artifactRead)
	addTool(s, "artifact_write", "Write a text artifact of a session: a new artifact, or the next revision of the one with that name.",
		b.artifactWrite)
	addTool(s, "files_list", "List files of an actor's durable file area.",
		b.filesList)
	addTool(s, "file_read", "Read a file of an actor's file area, up to 1 MiB (text, or base64).",
		b.fileRead)
	addTool(s, "file_write", "Write a text file to an actor's file area (atomically; folders are created).",
		func(ctx context.Context, _ *sdk.CallToolRequest, in fileWriteArgs) (*desk.FileUpload, error) {
			return caller(ctx).UploadFile(ctx, client.FileTarget{Workspace: in.WorkspaceID, Actor: in.Actor}, in.Path,
				strings.NewReader(in.Content), int64(len(in.Content)))
		})
	addTool(s, "approvals_list", "List a session's approval requests of gated tool calls.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in approvalsArgs) (approvalsOut, error) {
			as, err := caller(ctx).Approvals(ctx, in.SessionID, in.Pending)
			return approvalsOut{nonNil(as)}, err
		})
	addTool(s, "approval_answer", "Answer a gated tool call with one of its options (option_id), or decision approve or deny.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in approvalAnswerArgs) (*desk.Approval, error) {
			choice, err := desk.ApprovalDecision{Decision: in.Decision, OptionID: in.OptionID}.Choice()
			if err != nil {
				return nil, err
			}
			return caller(ctx).DecideApproval(ctx, in.ApprovalID, choice, in.Reason)
		})
	addTool(s, "input_requests_list", "List the questions the agent asked in a session.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in sessionArgs) (inputsOut, error) {
			rs, err := caller(ctx).InputRequests(ctx, in.SessionID)
			return inputsOut{nonNil(rs)}, err
		})
	addTool(s, "input_answer", "Answer a question the agent asked (answers: question id → answer).",
		func(ctx context.Context, _ *sdk.CallToolRequest, in inputAnswerArgs) (*client.InputAnswered, error) {
			return caller(ctx).AnswerInput(ctx, in.InputRequestID, in.Answers)
		})
	b.addThreadTools(s)
	b.addRoutineTools(s)
	b.addProfileTools(s)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (b *backend) artifactRead(ctx context.Context, _ *sdk.CallToolRequest, in artifactArgs) (*artifactReadOut, error) {
	a, data, err := b.readArtifact(ctx, in.SessionID, in.ArtifactID)
	if err != nil {
		return nil, err
	}
	out := &artifactReadOut{Artifact: a}
	if isText(a.Kind, a.MediaType, data) {
		out.Text = string(data)
	} else {
		out.ContentBase64 = data
	}
	return out, nil
}

// readArtifact returns an artifact's metadata and bytes, refusing one
// larger than maxReadBytes.
func (b *backend) readArtifact(ctx context.Context, ses, art string) (*desk.Artifact, []byte, error) {
	a, err := caller(ctx).GetArtifact(ctx, ses, art)
	if err != nil {
		return nil, nil, err
	}
	if a.Size > maxReadBytes {
		return nil, nil, desk.Errorf(desk.ETOOLARGE, "artifact %s is %d bytes, more than the %d an MCP read returns; download it with GET /v1/sessions/%s/artifacts/%s/content", a.ID, a.Size, maxReadBytes, ses, a.ID)
	}
	d, err := caller(ctx).DownloadArtifact(ctx, ses, art)
	if err != nil {
		return nil, nil, err
	}
	defer d.Body.Close()
	data, err := readLimited(d.Body)
	return a, data, err
}

func readLimited(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxReadBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxReadBytes {
		return nil, desk.Errorf(desk.ETOOLARGE, "content is more than the %d bytes an MCP read returns", maxReadBytes)
	}
	return data, nil
}

// textKinds are the artifact kinds whose bytes are text.
var textKinds = map[string]bool{"markdown": true, "text": true, "csv": true, "tsv": true, "json": true, "empty": true, "html": true, "svg": true, "code": true}

// isText decides whether content travels as text or as a blob: by kind or
// media type, and only if the bytes really are UTF-8.
func isText(kind, mediaType string, data []byte) bool {
	mt, _, _ := strings.Cut(mediaType, ";")
	textual := textKinds[kind] || strings.HasPrefix(mt, "text/") || mt == "application/json" ||
		strings.HasSuffix(mt, "+json") || mt == "application/xml" || strings.HasSuffix(mt, "+xml")
	return textual && utf8.Valid(data)
}

func (b *backend) artifactWrite(ctx context.Context, _ *sdk.CallToolRequest, in artifactWriteArgs) (*desk.Artifact, error) {
	as, err := caller(ctx).ListArtifacts(ctx, in.SessionID)
	if err != nil {
		return nil, err
	}
	body := strings.NewReader(in.Content)
	for _, a := range as {
		if a.Name == in.Name {
			return caller(ctx).UpdateArtifact(ctx, in.SessionID, a.ID, body, int64(len(in.Content)), "text/plain; charset=utf-8")
		}
	}
	return caller(ctx).PutArtifact(ctx, in.SessionID, in.Name, body, int64(len(in.Content)), client.PutOptions{MediaType: "text/plain; charset=utf-8"})
}

// maxListEntries bounds files_list: a listing lands in a model's context.
const maxListEntries = 1000

var errListFull = errors.New("listing full")

func (b *backend) filesList(ctx context.Context, _ *sdk.CallToolRequest, in filesListArgs) (*filesListOut, error) {
	depth := in.Depth
	if depth == 0 {
		depth = 1
	}
	out := &filesListOut{Entries: []desk.FileEntry{}}
	l, err := caller(ctx).ListFiles(ctx, client.FileTarget{Workspace: in.WorkspaceID, Actor: in.Actor}, in.Path, depth, func(e desk.FileEntry) error {
		if len(out.Entries) == maxListEntries {
			return errListFull
		}
		out.Entries = append(out.Entries, e)
		return nil
	})
	if errors.Is(err, errListFull) {
		return nil, desk.Errorf(desk.ETOOLARGE, "more than %d entries under %s: list a subfolder or a smaller depth", maxListEntries, in.Path)
	}
	out.Listing = l
	return out, err
}

func (b *backend) fileRead(ctx context.Context, _ *sdk.CallToolRequest, in fileArgs) (*fileReadOut, error) {
	d, err := caller(ctx).DownloadFile(ctx, client.FileTarget{Workspace: in.WorkspaceID, Actor: in.Actor}, in.Path)
	if err != nil {
		return nil, err
	}
	defer d.Body.Close()
	if d.Size > maxReadBytes {
		return nil, desk.Errorf(desk.ETOOLARGE, "%s is %d bytes, more than the %d an MCP read returns", in.Path, d.Size, maxReadBytes)
	}
	data, err := readLimited(d.Body)
	if err != nil {
		return nil, err
	}
	out := &fileReadOut{Path: in.Path, Size: int64(len(data)), ArtifactID: d.ArtifactID}
	if utf8.Valid(data) {
		out.Text = string(data)
	} else {
		out.ContentBase64 = data
	}
	return out, nil
}

// errTurnDone ends the event stream once the turn settled.
var errTurnDone = errors.New("turn done")

// sessionSend queues the message and, with wait, follows the session's
// events until the execution that runs it settles. Every event of the turn
// advances the MCP progress; the client's cancellation interrupts that
// exact execution (or withdraws the row if it has not started).
func (b *backend) sessionSend(ctx context.Context, req *sdk.CallToolRequest, in sessionSendArgs) (*sendOut, error) {
	res, err := caller(ctx).Send(ctx, in.SessionID, client.SubmitInput{Text: in.Text, Surface: in.Surface})
	if err != nil {
		return nil, err
	}
	out := &sendOut{QueuedItem: res.Item, ExecutionID: res.ExecutionID}
	if !in.Wait {
		return out, nil
	}
	log := SessionLogger(req.Session)
	prog := NewProgress(req)
	notify := func(msg string) { prog.Step(ctx, msg) }
	notify("queued " + res.Item.ID)
	var final *desk.Execution
	seen := false // an event of the turn's execution arrived
	err = caller(ctx).Events(ctx, client.EventFilter{Session: in.SessionID}, res.EventsAfter, func(e *desk.Event) error {
		switch {
		case strings.HasPrefix(e.Type, "execution."):
			var x desk.Execution
			if json.Unmarshal(e.Data, &x) != nil || x.QueueItemID != res.Item.ID {
				return nil
			}
			if !seen {
				seen, out.ExecutionID = true, x.ID
				log.InfoContext(ctx, "turn started", "session", in.SessionID, "execution", x.ID)
			}
			notify(x.ID + " " + x.Phase)
			if x.Terminal() {
				final = &x
				return errTurnDone
			}
		case e.Type == "assistant.message" && out.ExecutionID != "" && e.ExecutionID == out.ExecutionID:
			// (The execution's first event names it before any message,
			// so another turn's reply is never taken for this one's.)
			var m struct {
				Text      string `json:"text"`
				ToolCalls int    `json:"tool_calls"`
			}
			if json.Unmarshal(e.Data, &m) == nil && m.Text != "" {
				out.Reply = m.Text
			}
			notify("assistant message")
		case e.ExecutionID != "" && e.ExecutionID == out.ExecutionID:
			notify(e.Type)
		}
		return nil
	})
	if errors.Is(err, errTurnDone) {
		out.Outcome, out.Reason = final.Outcome, final.Reason
		if out.Outcome == "" {
			out.Outcome = desk.OutcomeOf(final.Phase)
		}
		return out, nil
	}
	if ctx.Err() != nil {
		b.stopTurn(ctx, in.SessionID, res.Item.ID, out.ExecutionID, log)
	}
	return nil, err
}

// stopTurn interrupts the execution a cancelled session_send waits for,
// or cancels its row when no execution has started yet (and interrupts the
// one that started meanwhile, if cancelling finds the row already taken).
// It runs after the call's own context ended, on one that keeps its caller.
func (b *backend) stopTurn(callCtx context.Context, ses, item, exe string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(callCtx), 30*time.Second)
	defer cancel()
	if exe == "" {
		if _, err := caller(ctx).QueueOp(ctx, ses, item, "cancel"); err == nil {
			log.InfoContext(ctx, "cancelled the queued message", "session", ses, "queued_item", item)
			return
		}
		exes, err := caller(ctx).Executions(ctx, ses)
		if err != nil {
			return
		}
		for _, x := range exes {
			if x.QueueItemID == item {
				exe = x.ID
				break
			}
		}
		if exe == "" {
			return
		}
	}
	if _, err := caller(ctx).Interrupt(ctx, ses, exe); err != nil {
		log.WarnContext(ctx, "could not interrupt the cancelled turn", "execution", exe, "err", err)
		return
	}
	log.InfoContext(ctx, "interrupted the cancelled turn", "session", ses, "execution", exe)
}
