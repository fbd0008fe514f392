// Package acp is the runtime host's transport for agents that speak the
// Agent Client Protocol (JSON-RPC over stdio): desk is the ACP client.
// It owns the protocol and nothing of desk's store: initialize,
// session/new and session/load (Open), session/prompt (Prompt) with the
// agent's session/update notifications reported to the host's Sink,
// session/cancel (Cancel), session/request_permission answered by the
// exact option the Sink chose, and — only when the host gives a
// wire.Client — the agent's fs/* and terminal/* requests.
//
// It is built on the ACP Go SDK (github.com/coder/acp-go-sdk).
package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	sdk "github.com/coder/acp-go-sdk"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

// Transport speaks ACP; the zero value is ready.
type Transport struct{}

var _ wire.Transport = Transport{}

// Args is nil: ACP reopens a conversation over the wire (session/load).
func (Transport) Args(string) []string { return nil }

// Attach initializes the protocol with the started child and returns its
// connection. The fs and terminal capabilities are declared only when
// opts.Client is set.
func (Transport) Attach(ctx context.Context, stdio wire.Stdio, opts wire.Options) (wire.Conn, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	c := &conn{opts: opts, tools: map[string]*wire.ToolEvent{}, terms: map[string]wire.Terminal{},
		termTool: map[string]string{}, termOut: map[string]string{}}
	c.out = newStdoutGuard(stdio.Stdout, opts.LineLimit())
	c.rpc = sdk.NewClientSideConnection(c, stdio.Stdin, c.out)
	c.rpc.SetLogger(opts.Log)
	close(c.out.ready)
	caps := sdk.ClientCapabilities{}
	if opts.Client != nil {
		caps.Fs = sdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}
		caps.Terminal = true
	}
	init, err := c.rpc.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion:    sdk.ProtocolVersionNumber,
		ClientCapabilities: caps,
		ClientInfo:         &sdk.Implementation{Name: "desk", Version: "1"},
	})
	if err != nil {
		return nil, fmt.Errorf("acp initialize: %w", c.out.cause(err))
	}
	c.canLoad = init.AgentCapabilities.LoadSession
	return c, nil
}

// conn is one ACP connection; it is also the SDK's Client, answering the
// agent's requests.
type conn struct {
	opts    wire.Options
	rpc     *sdk.ClientSideConnection
	out     *stdoutGuard
	canLoad bool

	mu      sync.Mutex
	session sdk.SessionId
	sink    wire.Sink // the running turn's, nil between turns
	turnCtx context.Context
	tools   map[string]*wire.ToolEvent // the turn's tool calls, by id
	terms   map[string]wire.Terminal
	// termTool links a terminal to the tool call whose content embeds it
	// (ACP's terminal content): the call's output is then the terminal's,
	// and termOut keeps it, by tool call, once the terminal is released.
	termTool map[string]string
	termOut  map[string]string
	nterm    int
	closed   bool

	sinkMu sync.Mutex // one Sink call at a time
}

func (c *conn) Open(ctx context.Context, native string) (string, error) {
	if native == "" {
		res, err := c.rpc.NewSession(ctx, sdk.NewSessionRequest{Cwd: c.opts.Cwd, McpServers: []sdk.McpServer{}})
		if err != nil {
			return "", fmt.Errorf("acp session/new: %w", c.out.cause(err))
		}
		c.setSession(res.SessionId)
		return string(res.SessionId), nil
	}
	if !c.canLoad {
		return "", fmt.Errorf("%w: the agent does not declare loadSession", wire.ErrCannotLoad)
	}
	// The agent replays the conversation as session/update notifications
	// while it loads; with no turn running they are not reported.
	if _, err := c.rpc.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: sdk.SessionId(native), Cwd: c.opts.Cwd, McpServers: []sdk.McpServer{}}); err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return "", fmt.Errorf("%w: session/load %s: %v", wire.ErrCannotLoad, native, err)
	}
	c.setSession(sdk.SessionId(native))
	return native, nil
}

func (c *conn) setSession(id sdk.SessionId) {
	c.mu.Lock()
	c.session = id
	c.mu.Unlock()
}

