package httpapi

import (
	"net/http"
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
		{Method: "POST", Path: "/v1/ask", Tag: lifecycleTag, Summary: "Cross-workspace ask: resolve the target (exact, unavailable, reconstructed) and queue the prompt on the resolved session; unavailable dispatches nothing.",
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
	res, err := s.Lifecycle.Ask(r.Context(), in.AskInput)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
