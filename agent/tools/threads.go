package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
)

// Thread tools (svvy's native control tools). The orchestrator delegates
// with thread_start, steers with thread_followup and thread_request_report
// and reads rows and episodes with thread_list and thread_episodes; a
// handler reads its objective and group with thread_current and
// thread_group and hands results back with thread_report. Each is declared
// only on the surface it belongs to; a call on the other kind of surface
// is a result that says why. Every write is one store transaction with its
// queue rows, and the dispatcher is woken after it commits.

// Limits of the thread tools' text arguments.
const (
	maxThreads      = 8
	maxThreadTitle  = 200
	maxThreadText   = 64 << 10
	maxForkedBlock  = 32 << 10
	threadChannel   = "thread"
	orchestratorOff = "is an orchestrator tool: this turn runs on handler thread %s, which cannot %s; ask the orchestrator with thread_report instead"
	handlerOff      = "is a handler-thread tool: this turn runs on the session's orchestrator surface, which has no thread of its own; use thread_list and thread_episodes to read threads"
)

// onHandler reports whether the turn runs on a handler thread.
func onHandler(env *Env) bool { return env.Thread != nil }

// surfaceOnly makes a thread tool Optional: declared only on its kind of
// surface.
type orchestratorOnly struct{}

func (orchestratorOnly) Unavailable(env *Env) string {
	if env.SurfaceKind == desk.SurfaceHandler {
		return "an orchestrator tool; this is a handler thread"
	}
	return ""
}

type handlerOnly struct{}

// surfaceScoped marks the thread tools: their absence on the other kind
// of surface is by design, so Absent does not list them.
func (orchestratorOnly) surfaceScoped() {}
func (handlerOnly) surfaceScoped()      {}

func (handlerOnly) Unavailable(env *Env) string {
	if env.SurfaceKind != desk.SurfaceHandler {
		return "a handler-thread tool; this is the orchestrator surface"
	}
	return ""
}

func refuseOnHandler(env *Env, name, what string) *Result {
	if onHandler(env) {
		return Fail(CodeBadInput, "%s "+orchestratorOff, name, env.Thread.ID, what)
	}
	return nil
}

func refuseOnOrchestrator(env *Env, name string) *Result {
	if !onHandler(env) {
		return Fail(CodeBadInput, "%s "+handlerOff, name)
	}
	return nil
}

func (env *Env) wake() {
	if env.Wake != nil {
		env.Wake()
	}
}

// stamp is the server-stamped origin of a thread tool's writes.
func stamp(ctx context.Context, env *Env) desk.Origin {
	if o, ok := desk.OriginFrom(ctx); ok {
		return o
	}
	o := desk.Origin{WorkspaceID: env.Session.WorkspaceID, SessionID: env.Session.ID, Actor: env.Session.Actor, Kind: desk.OriginAgent}
	if env.Execution != nil {
		o.ExecutionID, o.SurfaceID = env.Execution.ID, env.Execution.SurfaceID
	}
	return o
}

func (env *Env) queueRow(ctx context.Context, surface, kind, text string) *desk.QueueItem {
	x := env.Session
	return &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: surface, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
		Kind: kind, Priority: desk.PriorityNormal, Origin: stamp(ctx, env), Text: text, Channel: threadChannel,
		ConversationID: x.ID, CreatedAt: desk.Now()}
}

// sessionThread finds a thread of the turn's session; another session's
// thread is as unknown as one that does not exist.
func sessionThread(ctx context.Context, env *Env, id string) (*desk.Thread, *Result, error) {
	t, err := env.Store.GetThread(ctx, id)
	if desk.IsCode(err, desk.ENOTFOUND) || (err == nil && t.SessionID != env.Session.ID) {
		return nil, Fail(CodeNotFound, "thread %s is not a thread of this session (thread_list lists them)", id), nil
	}
	if err != nil {
		return nil, nil, err
	}
	return t, nil, nil
}

