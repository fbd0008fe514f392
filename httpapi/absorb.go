package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

var sourceParam = []param{{Name: "source", Type: "string", Required: true, Doc: "the workspace to absorb (ws_…); it is offboarded once its files are in"}}

func absorbRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/workspaces/{ws}/absorb", Tag: "absorb", Summary: "Plan absorbing the source workspace into this one (admin): per source user file ready, duplicate or conflict, what is left behind and why, and the plan's digest. Changes nothing.",
			Query: sourceParam, Resp: "AbsorbPlan", Status: 200, handle: (*Server).planAbsorb},
		{Method: "POST", Path: "/v1/workspaces/{ws}/absorb", Tag: "absorb", Summary: "Apply exactly the plan with this digest (admin), with target, source or both per conflict: copies the source's user files in, commits them when the checkout is a git repository, offboards the source intact and records absorbed_into. 409 stale_plan, unresolved conflicts, running sessions (blocked) or a staged git index.",
			Query: sourceParam, Body: "AbsorbApply", Resp: "AbsorbResult", Status: 200, handle: (*Server).applyAbsorb},
	}
}

func absorbSource(r *http.Request) (string, error) {
	src := r.URL.Query().Get("source")
	if src == "" {
		return "", desk.Errorf(desk.EINVALID, "query parameter source is required: the workspace to absorb (ws_…)")
	}
	if !desk.HasPrefix(src, desk.PrefixWorkspace) {
		return "", desk.Errorf(desk.EINVALID, "source %q is not a workspace id (ws_…)", src)
	}
	return src, nil
}

func (s *Server) planAbsorb(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	src, err := absorbSource(r)
	if err != nil {
		return err
	}
	p, err := s.Absorb.Plan(r.Context(), ws, src)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) applyAbsorb(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	src, err := absorbSource(r)
	if err != nil {
		return err
	}
	var in struct {
		desk.AbsorbApply
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := s.Absorb.Apply(r.Context(), ws, src, in.AbsorbApply)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
