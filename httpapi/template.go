package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

var toParam = []param{{Name: "to", Type: "string", Doc: "the template version to upgrade to; default: the version registered last"}}

func templateRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/templates", Tag: "templates", Summary: "Register a template version (admin). Versions are immutable: registering one that exists is 409.",
			Body: "TemplateCreate", Resp: "TemplateVersion", Status: 201, handle: (*Server).addTemplate},
		{Method: "GET", Path: "/v1/templates", Tag: "templates", Summary: "List every registered template version (admin), by name and registration time.",
			Resp: "TemplateList", Status: 200, handle: (*Server).listTemplates},
		{Method: "GET", Path: "/v1/workspaces/{ws}/template-upgrade", Tag: "templates", Summary: "Plan upgrading the workspace's managed template files (admin): per path unchanged, ready, preserved, conflict, add or remove, three-way merged against the recorded baseline, with the plan's digest. Changes nothing.",
			Query: toParam, Resp: "UpgradePlan", Status: 200, handle: (*Server).planUpgrade},
		{Method: "POST", Path: "/v1/workspaces/{ws}/template-upgrade", Tag: "templates", Summary: "Apply exactly the plan with this digest (admin), with a resolution per conflict: 409 stale_plan when the plan moved on, 409 on an unresolved conflict, running sessions (blocked) or a staged git index. Never writes conflict markers; commits when the checkout is a git repository.",
			Query: toParam, Body: "UpgradeApply", Resp: "UpgradeResult", Status: 200, handle: (*Server).applyUpgrade},
	}
}

func (s *Server) addTemplate(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		desk.TemplateCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	tv, err := s.Templates.Add(r.Context(), in.Name, in.Version, in.Files)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, tv)
	return nil
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) error {
	all, err := s.Templates.List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.TemplateList{Templates: nonNil(all)})
	return nil
}

func (s *Server) planUpgrade(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	p, err := s.Templates.Plan(r.Context(), ws, r.URL.Query().Get("to"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) applyUpgrade(w http.ResponseWriter, r *http.Request) error {
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.UpgradeApply
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	res, err := s.Templates.Apply(r.Context(), ws, r.URL.Query().Get("to"), in.UpgradeApply)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}