// threadRow is a thread as the thread tools show it: no transcript.
type threadRow struct {
	ID            string               `json:"id"`
	Title         string               `json:"title"`
	Objective     string               `json:"objective"`
	State         string               `json:"state"`
	History       string               `json:"history"`
	GroupID       string               `json:"thread_group_id"`
	SurfaceID     string               `json:"surface_id"`
	LatestEpisode *desk.EpisodeSummary `json:"latest_episode"`
	EpisodeCount  int                  `json:"episode_count"`
	Queued        int                  `json:"queued_items"`
}

func rowOf(t *desk.Thread, queued int) threadRow {
	return threadRow{ID: t.ID, Title: t.Title, Objective: t.Objective, State: t.State, History: t.History, GroupID: t.GroupID,
		SurfaceID: t.SurfaceID, LatestEpisode: t.LatestEpisode, EpisodeCount: t.EpisodeCount, Queued: queued}
}

// pendingBySurface counts each surface's queued rows, and lists its
// pending report requests.
func pendingBySurface(ctx context.Context, env *Env) (map[string]int, map[string][]map[string]string, error) {
	q, err := env.Store.ListQueue(ctx, env.Session.ID, true)
	if err != nil {
		return nil, nil, err
	}
	n, reqs := map[string]int{}, map[string][]map[string]string{}
	for _, it := range q {
		n[it.SurfaceID]++
		if it.Kind == desk.QueueReportRequest {
			reqs[it.SurfaceID] = append(reqs[it.SurfaceID], map[string]string{"id": it.ID, "status": it.Status})
		}
	}
	return n, reqs, nil
}

// ---- thread_start ----

type threadStartItem struct {
	Title     string `json:"title" jsonschema_description:"a short title of the handler thread, as the user sees it"`
	Objective string `json:"objective" jsonschema_description:"the delegated objective: a compact, self-contained task packet"`
	History   string `json:"history,omitempty" jsonschema:"enum=isolated,enum=forked" jsonschema_description:"isolated (default): the handler gets the objective only; forked: also a filtered copy of this conversation so far, only when continuity is explicitly asked for or re-explaining would be lossy"`
	GroupID   string `json:"thread_group_id,omitempty" jsonschema_description:"add the thread to this existing thread group instead of a new one"`
}

type threadStartArgs struct {
	Threads []threadStartItem `json:"threads" jsonschema:"minItems=1,maxItems=8" jsonschema_description:"the handler threads to open; usually one"`
}

type threadStart struct {
	orchestratorOnly
	args[threadStartArgs]
}

