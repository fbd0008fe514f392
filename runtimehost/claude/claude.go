// Package claude is the wire.Transport for Claude Code's stream-json
// protocol: `claude -p --input-format stream-json --output-format
// stream-json --verbose`, one JSON object per line each way.
//
// It owns the mapping of that protocol onto desk's neutral runtime
// events and nothing else: the host starts and reaps the process.
//
//   - Args adds the stream-json flags, --include-partial-messages (so text
//     arrives as deltas), --permission-prompt-tool stdio (permission
//     prompts come as control_request can_use_tool on stdout and are
//     answered by control_response on stdin) and, to continue a native
//     conversation, --resume <id>: Claude Code reopens a conversation only
//     on its command line, so Open merely checks the process took it.
//   - Open sends the initialize control request; a process that ends
//     before answering it while resuming could not load the conversation
//     (Claude Code exits with "No conversation found"), which is
//     wire.ErrCannotLoad.
//   - Prompt writes one user message and maps the stream until its result:
//     system init → Sink.NativeID, stream_event text deltas (or whole
//     assistant text when no delta came) → Sink.Text, tool_use and the
//     tool_result that answers it → Sink.Tool, TodoWrite → Sink.Plan,
//     can_use_tool → Sink.Permission, result → wire.Result.
//   - Cancel sends the interrupt control request.
package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/desk-runtime/desk/runtimehost/wire"
)

// Transport speaks Claude Code's stream-json. The zero value is ready.
type Transport struct{}

var _ wire.Transport = Transport{}

// Args are the flags the host appends to the operator's argv (e.g.
// `claude`), and --resume when the child must continue native.
func (Transport) Args(native string) []string {
	a := []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--permission-prompt-tool", "stdio"}
	if native != "" {
		a = append(a, "--resume", native)
	}
	return a
}

// Attach starts reading the child's stdout.
func (Transport) Attach(ctx context.Context, stdio wire.Stdio, opts wire.Options) (wire.Conn, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &conn{
		stdin:   stdio.Stdin,
		log:     log,
		msgs:    make(chan message, 64),
		done:    make(chan struct{}),
		pending: map[string]chan message{},
	}
	go c.read(stdio.Stdout, opts.LineLimit())
	return c, nil
}

