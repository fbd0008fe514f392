package web

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/httpdoor"
)

// logsView is the app log page: the newest entries matching the filters,
// and the live tail that appends later ones.
type logsView struct {
	Levels  []string
	Chosen  map[string]bool
	Source  string
	Text    string
	Entries []*logRow
	LastSeq int64
	Query   string // the filters, for the live tail
	Unread  *desk.LogUnread
}

// logViewer is whose seen mark the UI moves: the admin's, the same one the
// API's /v1/logs/seen moves.
func logViewer(r *request) (string, error) {
	if !r.p.Admin {
		return "", desk.Errorf(desk.EFORBIDDEN, "only the admin token may read the app log")
	}
	return desk.AdminActor, nil
}

// logFilter reads the filter form: level checkboxes, a source and text.
func (s *Server) logFilter(r *request) (desk.LogFilter, url.Values, error) {
	q := url.Values{}
	for _, l := range r.URL.Query()["level"] {
		if desk.LogLevelRank(l) >= 0 {
			q.Add("level", l)
		}
	}
	if v := strings.TrimSpace(r.URL.Query().Get("source")); v != "" {
		q.Set("source", v)
	}
	if v := strings.TrimSpace(r.URL.Query().Get("q")); v != "" {
		q.Set("q", v)
	}
	f, err := s.d.Logs.ParseQuery(q)
	return f, q, err
}

func (s *Server) logsView(r *request) (*logsView, error) {
	viewer, err := logViewer(r)
	if err != nil {
		return nil, err
	}
	f, q, err := s.logFilter(r)
	if err != nil {
		return nil, err
	}
	f.Newest, f.Limit = true, desk.LogDefaultLimit
	v := &logsView{Levels: desk.LogLevels, Chosen: map[string]bool{}, Source: q.Get("source"), Text: q.Get("q"), Query: q.Encode()}
	for _, l := range q["level"] {
		v.Chosen[l] = true
	}
	es, err := s.d.Logs.List(r.Context(), f)
	if err != nil {
		return nil, err
	}
	// Newest at the bottom, where the live tail appends.
	if v.LastSeq, err = s.d.Logs.LastSeq(r.Context()); err != nil {
		return nil, err
	}
	if v.Unread, err = s.d.Logs.Unread(r.Context(), viewer); err != nil {
		return nil, err
	}
	wsOf := map[string]string{}
	for _, e := range es {
		v.Entries = append(v.Entries, s.logRow(r.Context(), e, v.Unread.Seen, wsOf))
	}
	return v, nil
}

func (s *Server) logsPage(w http.ResponseWriter, r *request) error {
	v, err := s.logsView(r)
	if err != nil {
		return err
	}
	if isHTMX(r.Request) {
		return s.render(w, "log-list", v)
	}
	l, err := s.page(r, nil, "logs", "Logs", "logs-main", v)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

// logsStream tails the app log as rendered rows.
func (s *Server) logsStream(w http.ResponseWriter, r *request) error {
	if _, err := logViewer(r); err != nil {
		return err
	}
	f, _, err := s.logFilter(r)
	if err != nil {
		return err
	}
	f.Newest, f.Limit = false, 0
	if f.AfterSeq, err = strconv.ParseInt(r.URL.Query().Get("after"), 10, 64); err != nil || f.AfterSeq < 0 {
		f.AfterSeq = 0
	}
	if id, err := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64); err == nil && id > 0 {
		f.AfterSeq = id
	}
	ctx, end, err := s.d.Streams.Begin(r.Request)
	if err != nil {
		return err
	}
	defer end()
	out, err := newSSE(w)
	if err != nil {
		return err
	}
	wsOf := map[string]string{}
	err = s.d.Logs.Tail(ctx, f, func(e *desk.LogEntry) error {
		html, err := s.fragment("log-entry", s.logRow(ctx, e, 0, wsOf))
		if err != nil {
			return err
		}
		return sendHTML(out, strconv.FormatInt(e.Seq, 10), "entry", html)
	})
	if err != nil && ctx.Err() == nil && !httpdoor.ClientGone(r.Request, err) {
		s.log.Warn("log stream ended", desk.LogErr, err)
	}
	return nil
}