func (threadStart) Name() string { return "thread_start" }
func (threadStart) Description() string {
	return "Delegate bounded work to handler threads: each item opens a handler thread (its own conversation and queue) that owns one objective and reports back with durable episodes, which reach you as thread_report notifications. Usually one item; several only for separate, independent workstreams. Every call creates a thread group, or appends to the one named by thread_group_id. Returns the thread ids and the group id."
}
func (threadStart) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadStart) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnHandler(env, t.Name(), "start threads"); r != nil {
		return r, nil
	}
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	group := ""
	for i, it := range a.Threads {
		if strings.TrimSpace(it.Title) == "" || strings.TrimSpace(it.Objective) == "" {
			return Fail(CodeBadInput, "/threads/%d: title and objective must not be blank", i), nil
		}
		if len(it.Objective) > maxThreadText {
			return Fail(CodeTooLarge, "/threads/%d/objective: %d bytes; at most %d", i, len(it.Objective), maxThreadText), nil
		}
		if it.GroupID != "" {
			if group != "" && group != it.GroupID {
				return Fail(CodeBadInput, "/threads/%d/thread_group_id: one call adds to one group, and /threads names both %s and %s", i, group, it.GroupID), nil
			}
			group = it.GroupID
		}
	}
	x := env.Session
	now := desk.Now()
	g := &desk.ThreadGroup{ID: group, SessionID: x.ID, WorkspaceID: x.WorkspaceID, CreatedAt: now}
	if group != "" {
		old, err := env.Store.GetThreadGroup(ctx, group)
		if desk.IsCode(err, desk.ENOTFOUND) || (err == nil && old.SessionID != x.ID) {
			return Fail(CodeNotFound, "thread_group_id: %s is not a thread group of this session; leave it out to start a new group", group), nil
		}
		if err != nil {
			return nil, err
		}
	} else {
		g.ID = desk.NewID(desk.PrefixThreadGroup)
	}
	forked := ""
	starts := make([]desk.ThreadStart, len(a.Threads))
	for i, it := range a.Threads {
		h := it.History
		if h == "" {
			h = desk.HistoryIsolated
		}
		th := &desk.Thread{ID: desk.NewID(desk.PrefixThread), SessionID: x.ID, WorkspaceID: x.WorkspaceID, SurfaceID: desk.NewID(desk.PrefixSurface),
			Title: strings.TrimSpace(it.Title), Objective: it.Objective, State: desk.ThreadActive, History: h, GroupID: g.ID,
			CommandID: call.CommandID, CreatedAt: now, UpdatedAt: now}
		if h == desk.HistoryForked && forked == "" {
			if forked, err = ForkedHistory(ctx, env.Store, x.SurfaceID); err != nil {
				return nil, err
			}
		}
		block := forked
		if h != desk.HistoryForked {
			block = ""
		}
		starts[i] = desk.ThreadStart{Thread: th, Item: env.queueRow(ctx, th.SurfaceID, desk.QueueInitialHandler, InitialText(th, block))}
	}
	created, err := env.Store.StartThreads(ctx, g, group == "", starts)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return Fail(CodeNotFound, "%s", desk.ErrorMessage(err)), nil
	}
	if err != nil {
		return nil, err
	}
	if !created {
		// The same call already started its threads (a resumed step).
		ts, err := env.Store.ListThreads(ctx, x.ID, "")
		if err != nil {
			return nil, err
		}
		var mine []*desk.Thread
		for _, th := range ts {
			if th.CommandID == call.CommandID {
				mine = append(mine, th)
			}
		}
		if len(mine) > 0 {
			g.ID = mine[0].GroupID
		}
		return startResult(g.ID, mine), nil
	}
	env.wake()
	ths := make([]*desk.Thread, len(starts))
	for i, st := range starts {
		ths[i] = st.Thread
	}
	return startResult(g.ID, ths), nil
}

func startResult(group string, ts []*desk.Thread) *Result {
	rows := []map[string]string{}
	facts := []string{}
	for _, t := range ts {
		rows = append(rows, map[string]string{"id": t.ID, "surface_id": t.SurfaceID, "title": t.Title, "state": t.State, "history": t.History})
		facts = append(facts, t.ID)
	}
	return &Result{Value: map[string]any{"thread_group_id": group, "threads": rows,
		"note": "each thread works on its own; its episodes reach you as thread_report notifications in later turns"},
		Facts: map[string]any{"thread_group_id": group, "thread_ids": facts}}
}

// InitialText is the first prompt-bearing item of a handler thread: its
// objective, and for a forked thread the inherited-history block. It is
// the only place a forked history goes (never the system prompt, never
// fake prior turns).
func InitialText(t *desk.Thread, forked string) string {
	var b strings.Builder
	if forked != "" {
		b.WriteString("<inherited_history from=\"orchestrator\">\nThe orchestrator's conversation before it delegated this objective (user messages and replies only, filtered):\n")
		b.WriteString(forked)
		b.WriteString("\n</inherited_history>\n\n")
	}
	fmt.Fprintf(&b, "<thread id=%q title=%q thread_group_id=%q>\nYou own this delegated objective:\n%s\n</thread>\n", t.ID, t.Title, t.GroupID, t.Objective)
	b.WriteString("Work on it here. Report important intermediate findings with thread_report (no outcome); when the objective is delivered, failed or closed, conclude with thread_report and that outcome.")
	return b.String()
}

