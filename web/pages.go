package web

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// layout is the frame of every full page: navigation, the workspace's
// sidebar, and one main template.
type layout struct {
	Title      string
	CSRF       string
	Admin      bool
	Workspaces []*desk.Workspace
	// WSSuffix holds the id suffix of each listed workspace whose name
	// another one shares (idSuffixes).
	WSSuffix map[string]string
	WS       *desk.Workspace
	Side     *sidebar
	Nav      string // which navigation entry is current
	Main     string // the template of the main area
	Data     any
	Version  string
}

// sidebar is a workspace's session list in its three groups.
type sidebar struct {
	WS                         string
	Current                    string
	Pinned, Recent, Archived   []row
	HasPinned                  bool
	PinnedN, RecentN, ArchiveN int
	// Thread is the open thread, if a thread page shows the sidebar.
	Thread string
}

// row is one session of the sidebar.
type row struct {
	S       *desk.Session
	Tone    string // running, waiting, error or ""
	Current bool
	// Activity is the session's last conversation activity: its last
	// turn's request or settle, or its creation. The sidebar orders by it
	// (not by metadata changes such as pinning or a read mark).
	Activity time.Time
	// Threads are the session's handler threads, nested under its row.
	Threads []threadRow
}

// ToneLabel is the words of a row's status dot (the dot is never the only
// sign: its shape differs and it carries these words).
func (r row) ToneLabel() string { return toneLabel(r.Tone) }

func toneLabel(tone string) string {
	switch tone {
	case "running":
		return "Running"
	case "waiting":
		return "Waiting for you (an approval, an answer or a plan decision)"
	case "error":
		return "Last turn failed"
	}
	return "Idle"
}

// Name is what a row shows: the title, or the readable signature of an
// untitled session.
func (r row) Name() string {
	if strings.TrimSpace(r.S.Title) != "" {
		return r.S.Title
	}
	return r.S.Signature
}

