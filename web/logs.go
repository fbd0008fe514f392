package web

import (
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
	Entries []*desk.LogEntry
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
	if v.Entries, err = s.d.Logs.List(r.Context(), f); err != nil {
		return nil, err
	}
	// Newest at the bottom, where the live tail appends.
	if v.LastSeq, err = s.d.Logs.LastSeq(r.Context()); err != nil {
		return nil, err
	}
	if v.Unread, err = s.d.Logs.Unread(r.Context(), viewer); err != nil {
		return nil, err
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
	err = s.d.Logs.Tail(ctx, f, func(e *desk.LogEntry) error {
		html, err := s.fragment("log-entry", e)
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
