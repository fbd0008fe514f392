package agent

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/extensions"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/session"
)

// declarations are the tools a step declares: every built-in tool but
// the optional ones that cannot work here (tools.Declared).
func declarations(env *tools.Env) []provider.Tool {
	var out []provider.Tool
	for _, t := range tools.Declared(env) {
		out = append(out, provider.Tool{Name: t.Name(), Description: t.Description(), Parameters: t.Schema()})
	}
	return out
}

// stepInput is what a step's request is built from besides what the store
// holds (transcript, bindings, loaded skills).
type stepInput struct {
	surface  string
	plan     json.RawMessage // the pinned plan, if any
	forced   bool            // a /plan card is still owed
	model    string
	window   int
	settings *desk.AgentSettings
	// jail is the guest file system loaded skills are read through;
	// instructions are the external instruction files, read at the start
	// of the turn.
	jail         *fsjail.Jail
	instructions []extensions.Instruction
	// workspace names the primary root the prompt marks as the active
	// project.
	workspace *desk.Workspace
	// profile is the profile the surface runs (its instructions and tool
	// set); effort the reasoning effort asked of the model.
	profile *desk.ProfileSpec
	effort  string
}

// assembled is one model request and what went into it.
type assembled struct {
	req    provider.Request
	world  World
	loaded []*desk.LoadedExtension
}