// message is one line of stdout, decoded as far as the transport needs.
type message struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`  // control_request
	Response  json.RawMessage `json:"response"` // control_response
	Message   json.RawMessage `json:"message"`  // assistant, user
	Event     json.RawMessage `json:"event"`    // stream_event
	Result    string          `json:"result"`
	IsError   bool            `json:"is_error"`
	Errors    []string        `json:"errors"`
	// ParentToolUseID is set on a subagent's messages.
	ParentToolUseID *string `json:"parent_tool_use_id"`
}

type conn struct {
	stdin io.WriteCloser
	log   *slog.Logger
	wmu   sync.Mutex // one writer of stdin

	msgs chan message // everything but control responses, in order
	done chan struct{}
	err  error // why stdout ended; read after done

	mu        sync.Mutex
	pending   map[string]chan message
	nextID    int
	native    string
	resuming  bool
	turnStop  context.CancelFunc // ends a running turn's permission waits
	closeOnce sync.Once

	cancelled atomic.Bool
}

// read decodes stdout until it ends, routing control responses to their
// requests and everything else to msgs.
func (c *conn) read(r io.Reader, max int) {
	defer close(c.done)
	defer close(c.msgs)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, min(64<<10, max)), max)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var m message
		if err := json.Unmarshal(line, &m); err != nil || m.Type == "" {
			c.err = fmt.Errorf("claude stream-json: stdout is not stream-json (a line %q): is argv Claude Code, run with the stream-json flags?", clip(string(line[:min(len(line), 121)]), 120))
			return
		}
		if m.Type == "control_response" {
			var resp struct {
				RequestID string `json:"request_id"`
			}
			json.Unmarshal(m.Response, &resp)
			c.mu.Lock()
			ch := c.pending[resp.RequestID]
			delete(c.pending, resp.RequestID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		c.msgs <- m
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = wire.LineTooLong(max)
		}
		c.err = fmt.Errorf("claude stream-json: reading stdout: %w", err)
		return
	}
	c.err = errors.New("claude stream-json: the process closed its stdout (it exited)")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// write sends one JSON line on stdin.
func (c *conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("claude stream-json: writing stdin: %w", err)
	}
	return nil
}

// control sends a control request and waits for its response.
func (c *conn) control(ctx context.Context, req map[string]any) (json.RawMessage, error) {
	c.mu.Lock()
	c.nextID++
	id := fmt.Sprintf("desk_%d", c.nextID)
	ch := make(chan message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.write(map[string]any{"type": "control_request", "request_id": id, "request": req}); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		var resp struct {
			Subtype  string          `json:"subtype"`
			Error    string          `json:"error"`
			Response json.RawMessage `json:"response"`
		}
		json.Unmarshal(m.Response, &resp)
		if resp.Subtype == "error" {
			return nil, fmt.Errorf("claude stream-json: %s: %s", req["subtype"], resp.Error)
		}
		return resp.Response, nil
	case <-c.done:
		return nil, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Open checks the process is speaking stream-json (the initialize control
// request). native must be the id Args resumed ("" for a new
// conversation); the id of a new one is reported by Prompt through
// Sink.NativeID.
func (c *conn) Open(ctx context.Context, native string) (string, error) {
	c.mu.Lock()
	c.native, c.resuming = native, native != ""
	c.mu.Unlock()
	if _, err := c.control(ctx, map[string]any{"subtype": "initialize"}); err != nil {
		if native != "" && ctx.Err() == nil && isExit(c) {
			return "", fmt.Errorf("claude stream-json: --resume %s: the process ended before answering (%v): %w", native, err, wire.ErrCannotLoad)
		}
		return "", err
	}
	return native, nil
}

// isExit says stdout ended at EOF (not garbage).
func isExit(c *conn) bool {
	select {
	case <-c.done:
		return c.err != nil && strings.Contains(c.err.Error(), "closed its stdout")
	default:
		return false
	}
}

// Prompt runs one turn.
func (c *conn) Prompt(ctx context.Context, text string, sink wire.Sink) (wire.Result, error) {
	turn, stop := context.WithCancel(ctx)
	defer stop()
	c.mu.Lock()
	c.turnStop = stop
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.turnStop = nil
		c.mu.Unlock()
	}()
	c.cancelled.Store(false)
	err := c.write(map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": text},
		"parent_tool_use_id": nil,
		"session_id":         "",
	})
	if err != nil {
		return wire.Result{}, err
	}
	t := &turnState{c: c, sink: sink, tools: map[string]string{}}
	for {
		select {
		case <-ctx.Done():
			return wire.Result{}, ctx.Err()
		case m, ok := <-c.msgs:
			if !ok {
				c.mu.Lock()
				resuming := c.resuming
				c.mu.Unlock()
				if resuming && !t.sawInit && isExit(c) {
					return wire.Result{}, fmt.Errorf("%v before the resumed conversation started: %w", c.err, wire.ErrCannotLoad)
				}
				return wire.Result{}, c.err
			}
			if res, end := t.handle(turn, m); end {
				if c.cancelled.Load() {
					res.StopReason = wire.StopCancelled
					res.Error = ""
				}
				return res, nil
			}
		}
	}
}

// turnState follows one turn's stream.
type turnState struct {
	c       *conn
	sink    wire.Sink
	sawInit bool
	// streamed says text deltas came for the current assistant message,
	// so its whole text is not reported again.
	streamed bool
	tools    map[string]string // tool_use id → tool name
}

func (t *turnState) handle(ctx context.Context, m message) (wire.Result, bool) {
	switch m.Type {
	case "system":
		if m.Subtype == "init" && m.SessionID != "" {
			t.sawInit = true
			t.c.mu.Lock()
			old := t.c.native
			t.c.native, t.c.resuming = m.SessionID, false
			t.c.mu.Unlock()
			if m.SessionID != old || old == "" {
				t.sink.NativeID(m.SessionID)
			}
		}
	case "stream_event":
		if m.ParentToolUseID != nil {
			return wire.Result{}, false // a subagent's own stream
		}
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"delta"`
		}
		json.Unmarshal(m.Event, &ev)
		switch {
		case ev.Type == "message_start":
			t.streamed = false
		case ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "":
			t.streamed = true
			t.sink.Text(ev.Delta.Text)
		}
	case "assistant":
		t.assistant(m)
	case "user":
		t.toolResults(m)
	case "control_request":
		t.controlRequest(ctx, m)
	case "result":
		res := wire.Result{StopReason: wire.StopEndTurn, Reply: m.Result}
		if m.IsError || m.Subtype != "success" {
			res.StopReason = wire.StopFailed
			res.Error = m.Result
			if len(m.Errors) > 0 {
				res.Error = strings.Join(m.Errors, "; ")
			}
			if res.Error == "" {
				res.Error = m.Subtype
			}
			res.Reply = ""
		}
		return res, true
	}
	return wire.Result{}, false
}

