// Package agent owns desk's one general tool-loop agent: the Executor the
// execution model runs for every message. A turn loads the session's
// model, appends the user's message to the surface's transcript, attaches
// a compact world block (ids and counts, never bodies) to the latest user
// message, and loops — model step, tool calls (approval gate, then
// sandbox), results — until the model stops calling tools, the step limit
// is hit (a loud failure, never a silent truncation) or the turn is
// interrupted. There is no intent classifier and no per-message task
// object: the model decides (PawWork S-R).
//
// It must never put a provider key, an item body or an artifact body into
// the context on its own, and never let a request choose an origin.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/extensions"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/agent/provider/script"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/agent/typescript"
	"github.com/desk-runtime/desk/conversation"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/models"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/selection"
	"github.com/desk-runtime/desk/session"
)

// Options configure the agent.
type Options struct {
	// Models is the operator's model catalog (DESK_MODEL, DESK_MODELS):
	// a turn runs only a model it offers, and its default is the model of
	// a session that names none. nil offers the script model only.
	Models desk.ModelCatalog
	// Providers makes the provider of a non-script model.
	Providers func(spec provider.Spec) (provider.Provider, error)
	// Sandbox runs commands; nil means commands cannot run (except in the
	// full-access mode, which runs them unsandboxed).
	Sandbox sandbox.Runner
	// TypeScript is execute_typescript's toolchain; nil leaves the tool
	// out, and TypeScriptAbsent says why (list_extensions shows it).
	TypeScript       *typescript.Toolchain
	TypeScriptAbsent string
	// MaxSteps bounds the model calls of one turn (default 40).
	MaxSteps int
	// InputWait is how long a blocking request_user_input waits (5m).
	InputWait time.Duration
	HTTP      *http.Client
	Search    func(ctx context.Context, query string, limit int) ([]tools.SearchHit, error)
	Archive   execution.Archiver
	Logger    *slog.Logger
	// Submitter is the execution service (which in turn runs this agent:
	// it is built first and given the agent when it opens); the thread
	// tools wake its dispatcher through it.
	Submitter desk.Submitter
	// Dispatch is the dispatch service the ask tool uses (nil: no ask).
	Dispatch desk.DispatchService
	// Conversation is the gate the agent's turns wait on a person
	// through, shared with the runtime host and the doors (a decision
	// made through the doors wakes the wait at once). nil: the agent makes
	// its own, over its store, archive and Submitter.
	Conversation *conversation.Service
}

// Artifacts is the artifact service the agent's file tools use, with its
// path-addressed door.
type Artifacts interface {
	desk.ArtifactService
	desk.ArtifactPaths
}

// Agent is the executor.
type Agent struct {
	store     Store
	home      layout.Home
	artifacts desk.ArtifactService
	paths     desk.ArtifactPaths
	selection desk.SelectionService
	opts      Options
	log       *slog.Logger
	submit    desk.Submitter
	// bg is the context of background jobs (titles); Close cancels it.
	bg     context.Context
	stopBG context.CancelFunc
	jobs   sync.Mutex // guards closed against wg.Add after Close's Wait
	closed bool
	wg     sync.WaitGroup
	conv   *conversation.Service
	turns  sync.Map // execution id → *turn, the turns this process runs
}

var _ execution.Executor = (*Agent)(nil)

// New returns the agent; Open starts it.
func New(store Store, home layout.Home, artifacts Artifacts, sel desk.SelectionService, opts Options) *Agent {
	if opts.MaxSteps == 0 {
		opts.MaxSteps = 40
	}
	if opts.InputWait == 0 {
		opts.InputWait = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Agent{store: store, home: home, artifacts: artifacts, paths: artifacts, selection: sel, opts: opts, log: opts.Logger, submit: opts.Submitter,
		conv: opts.Conversation}
	if a.conv == nil {
		a.conv = conversation.New(store, conversation.Options{Archive: opts.Archive, Submitter: opts.Submitter, Logger: opts.Logger})
	}
	a.bg, a.stopBG = context.WithCancel(context.Background())
	if opts.Models == nil {
		a.opts.Models = (*models.Catalog)(nil)
	}
	return a
}

// Open is part of the component contract: the agent holds nothing until
// a turn runs (its turns are the execution service's to start and stop).
func (a *Agent) Open(context.Context) error { return nil }

// Close stops the agent's background jobs — a title's model call is
// cancelled and the session keeps the first words of its message as its
// title — and waits for them until ctx ends. It is idempotent.
func (a *Agent) Close(ctx context.Context) error {
	a.jobs.Lock()
	a.closed = true
	a.jobs.Unlock()
	a.stopBG()
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("agent background jobs did not stop: %w", ctx.Err())
	}
}

