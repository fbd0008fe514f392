package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

var errNoUsage = desk.Errorf(desk.EUNAVAILABLE, "this server does not record model usage")

func usageRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/sessions/{ses}/usage", Tag: "agent", Summary: "Tokens the session's model calls used, as the providers reported them: totals and a breakdown per model (turn steps, auto-review and title calls).",
			Resp: "SessionUsage", Status: 200, handle: (*Server).sessionUsage},
		{Method: "GET", Path: "/v1/workspaces/{ws}/usage", Tag: "agent", Summary: "Tokens the workspace's model calls used, per model and in total (an actor token: its own sessions only), with the token budget and the workspace-wide figure it is compared with.",
			Resp: "WorkspaceUsage", Status: 200, handle: (*Server).workspaceUsage},
	}
}

func (s *Server) sessionUsage(w http.ResponseWriter, r *http.Request) error {
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	if s.Usage == nil {
		return errNoUsage
	}
	u, err := s.Usage.SessionUsage(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}

func (s *Server) workspaceUsage(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	if _, err := s.Workspaces.GetWorkspace(r.Context(), ws); err != nil {
		return err
	}
	if s.Usage == nil {
		return errNoUsage
	}
	u, err := s.Usage.WorkspaceUsage(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, u)
	return nil
}