func (s *Server) page(r *request, ws *desk.Workspace, nav, title, main string, data any) (*layout, error) {
	l := &layout{Title: title, CSRF: r.csrf, Admin: r.p.Admin, WS: ws, Nav: nav, Main: main, Data: data, Version: s.d.Version}
	var err error
	if l.Workspaces, err = s.d.Workspaces.ListWorkspaces(r.Context()); err != nil {
		return nil, err
	}
	l.WSSuffix = workspaceSuffixes(l.Workspaces)
	if ws != nil {
		cur := ""
		switch x := data.(type) {
		case *sessionView:
			cur = x.S.ID
		case *threadView:
			cur = x.S.ID
		}
		if l.Side, err = s.sidebar(r.Context(), ws.ID, cur); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// workspaceOf returns the workspace a path names, if the caller may see it.
func (s *Server) workspaceOf(r *request) (*desk.Workspace, error) {
	id := r.PathValue("ws")
	if !desk.HasPrefix(id, desk.PrefixWorkspace) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %q not found", id)
	}
	return s.d.Workspaces.GetWorkspace(r.Context(), id)
}

// home opens the first workspace the caller can see, or offers to create
// one.
func (s *Server) home(w http.ResponseWriter, r *request) error {
	wss, err := s.d.Workspaces.ListWorkspaces(r.Context())
	if err != nil {
		return err
	}
	for _, ws := range wss {
		if ws.State == desk.WorkspaceActive {
			http.Redirect(w, r.Request, "/w/"+ws.ID, http.StatusSeeOther)
			return nil
		}
	}
	l, err := s.page(r, nil, "home", "desk", "home-main", nil)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *request) error {
	ws, err := s.d.Workspaces.CreateWorkspace(r.Context(), desk.WorkspaceCreate{
		Name:               strings.TrimSpace(r.PostFormValue("name")),
		AllowDuplicateName: r.PostFormValue("allow_duplicate_name") != "",
	})
	if err != nil {
		return err
	}
	redirect(w, r, "/w/"+ws.ID)
	return nil
}

// redirect sends the browser to another page, through htmx or not.
func redirect(w http.ResponseWriter, r *request, to string) {
	if isHTMX(r.Request) {
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r.Request, to, http.StatusSeeOther)
}

func (s *Server) workspacePage(w http.ResponseWriter, r *request) error {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	// The page's stream (the sidebar's live rows) resumes after the
	// newest event before the sidebar was read.
	_, after, err := s.d.Store.EventBounds(r.Context())
	if err != nil {
		return err
	}
	data, err := s.newSessionData(r, ws)
	if err != nil {
		return err
	}
	data.After = after
	l, err := s.page(r, ws, "sessions", ws.Name, "workspace-main", data)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

func (s *Server) newSessionPage(w http.ResponseWriter, r *request) error {
	return s.workspacePage(w, r)
}

// newSession is the new-session form: the models this desk offers.
type newSession struct {
	WS      *desk.Workspace
	Models  []string
	Default string
	Note    string
	After   int64
	// Profiles are the workspace's agent profiles; Reasoning the models
	// declared as reasoning (the only ones a reasoning effort is offered
	// for).
	Profiles  []*desk.Profile
	Reasoning map[string]bool
}

func (s *Server) newSessionData(r *request, ws *desk.Workspace) (*newSession, error) {
	def, models := s.models()
	n := &newSession{WS: ws, Default: def, Models: models, Reasoning: map[string]bool{}}
	if s.d.Profiles != nil {
		ps, err := s.d.Profiles.ListProfiles(r.Context(), ws.ID)
		if err != nil {
			return nil, err
		}
		n.Profiles = ps
	}
	if s.d.Models != nil {
		for _, m := range models {
			if s.d.Models.Reasoning(m) {
				n.Reasoning[m] = true
			}
		}
	}
	switch {
	case def == "" && r.p.Admin:
		n.Note = "No default model: set DESK_MODEL (openai:<model>, anthropic:<model> or openai-compatible:<base-url>#<model>) and restart desk. Script sessions still work."
	case def == "":
		n.Note = "This desk has no default model yet; ask the person who runs it to set one. Script sessions still work."
	}
	return n, nil
}

// models are the default model ("" for none) and every model a session
// may choose, the default first.
func (s *Server) models() (string, []string) {
	if s.d.Models == nil {
		return "", []string{"script"}
	}
	return s.d.Models.Default(), s.d.Models.Models()
}

func (s *Server) createSession(w http.ResponseWriter, r *request) error {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	model := r.PostFormValue("model")
	in := desk.SessionCreate{WorkspaceID: ws.ID, Title: r.PostFormValue("title"), Model: model,
		Profile: r.PostFormValue("profile"), ReasoningEffort: r.PostFormValue("reasoning_effort")}
	if def, _ := s.models(); model == def {
		in.Model = "" // follow the server's default as it changes
	}
	if in.Profile != "" && r.PostFormValue("model_chosen") == "" {
		in.Model = "" // the profile's model, unless a person picked one
	}
	if model == "script" {
		sc := strings.TrimSpace(r.PostFormValue("script"))
		if sc == "" {
			return desk.Errorf(desk.EINVALID, `a script session needs a script: {"steps":[{"text":"…"}]}`)
		}
		in.Script = []byte(sc)
	}
	// The palette's "> text" starts a session on the default model with
	// the text as its first message (desk names it from that message).
	first := r.PostFormValue("first_message")
	if first != "" && strings.TrimSpace(first) == "" {
		return desk.Errorf(desk.EINVALID, "the first message is empty")
	}
	if def, _ := s.models(); first != "" && in.Model == "" && def == "" {
		// Refused before anything is created: no orphan session.
		if r.p.Admin {
			return desk.Errorf(desk.ECONFLICT, "there is no default model to answer the first message: set DESK_MODEL and restart desk, or start a script session from New session")
		}
		return desk.Errorf(desk.ECONFLICT, "there is no default model to answer the first message; ask the person who runs this desk to set one")
	}
	x, err := s.d.Sessions.Create(r.Context(), in)
	if err != nil {
		return err
	}
	if first != "" {
		if _, err := s.d.Exec.Submit(r.Context(), x.ID, desk.SubmitInput{Text: first, Channel: "web"}); err != nil {
			return err
		}
	}
	redirect(w, r, "/w/"+ws.ID+"/s/"+x.ID)
	return nil
}

// sidebar lists a workspace's sessions: pinned, the rest by recency, and
// the archived ones.
func (s *Server) sidebar(ctx context.Context, ws, current string) (*sidebar, error) {
	xs, err := s.d.Sessions.List(ctx, desk.SessionFilter{WorkspaceID: ws})
	if err != nil {
		return nil, err
	}
	sb := &sidebar{WS: ws, Current: current}
	rows := make([]row, 0, len(xs))
	for _, x := range xs {
		rw := row{S: x, Current: x.ID == current}
		rw.Threads = s.threadRows(ctx, x, "")
		tone, at := s.tone(ctx, x)
		rw.Activity = at
		if !x.Archived {
			rw.Tone = tone
		}
		rows = append(rows, rw)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Activity.After(rows[j].Activity) })
	for _, rw := range rows {
		x := rw.S
		switch {
		case x.Archived:
			sb.Archived = append(sb.Archived, rw)
		case x.Pinned:
			sb.Pinned = append(sb.Pinned, rw)
		default:
			sb.Recent = append(sb.Recent, rw)
		}
	}
	sb.PinnedN, sb.RecentN, sb.ArchiveN = len(sb.Pinned), len(sb.Recent), len(sb.Archived)
	return sb, nil
}

// tone is a session's state at a glance: running, waiting for a person
// (an approval, a question, a plan), or its last turn failed; and when its
// conversation last moved.
func (s *Server) tone(ctx context.Context, x *desk.Session) (string, time.Time) {
	at := x.CreatedAt
	// The session's row shows its orchestrator: a handler thread's turns
	// never make it look running, waiting or broken.
	exes, err := s.d.Store.ListExecutions(ctx, x.ID, 50)
	if err != nil {
		return "", at
	}
	var last *desk.Execution
	for _, e := range exes {
		if e.SurfaceID == x.SurfaceID {
			last = e
			break
		}
	}
	if last == nil {
		return "", at
	}
	for _, t := range []*time.Time{&last.RequestedAt, last.StartedAt, last.FinishedAt} {
		if t != nil && t.After(at) {
			at = *t
		}
	}
	if desk.PhaseActive(last.Phase) {
		if aps, err := s.d.Conversation.Approvals(ctx, x.ID, true); err == nil {
			for _, a := range aps {
				if a.ExecutionID == last.ID {
					return "waiting", at
				}
			}
		}
		if s.pendingInputOf(ctx, x.ID, last.ID) {
			return "waiting", at
		}
		if ps, err := s.pendingPlans(ctx, last); err == nil && len(ps) > 0 {
			return "waiting", at
		}
		return "running", at
	}
	if s.pendingInputOn(ctx, x.ID, x.SurfaceID) {
		return "waiting", at
	}
	if last.Phase == desk.PhaseFailed {
		return "error", at
	}
	return "", at
}

// pendingInputOf reports whether execution exe waits on a question.
func (s *Server) pendingInputOf(ctx context.Context, ses, exe string) bool {
	return s.pendingInputWhere(ctx, ses, func(q *desk.InputRequest) bool { return q.ExecutionID == exe })
}

// pendingInputOn reports whether a question of surface waits (a
// non-blocking one outlives its turn).
func (s *Server) pendingInputOn(ctx context.Context, ses, surface string) bool {
	return s.pendingInputWhere(ctx, ses, func(q *desk.InputRequest) bool { return q.SurfaceID == surface || q.SurfaceID == "" })
}

func (s *Server) pendingInputWhere(ctx context.Context, ses string, ok func(*desk.InputRequest) bool) bool {
	rs, err := s.d.Conversation.InputRequests(ctx, ses)
	if err != nil {
		return false
	}
	for _, q := range rs {
		if q.Status == desk.InputPending && ok(q) {
			return true
		}
	}
	return false
}

// currentSession reads which session the page that sent an htmx request
// shows, so a sidebar rendered for it marks the right row.
func currentSession(r *http.Request) string {
	u, err := url.Parse(r.Header.Get("HX-Current-URL"))
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) == 4 && parts[0] == "w" && parts[2] == "s" {
		return parts[3]
	}
	return ""
}