// background runs fn as a background job, unless the agent is closed.
func (a *Agent) background(fn func(ctx context.Context)) {
	a.jobs.Lock()
	defer a.jobs.Unlock()
	if a.closed {
		return
	}
	a.wg.Go(func() { fn(a.bg) })
}

// modelOf is the model a session runs.
func (a *Agent) modelOf(x *desk.Session) string {
	if x.Model != "" {
		return x.Model
	}
	return a.opts.Models.Default()
}

// Available refuses work for a session that has no model: the submit
// answers 409 naming DESK_MODEL instead of queueing work that cannot run.
func (a *Agent) Available(ctx context.Context, x *desk.Session) error {
	m := a.modelOf(x)
	if m == "" {
		return desk.Errorf(desk.ECONFLICT, "no model is configured for session %s: set DESK_MODEL (openai:<model>, anthropic:<model> or openai-compatible:<base-url>#<model>) and restart desk, or create the session with a \"model\"", x.ID)
	}
	return nil
}

// provider makes the model of a session; th is the handler thread the
// turn runs on (nil on the orchestrator surface), which a script session
// answers from its handlers' steps with the thread's own cursor.
func (a *Agent) provider(ctx context.Context, x *desk.Session, th *desk.Thread, m string) (provider.Provider, provider.Spec, error) {
	if m == "" {
		return nil, provider.Spec{}, fmt.Errorf("no model is configured: set DESK_MODEL")
	}
	spec, err := a.spec(m)
	if err != nil {
		return nil, spec, fmt.Errorf("session %s: %w", x.ID, err)
	}
	if spec.Provider == "script" {
		sa, err := a.store.GetSessionAgent(ctx, x.ID)
		if err != nil {
			return nil, spec, err
		}
		scr, err := script.Parse(sa.Script)
		if err != nil {
			return nil, spec, err
		}
		if th != nil {
			h := scr.Handler(th.Title)
			if h == nil {
				return nil, spec, fmt.Errorf("the script of session %s has no handlers entry for the thread titled %q (%s): add \"handlers\": {%q: [steps]} to the script", x.ID, th.Title, th.ID, th.Title)
			}
			return &script.Provider{Script: h, Cursor: threadCursor{a.store, th.ID}, Session: x.ID + " (handler thread " + th.ID + ")", Refs: a.scriptRefs(x)}, spec, nil
		}
		return &script.Provider{Script: scr, Cursor: cursor{a.store, x.ID}, Session: x.ID, Refs: a.scriptRefs(x)}, spec, nil
	}
	p, err := a.providerOf(spec)
	return p, spec, err
}

// spec is the declared spec of a model reference. A session keeps the
// model it was created with; when the operator no longer declares it, its
// turns fail here, naming the models that are, before any request leaves
// desk.
func (a *Agent) spec(model string) (provider.Spec, error) {
	m, err := a.opts.Models.Resolve(model)
	if err != nil {
		return provider.Spec{}, errors.New(desk.ErrorMessage(err))
	}
	return provider.ParseSpec(m)
}

// providerOf makes the provider of a declared spec.
func (a *Agent) providerOf(spec provider.Spec) (provider.Provider, error) {
	if a.opts.Providers == nil {
		return nil, fmt.Errorf("no provider for %s", spec)
	}
	return a.opts.Providers(spec)
}

// scriptRefs resolves a script's {{thread:<title>}} and
// {{thread_group:<title>}} placeholders against x's threads: the latest
// thread with that title.
func (a *Agent) scriptRefs(x *desk.Session) func(ctx context.Context, kind, title string) (string, error) {
	return func(ctx context.Context, kind, title string) (string, error) {
		ts, err := a.store.ListThreads(ctx, x.ID, "")
		if err != nil {
			return "", err
		}
		for i := len(ts) - 1; i >= 0; i-- {
			if ts[i].Title == title {
				if kind == "thread_group" {
					return ts[i].GroupID, nil
				}
				return ts[i].ID, nil
			}
		}
		return "", fmt.Errorf("session %s has no thread titled %q yet", x.ID, title)
	}
}