// assemble builds the request of a surface's next step: the system prompt
// (fixed parts, then the surface's binding: identity, external
// instructions, loaded skills, plan), the transcript, and the world block
// attached to the latest user message only (never stored). The world
// holds ids, names and counts, so its size does not grow with the number
// of artifacts or items (S-Q).
func (a *Agent) assemble(ctx context.Context, x *desk.Session, in stepInput) (*assembled, error) {
	ms, err := a.recentMessages(ctx, in.surface, in.window)
	if err != nil {
		return nil, err
	}
	groups, err := a.store.ListBindings(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	n, err := a.store.CountArtifacts(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	sa, err := a.store.GetSessionAgent(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	skills, loaded, err := a.loadedSkills(ctx, in.jail, in.surface)
	if err != nil {
		return nil, err
	}
	th, err := a.threadOf(ctx, x, in.surface)
	if err != nil {
		return nil, err
	}
	w := worldOf(groups, sa.Focus, n)
	id := tools.IdentityOf(x, in.surface)
	env := a.toolEnv(in.settings)
	if th != nil {
		id.ThreadID, env.SurfaceKind = th.ID, desk.SurfaceHandler
	}
	b := Binding{Identity: id, PrimaryRoot: session.PrimaryRoot(in.workspace), Thread: th, Instructions: in.instructions, Skills: skills,
		Plan: in.plan, ForcePlan: in.forced}
	if in.profile != nil {
		b.ProfileInstructions = in.profile.Instructions
	}
	system := SystemPrompt(b)
	req := provider.Request{Model: in.model, System: system, Tools: allowTools(in.profile, declarations(env)), ReasoningEffort: in.effort}
	// Markers record changes of the session's agent for people; no model
	// reads them.
	ms = slices.DeleteFunc(ms, func(m *desk.Message) bool { return m.Role == desk.RoleMarker })
	ms, err = a.answerDangling(ctx, ms)
	if err != nil {
		return nil, err
	}
	msgs := toProvider(ms)
	msgs = fitWindow(msgs, req.System, in.window)
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == provider.RoleUser {
			msgs[i].Content = msgs[i].Content + "\n\n" + w.Block()
			break
		}
	}
	req.Messages = msgs
	return &assembled{req: req, world: w, loaded: loaded}, nil
}

// pageSize is how many messages one read of the transcript takes.
const pageSize = 200

// recentMessages reads the transcript back from the newest message, a page
// at a time, only until it holds more than the window could take: a long
// conversation costs the step what the model can see, not its whole
// history. It starts the result at a user message, so an exchange is never
// cut in the middle (fitWindow then trims to the budget exactly).
func (a *Agent) recentMessages(ctx context.Context, surface string, window int) ([]*desk.Message, error) {
	var ms []*desk.Message
	tokens := 0
	before := int64(0)
	for {
		page, err := a.store.ListMessages(ctx, surface, before, pageSize)
		if err != nil {
			return nil, err
		}
		ms = append(page, ms...)
		if len(page) < pageSize {
			return ms, nil // the whole transcript
		}
		before = page[0].Seq
		for _, m := range page {
			tokens += estimateTokens(m.Text)
			for _, c := range m.ToolCalls {
				tokens += estimateTokens(string(c.Arguments))
			}
		}
		if window > 0 && tokens > window {
			for i, m := range ms {
				if m.Role == desk.RoleUser {
					return ms[i:], nil
				}
			}
			// No user message yet: one exchange bigger than the window;
			// keep reading back to its start.
		}
	}
}

// Messages of synthesized tool results.
const (
	resultDeclined    = "declined by the user"
	resultInterrupted = "interrupted: outcome unknown"
)

// answerDangling gives every tool call of the transcript a result, right
// after the results it has. A call loses its result when its turn was
// interrupted while the call waited or ran, when desk died mid-step, or
// when a declined call's result was never written; every provider refuses
// a history with an unanswered call (HTTP 400), so without this one lost
// result would fail every later turn of the surface. The synthesized
// result comes from the call's command record: "declined by the user"
// when it was declined, else "interrupted: outcome unknown" (the model
// must check before it repeats a call that may have had effects). A tool
// result whose call is not in the history is dropped for the same reason.
func (a *Agent) answerDangling(ctx context.Context, ms []*desk.Message) ([]*desk.Message, error) {
	// One pass to see whether anything needs repair (the usual case is
	// that nothing does, and then no command record is read).
	var exes []string
	broken := false
	var open []desk.MessageCall
	answered := map[string]bool{}
	closeGroup := func(m *desk.Message) {
		for _, c := range open {
			if !answered[c.ID] {
				broken = true
				if m != nil && m.ExecutionID != "" && !slices.Contains(exes, m.ExecutionID) {
					exes = append(exes, m.ExecutionID)
				}
			}
		}
	}
	var owner *desk.Message // the assistant message whose results follow
	for _, m := range ms {
		if m.Role == desk.RoleTool {
			if !hasCall(open, m.ToolCallID) || answered[m.ToolCallID] {
				broken = true
			}
			answered[m.ToolCallID] = true
			continue
		}
		closeGroup(owner)
		owner, open, answered = nil, nil, map[string]bool{}
		if m.Role == desk.RoleAssistant && len(m.ToolCalls) > 0 {
			owner, open = m, m.ToolCalls
		}
	}
	closeGroup(owner)
	if !broken {
		return ms, nil
	}
	byCall := map[string]*desk.Command{}
	if len(exes) > 0 {
		cmds, err := a.store.ListCommands(ctx, exes)
		if err != nil {
			return nil, err
		}
		for _, c := range cmds {
			byCall[c.ExecutionID+"/"+c.CallID] = c
		}
	}
	out := make([]*desk.Message, 0, len(ms)+1)
	flush := func() {
		for _, c := range open {
			if answered[c.ID] {
				continue
			}
			text := resultInterrupted
			code := "INTERRUPTED"
			if cmd := byCall[owner.ExecutionID+"/"+c.ID]; cmd != nil && cmd.Status == desk.CommandDeclined {
				text, code = resultDeclined, tools.CodeDeclined
			}
			out = append(out, &desk.Message{SessionID: owner.SessionID, SurfaceID: owner.SurfaceID, ExecutionID: owner.ExecutionID,
				Role: desk.RoleTool, Text: tools.Fail(code, "%s", text).JSON(), ToolCallID: c.ID, ToolName: c.Name, IsError: true,
				CreatedAt: owner.CreatedAt})
		}
	}
	owner, open, answered = nil, nil, map[string]bool{}
	for _, m := range ms {
		if m.Role == desk.RoleTool {
			if hasCall(open, m.ToolCallID) && !answered[m.ToolCallID] {
				answered[m.ToolCallID] = true
				out = append(out, m)
			}
			continue
		}
		if owner != nil {
			flush()
		}
		owner, open, answered = nil, nil, map[string]bool{}
		out = append(out, m)
		if m.Role == desk.RoleAssistant && len(m.ToolCalls) > 0 {
			owner, open = m, m.ToolCalls
		}
	}
	if owner != nil {
		flush()
	}
	return out, nil
}

func hasCall(calls []desk.MessageCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// toProvider maps the stored transcript to provider messages.
func toProvider(ms []*desk.Message) []provider.Message {
	out := make([]provider.Message, 0, len(ms))
	for _, m := range ms {
		pm := provider.Message{Role: m.Role, Content: m.Text}
		switch m.Role {
		case desk.RoleAssistant:
			if in := m.Interrupted(); in != nil {
				pm.Content = m.Text + "\n\n" + desk.InterruptedNote(in)
			}
			for _, c := range m.ToolCalls {
				pm.ToolCalls = append(pm.ToolCalls, provider.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
			}
			for _, r := range m.Reasoning() {
				pm.Reasoning = append(pm.Reasoning, provider.Reasoning{Type: r.Type, Text: r.Text, Signature: r.Signature, Data: r.Data})
			}
		case desk.RoleTool:
			pm.ToolCallID, pm.Name, pm.IsError = m.ToolCallID, m.ToolName, m.IsError
		}
		out = append(out, pm)
	}
	return out
}

// fitWindow drops the oldest exchanges while the request would fill more
// than 80 % of the model's window, always cutting at a user message so a
// tool call never loses its result.
func fitWindow(msgs []provider.Message, system string, window int) []provider.Message {
	if window <= 0 {
		return msgs
	}
	budget := window * 8 / 10
	size := func(ms []provider.Message) int {
		n := estimateTokens(system)
		for _, m := range ms {
			n += estimateTokens(m.Content)
			for _, c := range m.ToolCalls {
				n += estimateTokens(string(c.Arguments))
			}
		}
		return n
	}
	for size(msgs) > budget {
		cut := -1
		for i := 1; i < len(msgs); i++ {
			if msgs[i].Role == provider.RoleUser {
				cut = i
				break
			}
		}
		if cut < 0 {
			break // one exchange left: send it whole
		}
		msgs = msgs[cut:]
	}
	return msgs
}

// request is the turn's next model request.
func (tr *turn) request() (provider.Request, error) {
	plan, owed := tr.planState()
	as, err := tr.a.assemble(tr.ctx, tr.x, stepInput{surface: tr.t.Execution.SurfaceID, plan: plan, forced: owed, model: tr.spec.Model,
		window: tr.prov.ContextWindow(tr.spec.Model), settings: tr.settings, jail: tr.jail, instructions: tr.instructions, workspace: tr.w,
		profile: tr.prof, effort: tr.effort})
	if err != nil {
		return provider.Request{}, err
	}
	return as.req, nil
}

// ContextView, Budget, World and WorldGroup are the root's wire types
// (see desk.ContextView): the doors show them without linking the agent.
type (
	ContextView = desk.ContextView
	Budget      = desk.ContextBudget
	World       = desk.World
	WorldGroup  = desk.WorldGroup
)

// Context shows what the next turn of a surface would send.
func (a *Agent) Context(ctx context.Context, x *desk.Session, surface string) (*ContextView, error) {
	if surface == "" {
		surface = x.SurfaceID
	}
	model := a.modelOf(x)
	window := 128000
	var spec provider.Spec
	if model != "" {
		if s, err := a.spec(model); err == nil {
			spec = s
			if s.Provider != "script" && a.opts.Providers != nil {
				if p, err := a.providerOf(s); err == nil {
					window = p.ContextWindow(s.Model)
				}
			}
		}
	}
	w, err := a.store.GetWorkspace(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	settings, err := a.store.GetAgentSettings(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	jail, err := a.guestJail(ctx, x, w)
	if err != nil {
		return nil, err
	}
	defer jail.Close()
	in := stepInput{surface: surface, model: spec.Model, window: window, settings: settings, jail: jail, workspace: w}
	// While a turn of this surface runs here, its next step carries the
	// turn's pinned plan (or its owed /plan card) and the instructions it
	// read when it started: show those. Otherwise the next turn reads the
	// instructions afresh, as here.
	running := false
	if cur, err := a.store.ActiveExecution(ctx, surface); err == nil && cur != nil {
		if tr, ok := a.turns.Load(cur.ID); ok {
			in.plan, in.forced = tr.(*turn).planState()
			in.instructions, running = tr.(*turn).instructions, true
		}
	}
	if !running {
		in.instructions = readInstructions(jail, w, settings)
	}
	as, err := a.assemble(ctx, x, in)
	if err != nil {
		return nil, err
	}
	v := &ContextView{Model: model, SystemPrompt: as.req.System, World: as.world, WorldBlock: as.world.Block(), Messages: len(as.req.Messages),
		ExternalInstructions: in.instructions, LoadedExtensions: as.loaded, AbsentTools: tools.Absent(a.toolEnv(settings))}
	if v.ExternalInstructions == nil {
		v.ExternalInstructions = []extensions.Instruction{}
	}
	if v.LoadedExtensions == nil {
		v.LoadedExtensions = []*desk.LoadedExtension{}
	}
	if v.Model == "" {
		v.Model = "(none: set DESK_MODEL)"
	}
	parts := []string{as.req.System}
	for _, t := range as.req.Tools {
		v.Tools = append(v.Tools, t.Name)
		parts = append(parts, t.Description, string(t.Parameters))
	}
	for _, m := range as.req.Messages {
		parts = append(parts, m.Content)
		for _, c := range m.ToolCalls {
			parts = append(parts, string(c.Arguments))
		}
	}
	if len(as.req.Messages) == 0 {
		parts = append(parts, v.WorldBlock)
	}
	used := estimateTokens(parts...)
	pct := percent(used, window)
	v.Budget = a.reportedBudget(ctx, surface, Budget{UsedTokens: used, Window: window, Percent: pct, Level: budgetLevel(pct)})
	return v, nil
}