func (c *conn) Prompt(ctx context.Context, text string, sink wire.Sink) (wire.Result, error) {
	c.mu.Lock()
	ses := c.session
	if ses == "" {
		c.mu.Unlock()
		return wire.Result{}, errors.New("acp: Prompt before Open")
	}
	if c.sink != nil {
		c.mu.Unlock()
		return wire.Result{}, errors.New("acp: a turn is already running")
	}
	turnCtx, endTurn := context.WithCancel(ctx)
	c.sink, c.turnCtx, c.tools = sink, turnCtx, map[string]*wire.ToolEvent{}
	c.mu.Unlock()
	defer func() {
		endTurn()
		c.mu.Lock()
		c.sink, c.turnCtx = nil, nil
		// A terminal lives for the turn that created it: the host kills
		// them at the turn's end, and their ids are forgotten here.
		terms := c.terms
		c.terms, c.termTool, c.termOut = map[string]wire.Terminal{}, map[string]string{}, map[string]string{}
		c.mu.Unlock()
		for _, t := range terms {
			_ = t.Release()
		}
	}()
	res, err := c.rpc.Prompt(ctx, sdk.PromptRequest{SessionId: ses, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
	if err != nil {
		if ctx.Err() != nil {
			return wire.Result{}, ctx.Err()
		}
		if bad := c.out.cause(err); bad != err {
			return wire.Result{}, fmt.Errorf("acp session/prompt: %w", bad)
		}
		var re *sdk.RequestError
		if errors.As(err, &re) {
			// The agent's own failure of the turn.
			return wire.Result{StopReason: wire.StopFailed, Error: errorText(re)}, nil
		}
		return wire.Result{}, fmt.Errorf("acp session/prompt: %w", err)
	}
	switch res.StopReason {
	case sdk.StopReasonEndTurn:
		return wire.Result{StopReason: wire.StopEndTurn}, nil
	case sdk.StopReasonCancelled:
		return wire.Result{StopReason: wire.StopCancelled}, nil
	case sdk.StopReasonMaxTokens, sdk.StopReasonMaxTurnRequests:
		return wire.Result{StopReason: wire.StopMaxTokens}, nil
	case sdk.StopReasonRefusal:
		return wire.Result{StopReason: wire.StopRefusal}, nil
	}
	return wire.Result{StopReason: wire.StopFailed, Error: "unknown stop reason " + string(res.StopReason)}, nil
}

func errorText(re *sdk.RequestError) string {
	s := re.Message
	if re.Data != nil {
		if b, err := json.Marshal(re.Data); err == nil {
			s += ": " + string(b)
		}
	}
	return s
}

// Cancel sends session/cancel and ends the turn's open permission
// requests, which the SDK handlers then answer "cancelled".
func (c *conn) Cancel(ctx context.Context) error {
	c.mu.Lock()
	ses := c.session
	c.mu.Unlock()
	if ses == "" {
		return nil
	}
	return c.rpc.Cancel(ctx, sdk.CancelNotification{SessionId: ses})
}

// Close releases the agent's terminals; the host closes stdio and reaps
// the process, which ends the SDK's connection.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	terms := c.terms
	c.terms = map[string]wire.Terminal{}
	c.mu.Unlock()
	for _, t := range terms {
		_ = t.Release()
	}
	return nil
}

// turn returns the running turn's sink and context when the notification
// is of this connection's session.
func (c *conn) turn(ses sdk.SessionId) (wire.Sink, context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sink == nil || ses != c.session {
		return nil, nil
	}
	return c.sink, c.turnCtx
}

// SessionUpdate reports the agent's updates to the running turn's sink.
func (c *conn) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	sink, _ := c.turn(n.SessionId)
	if sink == nil {
		return nil // a load's replay, or an update after the turn
	}
	u := n.Update
	c.sinkMu.Lock()
	defer c.sinkMu.Unlock()
	switch {
	case u.AgentMessageChunk != nil:
		if t := u.AgentMessageChunk.Content.Text; t != nil && t.Text != "" {
			text := t.Text
			if rest, notices := wire.SplitNotices(text); len(notices) > 0 {
				if _, ok := sink.(wire.Noticer); ok {
					for _, n := range notices {
						wire.Notify(sink, "warning", n)
					}
					text = rest
				}
			}
			if text != "" {
				sink.Text(text)
			}
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		ev := &wire.ToolEvent{ID: string(tc.ToolCallId), Kind: kind(tc.Kind), Title: tc.Title, Status: status(tc.Status),
			Input: rawJSON(tc.RawInput), Output: c.output(string(tc.ToolCallId), tc.Content, tc.RawOutput), Locations: locations(tc.Locations)}
		c.mu.Lock()
		c.tools[ev.ID] = ev
		c.mu.Unlock()
		sink.Tool(*ev)
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		out := c.output(string(tu.ToolCallId), tu.Content, tu.RawOutput)
		c.mu.Lock()
		ev := c.tools[string(tu.ToolCallId)]
		if ev == nil {
			ev = &wire.ToolEvent{ID: string(tu.ToolCallId), Kind: wire.ToolOther, Status: wire.ToolPending}
			c.tools[ev.ID] = ev
		}
		if tu.Kind != nil {
			ev.Kind = kind(*tu.Kind)
		}
		if tu.Title != nil {
			ev.Title = *tu.Title
		}
		if tu.Status != nil {
			ev.Status = status(*tu.Status)
		}
		if in := rawJSON(tu.RawInput); in != nil {
			ev.Input = in
		}
		if out != "" {
			ev.Output = out
		}
		if ls := locations(tu.Locations); ls != nil {
			ev.Locations = ls
		}
		cp := *ev
		c.mu.Unlock()
		sink.Tool(cp)
	case u.Plan != nil:
		es := make([]wire.PlanEntry, 0, len(u.Plan.Entries))
		for _, e := range u.Plan.Entries {
			es = append(es, wire.PlanEntry{Content: e.Content, Status: string(e.Status), Priority: string(e.Priority)})
		}
		sink.Plan(es)
	}
	return nil
}

// RequestPermission asks the sink and answers the exact option it chose;
// an interrupted turn (or one that ended) answers "cancelled".
func (c *conn) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	sink, turnCtx := c.turn(p.SessionId)
	if sink == nil {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(turnCtx, cancel)
	defer stop()
	req := wire.PermissionRequest{ToolCallID: string(p.ToolCall.ToolCallId), Kind: wire.ToolOther, Input: rawJSON(p.ToolCall.RawInput)}
	if p.ToolCall.Title != nil {
		req.Title = *p.ToolCall.Title
	}
	if p.ToolCall.Kind != nil {
		req.Kind = kind(*p.ToolCall.Kind)
	}
	c.mu.Lock()
	if ev := c.tools[req.ToolCallID]; ev != nil {
		if req.Title == "" {
			req.Title = ev.Title
		}
		if p.ToolCall.Kind == nil {
			req.Kind = ev.Kind
		}
		if req.Input == nil {
			req.Input = ev.Input
		}
	}
	c.mu.Unlock()
	for _, o := range p.Options {
		req.Options = append(req.Options, wire.PermissionOption{ID: string(o.OptionId), Name: o.Name, Kind: string(o.Kind)})
	}
	// What a person reads: an edit's file and diff from the call's
	// content, else the raw input's command line, cwd and reason (each
	// agent has its own; wire.Readable knows the common names).
	for _, ct := range p.ToolCall.Content {
		if d := ct.Diff; d != nil && req.Path == "" {
			old := ""
			if d.OldText != nil {
				old = *d.OldText
			}
			req.Path, req.Diff = d.Path, wire.Diff(d.Path, old, d.NewText)
		}
	}
	if req.Path == "" && len(p.ToolCall.Locations) > 0 && req.Kind == wire.ToolEdit {
		req.Path = p.ToolCall.Locations[0].Path
	}
	req.Readable(req.Input)
	c.sinkMu.Lock()
	ans, err := sink.Permission(ctx, req)
	c.sinkMu.Unlock()
	if err != nil || ans.Cancelled || ans.OptionID == "" {
		return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeCancelled()}, nil
	}
	for _, o := range p.Options {
		if string(o.OptionId) == ans.OptionID {
			return sdk.RequestPermissionResponse{Outcome: sdk.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
		}
	}
	return sdk.RequestPermissionResponse{}, sdk.NewInternalError(map[string]any{"error": fmt.Sprintf("desk chose option %q, which the agent did not offer", ans.OptionID)})
}

func (c *conn) client() (wire.Client, error) {
	if c.opts.Client == nil {
		return nil, sdk.NewMethodNotFound("fs/* and terminal/* (not declared by desk)")
	}
	return c.opts.Client, nil
}

// clientErr is desk's refusal of an fs/* or terminal/* request as the
// agent sees it: a path that does not exist is ACP's "resource not
// found" (-32002), a request desk refuses (outside the write boundary,
// not a text file, too large) invalid params (-32602) with desk's reason,
// anything else an internal error.
func clientErr(err error) error {
	data := map[string]any{"error": err.Error()}
	switch {
	case errors.Is(err, wire.ErrNotFound):
		return &sdk.RequestError{Code: -32002, Message: "Resource not found", Data: data}
	case errors.Is(err, wire.ErrRefused):
		return sdk.NewInvalidParams(data)
	case errors.Is(err, context.Canceled):
		return sdk.NewRequestCancelled(data)
	}
	return sdk.NewInternalError(data)
}

func (c *conn) ReadTextFile(ctx context.Context, p sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	cl, err := c.client()
	if err != nil {
		return sdk.ReadTextFileResponse{}, err
	}
	line, limit := 0, 0
	if p.Line != nil {
		line = *p.Line
	}
	if p.Limit != nil {
		limit = *p.Limit
	}
	s, err := cl.ReadTextFile(ctx, p.Path, line, limit)
	if err != nil {
		return sdk.ReadTextFileResponse{}, clientErr(err)
	}
	return sdk.ReadTextFileResponse{Content: s}, nil
}

func (c *conn) WriteTextFile(ctx context.Context, p sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	cl, err := c.client()
	if err != nil {
		return sdk.WriteTextFileResponse{}, err
	}
	if err := cl.WriteTextFile(ctx, p.Path, p.Content); err != nil {
		return sdk.WriteTextFileResponse{}, clientErr(err)
	}
	return sdk.WriteTextFileResponse{}, nil
}

func (c *conn) CreateTerminal(ctx context.Context, p sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	cl, err := c.client()
	if err != nil {
		return sdk.CreateTerminalResponse{}, err
	}
	req := wire.TerminalRequest{Command: p.Command, Args: p.Args}
	if p.Cwd != nil {
		req.Cwd = *p.Cwd
	}
	if p.OutputByteLimit != nil {
		req.OutputByteLimit = *p.OutputByteLimit
	}
	for _, e := range p.Env {
		req.Env = append(req.Env, e.Name+"="+e.Value)
	}
	t, err := cl.Terminal(ctx, req)
	if err != nil {
		return sdk.CreateTerminalResponse{}, clientErr(err)
	}
	c.mu.Lock()
	c.nterm++
	id := fmt.Sprintf("term_%d", c.nterm)
	c.terms[id] = t
	c.mu.Unlock()
	return sdk.CreateTerminalResponse{TerminalId: id}, nil
}

func (c *conn) terminal(id string) (wire.Terminal, error) {
	if _, err := c.client(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.terms[id]
	if t == nil {
		return nil, sdk.NewInvalidParams(map[string]any{"error": "no terminal " + id})
	}
	return t, nil
}

func exitStatus(e wire.ExitStatus) *sdk.TerminalExitStatus {
	s := &sdk.TerminalExitStatus{ExitCode: e.Code}
	if e.Signal != "" {
		s.Signal = sdk.Ptr(e.Signal)
	}
	return s
}

func (c *conn) TerminalOutput(_ context.Context, p sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return sdk.TerminalOutputResponse{}, err
	}
	out, truncated, exit := t.Output()
	res := sdk.TerminalOutputResponse{Output: out, Truncated: truncated}
	if exit != nil {
		res.ExitStatus = exitStatus(*exit)
	}
	return res, nil
}

func (c *conn) WaitForTerminalExit(ctx context.Context, p sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, err
	}
	e, err := t.Wait(ctx)
	if err != nil {
		return sdk.WaitForTerminalExitResponse{}, clientErr(err)
	}
	s := exitStatus(e)
	return sdk.WaitForTerminalExitResponse{ExitCode: s.ExitCode, Signal: s.Signal}, nil
}