// cursor is the durable script cursor of a session.
type cursor struct {
	store Store
	id    string
}

func (c cursor) Next(ctx context.Context) (int, error) { return c.store.NextScriptStep(ctx, c.id) }

// threadCursor is the durable script cursor of a handler thread.
type threadCursor struct {
	store Store
	id    string
}

func (c threadCursor) Next(ctx context.Context) (int, error) {
	return c.store.NextThreadScriptStep(ctx, c.id)
}

// threadOf is the handler thread of a surface of x, or nil for the
// orchestrator surface.
func (a *Agent) threadOf(ctx context.Context, x *desk.Session, surface string) (*desk.Thread, error) {
	if surface == "" || surface == x.SurfaceID {
		return nil, nil
	}
	th, err := a.store.ThreadBySurface(ctx, surface)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, nil // a handler surface without a thread row (none are made so)
	}
	return th, err
}

// wake is the dispatcher's Waker, when the Submitter is one (the execution
// service is both).
func (a *Agent) dispatchWaker() func() {
	if w, ok := a.submit.(desk.Waker); ok {
		return w.Wake
	}
	return nil
}

// turn is one execution's working state.
type turn struct {
	a        *Agent
	t        *execution.Turn
	x        *desk.Session
	w        *desk.Workspace
	settings *desk.AgentSettings
	prov     provider.Provider
	spec     provider.Spec
	effort   string            // the reasoning effort asked of the model
	prof     *desk.ProfileSpec // the profile the surface runs (nil: none)
	jail     *fsjail.Jail
	view     session.View
	env      *tools.Env
	waits    *conversation.Gate // approvals, questions and plan cards
	ctx      context.Context    // carries the agent principal
	forced   bool               // /plan: a plan card must come first
	// instructions are the checkout's AGENTS.md / CLAUDE.md, read once at
	// the start of the turn (instructions.go).
	instructions []extensions.Instruction

	// Tool calls of one step run side by side, and GET …/context reads
	// the plan of a running turn: mu guards what they share.
	mu      sync.Mutex
	plan    json.RawMessage // pinned after approval
	planned bool            // a plan card was approved this turn
	stopped string          // why the turn stops after this step (a declined plan)
}

// planState is the pinned plan and whether a forced plan card is still
// owed.
func (tr *turn) planState() (json.RawMessage, bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.plan, tr.forced && !tr.planned
}