// ForkedHistory is the product-filtered block of the orchestrator's
// conversation a forked thread inherits: user messages and the assistant's
// reply text, in order, with tool calls, tool results, world blocks and
// thread notifications left out, and only the most recent 32 KiB kept.
func ForkedHistory(ctx context.Context, st Store, surface string) (string, error) {
	var lines []string
	before := int64(0)
	size := 0
	for size < maxForkedBlock {
		page, err := st.ListMessages(ctx, surface, before, 200)
		if err != nil {
			return "", err
		}
		for i := len(page) - 1; i >= 0 && size < maxForkedBlock; i-- {
			m := page[i]
			text := strings.TrimSpace(m.Text)
			if text == "" || strings.HasPrefix(text, "<thread_report ") {
				continue
			}
			var line string
			switch m.Role {
			case desk.RoleUser:
				line = "user: " + text
			case desk.RoleAssistant:
				line = "assistant: " + text
			default:
				continue
			}
			lines = append(lines, line)
			size += len(line)
		}
		if len(page) < 200 {
			break
		}
		before = page[0].Seq
	}
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return strings.Join(lines, "\n"), nil
}

// ---- thread_followup ----

type threadFollowupArgs struct {
	ThreadIDs []string `json:"thread_ids,omitempty" jsonschema:"maxItems=32" jsonschema_description:"the exact threads to send to"`
	GroupID   string   `json:"thread_group_id,omitempty" jsonschema_description:"or every thread of this group"`
	Text      string   `json:"text" jsonschema_description:"the correction, clarification or later instruction"`
	Activate  bool     `json:"activate,omitempty" jsonschema_description:"move concluded targets back to active for a new objective span; active targets keep their objective"`
}

type threadFollowup struct {
	orchestratorOnly
	args[threadFollowupArgs]
}

func (threadFollowup) Name() string { return "thread_followup" }
func (threadFollowup) Description() string {
	return "Send a follow-up to existing handler threads, by exact thread_ids or one thread_group_id: it is queued in each thread's conversation. With activate, a concluded thread becomes active again for new work in the same delegated context."
}
func (threadFollowup) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadFollowup) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnHandler(env, t.Name(), "send follow-ups"); r != nil {
		return r, nil
	}
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if (len(a.ThreadIDs) == 0) == (a.GroupID == "") {
		return Fail(CodeBadInput, "name the targets with exactly one of thread_ids and thread_group_id"), nil
	}
	if strings.TrimSpace(a.Text) == "" || len(a.Text) > maxThreadText {
		return Fail(CodeBadInput, "text: must not be blank and at most %d bytes", maxThreadText), nil
	}
	var targets []*desk.Thread
	if a.GroupID != "" {
		g, err := env.Store.GetThreadGroup(ctx, a.GroupID)
		if desk.IsCode(err, desk.ENOTFOUND) || (err == nil && g.SessionID != env.Session.ID) {
			return Fail(CodeNotFound, "thread_group_id: %s is not a thread group of this session", a.GroupID), nil
		}
		if err != nil {
			return nil, err
		}
		if targets, err = env.Store.ListThreads(ctx, env.Session.ID, g.ID); err != nil {
			return nil, err
		}
	} else {
		seen := map[string]bool{}
		for _, id := range a.ThreadIDs {
			if seen[id] {
				continue
			}
			seen[id] = true
			th, bad, err := sessionThread(ctx, env, id)
			if bad != nil || err != nil {
				return bad, err
			}
			targets = append(targets, th)
		}
	}
	items := make([]*desk.QueueItem, len(targets))
	for i, th := range targets {
		items[i] = env.queueRow(ctx, th.SurfaceID, desk.QueueThreadFollowup, FollowupText(th, a.Text, a.Activate))
	}
	ts, err := env.Store.FollowupThreads(ctx, items, a.Activate)
	if err != nil {
		return nil, err
	}
	env.wake()
	rows := []map[string]string{}
	for i, th := range ts {
		rows = append(rows, map[string]string{"id": th.ID, "state": th.State, "queued_item": items[i].ID})
	}
	return &Result{Value: map[string]any{"threads": rows}, Facts: map[string]any{"queued": len(rows)}}, nil
}

// FollowupText is a thread_followup row's prompt.
func FollowupText(t *desk.Thread, text string, activate bool) string {
	note := ""
	if activate {
		note = " activate=\"true\""
	}
	return fmt.Sprintf("<thread_followup from=\"orchestrator\" thread=%q%s>\n%s\n</thread_followup>", t.ID, note, text)
}