func (s *Server) sidebarFragment(w http.ResponseWriter, r *request) error {
	ws, err := s.workspaceOf(r)
	if err != nil {
		return err
	}
	sb, err := s.sidebar(r.Context(), ws.ID, currentSession(r.Request))
	if err != nil {
		return err
	}
	return s.writeFragments(w, part{"sidebar-oob", sb})
}

// updateSession pins, archives, renames or marks a session unread from its
// row menu, and answers the re-rendered sidebar.
func (s *Server) updateSession(w http.ResponseWriter, r *request) error {
	ses := r.PathValue("ses")
	var u desk.SessionUpdate
	flag := func(name string) *bool {
		switch r.PostFormValue(name) {
		case "true":
			t := true
			return &t
		case "false":
			f := false
			return &f
		}
		return nil
	}
	u.Pinned, u.Archived, u.Unread = flag("pinned"), flag("archived"), flag("unread")
	if r.PostFormValue("rename") != "" {
		t := r.Header.Get("HX-Prompt")
		if t == "" {
			t = r.PostFormValue("title")
		}
		if strings.TrimSpace(t) == "" {
			return desk.Errorf(desk.EINVALID, "a new title is required")
		}
		u.Title = &t
	}
	if u.Pinned == nil && u.Archived == nil && u.Unread == nil && u.Title == nil {
		return desk.Errorf(desk.EINVALID, "nothing to change: send pinned, archived, unread or rename")
	}
	x, err := s.d.Sessions.Update(r.Context(), ses, u)
	if err != nil {
		return err
	}
	cur := currentSession(r.Request)
	sb, err := s.sidebar(r.Context(), x.WorkspaceID, cur)
	if err != nil {
		return err
	}
	parts := []part{{"sidebar-oob", sb}}
	if cur == x.ID && u.Title != nil {
		parts = append(parts, part{"session-title-oob", x})
	}
	return s.writeFragments(w, parts...)
}

