package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/desk-runtime/desk"
)

const lifecycleTag = "lifecycle"

func lifecycleRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/catalog", Tag: lifecycleTag, Summary: "Every workspace ever created, whatever its state (the admin; an actor token sees its own): state, dates, reason, handoff, absorbed_into.",
			Resp: "CatalogList", Status: 200, handle: (*Server).catalog},
		{Method: "GET", Path: "/v1/catalog/{ws}", Tag: lifecycleTag, Summary: "One workspace's catalog row.",
			Resp: "CatalogEntry", Status: 200, handle: (*Server).catalogEntry},
		{Method: "POST", Path: "/v1/workspaces/{ws}/offboard", Tag: lifecycleTag, Summary: "Offboard (admin): 409 blocked while an execution runs; otherwise write HANDOFF.md and offboarding.json, retire the sessions and move the directory to departed-workspaces/<ws>. Idempotent once departed.",
			Body: "OffboardRequest", Resp: "LifecycleResult", Status: 200, handle: (*Server).offboard},
		{Method: "POST", Path: "/v1/workspaces/{ws}/restore", Tag: lifecycleTag, Summary: "Restore a departed workspace (admin) to its exact original place and recall its sessions; 409 when the departed copy is missing or the place is taken.",
			Resp: "LifecycleResult", Status: 200, handle: (*Server).restore},
		{Method: "POST", Path: "/v1/workspaces/{ws}/purge", Tag: lifecycleTag, Summary: "Purge a departed workspace for good (admin): files, transcripts, artifacts and queue rows go; the catalog tombstone, retired identities and provenance stay.",
			Body: "PurgeRequest", Resp: "LifecycleResult", Status: 200, handle: (*Server).purge},
		{Method: "GET", Path: "/v1/dispatches", Tag: lifecycleTag, Summary: "List dispatches (asks with reply ownership) the caller may see, newest first: by the caller's or the target's session or workspace.",
			Query: []param{{Name: "session", Type: "string", Doc: "the caller's or the target's session"}, {Name: "workspace", Type: "string", Doc: "the caller's or the target's workspace"}, {Name: "limit", Type: "integer", Doc: "at most this many (1-500, default 500)"}},
			Resp:  "DispatchList", Status: 200, handle: (*Server).listDispatches},
		{Method: "GET", Path: "/v1/dispatches/{dsp}", Tag: lifecycleTag, Summary: "One dispatch: its immutable snapshot (caller, target, subject, reply ownership) and what became of it.",
			Resp: "Dispatch", Status: 200, handle: (*Server).getDispatch},
		{Method: "POST", Path: "/v1/ask", Tag: lifecycleTag, Summary: "Cross-workspace ask, recorded as a dispatch: resolve the target (exact, unavailable, reconstructed) and queue the prompt on the resolved session; unavailable dispatches nothing. With reply caller and from_session, the target's answer comes back to that session as a dispatch_reply queue row.",
			Body: "AskRequest", Resp: "AskResult", Status: 200, handle: (*Server).ask},
	}
}

// readsFiles are the GET routes that read a workspace's directory; they
// are refused like writes while the workspace is not active, because its
// directory is not in its place. Every other GET reads rows and is
// served whatever the workspace's state.
var readsFiles = []string{
	"/content", "/guest/list", "/guest/file", "/archive", "/archive/days", "/export",
	"/files", "/file", "/stats", "/context",
}

// admit refuses a request about a workspace that is not active (409): no
// new work, no writes, no reads of files that are not in their place.
// The lifecycle's own routes decide for themselves.
func (s *Server) admit(rt route, r *http.Request) error {
	if s.Lifecycle == nil || rt.Public || rt.Tag == lifecycleTag {
		return nil
	}
	if rt.Method == "GET" {
		reads := false
		for _, suf := range readsFiles {
			if strings.HasSuffix(rt.Path, suf) {
				reads = true
				break
			}
		}
		if !reads {
			return nil
		}
	}
	ref := desk.LifecycleRef{Workspace: r.PathValue("ws"), Session: r.PathValue("ses"), Group: r.PathValue("grp"), Execution: r.PathValue("exe")}
	if ref.Workspace == "" && strings.HasPrefix(rt.Path, "/cells/{id}") {
		ref.Workspace = r.PathValue("id")
	}
	if ref == (desk.LifecycleRef{}) {
		return nil
	}
	return s.Lifecycle.Admit(r.Context(), ref)
}

func (s *Server) catalog(w http.ResponseWriter, r *http.Request) error {
	es, err := s.Lifecycle.Catalog(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.CatalogList{Workspaces: nonNil(es)})
	return nil
}

func (s *Server) catalogEntry(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	e, err := s.Lifecycle.CatalogEntry(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

func (s *Server) offboard(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.OffboardInput
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := s.Lifecycle.Offboard(r.Context(), ws, in.OffboardInput)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) restore(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct{ ignoredOrigin }
	if err := decodeOptional(w, r, &in); err != nil {
		return err
	}
	res, err := s.Lifecycle.Restore(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) purge(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.PurgeRequest
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := s.Lifecycle.Purge(r.Context(), ws, in.Confirm)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) ask(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		desk.AskInput
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	if s.Dispatches == nil {
		res, err := s.Lifecycle.Ask(r.Context(), in.AskInput)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, res)
		return nil
	}
	a := in.AskInput
	d, res, err := s.Dispatches.Dispatch(r.Context(), desk.DispatchInput{Target: a.Target, Subject: a.Subject, Text: a.Prompt,
		Reply: a.Reply, FromSession: a.FromSession, Reconstruct: a.Reconstruct})
	if err != nil {
		return err
	}
	if res == nil {
		res = &desk.AskResult{Status: desk.AskDispatched}
	}
	if d != nil {
		res.DispatchID = d.ID
		if res.QueuedItemID == "" {
			res.QueuedItemID = d.QueueItemID
		}
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) listDispatches(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := desk.DispatchFilter{WorkspaceID: q.Get("workspace"), SessionID: q.Get("session")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return desk.Errorf(desk.EINVALID, "limit %q must be a number from 1 to 500", v)
		}
		f.Limit = n
	}
	ds, err := s.dispatches().List(r.Context(), f)
	if err != nil {
		return err
	}
	if ds == nil {
		ds = []*desk.Dispatch{}
	}
	writeJSON(w, http.StatusOK, desk.DispatchList{Dispatches: ds})
	return nil
}

func (s *Server) getDispatch(w http.ResponseWriter, r *http.Request) error {
	d, err := s.dispatches().Get(r.Context(), r.PathValue("dsp"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// dispatches is the dispatch service, or one that answers unavailable.
func (s *Server) dispatches() desk.DispatchService {
	if s.Dispatches == nil {
		return noDispatches{}
	}
	return s.Dispatches
}

type noDispatches struct{}

func (noDispatches) Dispatch(context.Context, desk.DispatchInput) (*desk.Dispatch, *desk.AskResult, error) {
	return nil, nil, desk.Errorf(desk.EUNAVAILABLE, "dispatches are not available on this desk")
}
func (noDispatches) Get(context.Context, string) (*desk.Dispatch, error) {
	return nil, desk.Errorf(desk.EUNAVAILABLE, "dispatches are not available on this desk")
}
func (noDispatches) List(context.Context, desk.DispatchFilter) ([]*desk.Dispatch, error) {
	return nil, desk.Errorf(desk.EUNAVAILABLE, "dispatches are not available on this desk")
}
