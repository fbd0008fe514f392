package httpapi

import (
	"context"
	"net/http"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/sse"
)

// LogQuery parses the log filters of a request.
type LogQuery func(r *http.Request) (desk.LogFilter, error)

// logViewer is who reads the operator log: the app log describes the whole
// server, so only the admin token reads it.
func logViewer(r *http.Request) (string, error) {
	p, _ := desk.PrincipalFrom(r.Context())
	if !p.Admin {
		return "", desk.Errorf(desk.EFORBIDDEN, "only the admin token may read the app log")
	}
	return desk.AdminActor, nil
}

func (s *Server) listLogs(w http.ResponseWriter, r *http.Request) error {
	if _, err := logViewer(r); err != nil {
		return err
	}
	f, err := s.LogQuery(r)
	if err != nil {
		return err
	}
	es, err := s.Logs.List(r.Context(), f)
	if err != nil {
		return err
	}
	last, err := s.Logs.LastSeq(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.LogList{Entries: nonNil(es), LastSeq: last})
	return nil
}

func (s *Server) logsUnread(w http.ResponseWriter, r *http.Request) error {
	viewer, err := logViewer(r)
	if err != nil {
		return err
	}
	u, err := s.Logs.Unread(r.Context(), viewer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) logsSeen(w http.ResponseWriter, r *http.Request) error {
	viewer, err := logViewer(r)
	if err != nil {
		return err
	}
	var in struct {
		desk.LogSeen
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Seq < 0 {
		return desk.Errorf(desk.EINVALID, "seq must not be negative")
	}
	mark, err := s.Logs.MarkSeen(r.Context(), viewer, in.Seq)
	if err != nil {
		return err
	}
	u, err := s.Logs.Unread(r.Context(), viewer)
	if err != nil {
		return err
	}
	u.Seen = mark
	writeJSON(w, http.StatusOK, u)
	return nil
}

// streamLogs tails the log over server-sent events; the event id is the
// entry's seq, so Last-Event-ID resumes exactly after the last entry seen.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request) error {
	if _, err := logViewer(r); err != nil {
		return err
	}
	f, err := s.LogQuery(r)
	if err != nil {
		return err
	}
	after, err := sse.LastEventID(r)
	if err != nil {
		return err
	}
	if after > 0 {
		f.AfterSeq = after
	}
	ctx, end, err := s.Streams.Begin(r)
	if err != nil {
		return err
	}
	defer end()
	out := sse.New(w)
	ctx, cancel := context.WithCancel(ctx)
	defer s.Streams.Go(func() { out.KeepAlive(ctx, cancel) })()
	defer cancel()
	err = s.Logs.Tail(ctx, f, func(e *desk.LogEntry) error {
		return out.JSON(e.Seq, "log", e)
	})
	if ctx.Err() != nil {
		return nil // the client went away; nothing to answer
	}
	if err != nil {
		_ = out.JSON(0, "error", map[string]any{"code": desk.ErrorCode(err), "message": desk.ErrorMessage(err)})
	}
	return nil
}