func (c *conn) KillTerminal(_ context.Context, p sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return sdk.KillTerminalResponse{}, err
	}
	if err := t.Kill(); err != nil {
		return sdk.KillTerminalResponse{}, clientErr(err)
	}
	return sdk.KillTerminalResponse{}, nil
}

func (c *conn) ReleaseTerminal(_ context.Context, p sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	t, err := c.terminal(p.TerminalId)
	if err != nil {
		return sdk.ReleaseTerminalResponse{}, err
	}
	// The tool call that embeds the terminal keeps its final output: the
	// agent's completion of the call usually carries no text of it, and
	// after the release desk has no terminal to read it from.
	out, _, _ := t.Output()
	c.mu.Lock()
	delete(c.terms, p.TerminalId)
	var ev *wire.ToolEvent
	if id, ok := c.termTool[p.TerminalId]; ok {
		delete(c.termTool, p.TerminalId)
		c.termOut[id] = out
		if ev = c.tools[id]; ev != nil && out != "" {
			ev.Output = out
		}
	}
	var cp wire.ToolEvent
	if ev != nil {
		cp = *ev
	}
	c.mu.Unlock()
	if ev != nil && out != "" {
		if sink, _ := c.turn(p.SessionId); sink != nil {
			c.sinkMu.Lock()
			sink.Tool(cp)
			c.sinkMu.Unlock()
		}
	}
	if err := t.Release(); err != nil {
		return sdk.ReleaseTerminalResponse{}, clientErr(err)
	}
	return sdk.ReleaseTerminalResponse{}, nil
}

