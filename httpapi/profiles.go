package httpapi

import (
	"net/http"

	"github.com/desk-runtime/desk"
)

func profileRoutes() []route {
	return []route{
		{Method: "GET", Path: "/v1/workspaces/{ws}/profiles", Tag: "runtimes", Summary: "List the workspace's agent profiles, with desk's defaults it does not replace.",
			Resp: "ProfileList", Status: 200, handle: (*Server).listProfiles},
		{Method: "POST", Path: "/v1/workspaces/{ws}/profiles", Tag: "runtimes", Summary: "Create an agent profile: executor (a declared model or a registered runtime), reasoning effort, approval mode, instructions, tool set and handler-thread profile. A field naming something the operator did not declare is 400 naming it.",
			Body: "ProfileCreate", Resp: "Profile", Status: 201, handle: (*Server).createProfile},
		{Method: "GET", Path: "/v1/workspaces/{ws}/profiles/{name}", Tag: "runtimes", Summary: "One agent profile.",
			Resp: "Profile", Status: 200, handle: (*Server).getProfile},
		{Method: "PUT", Path: "/v1/workspaces/{ws}/profiles/{name}", Tag: "runtimes", Summary: "Replace an agent profile (or store one replacing a default). Sessions made from it keep their snapshot.",
			Body: "ProfileCreate", Resp: "Profile", Status: 200, handle: (*Server).putProfile},
		{Method: "DELETE", Path: "/v1/workspaces/{ws}/profiles/{name}", Tag: "runtimes", Summary: "Remove an agent profile; desk's defaults cannot be removed. Sessions made from it keep their snapshot.",
			Status: 204, handle: (*Server).deleteProfile},
	}
}

func (s *Server) profiles() (desk.ProfileService, error) {
	if s.Profiles == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "profiles are not available on this server")
	}
	return s.Profiles, nil
}

func (s *Server) listProfiles(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.profiles()
	if err != nil {
		return err
	}
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	out, err := ps.ListProfiles(r.Context(), ws)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ProfileList{Profiles: nonNil(out)})
	return nil
}

func (s *Server) getProfile(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.profiles()
	if err != nil {
		return err
	}
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	p, err := ps.GetProfile(r.Context(), ws, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

func (s *Server) createProfile(w http.ResponseWriter, r *http.Request) error {
	return s.writeProfile(w, r, true)
}

func (s *Server) putProfile(w http.ResponseWriter, r *http.Request) error {
	return s.writeProfile(w, r, false)
}

func (s *Server) writeProfile(w http.ResponseWriter, r *http.Request, create bool) error {
	ps, err := s.profiles()
	if err != nil {
		return err
	}
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.ProfileCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	name, status := in.Name, http.StatusCreated
	if !create {
		if in.Name != "" && in.Name != r.PathValue("name") {
			return desk.Errorf(desk.EINVALID, "name %q differs from the path's %q", in.Name, r.PathValue("name"))
		}
		name, status = r.PathValue("name"), http.StatusOK
	}
	p, err := ps.PutProfile(r.Context(), &desk.Profile{WorkspaceID: ws, Name: name, ProfileSpec: in.ProfileSpec}, create)
	if err != nil {
		return err
	}
	writeJSON(w, status, p)
	return nil
}

func (s *Server) deleteProfile(w http.ResponseWriter, r *http.Request) error {
	ps, err := s.profiles()
	if err != nil {
		return err
	}
	ws, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	if err := ps.DeleteProfile(r.Context(), ws, r.PathValue("name")); err != nil {
		return err
	}
	return noContent(w)
}
