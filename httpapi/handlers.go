package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/desk-runtime/desk"
)

func (s *Server) health(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, desk.Health{Status: "ok", Version: s.Version})
	return nil
}

// ignoredOrigin accepts and discards an "origin" field in request bodies:
// provenance is stamped by the server from the token, and a client that
// sends one must not be able to set it (nor be refused for trying).
type ignoredOrigin struct {
	Origin json.RawMessage `json:"origin,omitempty"`
}

func (s *Server) workspaceManager(w http.ResponseWriter, r *http.Request) error {
	m, err := s.Workspaces.Manager(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, m)
	return nil
}

func (s *Server) createWorkspace(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		desk.WorkspaceCreateRequest
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	var ws *desk.Workspace
	var err error
	if in.Template != "" {
		ws, err = s.Templates.CreateWorkspace(r.Context(), in.WorkspaceCreate, in.Template)
	} else {
		ws, err = s.Workspaces.CreateWorkspace(r.Context(), in.WorkspaceCreate)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, ws)
	return nil
}

func (s *Server) listWorkspaces(w http.ResponseWriter, r *http.Request) error {
	ws, err := s.Workspaces.ListWorkspaces(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.WorkspaceList{Workspaces: nonNil(ws)})
	return nil
}

func (s *Server) getWorkspace(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	ws, err := s.Workspaces.GetWorkspace(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, ws)
	return nil
}

func (s *Server) createActor(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.ActorCreate
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	a, tok, err := s.Workspaces.CreateActor(r.Context(), id, in.Name, in.Kind)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, desk.ActorCreated{Actor: a, Token: tok})
	return nil
}

func (s *Server) listActors(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	as, err := s.Workspaces.ListActors(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.ActorList{Actors: nonNil(as)})
	return nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	var in struct {
		desk.SessionCreateRequest
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	x, err := s.Sessions.Create(r.Context(), desk.SessionCreate{WorkspaceID: id, Actor: in.Actor, Title: in.Title, Model: in.Model, Script: in.Script, Runtime: in.Runtime,
		Profile: in.Profile, ReasoningEffort: in.ReasoningEffort})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, x)
	return nil
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ws", desk.PrefixWorkspace)
	if err != nil {
		return err
	}
	f := desk.SessionFilter{WorkspaceID: id}
	if f.Pinned, err = boolParam(r, "pinned"); err != nil {
		return err
	}
	if f.Archived, err = boolParam(r, "archived"); err != nil {
		return err
	}
	xs, err := s.Sessions.List(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.SessionList{Sessions: nonNil(xs)})
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	x, err := s.Sessions.Get(r.Context(), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

func (s *Server) patchSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	var in struct {
		desk.SessionPatch
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	x, err := s.Sessions.Update(r.Context(), id, desk.SessionUpdate{Title: in.Title, Pinned: in.Pinned, Archived: in.Archived, Unread: in.Unread, Worktree: in.Worktree,
		Profile: in.Profile, Model: in.Model, ReasoningEffort: in.ReasoningEffort})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, x)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "ses", desk.PrefixSession)
	if err != nil {
		return err
	}
	if err := s.Sessions.Delete(r.Context(), id); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) storagePressure(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		desk.PressureRequest
		ignoredOrigin
	}
	if err := decode(w, r, &in); err != nil {
		return err
	}
	rep, err := s.Reclaimer.Pressure(r.Context(), in.Level)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rep)
	return nil
}

// createLoginLink issues a login link on the address the caller reached
// desk at, so the link works from wherever the CLI does.
func (s *Server) createLoginLink(w http.ResponseWriter, r *http.Request) error {
	if p, _ := desk.PrincipalFrom(r.Context()); !p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token may issue a login link")
	}
	if s.LoginLinks == nil {
		return desk.Errorf(desk.EUNAVAILABLE, "this server issues no login links")
	}
	code, exp, err := s.LoginLinks.Issue(r.Context())
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, desk.LoginLink{URL: desk.LoginLinkURL(scheme+"://"+r.Host, code), ExpiresAt: exp.UTC()})
	return nil
}

// revokeBrowserSessions ends the browser sessions the caller may end.
func (s *Server) revokeBrowserSessions(w http.ResponseWriter, r *http.Request) error {
	if s.BrowserSessions == nil {
		return desk.Errorf(desk.EUNAVAILABLE, "this server keeps no browser sessions")
	}
	n, err := s.BrowserSessions.RevokeAll(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, desk.BrowserSessionsRevoked{Revoked: n})
	return nil
}

// nonNil makes empty lists encode as [] rather than null.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
