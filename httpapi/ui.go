package httpapi

import (
	"net/http"
	"strings"

	"github.com/desk-runtime/desk"
)

var surfaceQuery = []param{{Name: "surface", Type: "string", Doc: "default: the orchestrator surface"}}

func uiRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/sessions/{ses}/draft", Tag: "ui", Summary: "The composer draft of a surface (an empty text when there is none).",
			Query: surfaceQuery, Resp: "Draft", Status: 200, handle: (*Server).getDraft},
		{Method: "PUT", Path: "/v1/sessions/{ses}/draft", Tag: "ui", Summary: "Save the composer draft of a surface (at most 256 KiB); an empty text clears it.",
			Query: surfaceQuery, Body: "DraftPut", Resp: "Draft", Status: 200, handle: (*Server).putDraft},
		{Method: "POST", Path: "/v1/sessions/{ses}/open", Tag: "ui", Summary: "Hold the session open for a viewer for 30 s (renew while showing it): clears unread, and a turn that finishes while any hold lasts leaves it read.",
			Body: "SessionView", Resp: "Session", Status: 200, handle: (*Server).openSession},
		{Method: "POST", Path: "/v1/sessions/{ses}/close", Tag: "ui", Summary: "End a viewer's hold on the session at once; turns finishing after it mark the session unread.",
			Body: "SessionView", Status: 204, handle: (*Server).closeSession},
	}
}

func (s *Server) getDraft(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	d, err := s.UI.Draft(r.Context(), ses, r.URL.Query().Get("surface"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) putDraft(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	var in struct {
		Text *string `json:"text"`
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if in.Text == nil {
		return desk.Errorf(desk.EINVALID, `text is required: {"text": "…"} ("" clears the draft)`)
	}
	d, err := s.UI.SaveDraft(r.Context(), ses, r.URL.Query().Get("surface"), *in.Text)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

func (s *Server) viewRequest(w http.ResponseWriter, r *http.Request) (string, string, error) {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return "", "", err
	}
	var in struct {
		desk.SessionView
		ignoredOrigin
	}
	if err := decodeOptional(w, r, &in); err != nil {
		return "", "", err
	}
	return ses, strings.TrimSpace(in.Viewer), nil
}

func (s *Server) openSession(w http.ResponseWriter, r *http.Request) error {
	ses, viewer, err := s.viewRequest(w, r)
	if err != nil {
		return err
	}
	x, err := s.UI.OpenSession(r.Context(), ses, viewer)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) error {
	ses, viewer, err := s.viewRequest(w, r)
	if err != nil {
		return err
	}
	if err := s.UI.Leave(r.Context(), ses, viewer); err != nil {
		return err
	}
	return noContent(w)
}