// Execute runs one turn.
func (a *Agent) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	x := t.Session
	th, err := a.threadOf(ctx, x, t.Execution.SurfaceID)
	if err != nil {
		return nil, err
	}
	prof, err := a.profileOf(ctx, x, th)
	if err != nil {
		return nil, err
	}
	model, effort := a.agentOf(x, prof, th)
	if err := a.checkEffort(model, effort); err != nil {
		return nil, fmt.Errorf("session %s: %w", x.ID, err)
	}
	prov, spec, err := a.provider(ctx, x, th, model)
	if err != nil {
		return nil, err
	}
	w, err := a.store.GetWorkspace(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	settings, err := a.store.GetAgentSettings(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if prof != nil && prof.ApprovalMode != "" {
		// The profile's approval mode holds for its sessions' turns.
		s := *settings
		s.ApprovalMode = prof.ApprovalMode
		settings = &s
	}
	groups, err := a.store.ListBindings(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	view := session.View{Session: x, Execution: t.Execution.ID, HostPaths: w.HostPaths, GitWritable: settings.GitWritable}
	for _, g := range groups {
		view.GroupIDs = append(view.GroupIDs, g.ID)
	}
	jail, err := fsjail.New(session.Mounts(a.home, view))
	if err != nil {
		return nil, err
	}
	defer jail.Close()
	// The agent acts as the session's actor, and everything it writes is
	// stamped as the execution's.
	actx := desk.WithPrincipal(ctx, desk.Principal{WorkspaceID: x.WorkspaceID, ActorID: x.Actor, ActorKind: desk.ActorAgent})
	actx = desk.WithOrigin(actx, desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, ExecutionID: t.Execution.ID,
		SurfaceID: t.Execution.SurfaceID, Actor: x.Actor, Kind: desk.OriginAgent})
	tr := &turn{a: a, t: t, x: x, w: w, settings: settings, prov: prov, spec: spec, effort: effort, prof: prof, jail: jail, view: view, ctx: actx,
		instructions: readInstructions(jail, w, settings), waits: a.conv.Gate(t, conversation.GateOptions{Resumes: true})}
	tr.env = &tools.Env{Store: a.store, Home: a.home, Workspace: w, Session: x, Execution: t.Execution, Settings: settings,
		View: view, Jail: jail, Artifacts: a.artifacts, Paths: a.paths, Selection: a.selection, Sandbox: a.opts.Sandbox,
		TypeScript: a.opts.TypeScript, TypeScriptAbsent: a.opts.TypeScriptAbsent,
		HTTP: a.opts.HTTP, Search: a.opts.Search, Emit: t.Emit, Ask: tr.ask, Propose: tr.propose,
		Procs: tools.NewProcs(actx), Submit: a.submit, Dispatch: a.opts.Dispatch, SurfaceKind: desk.SurfaceOrchestrator, Thread: th, Wake: a.dispatchWaker()}
	if th != nil {
		tr.env.SurfaceKind = desk.SurfaceHandler
	}

	// Long-running command sessions die, with their process trees, when
	// the turn settles (an interrupt ends them through actx already).
	defer tr.env.Procs.Close()
	a.turns.Store(t.Execution.ID, tr)
	defer a.turns.Delete(t.Execution.ID)
	out, err := a.run(tr)
	// A suspended turn keeps what it holds for the process that continues it.
	if !errors.Is(err, execution.ErrSuspended) {
		tr.release()
	}
	return out, err
}

// run starts the turn, or continues one a dead desk process left waiting
// on a person.
func (a *Agent) run(tr *turn) (*execution.Outcome, error) {
	t, x := tr.t, tr.x
	if err := t.Started(); err != nil {
		return nil, err
	}
	text := t.Item.Text
	tr.forced = strings.HasPrefix(strings.TrimSpace(text), "/plan")
	tr.env.ForcePlan = tr.forced
	if t.Resumed {
		return tr.resume()
	}
	user := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: t.Execution.SurfaceID, ExecutionID: t.Execution.ID,
		Role: desk.RoleUser, Text: text, CreatedAt: desk.Now()}
	if t.Item.EditOf != "" {
		// Edit and resend: the revised message starts a new branch from
		// the original's parent, so this turn (and every later one) sees
		// neither the original nor what answered it.
		orig, err := a.store.GetMessage(tr.ctx, t.Item.EditOf)
		if err != nil {
			return nil, err
		}
		user.EditOf, user.ParentID = orig.ID, orig.ParentID
	}
	if err := a.store.AppendMessage(tr.ctx, user); err != nil {
		return nil, err
	}
	if user.Seq == 1 && t.Execution.SurfaceID == x.SurfaceID {
		a.startTitle(x, text, tr.prov, tr.spec)
	}
	return tr.loop(0)
}

// release frees what the turn held: its leases (items only it kept alive
// are collected now, S-O).
func (tr *turn) release() {
	ctx := context.Background()
	if err := tr.a.store.ReleaseLeases(ctx, tr.t.Execution.ID); err != nil {
		tr.a.log.Error("release leases", "err", err, "execution_id", tr.t.Execution.ID)
		return
	}
	items, err := tr.a.store.ListUnreachableItems(ctx, tr.x.WorkspaceID)
	if err != nil {
		tr.a.log.Error("list unreachable items", "err", err)
		return
	}
	for _, it := range items {
		if _, err := selection.Collect(ctx, tr.a.store, tr.a.home, it); err != nil {
			tr.a.log.Error("collect item", "err", err, "item", it.ID)
		}
	}
}

