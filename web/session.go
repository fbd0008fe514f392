package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// pageMessages is how many messages a session opens with; older ones load
// as the transcript scrolls up.
const pageMessages = 50

// maxSpanOutput bounds the output an execution span carries in the page;
// the full output of a big result is an artifact.
const maxSpanOutput = 16 << 10

// sessionView is everything the session page shows.
type sessionView struct {
	S       *desk.Session
	WS      string
	Model   string
	NoModel bool
	// Admin shows the hints only the admin can act on (DESK_MODEL).
	Admin   bool
	Turns   []*turnView
	Older   *olderLink
	LastSeq int64
	Run     *runState
	Queue   *queueView
	Cards   *cards
	Budget  *budget
	Shelf   *shelf
	Draft   string
	After   int64
	// Viewer names this page's hold on the session; its event stream
	// renews and ends the same hold.
	Viewer string
	// Protocol is the wire protocol of a runtime-backed session's runtime
	// ("" when the runtime is no longer registered).
	Protocol string
	// The header's switcher: the models and profiles a person may switch
	// the session to (for its next turn), and whether the current model
	// takes a reasoning effort.
	Models     []string
	Profiles   []*desk.Profile
	CanReason  bool
	Efforts    []string
	ModelValue string // the session's model as the picker names it
}

// olderLink loads the page of messages before Before when it scrolls into
// view.
type olderLink struct {
	Ses string
	// Surface is the conversation the page shows: a thread page pages
	// back through its thread's transcript, not the orchestrator's.
	Surface string
	Before  int64
}

// msgView is one transcript message with its tool calls as spans.
type msgView struct {
	M     *desk.Message
	Spans []*span
	// Episode is the episode a thread report notification carries.
	Episode *threadCard
	// Brief is the objective of a handler thread's first message (the
	// orchestrator's <thread …> brief), shown without its markup.
	Brief string
}

// threadBrief reads the brief a handler thread starts with (see
// agent/tools/threads.go): the objective between the markup.
var threadBrief = regexp.MustCompile(`(?s)^<thread id="[^"]*" title="(?:[^"\\]|\\.)*" thread_group_id="[^"]*">\nYou own this delegated objective:\n(.*)\n</thread>\n?$`)

// span is one tool call shown as an execution span.
type span struct {
	ID        string
	Ses       string
	Cmd       *desk.Command
	Tool      string
	Target    string
	Status    string
	Duration  string
	Outcome   string
	Args      string
	Output    string
	Clipped   bool
	Error     string
	Artifacts []*desk.Artifact
	Missing   []string
	// Diff is apply_patch's file change list, rendered as a diff.
	Diff []diffFile
	// Denied is the reason a sandbox denial gave ("" for none).
	Denied string
	// OOB marks a span sent to replace the one on the page.
	OOB bool
	// Threads are the handler threads a thread_start call opened.
	Threads []*threadCard
}

// diffFile is one file of an apply_patch result as the span shows it.
type diffFile struct {
	Path, From, Kind string
	Added, Removed   int
	Lines            []diffLine
	Truncated        bool
}

// diffLine is one line of a unified diff with its CSS class: add, del,
// hunk (an @@ header), file (the ---/+++ header) or ctx.
type diffLine struct {
	Class, Text string
}

// patchDiff reads the file change list of an apply_patch record's facts.
func patchDiff(facts json.RawMessage) []diffFile {
	var f struct {
		Files []struct {
			Path          string `json:"path"`
			From          string `json:"from"`
			Kind          string `json:"kind"`
			Added         int    `json:"added"`
			Removed       int    `json:"removed"`
			Diff          string `json:"diff"`
			DiffTruncated bool   `json:"diff_truncated"`
		} `json:"files"`
	}
	if json.Unmarshal(facts, &f) != nil {
		return nil
	}
	out := make([]diffFile, 0, len(f.Files))
	for _, x := range f.Files {
		d := diffFile{Path: x.Path, From: x.From, Kind: x.Kind, Added: x.Added, Removed: x.Removed, Truncated: x.DiffTruncated}
		for _, l := range strings.Split(strings.TrimSuffix(x.Diff, "\n"), "\n") {
			class := "ctx"
			switch {
			case strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---"):
				class = "file"
			case strings.HasPrefix(l, "@@"):
				class = "hunk"
			case strings.HasPrefix(l, "+"):
				class = "add"
			case strings.HasPrefix(l, "-"):
				class = "del"
			}
			d.Lines = append(d.Lines, diffLine{Class: class, Text: l})
		}
		out = append(out, d)
	}
	return out
}