// ---- thread_request_report ----

type threadRequestReportArgs struct {
	ThreadID string `json:"thread_id" jsonschema_description:"the thread to ask"`
	Note     string `json:"note,omitempty" jsonschema_description:"what the report should cover"`
}

type threadRequestReport struct {
	orchestratorOnly
	args[threadRequestReportArgs]
}

func (threadRequestReport) Name() string { return "thread_request_report" }
func (threadRequestReport) Description() string {
	return "Ask one handler thread for an update episode without changing its objective; the episode reaches you as a thread_report notification."
}
func (threadRequestReport) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadRequestReport) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnHandler(env, t.Name(), "request reports"); r != nil {
		return r, nil
	}
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	th, bad, err := sessionThread(ctx, env, a.ThreadID)
	if bad != nil || err != nil {
		return bad, err
	}
	note := strings.TrimSpace(a.Note)
	if note == "" {
		note = "Report where the objective stands."
	}
	// Through the execution service, as every other queue row a door or
	// a tool makes (DESIGN: one path into the queue): it checks the
	// workspace and session take work, stamps the origin from this turn
	// and wakes the thread's dispatcher.
	if env.Submit == nil {
		return Fail(CodeNotConfigured, "thread_request_report needs the execution service, which this desk did not give the tools"), nil
	}
	res, err := env.Submit.Submit(ctx, env.Session.ID, desk.SubmitInput{
		Kind: desk.QueueReportRequest, Surface: th.SurfaceID, Channel: threadChannel,
		Text: fmt.Sprintf("<report_request from=\"orchestrator\">\n%s\n</report_request>\nAnswer with thread_report without an outcome (an update episode), unless the objective is truly finished.", note),
	})
	if err != nil {
		return nil, err
	}
	row := res.Item
	return &Result{Value: map[string]any{"report_request_id": row.ID, "thread_id": th.ID}, Facts: map[string]any{"report_request_id": row.ID}}, nil
}

// ---- thread_list ----

type threadListArgs struct {
	GroupID string `json:"thread_group_id,omitempty" jsonschema_description:"only the threads of this group"`
}

type threadList struct {
	orchestratorOnly
	args[threadListArgs]
}

func (threadList) Name() string { return "thread_list" }
func (threadList) Description() string {
	return "List this session's handler threads: objective, state, latest episode summary and counts (never transcripts)."
}
func (threadList) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadList) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnHandler(env, t.Name(), "list the session's threads"); r != nil {
		return r, nil
	}
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if a.GroupID != "" {
		g, err := env.Store.GetThreadGroup(ctx, a.GroupID)
		if desk.IsCode(err, desk.ENOTFOUND) || (err == nil && g.SessionID != env.Session.ID) {
			return Fail(CodeNotFound, "thread_group_id: %s is not a thread group of this session", a.GroupID), nil
		}
		if err != nil {
			return nil, err
		}
	}
	ts, err := env.Store.ListThreads(ctx, env.Session.ID, a.GroupID)
	if err != nil {
		return nil, err
	}
	queued, _, err := pendingBySurface(ctx, env)
	if err != nil {
		return nil, err
	}
	rows := []threadRow{}
	for _, th := range ts {
		rows = append(rows, rowOf(th, queued[th.SurfaceID]))
	}
	return &Result{Value: map[string]any{"threads": rows}}, nil
}

// ---- thread_episodes ----

type threadEpisodesArgs struct {
	ThreadID   string   `json:"thread_id,omitempty" jsonschema_description:"the thread (on a handler thread: its own, the default)"`
	EpisodeIDs []string `json:"episode_ids,omitempty" jsonschema_description:"only these episodes"`
}

type threadEpisodes struct{ args[threadEpisodesArgs] }

