package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func inboxRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/inbox", Tag: "inbox", Summary: "Everything waiting on the caller across the sessions and routines it can see, oldest first: pending approvals, questions, plans awaiting review, and routines whose latest run failed.",
			Resp: "Inbox", Status: 200, handle: (*Server).inbox},
	}
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request) error {
	if s.Inbox == nil {
		return desk.Errorf(desk.EUNAVAILABLE, "the inbox is not available on this desk")
	}
	in, err := s.Inbox.Inbox(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, in)
	return nil
}
