package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/httpdoor"
	"github.com/desk-runtime/desk/internal/sse"
)

// The page's event stream: desk's events of one workspace, turned into
// out-of-band HTML fragments (htmx swaps them into the page). Each stream
// message's id is "<event seq>-<transcript seq>", so a reconnecting
// browser resumes both where it left off.

// newSSE starts an event stream (see package sse) on a connection that
// can flush; the page's streams need every event delivered as written.
func newSSE(w http.ResponseWriter) (*sse.Writer, error) {
	if _, ok := w.(http.Flusher); !ok {
		return nil, fmt.Errorf("event stream: the connection cannot stream")
	}
	return sse.New(w), nil
}

// sendHTML writes one event of HTML; it may span lines. A carriage return
// would end an SSE line early; as an entity it means the same to the HTML.
func sendHTML(out *sse.Writer, id, event, html string) error {
	return out.Event(id, event, strings.ReplaceAll(html, "\r", "&#13;"))
}

// live is one page's stream state.
type live struct {
	s       *Server
	ctx     context.Context
	out     *sse.Writer
	ws      string
	x       *desk.Session
	tseq    int64
	bubbles map[string]bool // executions whose streaming text is shown
	// tail is the transcript's last item as the page shows it (nil when
	// empty): a new assistant message of the same turn is appended to its
	// block instead of opening a block of its own.
	tail *turnView
	// surface is the conversation the page shows: the session's
	// orchestrator, or the handler thread a thread page opened.
	surface string
	thread  string // the thread a thread page shows
	// What the streaming steps show (see liveargs.go): each execution's
	// text, the tool calls being written (by execution and index, or
	// call id for a runtime's calls), and which spans and output panes
	// the page has, so no fragment is sent for a target it lacks.
	texts map[string]*liveText
	calls map[string]*liveCall
	spans map[string]bool
	outs  map[string]bool
}

func (s *Server) stream(w http.ResponseWriter, r *request) error {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	after, _ := strconv.ParseInt(q.Get("after"), 10, 64)
	tseq, _ := strconv.ParseInt(q.Get("tseq"), 10, 64)
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		a, t, _ := strings.Cut(id, "-")
		if n, err := strconv.ParseInt(a, 10, 64); err == nil {
			after = n
		}
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			tseq = n
		}
	}
	l := &live{s: s, ws: ws.ID, tseq: tseq, bubbles: map[string]bool{},
		texts: map[string]*liveText{}, calls: map[string]*liveCall{}, spans: map[string]bool{}, outs: map[string]bool{}}
	if id := q.Get("session"); id != "" {
		x, err := s.d.Sessions.Get(r.Context(), id)
		if err != nil {
			return err
		}
		if x.WorkspaceID != ws.ID {
			return desk.Errorf(desk.ENOTFOUND, "session %s not found in workspace %s", x.ID, ws.ID)
		}
		l.x, l.surface = x, x.SurfaceID
		if id := q.Get("thread"); id != "" {
			th, err := s.d.Conversation.Thread(r.Context(), id)
			if err != nil {
				return err
			}
			if th.SessionID != x.ID {
				return desk.Errorf(desk.ENOTFOUND, "thread %s not found in session %s", id, x.ID)
			}
			l.surface, l.thread = th.SurfaceID, th.ID
		}
		if err := l.findTail(r.Context()); err != nil {
			return err
		}
	}
	ctx, end, err := s.d.Streams.Begin(r.Request)
	if err != nil {
		return err
	}
	defer end()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	l.ctx = ctx
	// While the stream is connected the session is open: a turn finishing
	// now leaves it read.
	viewer := q.Get("viewer")
	if !validViewer(viewer) {
		viewer = newViewer()
	}
	if l.x != nil {
		if _, err := s.d.UI.OpenSession(ctx, l.x.ID, viewer); err != nil {
			return err
		}
		defer func() {
			if err := s.d.UI.Leave(background(r), l.x.ID, viewer); err != nil {
				s.log.Warn("leave session", desk.LogSessionID, l.x.ID, desk.LogErr, err)
			}
		}()
	}
	out, err := newSSE(w)
	if err != nil {
		return err
	}
	l.out = out
	defer s.d.Streams.Go(func() { l.keepalive(cancel, viewer) })()
	defer cancel()
	err = s.d.Exec.Tail(ctx, desk.EventFilter{WorkspaceID: ws.ID, AfterSeq: after},
		func(desk.EventGap) error {
			// Events were lost to retention: redraw every region.
			parts, err := l.refresh()
			return l.emit(0, parts, err)
		},
		l.handle)
	if err != nil && ctx.Err() == nil && !httpdoor.ClientGone(r.Request, err) {
		s.log.Warn("page event stream ended", desk.LogErr, err)
	}
	return nil
}

