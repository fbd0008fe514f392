package httpapi

import (
	"context"
	"net/http"

	"github.com/desk-runtime/desk"
)

// Threads is the part of the store the thread routes read: handler
// threads, their groups and their episodes (svvy). The routes only read;
// threads are started and reported by the thread tools.
type Threads interface {
	GetThread(ctx context.Context, id string) (*desk.Thread, error)
	ListThreads(ctx context.Context, sessionID, groupID string) ([]*desk.Thread, error)
	ListThreadGroups(ctx context.Context, sessionID string) ([]*desk.ThreadGroup, error)
	ListEpisodes(ctx context.Context, threadID string) ([]*desk.Episode, error)
}

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

// threadsStore answers unavailable rather than panicking when the server
// was built without a thread store.
func (s *Server) threadsStore() (Threads, error) {
	if s.Threads == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "threads are not served by this desk")
	}
	return s.Threads, nil
}

// sessionOf scopes the session route: the session service decides whether
// the caller sees it, so an actor token gets the same answer for another
// actor's session's threads as for the session itself.
func (s *Server) sessionOf(r *http.Request) (*desk.Session, Threads, error) {
	st, err := s.threadsStore()
	if err != nil {
		return nil, nil, err
	}
	ses, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return nil, nil, err
	}
	x, err := s.Sessions.Get(r.Context(), ses)
	if err != nil {
		return nil, nil, err
	}
	return x, st, nil
}

// visibleThread finds a thread the caller may see: a thread of a session
// the caller cannot see is as unknown as one that does not exist.
func (s *Server) visibleThread(r *http.Request) (*desk.Thread, Threads, error) {
	st, err := s.threadsStore()
	if err != nil {
		return nil, nil, err
	}
	id, err := pathID(r, "thr", desk.PrefixThread)
	if err != nil {
		return nil, nil, err
	}
	t, err := st.GetThread(r.Context(), id)
	if err != nil {
		return nil, nil, err
	}
	x, err := s.Sessions.Get(r.Context(), t.SessionID)
	if err != nil {
		if desk.IsCode(err, desk.ENOTFOUND) || desk.IsCode(err, desk.EFORBIDDEN) {
			return nil, nil, desk.Errorf(desk.ENOTFOUND, "thread %s not found", id)
		}
		return nil, nil, err
	}
	// The session read carries its /workspace's branch, which is the
	// thread's: a handler thread runs in its session's /workspace.
	t.Git = x.Git
	return t, st, nil
}

func (s *Server) listThreads(w http.ResponseWriter, r *http.Request) error {
	x, st, err := s.sessionOf(r)
	if err != nil {
		return err
	}
	group := r.URL.Query().Get("thread_group_id")
	if group != "" {
		gs, err := st.ListThreadGroups(r.Context(), x.ID)
		if err != nil {
			return err
		}
		found := false
		for _, g := range gs {
			found = found || g.ID == group
		}
		if !found {
			return desk.Errorf(desk.ENOTFOUND, "thread group %s is not a thread group of session %s", group, x.ID)
		}
	}
	ts, err := st.ListThreads(r.Context(), x.ID, group)
	if err != nil {
		return err
	}
	for _, t := range ts {
		t.Git = x.Git
	}
	writeJSON(w, http.StatusOK, desk.ThreadList{Threads: nonNil(ts)})
	return nil
}

func (s *Server) listThreadGroups(w http.ResponseWriter, r *http.Request) error {
	x, st, err := s.sessionOf(r)
	if err != nil {
		return err
	}
	gs, err := st.ListThreadGroups(r.Context(), x.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ThreadGroupList{ThreadGroups: nonNil(gs)})
	return nil
}

func (s *Server) getThread(w http.ResponseWriter, r *http.Request) error {
	t, _, err := s.visibleThread(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) threadEpisodes(w http.ResponseWriter, r *http.Request) error {
	t, st, err := s.visibleThread(r)
	if err != nil {
		return err
	}
	es, err := st.ListEpisodes(r.Context(), t.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.EpisodeList{Episodes: nonNil(es)})
	return nil
}
