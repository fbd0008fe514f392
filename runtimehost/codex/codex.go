// Package codex is the wire.Transport for `codex app-server`: Codex's
// JSON-RPC 2.0 protocol over stdio, one JSON object per line (the
// protocol the binary documents with `codex app-server generate-ts`).
//
// It owns the mapping of that protocol onto the neutral contract:
// initialize → thread/start or thread/resume (Open) → turn/start (Prompt),
// whose item notifications become Sink calls (item/agentMessage/delta →
// Text; commandExecution, fileChange, mcpToolCall items → Tool; the turn's
// plan → Plan) until turn/completed; turn/interrupt (Cancel); and the
// server's approval requests (item/commandExecution/requestApproval,
// item/fileChange/requestApproval) → Sink.Permission, the chosen option's
// id being Codex's own decision word (accept, acceptForSession, decline,
// cancel).
package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/desk-runtime/desk/runtimehost/wire"
)

// Transport speaks codex app-server. Its zero value is ready.
type Transport struct{}

var _ wire.Transport = Transport{}

// Args is nil: codex reopens a thread over the wire (thread/resume).
func (Transport) Args(string) []string { return nil }

// GatewayArgs points Codex at desk's model gateway: a model provider of
// its own speaking the Responses API, whose key is the child's gateway
// credential (OPENAI_API_KEY of its environment). Codex's built-in
// openai provider takes neither its base URL nor its key from the
// environment in app-server mode (measured with 0.171.0: it sends no
// Authorization without a login), hence a provider of desk's.
func (Transport) GatewayArgs(url string) []string {
	var out []string
	for _, kv := range []string{
		"model_provider=desk", "model_providers.desk.name=desk",
		"model_providers.desk.base_url=" + url + "/v1",
		"model_providers.desk.wire_api=responses",
		"model_providers.desk.env_key=OPENAI_API_KEY",
	} {
		out = append(out, "-c", kv)
	}
	return out
}