// newViewer names one page's view of a session.
func newViewer() string { return "tab-" + randomString()[:16] }

func validViewer(v string) bool {
	if !strings.HasPrefix(v, "tab-") || len(v) > 64 {
		return false
	}
	for _, r := range v[4:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// keepalive comments on an idle stream (proxies and browsers drop silent
// ones) and renews the session's open hold.
func (l *live) keepalive(cancel context.CancelFunc, viewer string) {
	ping := time.NewTicker(l.s.keepalive)
	defer ping.Stop()
	hold := time.NewTicker(max(l.s.d.UI.HoldTTL()/3, time.Second))
	defer hold.Stop()
	for {
		select {
		case <-l.ctx.Done():
			return
		case <-ping.C:
			if err := l.out.Comment("ping"); err != nil {
				cancel()
				return
			}
		case <-hold.C:
			if l.x != nil {
				if _, err := l.s.d.UI.OpenSession(l.ctx, l.x.ID, viewer); err != nil && l.ctx.Err() == nil {
					l.s.log.Warn("renew session hold", desk.LogSessionID, l.x.ID, desk.LogErr, err)
				}
			}
		}
	}
}

// emit sends parts as one patch.
func (l *live) emit(seq int64, parts []part, err error) error {
	if err != nil {
		if desk.IsCode(err, desk.ENOTFOUND) {
			return nil // the session went away; the next page load says so
		}
		return err
	}
	if len(parts) == 0 {
		return nil
	}
	var b strings.Builder
	for _, p := range parts {
		if err := l.s.tmpl.ExecuteTemplate(&b, p.name, p.data); err != nil {
			return fmt.Errorf("render %s: %w", p.name, err)
		}
	}
	id := ""
	if seq > 0 {
		id = strconv.FormatInt(seq, 10) + "-" + strconv.FormatInt(l.tseq, 10)
	}
	return sendHTML(l.out, id, "patch", b.String())
}

func (l *live) refresh() ([]part, error) {
	_, at, err := l.s.d.Store.EventBounds(l.ctx)
	if err != nil {
		return nil, err
	}
	var parts []part
	if l.x != nil {
		sync, err := l.sync()
		if err != nil {
			return nil, err
		}
		parts = append(parts, sync...)
		rp, err := l.s.regionParts(l.ctx, l.view(), regionRun|regionQueue|regionCards|regionBudget|regionShelf)
		if err != nil {
			return nil, err
		}
		parts = append(parts, rp...)
	}
	sb, err := l.s.sidebar(l.ctx, l.ws, l.current())
	if err != nil {
		return nil, err
	}
	markThread(sb, l.thread)
	return stamp(append(parts, part{"sidebar-oob", sb}), at), nil
}

// view is the session as the page's surface shows it.
func (l *live) view() *desk.Session { return onSurface(l.x, l.surface) }

func (l *live) current() string {
	if l.x == nil {
		return ""
	}
	return l.x.ID
}

// findTail reads which transcript item the page ends with: the last one
// up to the transcript seq the page (or the reconnecting stream) has.
func (l *live) findTail(ctx context.Context) error {
	ms, err := l.s.d.Conversation.Transcript(ctx, l.surface, l.tseq+1, pageMessages)
	if err != nil {
		return err
	}
	if ts := turns(l.x.ID, ms, nil); len(ts) > 0 {
		l.tail = ts[len(ts)-1]
	}
	for _, m := range ms {
		l.known(m)
	}
	return nil
}

// stepTarget is where a new step of a turn goes: the end of an assistant
// block already on the page.
type stepTarget struct {
	Block string
	Step  *msgView
	Exe   string // live-step-oob: the execution whose text streams
}

// sync appends the transcript's messages the page does not have yet (an
// assistant message into its turn's block), and retires the streaming
// text they replace.
func (l *live) sync() ([]part, error) {
	ms, err := l.s.d.Conversation.Transcript(l.ctx, l.surface, 0, pageMessages)
	if err != nil {
		return nil, err
	}
	var fresh []*desk.Message
	for _, m := range ms {
		if m.Seq > l.tseq {
			fresh = append(fresh, m)
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	arts, err := l.s.d.Artifacts.List(l.ctx, l.x.ID)
	if err != nil {
		return nil, err
	}
	am := artifactMap(arts)
	var parts []part
	var views []*turnView // for the thread and episode cards
	defer func() { l.s.threadCards(l.ctx, l.x, views) }()
	for _, m := range fresh {
		v := message(l.x.ID, m, am)
		l.known(m)
		if m.Role == desk.RoleAssistant {
			views = append(views, &turnView{Steps: []*msgView{v}})
		} else {
			views = append(views, &turnView{User: v})
		}
		if m.Role != desk.RoleAssistant {
			l.tail = &turnView{User: v}
			parts = append(parts, part{"append-turns", []*turnView{l.tail}})
			continue
		}
		if l.bubbles[m.ExecutionID] {
			parts = append(parts, l.unbubble(m.ExecutionID))
		}
		if l.tail != nil && l.tail.User == nil && l.tail.Exe == m.ExecutionID {
			parts = append(parts, part{"append-step", stepTarget{Block: l.tail.ID, Step: v}})
			continue
		}
		l.tail = &turnView{ID: "turn-" + m.ID, Exe: m.ExecutionID, At: m.CreatedAt, Steps: []*msgView{v}}
		parts = append(parts, part{"append-turns", []*turnView{l.tail}})
	}
	l.tseq = fresh[len(fresh)-1].Seq
	return parts, nil
}

// handle turns one event into fragments.
func (l *live) handle(e *desk.Event) error {
	parts, err := l.parts(e)
	return l.emit(e.Seq, stamp(parts, e.Seq), err)
}

func (l *live) parts(e *desk.Event) ([]part, error) {
	var parts []part
	add := func(ps []part, err error) error {
		parts = append(parts, ps...)
		return err
	}
	mine := l.x != nil && e.SessionID == l.x.ID
	// "orchestrator" is the surface the page shows (a thread page shows
	// its handler's).
	orchestrator := mine && (e.SurfaceID == "" && l.surface == l.x.SurfaceID || e.SurfaceID == l.surface)
	typ := e.Type
	switch {
	case !mine:
	case typ == "assistant.delta" && orchestrator:
		opened := !l.bubbles[e.ExecutionID]
		if err := add(l.bubble(e.ExecutionID)); err != nil {
			return nil, err
		}
		if opened { // the run bar now says the reply is being written
			if err := add(l.s.regionParts(l.ctx, l.view(), regionRun)); err != nil {
				return nil, err
			}
		}
		var d struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(e.Data, &d)
		t := l.texts[e.ExecutionID]
		if t == nil {
			t = &liveText{}
			l.texts[e.ExecutionID] = t
		}
		parts = append(parts, part{"live-md", t.add(e.ExecutionID, d.Text)})
	case typ == "tool.call_started" && orchestrator:
		if err := add(l.bubble(e.ExecutionID)); err != nil {
			return nil, err
		}
		parts = append(parts, l.callStarted(e)...)
	case typ == "tool.args_delta" && orchestrator:
		parts = append(parts, l.argsDelta(e)...)
	case typ == "assistant.message" && orchestrator:
		if err := add(l.sync()); err != nil {
			return nil, err
		}
		if err := add(l.s.regionParts(l.ctx, l.view(), regionRun)); err != nil {
			return nil, err
		}
	case typ == "session.updated":
		x, err := l.s.d.Sessions.Get(l.ctx, l.x.ID)
		if err != nil {
			return nil, err
		}
		l.x = x
		parts = append(parts, part{"session-title-oob", x})
	case strings.HasPrefix(typ, "command.") && orchestrator:
		if err := add(l.sync()); err != nil {
			return nil, err
		}
		if err := add(l.s.regionParts(l.ctx, l.view(), regionRun)); err != nil {
			return nil, err
		}
		var c desk.Command
		if json.Unmarshal(e.Data, &c) == nil && c.CallID != "" {
			arts, err := l.s.d.Artifacts.List(l.ctx, l.x.ID)
			if err != nil {
				return nil, err
			}
			call := desk.MessageCall{ID: c.CallID, Name: c.Tool, Arguments: c.Arguments}
			sp := newSpan(l.x.ID, c.ExecutionID, call, &c, artifactMap(arts))
			sp.OOB = true
			// A span the page does not show (its message is older than
			// the page, or not written yet) has nothing to replace.
			if l.spans[sp.ID] {
				l.outs[c.ID] = true
				l.s.threadCards(l.ctx, l.x, []*turnView{{Steps: []*msgView{{Spans: []*span{sp}}}}})
				parts = append(parts, part{"span-oob", sp})
			}
		}
	case typ == "tool.output" && orchestrator:
		var d struct {
			CommandID string `json:"command_id"`
			Text      string `json:"text"`
		}
		_ = json.Unmarshal(e.Data, &d)
		if l.outs[d.CommandID] {
			parts = append(parts, part{"span-output", d})
		}
	case strings.HasPrefix(typ, "execution."):
		if orchestrator {
			if err := add(l.sync()); err != nil {
				return nil, err
			}
			if !desk.PhaseActive(strings.TrimPrefix(typ, "execution.")) && l.bubbles[e.ExecutionID] {
				parts = append(parts, l.unbubble(e.ExecutionID))
			}
		}
		if err := add(l.s.regionParts(l.ctx, l.view(), regionRun|regionQueue|regionCards|regionBudget)); err != nil {
			return nil, err
		}
	case strings.HasPrefix(typ, "queue."):
		if err := add(l.s.regionParts(l.ctx, l.view(), regionQueue)); err != nil {
			return nil, err
		}
	case strings.HasPrefix(typ, "approval."), strings.HasPrefix(typ, "input."), strings.HasPrefix(typ, "plan."):
		if err := add(l.s.regionParts(l.ctx, l.view(), regionCards|regionRun)); err != nil {
			return nil, err
		}
	case strings.HasPrefix(typ, "thread."), strings.HasPrefix(typ, "episode."):
		// A thread's state and latest report change its cards (and, on
		// its own page, its header).
		ths, err := l.s.d.Conversation.Threads(l.ctx, l.x.ID, "")
		if err != nil {
			return nil, err
		}
		for _, th := range ths {
			switch {
			case l.thread == "":
				parts = append(parts, part{"thread-card-oob", &threadCard{WS: l.ws, Ses: l.x.ID, T: th}})
			case th.ID == l.thread:
				parts = append(parts, part{"thread-state-oob", th})
			}
		}
	case strings.HasPrefix(typ, "artifact."):
		if err := add(l.s.regionParts(l.ctx, l.view(), regionShelf)); err != nil {
			return nil, err
		}
	case strings.HasPrefix(typ, "block."):
		if err := add(l.s.regionParts(l.ctx, l.view(), regionRun)); err != nil {
			return nil, err
		}
	}
	if sidebarEvent(typ) {
		sb, err := l.s.sidebar(l.ctx, l.ws, l.current())
		if err != nil {
			return nil, err
		}
		markThread(sb, l.thread)
		parts = append(parts, part{"sidebar-oob", sb})
	}
	for _, p := range parts {
		if rs, ok := p.data.(*runState); ok && rs.Active != nil {
			rs.Streaming = l.bubbles[rs.Active.ID]
		}
	}
	return parts, nil
}

// bubble makes sure the streaming text of an execution has its place at
// the end of the transcript, after the message that started the turn.
func (l *live) bubble(exe string) ([]part, error) {
	if l.bubbles[exe] {
		return nil, nil
	}
	parts, err := l.sync()
	if err != nil {
		return nil, err
	}
	l.bubbles[exe] = true
	if l.tail != nil && l.tail.User == nil && l.tail.Exe == exe {
		return append(parts, part{"live-step-oob", stepTarget{Block: l.tail.ID, Exe: exe}}), nil
	}
	// The turn has no block yet: open one holding only the streaming text.
	l.tail = &turnView{ID: "turn-" + exe, Exe: exe, At: time.Now(), Live: true}
	return append(parts, part{"append-turns", []*turnView{l.tail}}), nil
}

// sidebarEvent reports whether an event can change a row of the sidebar:
// its tone (running, waiting, error), its unread dot, or its place.
func sidebarEvent(typ string) bool {
	switch typ {
	case "execution.starting", "execution.ended", "execution.failed", "execution.interrupted",
		"session.created", "session.unread", "session.read", "session.updated", "approval.requested", "input.requested",
		"assistant.message":
		return true
	}
	return strings.HasPrefix(typ, "approval.") || strings.HasPrefix(typ, "input.") || strings.HasPrefix(typ, "plan.") ||
		strings.HasPrefix(typ, "thread.") || strings.HasPrefix(typ, "episode.")
}

// known notes the spans a transcript message puts on the page.
func (l *live) known(m *desk.Message) {
	for _, c := range m.ToolCalls {
		l.spans[spanID(m.ExecutionID, c.ID)] = true
	}
}

// unbubble removes an execution's streaming step and what it showed.
func (l *live) unbubble(exe string) part {
	delete(l.bubbles, exe)
	delete(l.texts, exe)
	// A runtime call's span id stays known: the stored step that replaces
	// the bubble shows the same span.
	for k := range l.calls {
		if strings.HasPrefix(k, exe+"#") || strings.HasPrefix(k, exe+"@") {
			delete(l.calls, k)
		}
	}
	return part{"live-remove", exe}
}

// callStarted opens a tool call's place in the streaming step. desk's
// agent numbers a step's calls (its argument deltas name the index); a
// runtime's call has a command already, so its place is the span itself
// (with an output pane), which the command's events then replace.
func (l *live) callStarted(e *desk.Event) []part {
	var d struct {
		Index     *int   `json:"index"`
		CallID    string `json:"call_id"`
		CommandID string `json:"command_id"`
		Tool      string `json:"tool"`
		Title     string `json:"title"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return nil
	}
	c := &liveCall{Tool: d.Tool}
	var key string
	switch {
	case d.Index != nil:
		key = e.ExecutionID + "#" + strconv.Itoa(*d.Index)
		c.ID = "live-" + e.ExecutionID + "-call-" + strconv.Itoa(*d.Index)
	case d.CallID != "":
		key = e.ExecutionID + "@" + d.CallID
		c.ID = spanID(e.ExecutionID, d.CallID)
	default:
		return nil
	}
	if l.calls[key] != nil {
		return nil
	}
	l.calls[key] = c
	v := c.view()
	if d.Title != "" {
		v.Target, v.Pending = clipLine(d.Title), false
	}
	if d.CommandID != "" && d.Index == nil {
		v.Out = d.CommandID
		l.spans[c.ID], l.outs[d.CommandID] = true, true
	}
	c.drawn = time.Now()
	return []part{{"live-call-new", map[string]any{"Exe": e.ExecutionID, "Call": v}}}
}

// argsDelta grows a call's arguments and redraws its preview (at most
// every argsEvery: a model may send a delta per token).
func (l *live) argsDelta(e *desk.Event) []part {
	var d struct {
		Index int    `json:"index"`
		Delta string `json:"delta"`
	}
	if json.Unmarshal(e.Data, &d) != nil {
		return nil
	}
	c := l.calls[e.ExecutionID+"#"+strconv.Itoa(d.Index)]
	if c == nil {
		return nil // the page joined after the call began
	}
	c.add(d.Delta)
	if time.Since(c.drawn) < argsEvery {
		return nil
	}
	c.drawn = time.Now()
	v := c.view()
	v.OOB = true
	return []part{{"live-call", v}}
}