// loop runs model steps until the model stops calling tools; step is the
// number of steps the turn already took.
func (tr *turn) loop(step int) (*execution.Outcome, error) {
	for ; ; step++ {
		if step >= tr.a.opts.MaxSteps {
			return nil, fmt.Errorf("the turn reached the limit of %d model steps and the model still asked for tools; nothing was cut short silently — raise the limit or ask for less per message", tr.a.opts.MaxSteps)
		}
		req, err := tr.request()
		if err != nil {
			return nil, err
		}
		deltas := newCoalescer(50*time.Millisecond, func(s string) { tr.t.Emit("assistant.delta", map[string]any{"text": s}) })
		// Reasoning streams as events of its own, never as reply text.
		thoughts := newCoalescer(50*time.Millisecond, func(s string) { tr.t.Emit("assistant.reasoning", map[string]any{"text": s}) })
		var streamed strings.Builder // what the user saw, kept if the step is cut short
		resp, err := tr.prov.Stream(tr.ctx, req, func(ev provider.Event) {
			switch ev.Type {
			case provider.EventReasoning:
				thoughts.add(ev.Text)
			case provider.EventText:
				thoughts.flush()
				streamed.WriteString(ev.Text)
				deltas.add(ev.Text)
			case provider.EventToolCallStart:
				thoughts.flush()
				deltas.flush()
				tr.t.Emit("tool.call_started", map[string]any{"index": ev.Index, "call_id": ev.ToolCallID, "tool": ev.Name})
			case provider.EventToolCallDelta:
				tr.t.Emit("tool.args_delta", map[string]any{"index": ev.Index, "delta": ev.ArgsDelta})
			}
		})
		thoughts.flush()
		deltas.flush()
		if err != nil {
			if tr.ctx.Err() != nil && streamed.Len() > 0 {
				return tr.partial(streamed.String(), err)
			}
			return nil, err
		}
		if err := tr.recordUsage(resp); err != nil {
			return nil, err
		}
		calls := make([]desk.MessageCall, 0, len(resp.ToolCalls))
		for _, c := range resp.ToolCalls {
			calls = append(calls, desk.MessageCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
		}
		// The step is durable before any of its calls runs: a turn that
		// waits in one of them continues from here after a restart,
		// without asking the model again.
		msg := &desk.Message{ID: desk.NewID("msg"), SessionID: tr.x.ID, SurfaceID: tr.t.Execution.SurfaceID, ExecutionID: tr.t.Execution.ID,
			Role: desk.RoleAssistant, Text: resp.Text, ToolCalls: calls, CreatedAt: desk.Now()}
		if len(resp.Reasoning) > 0 {
			rs := make([]desk.MessageReasoning, 0, len(resp.Reasoning))
			for _, r := range resp.Reasoning {
				rs = append(rs, desk.MessageReasoning{Type: r.Type, Text: r.Text, Signature: r.Signature, Data: r.Data})
			}
			msg.SetReasoning(rs)
		}
		if err := tr.a.store.AppendMessage(tr.ctx, msg); err != nil {
			return nil, err
		}
		tr.t.Emit("assistant.message", map[string]any{"message_id": msg.ID, "text": resp.Text, "tool_calls": len(calls), "usage": resp.Usage,
			"reasoning": len(resp.Reasoning) > 0})
		if len(calls) == 0 {
			return &execution.Outcome{Reply: resp.Text}, nil
		}
		if out, err := tr.step(msg, nil); out != nil || err != nil {
			return out, err
		}
	}
}

// partial keeps the text a step streamed before an interrupt cut it
// short: an assistant message marked interrupted (no tool calls: a call
// whose arguments were still streaming never ran), which the UI, the CLI,
// the next turn's request and the archive (the outcome's reply) all see.
// err is the stream's error, returned as it was so the execution settles
// interrupted.
func (tr *turn) partial(text string, err error) (*execution.Outcome, error) {
	ctx := context.WithoutCancel(tr.ctx)
	msg := &desk.Message{ID: desk.NewID("msg"), SessionID: tr.x.ID, SurfaceID: tr.t.Execution.SurfaceID, ExecutionID: tr.t.Execution.ID,
		Role: desk.RoleAssistant, Text: text, CreatedAt: desk.Now()}
	conversation.MarkInterrupted(ctx, tr.a.store, msg, tr.t.Execution.ID)
	if aerr := tr.a.store.AppendMessage(ctx, msg); aerr != nil {
		tr.a.log.Error("keep the interrupted step's text", "err", aerr, "execution_id", tr.t.Execution.ID)
		return nil, err
	}
	tr.t.Emit("assistant.message", map[string]any{"message_id": msg.ID, "text": text, "tool_calls": 0, "interrupted": msg.Interrupted()})
	return &execution.Outcome{Reply: text}, err
}

// step runs the tool calls of the assistant message msg and appends their
// results; cmds are the calls' records when the step resumes after a
// restart (nil for a new step). It returns an outcome when the turn ends
// after this step.
func (tr *turn) step(msg *desk.Message, cmds []*desk.Command) (*execution.Outcome, error) {
	calls := msg.ToolCalls
	results, stop, err := tr.runCalls(calls, cmds)
	if err != nil {
		return nil, err
	}
	for i, r := range results {
		tm := &desk.Message{ID: desk.NewID("msg"), SessionID: tr.x.ID, SurfaceID: tr.t.Execution.SurfaceID, ExecutionID: tr.t.Execution.ID,
			Role: desk.RoleTool, Text: r.Text, ToolCallID: calls[i].ID, ToolName: calls[i].Name, IsError: r.IsError, CreatedAt: desk.Now()}
		if err := tr.a.store.AppendMessage(tr.ctx, tm); err != nil {
			return nil, err
		}
	}
	if stop != "" {
		return &execution.Outcome{Reply: strings.TrimSpace(msg.Text + "\n\n(" + stop + ")")}, nil
	}
	return nil, nil
}

// runCalls runs one step's tool calls side by side and returns their
// results in call order. Every call gets its command record (requested)
// before any of them runs, so a call that waits shows as soon as the step
// is known. A resumed step passes the records it has: a call whose record
// holds its result is not run again.
func (tr *turn) runCalls(calls []desk.MessageCall, cmds []*desk.Command) ([]*desk.CommandResult, string, error) {
	exe := tr.t.Execution
	if cmds == nil {
		cmds = make([]*desk.Command, len(calls))
		for i, c := range calls {
			cmds[i] = &desk.Command{ID: desk.NewID("cmd"), ExecutionID: exe.ID, SessionID: tr.x.ID, SurfaceID: exe.SurfaceID, CallID: c.ID,
				Tool: c.Name, Arguments: normJSON(c.Arguments), Status: desk.CommandRequested, CreatedAt: desk.Now()}
			if err := tr.a.store.CreateCommand(tr.ctx, cmds[i]); err != nil {
				return nil, "", err
			}
		}
	}
	results := make([]*desk.CommandResult, len(calls))
	errs := make([]error, len(calls))
	for i, cmd := range cmds {
		results[i] = cmd.Result
	}
	run := func(i int) { results[i], errs[i] = tr.runCall(cmds[i], calls[i]) }
	// A plan card comes first when /plan asked for one: other calls of the
	// same step wait for its decision (and are refused without one).
	var wg sync.WaitGroup
	first := map[int]bool{}
	if _, owed := tr.planState(); owed {
		for i, c := range calls {
			if c.Name == "clarify" {
				first[i] = true
				if results[i] == nil {
					wg.Go(func() { run(i) })
				}
			}
		}
		wg.Wait()
		if err := firstErr(errs); err != nil {
			if errors.Is(err, execution.ErrSuspended) {
				return nil, "", err // the others wait with the plan
			}
			// The calls that waited never run.
			for i, cmd := range cmds {
				if !first[i] && results[i] == nil {
					t := desk.Now()
					cmd.Status, cmd.FinishedAt = desk.CommandCancelled, &t
					if uerr := tr.a.store.UpdateCommand(context.WithoutCancel(tr.ctx), cmd); uerr != nil {
						tr.a.log.Error("cancel command", "err", uerr, "command_id", cmd.ID)
					}
				}
			}
			return nil, "", err
		}
	}
	for i := range calls {
		if !first[i] && results[i] == nil {
			wg.Go(func() { run(i) })
		}
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, "", err
	}
	stop := ""
	for _, r := range results {
		if r.Stop != "" {
			stop = r.Stop
		}
	}
	return results, stop, nil
}

// firstErr is the error a step ends with: a suspension wins (the waits are
// kept for the next process), else the first error in call order.
func firstErr(errs []error) error {
	var first error
	for _, err := range errs {
		if errors.Is(err, execution.ErrSuspended) {
			return err
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// maxOutput bounds a command record's output.
const maxOutput = 64 << 10

// runCall runs one tool call whose record cmd is requested (or, in a
// resumed step, waiting).
func (tr *turn) runCall(cmd *desk.Command, c desk.MessageCall) (*desk.CommandResult, error) {
	ctx := tr.ctx
	exe := tr.t.Execution
	finish := func(r *tools.Result, status string) (*desk.CommandResult, error) {
		t := desk.Now()
		cmd.FinishedAt, cmd.Status = &t, status
		if r != nil {
			cmd.Output = clip(r.Output, maxOutput)
			if r.Facts != nil {
				cmd.Facts, _ = json.Marshal(r.Facts)
			}
			cmd.Artifacts = r.Artifacts
			if r.Code != "" {
				cmd.Error = r.Code + ": " + r.Message
			}
			cmd.Result = &desk.CommandResult{Text: r.JSON(), IsError: r.Code != "", Stop: r.Stop}
		}
		if err := tr.a.store.UpdateCommand(context.WithoutCancel(tr.ctx), cmd); err != nil {
			return nil, err
		}
		return cmd.Result, nil
	}
	tool := tools.ByName(c.Name)
	if tool != nil && !toolAllowed(tr.prof, c.Name) {
		return finish(tools.Fail(tools.CodeBadInput, "the tool %q is not in this session's profile", c.Name), desk.CommandFailed)
	}
	if tool == nil {
		return finish(tools.Fail(tools.CodeBadInput, "there is no tool named %q", c.Name), desk.CommandFailed)
	}
	tr.mu.Lock()
	stopped := tr.stopped
	tr.mu.Unlock()
	if stopped != "" {
		return finish(tools.Fail(tools.CodeDeclined, "not run: %s", stopped), desk.CommandDeclined)
	}
	if _, owed := tr.planState(); owed && c.Name != "clarify" {
		return finish(tools.Fail(tools.CodeBadInput, "the user asked for a plan first (/plan): call clarify with a plan before other tools"), desk.CommandFailed)
	}
	cctx := desk.WithOrigin(ctx, desk.Origin{WorkspaceID: tr.x.WorkspaceID, SessionID: tr.x.ID, ExecutionID: exe.ID,
		SurfaceID: exe.SurfaceID, CommandID: cmd.ID, Actor: tr.x.Actor, Kind: desk.OriginAgent})
	gated, summary := tool.Gate(tr.env, c.Arguments)
	if pc, ok := tool.(tools.Prechecker); ok && gated {
		// Refused before anyone is asked (a snippet with type errors).
		res, err := pc.Precheck(cctx, tr.env, &tools.Call{CommandID: cmd.ID, Args: c.Arguments})
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				finish(nil, desk.CommandCancelled)
				return nil, err
			}
			cmd.Error = err.Error()
			finish(nil, desk.CommandFailed)
			return nil, fmt.Errorf("tool %s: %w", c.Name, err)
		}
		if res != nil {
			return finish(res, desk.CommandFailed)
		}
	}
	if gated {
		ok, why, err := tr.gate(cmd, summary)
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, execution.ErrSuspended) {
				finish(nil, desk.CommandCancelled)
			}
			return nil, err
		}
		if !ok {
			return finish(tools.Fail(tools.CodeDeclined, "declined: %s", why), desk.CommandDeclined)
		}
	}
	t := desk.Now()
	cmd.Status, cmd.StartedAt = desk.CommandRunning, &t
	if err := tr.a.store.UpdateCommand(ctx, cmd); err != nil {
		return nil, err
	}
	// One coalescer per stream, so each tool.output event is labelled
	// stdout or stderr.
	streamOut := func(stream string) *coalescer {
		return newCoalescer(100*time.Millisecond, func(s string) {
			tr.t.Emit("tool.output", map[string]any{"command_id": cmd.ID, "stream": stream, "text": s})
		})
	}
	stdout, stderr := streamOut(sandbox.StreamStdout), streamOut(sandbox.StreamStderr)
	output := func(stream string, chunk []byte) {
		if stream == sandbox.StreamStderr {
			stderr.add(string(chunk))
		} else {
			stdout.add(string(chunk))
		}
	}
	res, err := tool.Run(cctx, tr.env, &tools.Call{CommandID: cmd.ID, Args: c.Arguments, Output: output})
	stdout.flush()
	stderr.flush()
	if err != nil {
		if errors.Is(err, execution.ErrSuspended) {
			// The call waits on a person (a question, a plan): its record
			// and its request stay as they are for the next process.
			return nil, err
		}
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			finish(nil, desk.CommandCancelled)
			return nil, err
		}
		cmd.Error = err.Error()
		finish(nil, desk.CommandFailed)
		return nil, fmt.Errorf("tool %s: %w", c.Name, err)
	}
	if res.Stop != "" {
		tr.mu.Lock()
		tr.stopped = res.Stop
		tr.mu.Unlock()
	}
	status := desk.CommandSucceeded
	if res.Code != "" {
		status = desk.CommandFailed
	}
	return finish(res, status)
}

func normJSON(b json.RawMessage) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		return json.RawMessage(`{}`)
	}
	return b
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[… truncated]"
}