var unsafeID = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func spanID(exe, call string) string {
	return "span-" + exe + "-" + unsafeID.ReplaceAllString(call, "_")
}

// newSpan describes a tool call from its command record (nil while the
// call has no record yet).
func newSpan(ses, exe string, call desk.MessageCall, cmd *desk.Command, arts map[string]*desk.Artifact) *span {
	sp := &span{ID: spanID(exe, call.ID), Ses: ses, Cmd: cmd, Tool: call.Name, Status: desk.CommandRequested}
	args := call.Arguments
	if cmd != nil {
		sp.Tool, sp.Status, args = cmd.Tool, cmd.Status, cmd.Arguments
	}
	sp.Args = prettyJSON(args)
	sp.Target = target(args)
	if cmd == nil {
		return sp
	}
	if cmd.StartedAt != nil {
		end := time.Now()
		if cmd.FinishedAt != nil {
			end = *cmd.FinishedAt
		}
		sp.Duration = duration(end.Sub(*cmd.StartedAt))
	}
	sp.Output = cmd.Output
	if len(sp.Output) > maxSpanOutput {
		sp.Output, sp.Clipped = sp.Output[:maxSpanOutput], true
	}
	sp.Error = cmd.Error
	sp.Outcome = outcome(cmd)
	if cmd.Tool == "apply_patch" && cmd.Status == desk.CommandSucceeded {
		sp.Diff = patchDiff(cmd.Facts)
	}
	var denial struct {
		SandboxDenied bool   `json:"sandbox_denied"`
		Reason        string `json:"reason"`
	}
	if json.Unmarshal(cmd.Facts, &denial) == nil && denial.SandboxDenied {
		sp.Denied = denial.Reason
		if sp.Denied == "" {
			sp.Denied = "the sandbox refused"
		}
	}
	for _, id := range cmd.Artifacts {
		if a := arts[id]; a != nil {
			sp.Artifacts = append(sp.Artifacts, a)
		} else {
			sp.Missing = append(sp.Missing, id)
		}
	}
	return sp
}