// Attach reads the child's stdout and sends initialize.
func (Transport) Attach(ctx context.Context, stdio wire.Stdio, opts wire.Options) (wire.Conn, error) {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &conn{stdio: stdio, opts: opts, log: log, pending: map[int64]chan response{}, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go c.read()
	var res json.RawMessage
	err := c.call(ctx, "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "desk", "title": "desk", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": false, "requestAttestation": false},
	}, &res)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("codex app-server: initialize: %w", err)
	}
	if err := c.notify("initialized", nil); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type message struct {
	JSONRPC string           `json:"jsonrpc,omitempty"`
	ID      *json.RawMessage `json:"id,omitempty"`
	Method  string           `json:"method,omitempty"`
	Params  json.RawMessage  `json:"params,omitempty"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   *rpcError        `json:"error,omitempty"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

type response struct {
	result json.RawMessage
	err    error
}

type conn struct {
	stdio wire.Stdio
	opts  wire.Options
	log   *slog.Logger

	wmu sync.Mutex // one writer on stdin

	mu      sync.Mutex
	next    int64
	pending map[int64]chan response
	thread  string
	turn    string
	readErr error

	queue     []message     // notifications and server requests, in order
	wake      chan struct{} // signalled when queue grew
	permStop  context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// read decodes stdout line by line until it ends; a line that is not a
// JSON-RPC message ends the connection with an error naming it.
func (c *conn) read() {
	defer close(c.done)
	max := c.opts.LineLimit()
	sc := bufio.NewScanner(c.stdio.Stdout)
	sc.Buffer(make([]byte, 0, min(64<<10, max)), max)
	var err error
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var m message
		if e := json.Unmarshal(line, &m); e != nil || (m.ID == nil && m.Method == "") {
			err = fmt.Errorf("codex app-server printed something that is not a JSON-RPC message on stdout: %.200q", line)
			break
		}
		if m.Method == "" { // a response
			var id int64
			json.Unmarshal(*m.ID, &id)
			c.mu.Lock()
			ch := c.pending[id]
			delete(c.pending, id)
			c.mu.Unlock()
			if ch != nil {
				if m.Error != nil {
					ch <- response{err: m.Error}
				} else {
					ch <- response{result: m.Result}
				}
			}
			continue
		}
		// Queued without bound, so responses keep flowing while no turn
		// reads (notifications between turns).
		c.mu.Lock()
		c.queue = append(c.queue, m)
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	if err == nil {
		err = sc.Err()
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("codex app-server: %w", wire.LineTooLong(max))
		}
	}
	if err == nil {
		err = errors.New("codex app-server closed its stdout")
	}
	c.mu.Lock()
	c.readErr = err
	for id, ch := range c.pending {
		ch <- response{err: err}
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func (c *conn) failure() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readErr
}

func (c *conn) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err = c.stdio.Stdin.Write(append(b, '\n'))
	return err
}

func (c *conn) notify(method string, params any) error {
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(m)
}

func (c *conn) call(ctx context.Context, method string, params any, out any) error {
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.readErr != nil {
		err := c.readErr
		c.mu.Unlock()
		return err
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("codex app-server: %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		if out != nil {
			return json.Unmarshal(r.result, out)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

func (c *conn) reply(id *json.RawMessage, result any) error {
	return c.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

type threadResponse struct {
	Thread struct {
		ID string `json:"id"`
	} `json:"thread"`
}

// nextEvent takes the next notification or server request, waiting for
// one; it fails when ctx ends or stdout ended with nothing queued.
func (c *conn) nextEvent(ctx context.Context) (message, error) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return m, nil
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return message{}, ctx.Err()
		case <-c.wake:
		case <-c.done:
			c.mu.Lock()
			n := len(c.queue)
			c.mu.Unlock()
			if n == 0 {
				return message{}, c.failure()
			}
		}
	}
}

// Open starts a thread or resumes the exact one named.
func (c *conn) Open(ctx context.Context, native string) (string, error) {
	var res threadResponse
	params := map[string]any{}
	if c.opts.Cwd != "" {
		params["cwd"] = c.opts.Cwd
	}
	if native == "" {
		if err := c.call(ctx, "thread/start", params, &res); err != nil {
			return "", fmt.Errorf("codex app-server: thread/start: %w", err)
		}
	} else {
		params["threadId"] = native
		if err := c.call(ctx, "thread/resume", params, &res); err != nil {
			if ctx.Err() != nil || c.failure() != nil {
				return "", fmt.Errorf("codex app-server: thread/resume %s: %w", native, err)
			}
			return "", fmt.Errorf("%w: codex app-server: thread/resume %s: %v", wire.ErrCannotLoad, native, err)
		}
		if res.Thread.ID != native {
			return "", fmt.Errorf("%w: codex app-server resumed thread %q instead of %q", wire.ErrCannotLoad, res.Thread.ID, native)
		}
	}
	if res.Thread.ID == "" {
		return "", errors.New("codex app-server: the thread has no id")
	}
	c.mu.Lock()
	c.thread = res.Thread.ID
	c.mu.Unlock()
	return res.Thread.ID, nil
}

// item is the part of a ThreadItem the transport maps.
type item struct {
	Type             string `json:"type"`
	ID               string `json:"id"`
	Text             string `json:"text"`
	Command          string `json:"command"`
	Cwd              string `json:"cwd"`
	Status           string `json:"status"`
	AggregatedOutput string `json:"aggregatedOutput"`
	ExitCode         *int   `json:"exitCode"`
	Changes          []struct {
		Path string `json:"path"`
		Diff string `json:"diff"`
	} `json:"changes"`
	Server string          `json:"server"`
	Tool   string          `json:"tool"`
	Args   json.RawMessage `json:"arguments"`
}

func toolStatus(s string) string {
	switch s {
	case "inProgress", "":
		return wire.ToolInProgress
	case "completed":
		return wire.ToolCompleted
	default: // failed, declined
		return wire.ToolFailed
	}
}

// tool maps a tool-like item to a ToolEvent; ok is false for other items.
func (it item) tool() (wire.ToolEvent, bool) {
	ev := wire.ToolEvent{ID: it.ID, Status: toolStatus(it.Status)}
	switch it.Type {
	case "commandExecution":
		ev.Kind, ev.Title, ev.Output = wire.ToolCommand, it.Command, it.AggregatedOutput
		ev.Input, _ = json.Marshal(map[string]any{"command": it.Command, "cwd": it.Cwd})
		if it.Status == "completed" && it.ExitCode != nil && *it.ExitCode != 0 {
			ev.Status = wire.ToolFailed
		}
	case "fileChange":
		ev.Kind, ev.Title = wire.ToolEdit, "edit files"
		var diffs []string
		for _, ch := range it.Changes {
			ev.Locations = append(ev.Locations, ch.Path)
			diffs = append(diffs, ch.Diff)
		}
		if len(ev.Locations) > 0 {
			ev.Title = "edit " + strings.Join(ev.Locations, ", ")
		}
		ev.Input, _ = json.Marshal(map[string]any{"changes": it.Changes})
		if ev.Status == wire.ToolCompleted {
			ev.Output = strings.Join(diffs, "\n")
		}
	case "mcpToolCall":
		ev.Kind, ev.Title, ev.Input = wire.ToolOther, it.Server+"."+it.Tool, it.Args
	case "webSearch":
		ev.Kind, ev.Title = wire.ToolSearch, "web search"
	default:
		return ev, false
	}
	return ev, true
}

// Prompt starts a turn and reports its items until turn/completed.
func (c *conn) Prompt(ctx context.Context, text string, sink wire.Sink) (wire.Result, error) {
	c.mu.Lock()
	thread := c.thread
	c.mu.Unlock()
	if thread == "" {
		return wire.Result{}, errors.New("codex app-server: Prompt before Open")
	}
	var res struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if err := c.call(ctx, "turn/start", map[string]any{
		"threadId": thread,
		"input":    []any{map[string]any{"type": "text", "text": text, "text_elements": []any{}}},
	}, &res); err != nil {
		return wire.Result{}, fmt.Errorf("codex app-server: turn/start: %w", err)
	}
	// An approval waits on permCtx, which Cancel ends too.
	permCtx, stop := context.WithCancel(ctx)
	c.mu.Lock()
	c.turn, c.permStop = res.Turn.ID, stop
	c.mu.Unlock()
	defer func() {
		stop()
		c.mu.Lock()
		c.turn, c.permStop = "", nil
		c.mu.Unlock()
	}()
	var reply strings.Builder
	outputs := map[string]string{} // command output so far, by item
	for {
		m, err := c.nextEvent(ctx)
		if err != nil {
			return wire.Result{}, err
		}
		var p struct {
			TurnID string          `json:"turnId"`
			ItemID string          `json:"itemId"`
			Delta  string          `json:"delta"`
			Item   json.RawMessage `json:"item"`
			Turn   struct {
				ID     string `json:"id"`
				Status string `json:"status"`
				Error  *struct {
					Message string `json:"message"`
				} `json:"error"`
			} `json:"turn"`
			Plan []struct {
				Step   string `json:"step"`
				Status string `json:"status"`
			} `json:"plan"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
			WillRetry bool `json:"willRetry"`
		}
		json.Unmarshal(m.Params, &p)
		if m.ID != nil { // a request of the server
			c.answer(permCtx, m, sink)
			continue
		}
		if p.TurnID != "" && res.Turn.ID != "" && p.TurnID != res.Turn.ID {
			continue // a late report of an earlier turn
		}
		switch m.Method {
		case "item/agentMessage/delta":
			reply.WriteString(p.Delta)
			sink.Text(p.Delta)
		case "item/commandExecution/outputDelta":
			outputs[p.ItemID] += p.Delta
			sink.Tool(wire.ToolEvent{ID: p.ItemID, Kind: wire.ToolCommand, Status: wire.ToolInProgress, Output: outputs[p.ItemID]})
		case "item/started", "item/completed":
			var it item
			json.Unmarshal(p.Item, &it)
			if ev, ok := it.tool(); ok {
				if m.Method == "item/started" && ev.Status != wire.ToolInProgress {
					ev.Status = wire.ToolPending
				}
				if ev.Output == "" {
					ev.Output = outputs[it.ID]
				}
				sink.Tool(ev)
			}
		case "turn/plan/updated":
			entries := make([]wire.PlanEntry, 0, len(p.Plan))
			for _, s := range p.Plan {
				st := s.Status
				if st == "inProgress" {
					st = "in_progress"
				}
				entries = append(entries, wire.PlanEntry{Content: s.Step, Status: st})
			}
			sink.Plan(entries)
		case "error":
			if p.Error != nil && !p.WillRetry {
				c.log.Warn("codex app-server: error", "message", p.Error.Message)
				wire.Notify(sink, "error", p.Error.Message)
			}
		case "warning", "configWarning", "deprecationNotice":
			// Codex's own notices: events of their own, never reply text.
			var n struct {
				Message string `json:"message"`
				Summary string `json:"summary"`
				Details string `json:"details"`
			}
			json.Unmarshal(m.Params, &n)
			wire.Notify(sink, "warning", strings.TrimSpace(strings.Join([]string{n.Message, n.Summary, n.Details}, " ")))
		case "turn/completed":
			if p.Turn.ID != "" && res.Turn.ID != "" && p.Turn.ID != res.Turn.ID {
				continue
			}
			switch p.Turn.Status {
			case "interrupted":
				return wire.Result{StopReason: wire.StopCancelled, Reply: reply.String()}, nil
			case "failed":
				msg := "the turn failed"
				if p.Turn.Error != nil {
					msg = p.Turn.Error.Message
				}
				return wire.Result{StopReason: wire.StopFailed, Error: msg, Reply: reply.String()}, nil
			default:
				return wire.Result{StopReason: wire.StopEndTurn, Reply: reply.String()}, nil
			}
		}
	}
}

// Options Codex offers for an approval, as desk's permission options:
// the id is Codex's decision word, answered back verbatim.
var (
	commandOptions = []wire.PermissionOption{
		{ID: "accept", Name: "Allow once", Kind: wire.AllowOnce},
		{ID: "acceptForSession", Name: "Allow for this session", Kind: wire.AllowAlways},
		{ID: "decline", Name: "Decline", Kind: wire.RejectOnce},
	}
	fileOptions = commandOptions
)

// answer answers a request of the server: approvals through the sink,
// anything else refused as not supported.
func (c *conn) answer(ctx context.Context, m message, sink wire.Sink) {
	var p struct {
		ItemID    string          `json:"itemId"`
		Command   json.RawMessage `json:"command"`
		Cwd       string          `json:"cwd"`
		Reason    string          `json:"reason"`
		GrantRoot string          `json:"grantRoot"`
	}
	json.Unmarshal(m.Params, &p)
	var req wire.PermissionRequest
	switch m.Method {
	case "item/commandExecution/requestApproval":
		line := wire.CommandLine(p.Command)
		req = wire.PermissionRequest{ToolCallID: p.ItemID, Title: "Run " + line, Kind: wire.ToolCommand, Input: m.Params, Options: commandOptions,
			Command: line, Cwd: p.Cwd, Reason: p.Reason}
	case "item/fileChange/requestApproval":
		req = wire.PermissionRequest{ToolCallID: p.ItemID, Title: "Change files", Kind: wire.ToolEdit, Input: m.Params, Options: fileOptions,
			Path: p.GrantRoot, Reason: p.Reason}
	default:
		c.write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "desk does not support " + m.Method}})
		return
	}
	ans, err := sink.Permission(ctx, req)
	decision := "cancel"
	if err == nil && !ans.Cancelled {
		decision = "decline"
		for _, o := range req.Options {
			if o.ID == ans.OptionID {
				decision = o.ID
			}
		}
	}
	if err := c.reply(m.ID, map[string]any{"decision": decision}); err != nil {
		c.log.Warn("codex app-server: answering an approval", "err", err)
	}
}

// Cancel asks codex to interrupt the running turn.
func (c *conn) Cancel(ctx context.Context) error {
	c.mu.Lock()
	thread, turn, stop := c.thread, c.turn, c.permStop
	c.mu.Unlock()
	if stop != nil {
		stop()
	}
	if turn == "" {
		return nil
	}
	return c.call(ctx, "turn/interrupt", map[string]any{"threadId": thread, "turnId": turn}, nil)
}

// Close closes the child's stdin, which ends app-server; the host reaps
// the process. It waits for the reader when the child's stdout ends.
func (c *conn) Close() error {
	c.closeOnce.Do(func() { c.stdio.Stdin.Close() })
	return nil
}

var _ io.Closer = (*conn)(nil)
