package web

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

// inboxView is the Inbox page: what waits on the caller across sessions.
type inboxView struct {
	Available bool
	In        *desk.Inbox
}

func (s *Server) inboxView(r *request) (*inboxView, error) {
	v := &inboxView{Available: s.d.Inbox != nil}
	if !v.Available {
		return v, nil
	}
	var err error
	v.In, err = s.d.Inbox.Inbox(r.Context())
	return v, err
}

func (s *Server) inboxPage(w http.ResponseWriter, r *request) error {
	v, err := s.inboxView(r)
	if err != nil {
		return err
	}
	if isHTMX(r.Request) {
		return s.render(w, "inbox-main", v)
	}
	l, err := s.page(r, nil, "inbox", "Inbox", "inbox-main", v)
	if err != nil {
		return err
	}
	return s.render(w, "layout", l)
}

// inboxDecide decides an approval from the Inbox page and answers the
// refreshed inbox (the session page's own handler answers that page's
// regions instead).
func (s *Server) inboxDecide(w http.ResponseWriter, r *request) error {
	choice, err := desk.ApprovalDecision{Decision: r.PostFormValue("decision"), OptionID: r.PostFormValue("option_id")}.Choice()
	if err != nil {
		return err
	}
	if _, err := s.d.Conversation.DecideApproval(r.Context(), r.PathValue("apr"), choice, r.PostFormValue("reason")); err != nil {
		return err
	}
	v, err := s.inboxView(r)
	if err != nil {
		return err
	}
	return s.render(w, "inbox-main", v)
}

// inboxCount is the top bar's count of what waits on the caller.
func (s *Server) inboxCount(w http.ResponseWriter, r *request) error {
	v, err := s.inboxView(r)
	if err != nil {
		return err
	}
	n := 0
	if v.In != nil {
		n = len(v.In.Items)
	}
	return s.render(w, "inbox-count", n)
}