// kind maps ACP's tool kinds onto the neutral ones.
func kind(k sdk.ToolKind) string {
	switch k {
	case sdk.ToolKindExecute:
		return wire.ToolCommand
	case sdk.ToolKindEdit, sdk.ToolKindDelete, sdk.ToolKindMove:
		return wire.ToolEdit
	case sdk.ToolKindRead:
		return wire.ToolRead
	case sdk.ToolKindSearch:
		return wire.ToolSearch
	case sdk.ToolKindFetch:
		return wire.ToolFetch
	}
	return wire.ToolOther
}

func status(s sdk.ToolCallStatus) string {
	switch s {
	case sdk.ToolCallStatusInProgress:
		return wire.ToolInProgress
	case sdk.ToolCallStatusCompleted:
		return wire.ToolCompleted
	case sdk.ToolCallStatusFailed:
		return wire.ToolFailed
	}
	return wire.ToolPending
}

func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}

// output is a tool call's output: its text content, else the output of
// the terminal of desk's it embeds (desk ran that command and has its
// exact output, which an agent embedding a terminal does not repeat as
// text; a released terminal's is kept in termOut), else its raw output.
// Embedding links the terminal to the call.
func (c *conn) output(toolID string, content []sdk.ToolCallContent, raw any) string {
	if out := output(content, nil); out != "" {
		return out
	}
	c.mu.Lock()
	for _, cc := range content {
		if cc.Terminal != nil && c.terms[cc.Terminal.TerminalId] != nil {
			c.termTool[cc.Terminal.TerminalId] = toolID
		}
	}
	var t wire.Terminal
	for term, tool := range c.termTool {
		if tool == toolID {
			t = c.terms[term]
		}
	}
	kept, released := c.termOut[toolID]
	c.mu.Unlock()
	switch {
	case t != nil:
		out, _, _ := t.Output()
		return out
	case released && kept != "":
		return kept
	}
	return output(nil, raw)
}