func (threadEpisodes) Name() string { return "thread_episodes" }
func (threadEpisodes) Description() string {
	return "Read the exact durable episodes a handler thread reported, in the order recorded. The orchestrator names the thread; a handler thread reads its own."
}
func (threadEpisodes) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadEpisodes) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	id := a.ThreadID
	if onHandler(env) {
		if id != "" && id != env.Thread.ID {
			return Fail(CodeBadInput, "thread_id: a handler thread reads only its own episodes (%s), not %s's", env.Thread.ID, id), nil
		}
		id = env.Thread.ID
	} else if id == "" {
		return Fail(CodeBadInput, "thread_id: required on the orchestrator surface (thread_list lists the threads)"), nil
	}
	th, bad, err := sessionThread(ctx, env, id)
	if bad != nil || err != nil {
		return bad, err
	}
	es, err := env.Store.ListEpisodes(ctx, th.ID)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, e := range a.EpisodeIDs {
		want[e] = true
	}
	out := []map[string]any{}
	for _, e := range es {
		if len(want) > 0 && !want[e.ID] {
			continue
		}
		delete(want, e.ID)
		out = append(out, map[string]any{"id": e.ID, "kind": e.Kind, "outcome": e.Outcome, "title": e.Title, "body": e.Body,
			"artifacts": e.Artifacts, "created_at": e.CreatedAt})
	}
	for e := range want {
		return Fail(CodeNotFound, "episode_ids: %s is not an episode of thread %s", e, th.ID), nil
	}
	return &Result{Value: map[string]any{"thread_id": th.ID, "state": th.State, "episodes": out}}, nil
}

// ---- thread_current ----

type threadCurrentArgs struct{}

type threadCurrent struct {
	handlerOnly
	args[threadCurrentArgs]
}

func (threadCurrent) Name() string { return "thread_current" }
func (threadCurrent) Description() string {
	return "This handler thread's objective, state and group, its pending report requests and its latest episode summary."
}
func (threadCurrent) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadCurrent) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnOrchestrator(env, t.Name()); r != nil {
		return r, nil
	}
	if _, bad, err := t.decode(call.Args); bad != nil || err != nil {
		return bad, err
	}
	th, err := env.Store.GetThread(ctx, env.Thread.ID)
	if err != nil {
		return nil, err
	}
	_, reqs, err := pendingBySurface(ctx, env)
	if err != nil {
		return nil, err
	}
	pending := reqs[th.SurfaceID]
	if pending == nil {
		pending = []map[string]string{}
	}
	return &Result{Value: map[string]any{"thread": rowOf(th, 0), "pending_report_requests": pending}}, nil
}

// ---- thread_group ----

type threadGroupArgs struct{}

type threadGroup struct {
	handlerOnly
	args[threadGroupArgs]
}

func (threadGroup) Name() string { return "thread_group" }
func (threadGroup) Description() string {
	return "This thread's group and its sibling threads' objective summaries (topology only: no shared memory, no messaging; ask the orchestrator with thread_report to forward something to siblings)."
}
func (threadGroup) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadGroup) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnOrchestrator(env, t.Name()); r != nil {
		return r, nil
	}
	if _, bad, err := t.decode(call.Args); bad != nil || err != nil {
		return bad, err
	}
	ts, err := env.Store.ListThreads(ctx, env.Session.ID, env.Thread.GroupID)
	if err != nil {
		return nil, err
	}
	sib := []map[string]any{}
	for _, th := range ts {
		if th.ID == env.Thread.ID {
			continue
		}
		sib = append(sib, map[string]any{"id": th.ID, "title": th.Title, "objective": th.Objective, "state": th.State, "latest_episode": th.LatestEpisode})
	}
	return &Result{Value: map[string]any{"thread_group_id": env.Thread.GroupID, "thread_id": env.Thread.ID, "siblings": sib}}, nil
}

// ---- thread_report ----

type threadReportArgs struct {
	Title     string   `json:"title" jsonschema_description:"a one-line summary of the episode"`
	Body      string   `json:"body" jsonschema_description:"the human-readable result: what was done, found or decided, compact enough to reuse"`
	Outcome   string   `json:"outcome,omitempty" jsonschema:"enum=delivered,enum=failed,enum=closed" jsonschema_description:"leave out for an update episode; set to conclude the objective (delivered, failed or closed)"`
	Artifacts []string `json:"artifacts,omitempty" jsonschema:"maxItems=32" jsonschema_description:"ids of artifacts of this session the episode names"`
}

