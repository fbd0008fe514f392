package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func runtimeRoutes() []route {
	return []route{
		{Method: "POST", Path: "/v1/runtimes", Tag: "runtimes", Summary: "Register an external agent runtime (admin): a name, its protocol (acp, codex-app-server, claude-stream-json), argv (argv[0] resolved on the host, must be executable) and the names of environment variables to pass through (values are never stored). A session picks it by name.",
			Body: "RuntimeCreate", Resp: "Runtime", Status: 201, handle: (*Server).createRuntime},
		{Method: "GET", Path: "/v1/runtimes", Tag: "runtimes", Summary: "List the registered runtimes (admin).",
			Resp: "RuntimeList", Status: 200, handle: (*Server).listRuntimes},
		{Method: "DELETE", Path: "/v1/runtimes/{name}", Tag: "runtimes", Summary: "Remove a runtime's registration (admin). Sessions naming it fail their next turn until it is registered again.",
			Status: 204, handle: (*Server).deleteRuntime},
	}
}

func (s *Server) runtimes() (desk.RuntimeService, error) {
	if s.Runtimes == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "runtimes are not available on this server")
	}
	return s.Runtimes, nil
}

func (s *Server) createRuntime(w http.ResponseWriter, r *http.Request) error {
	rs, err := s.runtimes()
	if err != nil {
		return err
	}
	var in struct {
		desk.RuntimeCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	x, err := rs.Add(r.Context(), desk.Runtime{Name: in.Name, Protocol: in.Protocol, Argv: in.Argv, Env: in.Env})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, x)
	return nil
}

func (s *Server) listRuntimes(w http.ResponseWriter, r *http.Request) error {
	rs, err := s.runtimes()
	if err != nil {
		return err
	}
	ls, err := rs.List(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.RuntimeList{Runtimes: nonNil(ls)})
	return nil
}

func (s *Server) deleteRuntime(w http.ResponseWriter, r *http.Request) error {
	rs, err := s.runtimes()
	if err != nil {
		return err
	}
	if err := rs.Remove(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	return noContent(w)
}