// block is a content block of an assistant or user message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func blocks(raw json.RawMessage) []block {
	var msg struct {
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(raw, &msg)
	var bs []block
	if json.Unmarshal(msg.Content, &bs) != nil {
		var s string
		if json.Unmarshal(msg.Content, &s) == nil && s != "" {
			bs = []block{{Type: "text", Text: s}}
		}
	}
	return bs
}

func (t *turnState) assistant(m message) {
	sub := m.ParentToolUseID != nil
	for _, b := range blocks(m.Message) {
		switch b.Type {
		case "text":
			if !sub && !t.streamed && b.Text != "" {
				t.sink.Text(b.Text)
			}
		case "tool_use":
			t.tools[b.ID] = b.Name
			kind, title := describe(b.Name, b.Input)
			t.sink.Tool(wire.ToolEvent{ID: b.ID, Kind: kind, Title: title, Status: wire.ToolInProgress, Input: b.Input})
			if b.Name == "TodoWrite" && !sub {
				if plan, ok := todos(b.Input); ok {
					t.sink.Plan(plan)
				}
			}
		}
	}
}

func (t *turnState) toolResults(m message) {
	for _, b := range blocks(m.Message) {
		if b.Type != "tool_result" {
			continue
		}
		name := t.tools[b.ToolUseID]
		kind, _ := describe(name, nil)
		st := wire.ToolCompleted
		if b.IsError {
			st = wire.ToolFailed
		}
		t.sink.Tool(wire.ToolEvent{ID: b.ToolUseID, Kind: kind, Title: name, Status: st, Output: resultText(b.Content)})
	}
}

// resultText flattens a tool_result's content (a string or text blocks).
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []block
	json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// describe maps a Claude Code tool to a wire kind and a title.
func describe(name string, input json.RawMessage) (string, string) {
	var in struct {
		Command  string `json:"command"`
		FilePath string `json:"file_path"`
		Pattern  string `json:"pattern"`
		URL      string `json:"url"`
		Query    string `json:"query"`
	}
	json.Unmarshal(input, &in)
	title := func(arg string) string {
		if arg == "" {
			return name
		}
		return name + ": " + arg
	}
	switch name {
	case "Bash", "BashOutput", "KillShell":
		if in.Command != "" {
			return wire.ToolCommand, in.Command
		}
		return wire.ToolCommand, name
	case "Edit", "MultiEdit", "Write", "NotebookEdit":
		return wire.ToolEdit, title(in.FilePath)
	case "Read":
		return wire.ToolRead, title(in.FilePath)
	case "Grep", "Glob", "LS":
		return wire.ToolSearch, title(in.Pattern)
	case "WebFetch":
		return wire.ToolFetch, title(in.URL)
	case "WebSearch":
		return wire.ToolFetch, title(in.Query)
	}
	return wire.ToolOther, name
}

