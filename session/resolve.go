package session

import (
	"context"
	"strings"

	"github.com/desk-runtime/desk"
)

// Resolve answers the follow-up resolution of the OpenAlice seed: a usable
// session continues exactly; a known but unavailable one says why and keeps
// its attributed origin; an unknown target in a known, active workspace
// gets a session labelled reconstructed (never presented as the original
// author), made by the first resolution and continued by later ones;
// anything else is unavailable.
func (s *Service) Resolve(ctx context.Context, t desk.ResolveTarget) (*desk.Resolution, error) {
	if _, ok := desk.PrincipalFrom(ctx); !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	switch t.Kind {
	case "session", "artifact", "workspace":
	default:
		return nil, desk.Errorf(desk.EINVALID, "target kind %q must be session, artifact or workspace", t.Kind)
	}
	if t.ID == "" {
		return nil, desk.Errorf(desk.EINVALID, "target id is required")
	}
	var x *desk.Session
	switch t.Kind {
	case "session":
		id := t.ID
		if strings.HasPrefix(id, "@") {
			// A signature names the session: the same visibility applies.
			if y, err := s.store.SessionBySignature(ctx, id); err == nil {
				id = y.ID
			}
		}
		x, _ = visibleSession(ctx, s.store, id)
	case "artifact":
		if a, err := s.store.GetArtifact(ctx, t.ID); err == nil {
			x, _ = visibleSession(ctx, s.store, a.SessionID)
		} else if tb, err := s.store.GetArtifactTombstone(ctx, t.ID); err == nil {
			// A purge deleted the artifact but kept who made it.
			x, _ = visibleSession(ctx, s.store, tb.SessionID)
		}
	case "workspace":
		t.WorkspaceID = t.ID
	}
	if x != nil {
		o := x.Origin
		res := &desk.Resolution{SessionID: x.ID, Signature: x.Signature, Origin: &o}
		w, err := s.store.GetWorkspace(ctx, x.WorkspaceID)
		if err != nil {
			return nil, err
		}
		switch {
		case w.State == desk.WorkspacePurged || w.State == desk.WorkspacePurging:
			res.Resolution, res.Reason = desk.ResolveUnavailable, "purged-workspace"
		case w.State != desk.WorkspaceActive:
			res.Resolution, res.Reason = desk.ResolveUnavailable, "departed-workspace"
		case x.Lifecycle == desk.SessionRetired:
			res.Resolution, res.Reason = desk.ResolveUnavailable, "retired-session"
		default:
			res.Resolution = desk.ResolveExact
		}
		return res, nil
	}
	if t.WorkspaceID == "" {
		return &desk.Resolution{Resolution: desk.ResolveUnavailable, Reason: "unknown-target"}, nil
	}
	w, err := s.workspaces.GetWorkspace(ctx, t.WorkspaceID)
	if err != nil {
		return &desk.Resolution{Resolution: desk.ResolveUnavailable, Reason: "unknown-workspace"}, nil
	}
	switch w.State {
	case desk.WorkspaceActive:
	case desk.WorkspacePurged, desk.WorkspacePurging:
		return &desk.Resolution{Resolution: desk.ResolveUnavailable, Reason: "purged-workspace"}, nil
	default:
		return &desk.Resolution{Resolution: desk.ResolveUnavailable, Reason: "departed-workspace"}, nil
	}
	// One reconstruction per target and actor: resolving the same unknown
	// target again continues the session the first resolution made. The
	// lock keeps two concurrent resolutions in this process from both
	// creating one.
	from := t.Kind + ":" + t.ID
	s.reconstructMu.Lock()
	defer s.reconstructMu.Unlock()
	if x, err := s.reconstruction(ctx, w.ID, from); err != nil {
		return nil, err
	} else if x != nil {
		return &desk.Resolution{Resolution: desk.ResolveReconstructed, SessionID: x.ID, Signature: x.Signature}, nil
	}
	title := "Reconstructed"
	if t.Kind != "workspace" {
		title = "Reconstructed for " + t.Kind + " " + t.ID
	}
	n, err := s.create(ctx, desk.SessionCreate{WorkspaceID: w.ID, Title: title}, from)
	if err != nil {
		return nil, err
	}
	return &desk.Resolution{Resolution: desk.ResolveReconstructed, SessionID: n.ID, Signature: n.Signature, Created: true}, nil
}

// reconstruction finds the active session an earlier resolution
// reconstructed for the target from, of the actor a new one would belong
// to (the owner for the admin, else the caller's actor); nil when none.
func (s *Service) reconstruction(ctx context.Context, workspaceID, from string) (*desk.Session, error) {
	p, _ := desk.PrincipalFrom(ctx)
	actor := p.ActorID
	if p.Admin {
		a, err := s.workspaces.ResolveActor(ctx, workspaceID, desk.OwnerActorName)
		if err != nil {
			return nil, err
		}
		actor = a.ID
	}
	xs, err := s.store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: workspaceID, ActorID: actor})
	if err != nil {
		return nil, err
	}
	for _, x := range xs {
		if x.ReconstructedFrom == from && x.Lifecycle == desk.SessionActive && !x.Deleting {
			return x, nil
		}
	}
	return nil, nil
}