// logsSeen moves the seen mark to ?seq= (the newest entry shown).
func (s *Server) logsSeen(w http.ResponseWriter, r *request) error {
	viewer, err := logViewer(r)
	if err != nil {
		return err
	}
	seq, err := strconv.ParseInt(r.PostFormValue("seq"), 10, 64)
	if err != nil || seq < 0 {
		return desk.Errorf(desk.EINVALID, "seq must be a non-negative integer")
	}
	if _, err := s.d.Logs.MarkSeen(r.Context(), viewer, seq); err != nil {
		return err
	}
	return s.navUnread(w, r)
}

// navUnread is the warn and error counts in the navigation.
func (s *Server) navUnread(w http.ResponseWriter, r *request) error {
	if !r.p.Admin {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	u, err := s.d.Logs.Unread(r.Context(), desk.AdminActor)
	if err != nil {
		return err
	}
	return s.render(w, "nav-unread", u)
}

// logRow is one entry as the log page shows it: an error or warning
// normalised to one line (what failed, where, the kind of error), links
// to the session, execution and workspace it is about, and whether it is
// unread (a warning or error above the viewer's seen mark).
type logRow struct {
	*desk.LogEntry
	Unread bool
	Where  string // the source, and the component or request it names
	Kind   string // the error's kind, in a word or two
	Detail string // the error's first line, clipped
	WS     string // the workspace, for links
	Ses    string
	Exe    string
}

// maxLogDetail bounds the one-line error shown beside an entry.
const maxLogDetail = 200

func (s *Server) logRow(ctx context.Context, e *desk.LogEntry, seen int64, wsOf map[string]string) *logRow {
	r := &logRow{LogEntry: e, WS: e.WorkspaceID, Ses: e.SessionID}
	r.Unread = (e.Level == desk.LogWarn || e.Level == desk.LogError) && e.Seq > seen
	str := func(k string) string { v, _ := e.Fields[k].(string); return v }
	if r.Ses == "" {
		r.Ses = str(desk.LogSessionID)
	}
	if r.WS == "" {
		r.WS = str(desk.LogWorkspaceID)
	}
	r.Exe = str(desk.LogExecutionID)
	if r.Ses != "" && r.WS == "" {
		// The session's page needs its workspace: looked up once a page.
		ws, ok := wsOf[r.Ses]
		if !ok {
			if x, err := s.d.Sessions.Get(ctx, r.Ses); err == nil {
				ws = x.WorkspaceID
			}
			wsOf[r.Ses] = ws
		}
		r.WS = ws
	}
	if e.Level != desk.LogWarn && e.Level != desk.LogError {
		return r
	}
	r.Where = e.Source
	switch {
	case str(desk.LogMethod) != "" && str(desk.LogPath) != "":
		r.Where += " · " + str(desk.LogMethod) + " " + str(desk.LogPath)
	case str(desk.LogComponent) != "":
		r.Where += " · " + str(desk.LogComponent)
	case str(desk.LogPath) != "":
		r.Where += " · " + str(desk.LogPath)
	}
	if err := e.Fields[desk.LogErr]; err != nil {
		msg := strings.TrimSpace(fmt.Sprint(err))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i] + " …"
		}
		r.Detail = msg
		if len(msg) > maxLogDetail {
			r.Detail = clipTo(msg, maxLogDetail)
		}
		r.Kind = errKind(msg)
	}
	return r
}

func clipTo(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// errKinds name an error's kind from the words Go's errors use; the
// first match wins, in this order.
var errKinds = []struct{ kind, words string }{
	{"timeout", "deadline exceeded|timeout|timed out"},
	{"canceled", "context canceled"},
	{"network", "connection refused|connection reset|no such host|broken pipe|network is unreachable|EOF"},
	{"not found", "not found|no such file"},
	{"permission", "permission denied|forbidden|unauthorized|operation not permitted"},
	{"conflict", "conflict|already exists|duplicate key|UNIQUE constraint"},
	{"store", "database is locked|SQLSTATE|sql:|sqlite|postgres"},
	{"sandbox", "bwrap|bubblewrap|sandbox|seccomp"},
	{"invalid input", "invalid|malformed|cannot unmarshal|syntax error"},
	{"out of space", "no space left|quota|too large"},
}

func errKind(msg string) string {
	low := strings.ToLower(msg)
	for _, k := range errKinds {
		for _, w := range strings.Split(k.words, "|") {
			if strings.Contains(low, strings.ToLower(w)) {
				return k.kind
			}
		}
	}
	return "error"
}
