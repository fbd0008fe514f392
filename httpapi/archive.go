package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/desk-runtime/desk"
)

// archiveWorkspace checks that the caller may read the workspace's ledger:
// it holds every actor's conversations, so only the admin token reads it.
func (s *Server) archiveWorkspace(r *http.Request) (string, error) {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return "", err
	}
	p, _ := desk.PrincipalFrom(r.Context())
	if !p.Admin {
		return "", desk.Errorf(desk.EFORBIDDEN, "only the admin token may read a workspace's archive")
	}
	if _, err := s.Workspaces.GetWorkspace(r.Context(), ws); err != nil {
		return "", err
	}
	return ws, nil
}

// timeParam accepts RFC 3339 or a plain date (midnight UTC).
func timeParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, desk.Errorf(desk.EINVALID, "query parameter %s=%q must be an RFC 3339 time or a YYYY-MM-DD date", name, v)
}

// readArchive streams the matching records as NDJSON, byte for byte as
// stored. Lines that do not parse (the one fragment a crash may leave) are
// skipped; the X-Desk-Skipped trailer says how many.
func (s *Server) readArchive(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.archiveWorkspace(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	f := desk.ArchiveFilter{Channel: q.Get("channel"), Conversation: q.Get("conversation")}
	if f.From, err = timeParam(r, "from"); err != nil {
		return err
	}
	if f.To, err = timeParam(r, "to"); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Trailer", "X-Desk-Skipped")
	rc := http.NewResponseController(w)
	started := false
	n := 0
	sum, err := s.Archive.ReadRaw(r.Context(), ws, f, func(raw []byte) error {
		if !started {
			w.WriteHeader(http.StatusOK)
			started = true
		}
		if _, err := w.Write(append(raw, '\n')); err != nil {
			return err
		}
		if n++; n%256 == 0 {
			return rc.Flush()
		}
		return nil
	})
	if err != nil && !started {
		return err
	}
	if !started {
		w.WriteHeader(http.StatusOK)
	}
	w.Header().Set("X-Desk-Skipped", strconv.Itoa(sum.SkippedTotal))
	return nil
}

func (s *Server) archiveDays(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.archiveWorkspace(r)
	if err != nil {
		return err
	}
	days, err := s.Archive.Days(r.Context(), ws)
	if err != nil {
		return err
	}
	files, err := s.Archive.List(r.Context(), ws, r.URL.Query().Get("day"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ArchiveDays{Days: nonNil(days), Files: nonNil(files)})
	return nil
}
