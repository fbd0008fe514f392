package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func threadRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/sessions/{ses}/threads", Tag: "threads", Summary: "The session's handler threads in start order, each with its objective state, latest episode summary and /workspace branch (never a transcript).",
			Query: []param{{Name: "thread_group_id", Type: "string", Doc: "only the threads of this thread group"}},
			Resp:  "ThreadList", Status: 200, handle: (*Server).listThreads},
		{Method: "GET", Path: "/v1/sessions/{ses}/thread-groups", Tag: "threads", Summary: "The session's thread groups (one per thread_start that did not name a group), each with its thread ids in start order.",
			Resp: "ThreadGroupList", Status: 200, handle: (*Server).listThreadGroups},
		{Method: "GET", Path: "/v1/threads/{thr}", Tag: "threads", Summary: "One handler thread, with the branch its /workspace has checked out (git).",
			Resp: "Thread", Status: 200, handle: (*Server).getThread},
		{Method: "GET", Path: "/v1/threads/{thr}/episodes", Tag: "threads", Summary: "A thread's durable episodes in the order recorded.",
			Resp: "EpisodeList", Status: 200, handle: (*Server).threadEpisodes},
	}
}

// conversation answers unavailable rather than panicking when the server
// was built without the conversation service.
func (s *Server) conversation() (desk.ConversationService, error) {
	if s.Conversation == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "threads are not served by this desk")
	}
	return s.Conversation, nil
}

// visibleThread finds a thread the caller may see (the conversation
// service's rule), with the branch its /workspace has checked out: a
// handler thread runs in its session's /workspace.
func (s *Server) visibleThread(r *http.Request) (*desk.Thread, error) {
	c, err := s.conversation()
	if err != nil {
		return nil, err
	}
	id, err := pathID(r, "thr", desk.PrefixThread)
	if err != nil {
		return nil, err
	}
	t, err := c.Thread(r.Context(), id)
	if err != nil {
		return nil, err
	}
	x, err := s.Sessions.Get(r.Context(), t.SessionID)
	if err != nil {
		return nil, err
	}
	t.Git = x.Git
	return t, nil
}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) error {
	c, err := s.conversation()
	if err != nil {
		return err
	}
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	ts, err := c.Threads(r.Context(), ses, r.URL.Query().Get("thread_group_id"))
	if err != nil {
		return err
	}
	if len(ts) > 0 {
		x, err := s.Sessions.Get(r.Context(), ses)
		if err != nil {
			return err
		}
		for _, t := range ts {
			t.Git = x.Git
		}
	}
	writeJSON(w, http.StatusOK, desk.ThreadList{Threads: nonNil(ts)})
	return nil
}

func (s *Server) listThreadGroups(w http.ResponseWriter, r *http.Request) error {
	c, err := s.conversation()
	if err != nil {
		return err
	}
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	gs, err := c.ThreadGroups(r.Context(), ses)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ThreadGroupList{ThreadGroups: nonNil(gs)})
	return nil
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	t, err := s.visibleThread(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) threadEpisodes(w http.ResponseWriter, r *http.Request) error {
	c, err := s.conversation()
	if err != nil {
		return err
	}
	id, err := pathID(r, "thr", desk.PrefixThread)
	if err != nil {
		return err
	}
	es, err := c.Episodes(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.EpisodeList{Episodes: nonNil(es)})
	return nil
}