// target is what a call acted on: its command, path, URL or query, the
// view it inspected, the files a patch touches. Every span names one.
func target(args json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(args, &m) != nil {
		return ""
	}
	str := func(k string) string { v, _ := m[k].(string); return v }
	for _, k := range []string{"command", "path", "url", "query", "name"} {
		if v := str(k); v != "" {
			return v
		}
	}
	if a := str("action"); a != "" {
		return strings.TrimSpace(a + " " + str("id"))
	}
	if v := str("view"); v != "" {
		return strings.TrimSpace(v + " " + str("group_id") + str("item_id"))
	}
	if p := str("patch"); p != "" {
		var files []string
		for _, l := range strings.Split(p, "\n") {
			for _, pre := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: "} {
				if f, ok := strings.CutPrefix(l, pre); ok {
					files = append(files, strings.TrimSpace(f))
				}
			}
		}
		if len(files) > 0 {
			return strings.Join(files, ", ")
		}
	}
	if p, ok := m["plan"].(map[string]any); ok {
		if t, ok := p["title"].(string); ok {
			return t
		}
	}
	if qs, ok := m["questions"].([]any); ok {
		return fmt.Sprintf("%d question(s)", len(qs))
	}
	if len(m) == 0 {
		return "no arguments"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// outcome is the one useful line of a finished call.
func outcome(c *desk.Command) string {
	var f map[string]any
	_ = json.Unmarshal(c.Facts, &f)
	// The status badge already says declined or cancelled; the outcome
	// adds only what it does not ("cancelled cancelled" was the result).
	if c.Error != "" {
		if l := firstLineOf(c.Error); !strings.EqualFold(l, c.Status) {
			return l
		}
		return ""
	}
	if c.Status == desk.CommandDeclined || c.Status == desk.CommandCancelled || c.Status == desk.CommandUnknown {
		return ""
	}
	if code, ok := f["exit_code"].(float64); ok {
		if f["timed_out"] == true {
			return "timed out"
		}
		return "exit " + strconv.Itoa(int(code))
	}
	if n, ok := f["size"].(float64); ok {
		return humanBytes(int64(n)) + " written"
	}
	if n, ok := f["entries"].(float64); ok {
		return strconv.Itoa(int(n)) + " entries"
	}
	if d, ok := f["decision"].(string); ok {
		return d
	}
	if c.Status == desk.CommandSucceeded && c.Output != "" {
		return firstLineOf(c.Output)
	}
	if n, ok := f["artifacts"].(float64); ok {
		return strconv.Itoa(int(n)) + " artifact(s)"
	}
	if n, ok := f["items"].(float64); ok {
		return strconv.Itoa(int(n)) + " item(s)"
	}
	if n, ok := f["groups"].(float64); ok {
		return strconv.Itoa(int(n)) + " group(s)"
	}
	return ""
}

func firstLineOf(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if r := []rune(s); len(r) > 120 {
		s = string(r[:120]) + "…"
	}
	return s
}

func duration(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.Itoa(int(d.Milliseconds())) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return d.Round(time.Second).String()
}

// message turns one transcript message into its view, tool calls as spans.
func message(ses string, m *desk.Message, arts map[string]*desk.Artifact) *msgView {
	v := &msgView{M: m}
	if m.Role == desk.RoleUser {
		if b := threadBrief.FindStringSubmatch(m.Text); b != nil {
			v.Brief = b[1]
		}
	}
	byCall := map[string]*desk.Command{}
	for _, c := range m.Commands {
		byCall[c.CallID] = c
	}
	for _, c := range m.ToolCalls {
		v.Spans = append(v.Spans, newSpan(ses, m.ExecutionID, c, byCall[c.ID], arts))
	}
	return v
}

// turnView is one item of the transcript: a user message, or one turn's
// assistant block, which holds every step (assistant message with its
// tool spans) the turn made, in order.
type turnView struct {
	User *msgView
	// ID is the block's element id: "turn-" and the id of its first
	// step's message, or of the execution when the block was opened by
	// streaming text before any message of the turn was stored.
	ID    string
	Exe   string
	At    time.Time
	Steps []*msgView
	// Live puts the streaming placeholder in an otherwise empty block.
	Live bool
}

// turns groups a transcript page into user messages and assistant blocks:
// consecutive assistant messages of one execution are one block.
func turns(ses string, ms []*desk.Message, arts map[string]*desk.Artifact) []*turnView {
	var out []*turnView
	for _, m := range ms {
		v := message(ses, m, arts)
		if m.Role != desk.RoleAssistant {
			out = append(out, &turnView{User: v})
			continue
		}
		if n := len(out); n > 0 && out[n-1].User == nil && out[n-1].Exe == m.ExecutionID {
			out[n-1].Steps = append(out[n-1].Steps, v)
			continue
		}
		out = append(out, &turnView{ID: "turn-" + m.ID, Exe: m.ExecutionID, At: m.CreatedAt, Steps: []*msgView{v}})
	}
	return out
}

func artifactMap(as []*desk.Artifact) map[string]*desk.Artifact {
	m := make(map[string]*desk.Artifact, len(as))
	for _, a := range as {
		m[a.ID] = a
	}
	return m
}

// runState is the session's current turn, what it is doing in words, and
// what holds it back.
type runState struct {
	Ses    string
	Active *desk.Execution
	Last   *desk.Execution
	Blocks []*desk.Block
	// Label says what the active turn does now: starting, writing (while
	// its text streams; set by the page's event stream), running a
	// command, or waiting for your approval, answer or plan decision.
	Label string
	// Wait is "approval", "answer" or "plan" while the turn waits for a
	// person.
	Wait string
	// Streaming is set by the event stream while the turn's text arrives.
	Streaming bool
	// Failure is the last turn's failure in plain words (its Reason is the
	// folded detail); RetryText the message that started it, which Retry
	// sends again.
	Failure   string
	RetryText string
	// Interrupted says why the last turn was interrupted.
	Interrupted string
	// At is the event seq the region was rendered at (see stamp).
	At int64
	// Surface is the conversation the bar is about (Retry re-sends there).
	Surface string
}

// Text is the run bar's words for the active turn.
func (r *runState) Text() string {
	if r.Active == nil {
		return ""
	}
	if r.Streaming && r.Wait == "" && r.Label == "Working…" {
		return "Writing a reply…"
	}
	return r.Label
}

func (s *Server) runState(ctx context.Context, x *desk.Session) (*runState, error) {
	st := &runState{Ses: x.ID, Surface: x.SurfaceID}
	exes, err := s.d.Store.ListExecutions(ctx, x.ID, 5)
	if err != nil {
		return nil, err
	}
	for _, e := range exes {
		if e.SurfaceID != x.SurfaceID {
			continue
		}
		if desk.PhaseActive(e.Phase) && st.Active == nil {
			st.Active = e
		} else if !desk.PhaseActive(e.Phase) && st.Last == nil {
			st.Last = e
		}
	}
	bs, err := s.d.Exec.Blocks(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	for _, b := range bs {
		// A handler thread's block holds the thread, not the orchestrator.
		if b.Active && (b.SurfaceID == x.SurfaceID || b.SurfaceID == "") {
			st.Blocks = append(st.Blocks, b)
		}
	}
	if st.Active != nil {
		if err := s.label(ctx, x, st); err != nil {
			return nil, err
		}
	} else if st.Last != nil {
		if err := s.settled(ctx, x, st); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// label finds what the active turn does: a decision it waits for comes
// first, then a command it runs, then its phase.
func (s *Server) label(ctx context.Context, x *desk.Session, st *runState) error {
	aps, err := s.d.Conversation.Approvals(ctx, x.ID, true)
	if err != nil {
		return err
	}
	for _, a := range aps {
		if a.ExecutionID == st.Active.ID {
			st.Wait, st.Label = "approval", "Waiting for your approval to run "+a.Tool
			return nil
		}
	}
	if s.pendingInputOf(ctx, x.ID, st.Active.ID) {
		st.Wait, st.Label = "answer", "Waiting for your answer"
		return nil
	}
	plans, err := s.pendingPlans(ctx, st.Active)
	if err != nil {
		return err
	}
	if len(plans) > 0 {
		st.Wait, st.Label = "plan", "Waiting for your decision on the plan"
		return nil
	}
	switch st.Active.Phase {
	case desk.PhaseStarting:
		st.Label = "Starting…"
		return nil
	case desk.PhaseStopping:
		st.Label = "Stopping…"
		return nil
	}
	st.Label = "Working…"
	ms, err := s.d.Conversation.Transcript(ctx, x.SurfaceID, 0, 3)
	if err != nil {
		return err
	}
	for _, m := range ms {
		for _, c := range m.Commands {
			if c.ExecutionID == st.Active.ID && c.Status == desk.CommandRunning {
				if c.Tool == "exec_command" {
					st.Label = "Running a command: " + firstLineOf(target(c.Arguments))
				} else {
					st.Label = "Running " + c.Tool + " " + firstLineOf(target(c.Arguments))
				}
			}
		}
	}
	return nil
}

// settled words the last turn's end: a failure in plain words with the
// message to retry, or why it was interrupted.
func (s *Server) settled(ctx context.Context, x *desk.Session, st *runState) error {
	e := st.Last
	switch e.Phase {
	case desk.PhaseFailed:
		st.Failure = plainFailure(e.Reason)
		items, err := s.d.Exec.Queue(ctx, x.ID, true)
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.ID == e.QueueItemID {
				st.RetryText = it.Text
			}
		}
	case desk.PhaseInterrupted:
		st.Interrupted = plainInterruption(e)
	}
	return nil
}

// plainFailure says in plain words why a turn failed; the raw reason is
// shown folded beside it.
func plainFailure(reason string) string {
	r := strings.ToLower(reason)
	has := func(ws ...string) bool {
		for _, w := range ws {
			if strings.Contains(r, w) {
				return true
			}
		}
		return false
	}
	switch {
	case has("no model", "desk_model"):
		return "This session has no model to answer it."
	case has("no api key is configured"):
		// desk never had a key (provider.MissingKey): nothing was refused,
		// and only the operator can fix it.
		env := "the provider's key variable"
		if _, after, ok := strings.Cut(reason, "; set "); ok {
			env = strings.Fields(after + " ")[0]
		}
		return "desk has no API key for this model's provider: whoever runs desk sets " + env + " and restarts it."
	case has("401", "403", "unauthorized", "forbidden", "api key", "api_key", "authentication"):
		return "The model provider refused desk's credentials."
	case has("429", "rate limit", "rate_limit", "quota"):
		return "The model provider is limiting requests; try again in a moment."
	case has("deadline exceeded", "timeout", "timed out"):
		return "The model took too long to answer."
	case has("connection refused", "no such host", "dial tcp", "eof", "connection reset"):
		return "desk could not reach the model provider."
	case has("500", "502", "503", "504", "server error", "overloaded"):
		return "The model provider had an error."
	case has("script"):
		return "The scripted agent has no answer for this turn."
	}
	return "Something went wrong while the agent worked on this turn."
}

// plainInterruption says why a turn was interrupted.
func plainInterruption(e *desk.Execution) string {
	reason := e.Reason
	by := ""
	if e.Interruption != nil {
		reason, by = e.Interruption.Reason, e.Interruption.By
	}
	switch {
	// owner-restarted (desk crashed and a new process found the turn) and
	// owner-stopping (desk was stopped while the turn ran) read the same:
	// a page can only show either once desk is serving again, i.e. after
	// it restarted.
	case strings.Contains(reason, "restart"), strings.Contains(reason, "stopping"):
		return "Interrupted because desk restarted."
	case by != "" && by != "system":
		// Who pressed Stop (or sent with multitask interrupt) and, when
		// it was not a plain Stop, why; what the turn had written is kept.
		return upperFirst(desk.StoppedBy(e.Interruption)) + ". What it had written so far is kept."
	case reason != "":
		return "Interrupted (" + reason + ")."
	}
	return "Interrupted."
}

// queueView is the rows waiting behind the running turn.
type queueView struct {
	Ses   string
	Items []*desk.QueueItem
	At    int64
}

func (s *Server) queueView(ctx context.Context, x *desk.Session) (*queueView, error) {
	items, err := s.d.Exec.Queue(ctx, x.ID, false)
	if err != nil {
		return nil, err
	}
	q := &queueView{Ses: x.ID}
	for _, it := range items {
		if it.Status == desk.QueueStatusQueued && (it.SurfaceID == x.SurfaceID || it.SurfaceID == "") {
			q.Items = append(q.Items, it)
		}
	}
	return q, nil
}

// cards are the decisions the session waits for.
type cards struct {
	Ses       string
	Approvals []*desk.Approval
	Inputs    []*desk.InputRequest
	Plans     []*planView
	At        int64
}

// planView is a plan card with its decoded content.
type planView struct {
	P     *desk.Plan
	Title string
	Steps []string
	Notes string
}

func (s *Server) cards(ctx context.Context, x *desk.Session, run *runState) (*cards, error) {
	c := &cards{Ses: x.ID}
	var err error
	aps, err := s.d.Conversation.Approvals(ctx, x.ID, true)
	if err != nil {
		return nil, err
	}
	// Each surface's page shows the decisions its own turns wait for.
	exes, err := s.d.Store.ListExecutions(ctx, x.ID, 50)
	if err != nil {
		return nil, err
	}
	surf := map[string]string{}
	for _, e := range exes {
		surf[e.ID] = e.SurfaceID
	}
	for _, a := range aps {
		at, ok := surf[a.ExecutionID]
		if at == x.SurfaceID || !ok { // an unknown execution's: shown everywhere, never hidden
			c.Approvals = append(c.Approvals, a)
		}
	}
	rs, err := s.d.Conversation.InputRequests(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	for _, q := range rs {
		if q.Status == desk.InputPending && (q.SurfaceID == x.SurfaceID || q.SurfaceID == "") {
			c.Inputs = append(c.Inputs, q)
		}
	}
	if run != nil && run.Active != nil {
		ps, err := s.pendingPlans(ctx, run.Active)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			c.Plans = append(c.Plans, newPlanView(p))
		}
	}
	return c, nil
}

// pendingPlans are the plans an active turn waits on: a plan waits only
// inside its running turn, and is found among that execution's events.
func (s *Server) pendingPlans(ctx context.Context, active *desk.Execution) ([]*desk.Plan, error) {
	exe, err := s.d.Exec.Execution(ctx, active.ID)
	if err != nil {
		return nil, err
	}
	var out []*desk.Plan
	for _, ev := range exe.Events {
		if ev.Type != "plan.proposed" {
			continue
		}
		var p desk.Plan
		if json.Unmarshal(ev.Data, &p) != nil {
			continue
		}
		cur, err := s.d.Store.GetPlan(ctx, p.ID)
		if err != nil || cur.Status != desk.PlanProposed {
			continue
		}
		out = append(out, cur)
	}
	return out, nil
}

func newPlanView(p *desk.Plan) *planView {
	v := &planView{P: p}
	var card struct {
		Title string `json:"title"`
		Steps []any  `json:"steps"`
		Notes string `json:"notes"`
	}
	_ = json.Unmarshal(p.Card, &card)
	v.Title, v.Notes = card.Title, card.Notes
	for _, st := range card.Steps {
		switch t := st.(type) {
		case string:
			v.Steps = append(v.Steps, t)
		default:
			b, _ := json.Marshal(t)
			v.Steps = append(v.Steps, string(b))
		}
	}
	return v
}

// budget is the context budget bar: neutral below 40 %, warn (orange) from
// 40 %, high (red) from 60 %.
type budget struct {
	Ses     string
	Used    int
	Window  int
	Percent float64
	Level   string
	// Reported is set when Used starts from the provider's own counts of
	// the last model call rather than desk's estimate.
	Reported bool
	At       int64
}

func (s *Server) budget(ctx context.Context, x *desk.Session) *budget {
	v, err := s.d.Agent.Context(ctx, x, "")
	if err != nil {
		return &budget{Ses: x.ID, Level: "neutral"}
	}
	b := &budget{Ses: x.ID, Used: v.Budget.UsedTokens, Window: v.Budget.Window, Percent: v.Budget.Percent, Reported: v.Budget.Source == desk.BudgetProvider}
	switch {
	case b.Percent >= 60:
		b.Level = "high"
	case b.Percent >= 40:
		b.Level = "warn"
	default:
		b.Level = "neutral"
	}
	return b
}

// session returns the visible session a path names.
func (s *Server) session(r *request) (*desk.Session, error) {
	id := r.PathValue("ses")
	if !desk.HasPrefix(id, desk.PrefixSession) {
		return nil, desk.Errorf(desk.ENOTFOUND, "session %q not found", id)
	}
	return s.d.Sessions.Get(r.Context(), id)
}

func (s *Server) sessionPage(w http.ResponseWriter, r *request) error {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	x, err := s.session(r)
	if err != nil {
		return err
	}
	if x.WorkspaceID != ws.ID {
		return desk.Errorf(desk.ENOTFOUND, "session %s not found in workspace %s", x.ID, ws.ID)
	}
	// The stream resumes after the newest event that existed before any
	// state below was read, so nothing between the two is missed.
	_, after, err := s.d.Store.EventBounds(r.Context())
	if err != nil {
		return err
	}
	// Opening the session reads it; the page's event stream keeps the same
	// hold and ends it when the page goes.
	viewer := newViewer()
	if x, err = s.d.UI.OpenSession(r.Context(), x.ID, viewer); err != nil {
		return err
	}
	v, err := s.sessionView(r.Context(), x)
	if err != nil {
		return err
	}
	v.WS, v.After, v.Viewer, v.Admin = ws.ID, after, viewer, r.p.Admin
	stamp([]part{{data: v.Run}, {data: v.Queue}, {data: v.Cards}, {data: v.Budget}, {data: v.Shelf}}, after)
	title := x.Title
	if title == "" {
		title = x.Signature
	}
	l, err := s.page(r, ws, "sessions", title, "session-main", v)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

func (s *Server) sessionView(ctx context.Context, x *desk.Session) (*sessionView, error) {
	v := &sessionView{S: x, WS: x.WorkspaceID, Model: x.Model}
	if x.Runtime != "" {
		if rt, err := s.d.Store.GetRuntime(ctx, x.Runtime); err == nil {
			v.Protocol = rt.Protocol
		} else if !desk.IsCode(err, desk.ENOTFOUND) {
			return nil, err
		}
	}
	def, models := s.models()
	if v.Model == "" && x.Runtime == "" { // a runtime brings its own model
		v.Model = def
		v.NoModel = def == ""
	}
	if x.Runtime == "" && x.Model != "script" {
		for _, m := range models {
			if m != "script" {
				v.Models = append(v.Models, m)
			}
		}
		v.ModelValue = v.Model
		v.Efforts = []string{desk.EffortLow, desk.EffortMedium, desk.EffortHigh}
		v.CanReason = s.d.Models != nil && s.d.Models.Reasoning(x.Model)
	}
	if s.d.Profiles != nil {
		ps, err := s.d.Profiles.ListProfiles(ctx, x.WorkspaceID)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if p.Runtime == x.Runtime { // a session keeps its executor
				v.Profiles = append(v.Profiles, p)
			}
		}
	}
	ms, err := s.d.Conversation.Transcript(ctx, x.SurfaceID, 0, pageMessages)
	if err != nil {
		return nil, err
	}
	arts, err := s.d.Artifacts.List(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	v.Turns = turns(x.ID, ms, artifactMap(arts))
	s.threadCards(ctx, x, v.Turns)
	if len(ms) > 0 {
		v.LastSeq = ms[len(ms)-1].Seq
		if ms[0].Seq > 1 {
			v.Older = &olderLink{Ses: x.ID, Surface: x.SurfaceID, Before: ms[0].Seq}
		}
	}
	if v.Run, err = s.runState(ctx, x); err != nil {
		return nil, err
	}
	if v.Queue, err = s.queueView(ctx, x); err != nil {
		return nil, err
	}
	if v.Cards, err = s.cards(ctx, x, v.Run); err != nil {
		return nil, err
	}
	v.Budget = s.budget(ctx, x)
	v.Shelf = newShelf(x, arts)
	d, err := s.d.UI.Draft(ctx, x.ID, "")
	if err != nil {
		return nil, err
	}
	v.Draft = d.Text
	return v, nil
}

// older answers the page of messages before ?before= and the link to the
// page before that.
func (s *Server) older(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	before, err := strconv.ParseInt(r.URL.Query().Get("before"), 10, 64)
	if err != nil || before <= 0 {
		return desk.Errorf(desk.EINVALID, "before must be a positive message seq")
	}
	surface := r.URL.Query().Get("surface")
	if surface != "" && surface != x.SurfaceID {
		// Only a surface of this session: its own or one of its threads'.
		ths, err := s.d.Conversation.Threads(r.Context(), x.ID, "")
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(ths, func(t *desk.Thread) bool { return t.SurfaceID == surface }) {
			return desk.Errorf(desk.ENOTFOUND, "surface %q is not a conversation of session %s", surface, x.ID)
		}
		x = onSurface(x, surface)
	}
	ms, err := s.d.Conversation.Transcript(r.Context(), x.SurfaceID, before, pageMessages)
	if err != nil {
		return err
	}
	arts, err := s.d.Artifacts.List(r.Context(), x.ID)
	if err != nil {
		return err
	}
	var link *olderLink
	if len(ms) > 0 && ms[0].Seq > 1 {
		link = &olderLink{Ses: x.ID, Surface: x.SurfaceID, Before: ms[0].Seq}
	}
	return s.writeFragments(w, part{"older", link}, part{"turns", turns(x.ID, ms, artifactMap(arts))})
}

// send submits the composer's text to the session's queue and clears the
// draft; the turn itself arrives through the event stream.
func (s *Server) send(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	text := r.PostFormValue("text")
	if strings.TrimSpace(text) == "" {
		return desk.Errorf(desk.EINVALID, "the message is empty")
	}
	// A thread page's composer names the handler thread's surface.
	surface := r.PostFormValue("surface")
	if _, err := s.d.Exec.Submit(r.Context(), x.ID, desk.SubmitInput{Text: text, Channel: "web", Surface: surface,
		IdempotencyKey: r.PostFormValue("idempotency_key"), EditOf: r.PostFormValue("edit_of")}); err != nil {
		return err
	}
	if _, err := s.d.UI.SaveDraft(r.Context(), x.ID, surface, ""); err != nil {
		return err
	}
	return s.regions(w, r.Context(), onSurface(x, surface), regionQueue|regionRun)
}

func (s *Server) saveDraft(w http.ResponseWriter, r *request) error {
	r.Body = http.MaxBytesReader(w, r.Body, desk.MaxDraftBytes*4)
	x, err := s.session(r)
	if err != nil {
		return err
	}
	if _, err := s.d.UI.SaveDraft(r.Context(), x.ID, r.URL.Query().Get("surface"), r.PostFormValue("text")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) queueOp(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	ops := map[string]desk.QueueOp{"steer": desk.QueueSteer, "cancel": desk.QueueCancel, "front": desk.QueueFront, "back": desk.QueueBack}
	op, ok := ops[r.PathValue("op")]
	if !ok {
		return desk.Errorf(desk.EINVALID, "queue operation %q must be steer, cancel, front or back", r.PathValue("op"))
	}
	it, err := s.d.Exec.QueueOp(r.Context(), x.ID, r.PathValue("q"), op)
	if err != nil {
		return err
	}
	return s.regions(w, r.Context(), onSurface(x, it.SurfaceID), regionQueue)
}

// stop interrupts exactly the execution the button was drawn for.
func (s *Server) stop(w http.ResponseWriter, r *request) error {
	x, err := s.session(r)
	if err != nil {
		return err
	}
	if _, err := s.d.Exec.Interrupt(r.Context(), x.ID, r.PathValue("exe")); err != nil {
		return err
	}
	return s.regions(w, r.Context(), onSurface(x, s.exeSurface(r.Context(), r.PathValue("exe"))), regionRun|regionQueue|regionCards)
}

func (s *Server) decideApproval(w http.ResponseWriter, r *request) error {
	choice, err := desk.ApprovalDecision{Decision: r.PostFormValue("decision"), OptionID: r.PostFormValue("option_id")}.Choice()
	if err != nil {
		return err
	}
	ap, err := s.d.Conversation.DecideApproval(r.Context(), r.PathValue("apr"), choice, r.PostFormValue("reason"))
	if err != nil {
		return err
	}
	x, err := s.d.Sessions.Get(r.Context(), ap.SessionID)
	if err != nil {
		return err
	}
	return s.regions(w, r.Context(), onSurface(x, s.exeSurface(r.Context(), ap.ExecutionID)), regionCards|regionRun)
}

// answerInput collects one answer per question: the custom text when one
// was typed, the chosen option otherwise.
func (s *Server) answerInput(w http.ResponseWriter, r *request) error {
	if err := r.ParseForm(); err != nil {
		return desk.Errorf(desk.EINVALID, "unreadable form: %v", err)
	}
	answers := map[string]string{}
	for k, vs := range r.PostForm {
		if q, ok := strings.CutPrefix(k, "a:"); ok && len(vs) > 0 && strings.TrimSpace(vs[0]) != "" {
			answers[q] = vs[0]
		}
	}
	// A typed answer counts only where no option is chosen: the card's
	// own-answer radio (chosen by typing) sends an empty option, so an
	// option picked after typing wins, as the card shows it.
	for k, vs := range r.PostForm {
		if q, ok := strings.CutPrefix(k, "c:"); ok && len(vs) > 0 && strings.TrimSpace(vs[0]) != "" && answers[q] == "" {
			answers[q] = strings.TrimSpace(vs[0])
		}
	}
	req, _, err := s.d.Conversation.AnswerInput(r.Context(), r.PathValue("inp"), answers)
	if err != nil {
		return err
	}
	x, err := s.d.Sessions.Get(r.Context(), req.SessionID)
	if err != nil {
		return err
	}
	return s.regions(w, r.Context(), onSurface(x, req.SurfaceID), regionCards|regionQueue|regionRun)
}

func (s *Server) decidePlan(w http.ResponseWriter, r *request) error {
	p, err := s.d.Conversation.DecidePlan(r.Context(), r.PathValue("pln"), r.PostFormValue("decision"), r.PostFormValue("notes"))
	if err != nil {
		return err
	}
	x, err := s.d.Sessions.Get(r.Context(), p.SessionID)
	if err != nil {
		return err
	}
	return s.regions(w, r.Context(), onSurface(x, s.exeSurface(r.Context(), p.ExecutionID)), regionCards|regionRun)
}

// Regions of the session page that answers and the event stream re-render
// as out-of-band swaps.
const (
	regionRun = 1 << iota
	regionQueue
	regionCards
	regionBudget
	regionShelf
)

// regionParts renders the chosen regions of a session as out-of-band
// fragments.
func (s *Server) regionParts(ctx context.Context, x *desk.Session, which int) ([]part, error) {
	var parts []part
	var run *runState
	var err error
	if which&(regionRun|regionCards) != 0 {
		if run, err = s.runState(ctx, x); err != nil {
			return nil, err
		}
	}
	if which&regionRun != 0 {
		parts = append(parts, part{"run-oob", run})
	}
	if which&regionQueue != 0 {
		q, err := s.queueView(ctx, x)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{"queue-oob", q})
	}
	if which&regionCards != 0 {
		c, err := s.cards(ctx, x, run)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{"cards-oob", c})
	}
	if which&regionBudget != 0 {
		parts = append(parts, part{"budget-oob", s.budget(ctx, x)})
	}
	if which&regionShelf != 0 {
		arts, err := s.d.Artifacts.List(ctx, x.ID)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{"shelf-oob", newShelf(x, arts)})
	}
	return parts, nil
}

func (s *Server) regions(w http.ResponseWriter, ctx context.Context, x *desk.Session, which int) error {
	// Read before the regions: the answer shows at least this state.
	_, at, err := s.d.Store.EventBounds(ctx)
	if err != nil {
		return err
	}
	parts, err := s.regionParts(ctx, x, which)
	if err != nil {
		return err
	}
	return s.writeFragments(w, stamp(parts, at)...)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// blockNote says in plain words what an admission block holds back, and
// until when, instead of its kind and raw reason.
func blockNote(b *desk.Block) string {
	switch b.Kind {
	case desk.BlockUserCooldown:
		s := "After the stop, work nobody typed here (routines, thread reports, dispatches) waits"
		if b.ExpiresAt != nil {
			s += " until " + b.ExpiresAt.Local().Format("15:04:05")
		}
		return s + "; your own messages go through."
	case desk.BlockExecutionFault:
		return "Held back after a fault: nothing runs here until the block is released (" + b.Reason + ")."
	}
	return "Held back (" + b.Kind + "): " + b.Reason
}