// todos reads TodoWrite's input as a plan.
func todos(input json.RawMessage) ([]wire.PlanEntry, bool) {
	var in struct {
		Todos []struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"todos"`
	}
	if json.Unmarshal(input, &in) != nil {
		return nil, false
	}
	plan := make([]wire.PlanEntry, 0, len(in.Todos))
	for _, td := range in.Todos {
		plan = append(plan, wire.PlanEntry{Content: td.Content, Status: td.Status})
	}
	return plan, true
}

// The permission options desk offers for a can_use_tool request; their
// ids are what desk answers with.
const (
	OptionAllow       = "allow"
	OptionAllowAlways = "allow_always"
	OptionDeny        = "deny"
)

// controlRequest answers a request of the CLI: can_use_tool through the
// sink, anything else with an error (desk registers no hooks or MCP
// servers of its own).
func (t *turnState) controlRequest(ctx context.Context, m message) {
	var req struct {
		Subtype     string            `json:"subtype"`
		ToolName    string            `json:"tool_name"`
		Input       json.RawMessage   `json:"input"`
		ToolUseID   string            `json:"tool_use_id"`
		Suggestions []json.RawMessage `json:"permission_suggestions"`
	}
	json.Unmarshal(m.Request, &req)
	reply := func(resp any) {
		if err := t.c.write(map[string]any{"type": "control_response", "response": resp}); err != nil {
			t.c.log.Warn("claude stream-json: answering a control request", "err", err)
		}
	}
	if req.Subtype != "can_use_tool" {
		reply(map[string]any{"subtype": "error", "request_id": m.RequestID, "error": "desk does not handle " + req.Subtype})
		return
	}
	kind, title := describe(req.ToolName, req.Input)
	opts := []wire.PermissionOption{{ID: OptionAllow, Name: "Allow", Kind: wire.AllowOnce}}
	if len(req.Suggestions) > 0 {
		opts = append(opts, wire.PermissionOption{ID: OptionAllowAlways, Name: "Always allow", Kind: wire.AllowAlways})
	}
	opts = append(opts, wire.PermissionOption{ID: OptionDeny, Name: "Deny", Kind: wire.RejectOnce})
	preq := wire.PermissionRequest{ToolCallID: req.ToolUseID, Title: title, Kind: kind, Input: req.Input, Options: opts}
	if kind == wire.ToolEdit {
		// Edit's old_string/new_string, Write's whole content.
		var in struct {
			FilePath  string `json:"file_path"`
			OldString string `json:"old_string"`
			NewString string `json:"new_string"`
			Content   string `json:"content"`
		}
		if json.Unmarshal(req.Input, &in) == nil && in.FilePath != "" {
			preq.Path = in.FilePath
			if in.NewString != "" || in.OldString != "" {
				preq.Diff = wire.Diff(in.FilePath, in.OldString, in.NewString)
			} else if in.Content != "" {
				preq.Diff = wire.Diff(in.FilePath, "", in.Content)
			}
		}
	}
	if kind == wire.ToolCommand {
		preq.Readable(req.Input)
	}
	ans, err := t.sink.Permission(ctx, preq)
	input := req.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	var decision map[string]any
	switch {
	case err != nil || ans.Cancelled:
		decision = map[string]any{"behavior": "deny", "message": "The turn was interrupted.", "interrupt": true}
	case ans.OptionID == OptionAllow:
		decision = map[string]any{"behavior": "allow", "updatedInput": input}
	case ans.OptionID == OptionAllowAlways:
		decision = map[string]any{"behavior": "allow", "updatedInput": input, "updatedPermissions": req.Suggestions}
	default:
		decision = map[string]any{"behavior": "deny", "message": "The user denied this."}
	}
	if req.ToolUseID != "" {
		decision["toolUseID"] = req.ToolUseID
	}
	reply(map[string]any{"subtype": "success", "request_id": m.RequestID, "response": decision})
}

// Cancel sends the interrupt control request; Prompt then returns with
// StopCancelled when the turn's result arrives.
func (c *conn) Cancel(ctx context.Context) error {
	c.cancelled.Store(true)
	c.mu.Lock()
	stop := c.turnStop
	c.nextID++
	id := fmt.Sprintf("desk_%d", c.nextID)
	c.mu.Unlock()
	if stop != nil {
		stop() // a pending permission answers "cancelled"
	}
	return c.write(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{"subtype": "interrupt"}})
}

// EndsAfterCancel: after an interrupt that cut a streaming model request
// short, Claude Code (2.1.x, measured) never sends the next user
// message's request, so the host replaces the process after a cancelled
// turn; the new one --resumes the conversation, interrupt marker and all.
func (c *conn) EndsAfterCancel() bool { return true }

// Close closes stdin, which ends Claude Code's input and so the process,
// and waits (briefly) for stdout to end so the reader is gone.
func (c *conn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		err = c.stdin.Close()
		go func() {
			for range c.msgs { // let the reader finish
			}
		}()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
		}
	})
	return err
}