type threadReport struct {
	handlerOnly
	args[threadReportArgs]
}

func (threadReport) Name() string { return "thread_report" }
func (threadReport) Description() string {
	return "Hand a durable episode to the orchestrator. Without outcome: an update episode (the objective stays active). With outcome: a conclusion episode, and the objective becomes concluded. The orchestrator reconciles it in a later turn; ordinary replies in this thread never reach it."
}
func (threadReport) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t threadReport) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if r := refuseOnOrchestrator(env, t.Name()); r != nil {
		return r, nil
	}
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if strings.TrimSpace(a.Title) == "" || strings.TrimSpace(a.Body) == "" {
		return Fail(CodeBadInput, "an episode needs a title and a body that are not blank"), nil
	}
	if len(a.Body) > maxThreadText {
		return Fail(CodeTooLarge, "body: %d bytes; at most %d (put large results in an artifact and name it)", len(a.Body), maxThreadText), nil
	}
	for i, id := range a.Artifacts {
		art, err := env.Store.GetArtifact(ctx, id)
		if desk.IsCode(err, desk.ENOTFOUND) || (err == nil && art.SessionID != env.Session.ID) {
			return Fail(CodeNotFound, "/artifacts/%d: %s is not an artifact of this session", i, id), nil
		}
		if err != nil {
			return nil, err
		}
	}
	th, err := env.Store.GetThread(ctx, env.Thread.ID)
	if err != nil {
		return nil, err
	}
	kind := desk.EpisodeUpdate
	if a.Outcome != "" {
		kind = desk.EpisodeConclusion
	}
	o := stamp(ctx, env)
	e := &desk.Episode{ID: desk.NewID(desk.PrefixEpisode), ThreadID: th.ID, SessionID: th.SessionID, WorkspaceID: th.WorkspaceID,
		Kind: kind, Outcome: a.Outcome, Title: strings.TrimSpace(a.Title), Body: a.Body, Origin: o, CommandID: call.CommandID,
		ExecutionID: o.ExecutionID, Artifacts: a.Artifacts, CreatedAt: desk.Now()}
	state := th.State
	if kind == desk.EpisodeConclusion {
		state = desk.ThreadConcluded
	}
	n := env.queueRow(ctx, env.Session.SurfaceID, desk.QueueThreadReport, NotificationText(th, state, e))
	got, _, err := env.Store.RecordEpisode(ctx, e, n)
	if err != nil {
		return nil, err
	}
	env.wake()
	return &Result{Value: map[string]any{"episode_id": got.ID, "kind": got.Kind, "outcome": got.Outcome, "state": state,
		"note": "recorded; the orchestrator reconciles it in its own turn"},
		Facts: map[string]any{"episode_id": got.ID}, Artifacts: got.Artifacts}, nil
}

// NotificationText is the context block of a thread_report_notification:
// the thread, its objective state and the episode body — never the
// handler's transcript.
func NotificationText(t *desk.Thread, state string, e *desk.Episode) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<thread_report thread=%q title=%q thread_group_id=%q state=%q episode=%q kind=%q", t.ID, t.Title, t.GroupID, state, e.ID, e.Kind)
	if e.Outcome != "" {
		fmt.Fprintf(&b, " outcome=%q", e.Outcome)
	}
	b.WriteString(">\n")
	fmt.Fprintf(&b, "objective: %s\nepisode title: %s\n", t.Objective, e.Title)
	if len(e.Artifacts) > 0 {
		fmt.Fprintf(&b, "artifacts: %s\n", strings.Join(e.Artifacts, ", "))
	}
	b.WriteString("episode body:\n")
	b.WriteString(e.Body)
	b.WriteString("\n</thread_report>\nReconcile this episode against the thread's durable state (thread_list, thread_episodes); the handler's transcript is not included.")
	return b.String()
}
