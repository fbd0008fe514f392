package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func transferRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/workspaces/{ws}/export", Tag: "transfer", Summary: "Stream the workspace as a tar.gz (admin): workspace/, checkout/, skills/, knowledge/, conversations/, the archive, items, groups and revisions, plus its rows as NDJSON under meta/. Never .scratch/, host paths or tokens. Deterministic: an unchanged workspace exports to the same bytes.",
			Query: []param{{Name: "skip_workspace", Type: "boolean", Doc: "leave the actors' file areas (workspace/) out"}},
			Resp:  "binary", Status: 200, handle: (*Server).exportWorkspace},
		{Method: "POST", Path: "/v1/workspaces/import", Tag: "transfer", Summary: "Recreate a workspace from an export (admin; tar.gz body, streamed): same id (409 if it exists here), all rows in one transaction. Unsafe archives (absolute or .. paths, links out, devices, over the size limit) are refused and leave nothing behind.",
			Query: []param{{Name: "new_tokens", Type: "boolean", Doc: "mint a fresh token for every imported actor (exports never carry tokens)"}},
			Body:  "binary", Resp: "ImportResult", Status: 201, handle: (*Server).importWorkspace},
	}
}

// lazyWriter sends the success headers with the first byte, so a refusal
// that comes before any output is still an ordinary JSON error.
type lazyWriter struct {
	w       http.ResponseWriter
	header  func(http.Header)
	started bool
}

func (l *lazyWriter) Write(p []byte) (int, error) {
	if !l.started {
		l.started = true
		l.header(l.w.Header())
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(p)
}

func (s *Server) exportWorkspace(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	skip, err := boolParam(r, "skip_workspace")
	if err != nil {
		return err
	}
	lw := &lazyWriter{w: w, header: func(h http.Header) {
		h.Set("Content-Type", "application/gzip")
		h.Set("Content-Disposition", `attachment; filename="`+ws+`.tar.gz"`)
		h.Set("Cache-Control", "no-store")
	}}
	err = s.Transfer.Export(r.Context(), ws, desk.ExportOptions{SkipWorkspace: skip != nil && *skip}, lw)
	if err != nil {
		if !lw.started {
			return err
		}
		// The archive is cut short: abort the response so the client
		// sees a broken transfer, never a clean end of a partial archive.
		s.logFailure(r, "export failed part-way", err, desk.LogWorkspaceID, ws)
		panic(http.ErrAbortHandler)
	}
	if !lw.started {
		lw.Write(nil)
	}
	return nil
}

func (s *Server) importWorkspace(w http.ResponseWriter, r *http.Request) error {
	nt, err := boolParam(r, "new_tokens")
	if err != nil {
		return err
	}
	res, err := s.Transfer.Import(r.Context(), r.Body, desk.ImportOptions{NewTokens: nt != nil && *nt, Size: r.ContentLength})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, res)
	return nil
}