// output is a tool call's output as text: its text content and diffs,
// else its raw output.
func output(content []sdk.ToolCallContent, rawOut any) string {
	var parts []string
	for _, c := range content {
		switch {
		case c.Content != nil && c.Content.Content.Text != nil:
			parts = append(parts, c.Content.Content.Text.Text)
		case c.Diff != nil:
			parts = append(parts, "--- "+c.Diff.Path+"\n"+c.Diff.NewText)
		}
	}
	if len(parts) == 0 && rawOut != nil {
		// An MCP tool's result, as claude-code-acp reports its own tools':
		// a list of content blocks, of which the text is the output.
		if l, ok := rawOut.([]any); ok {
			var texts []string
			for _, b := range l {
				if m, ok := b.(map[string]any); ok && m["type"] == "text" {
					if s, ok := m["text"].(string); ok {
						texts = append(texts, s)
					}
				}
			}
			if len(texts) > 0 {
				return strings.Join(texts, "\n")
			}
		}
		if m, ok := rawOut.(map[string]any); ok {
			for _, k := range []string{"formatted_output", "aggregated_output", "output", "stdout"} {
				if s, ok := m[k].(string); ok && s != "" {
					return s
				}
			}
		}
		if b := rawJSON(rawOut); b != nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

func locations(ls []sdk.ToolCallLocation) []string {
	if len(ls) == 0 {
		return nil
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Path)
	}
	return out
}