// switchAgent changes the session's profile, model or reasoning effort
// for its next turn (the header's switcher); only what differs from the
// session is sent, and the page reloads to show the marker.
func (s *Server) switchAgent(w http.ResponseWriter, r *request) error {
	x, err := s.d.Sessions.Get(r.Context(), r.PathValue("ses"))
	if err != nil {
		return err
	}
	var u desk.SessionUpdate
	if p := r.PostFormValue("profile"); p != "" && p != x.Profile {
		u.Profile = &p
	} else {
		def, _ := s.models()
		cur := firstNonEmpty(x.Model, def)
		if m := r.PostFormValue("model"); m != "" && m != cur {
			u.Model = &m
		}
		if e := r.PostFormValue("reasoning_effort"); e != x.ReasoningEffort && u.Model == nil && r.Form.Has("reasoning_effort") {
			u.ReasoningEffort = &e
		}
	}
	if u.Profile == nil && u.Model == nil && u.ReasoningEffort == nil {
		return nil
	}
	if _, err := s.d.Sessions.Update(r.Context(), x.ID, u); err != nil {
		return err
	}
	redirect(w, r, "/w/"+x.WorkspaceID+"/s/"+x.ID)
	return nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *Server) deleteSession(w http.ResponseWriter, r *request) error {
	x, err := s.d.Sessions.Get(r.Context(), r.PathValue("ses"))
	if err != nil {
		return err
	}
	if err := s.d.Sessions.Delete(r.Context(), x.ID); err != nil {
		return err
	}
	cur := currentSession(r.Request)
	if cur == x.ID || !isHTMX(r.Request) {
		redirect(w, r, "/w/"+x.WorkspaceID)
		return nil
	}
	sb, err := s.sidebar(r.Context(), x.WorkspaceID, cur)
	if err != nil {
		return err
	}
	return s.writeFragments(w, part{"sidebar-oob", sb})
}
