// Package files owns the per-actor durable file area (Wesclaw's ArtifactDir,
// workspaces/<ws>/workspace/<act_…>/ under DESK_HOME) and its operations:
// list, download, upload, delete, delete by prefix, stats with the per-actor
// quota, and workspace GC; and the workspace's host paths and primary root,
// the other half of "where an agent's files may be".
//
// The area is derived from (workspace, actor) by layout, never taken from a
// request (INV-IO-01), and every disk access goes through an os.Root opened
// on it. Paths are relative to the area with a leading "/"; "..", NUL,
// backslashes and paths through symbolic links are refused before the disk
// is touched for anything but the check itself.
//
// /sessions/<ses>/ inside an area is that session's artifact directory: the
// file API, the artifact API and the agents are three doors to the same
// files and rows, so writes and deletes there go through desk.ArtifactPaths
// (the session package) and listings show each file's artifact row. This is
// why files imports session: the path rules (session.ValidRel) must be
// identical for both doors.
//
// What it must never do: follow a symbolic link; show, count, export or
// overwrite desk's temporary files; delete an artifact or a user file
// except at an explicit delete of its path; create, chmod, collect or walk a
// host path (INV-IO-07).
package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/gc"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/internal/keyedmutex"
	"github.com/desk-runtime/desk/layout"
)

// Options configures the file service.
type Options struct {
	// QuotaBytes bounds each actor's area; 0 means unlimited.
	QuotaBytes int64
}

// Service implements desk.FileService.
type Service struct {
	store      Store
	home       layout.Home
	workspaces desk.WorkspaceService
	artifacts  desk.ArtifactPaths
	collector  *gc.Collector
	quota      *Quota
	opts       Options

	paths keyedmutex.Map // one writer per area path at the commit step
}

var _ desk.FileService = (*Service)(nil)

// New returns the file service. artifacts is the path-addressed door to the
// artifact service; collector does the workspace GC; quota admits uploads
// (the artifact service shares it).
func New(store Store, home layout.Home, workspaces desk.WorkspaceService, artifacts desk.ArtifactPaths, collector *gc.Collector, quota *Quota) *Service {
	return &Service{store: store, home: home, workspaces: workspaces, artifacts: artifacts, collector: collector, quota: quota, opts: quota.opts}
}

// area is one actor's file area, resolved for a request.
type area struct {
	ws    *desk.Workspace
	actor *desk.Actor
	admin bool
}

// rel is the area's directory relative to the workspace directory.
func (a *area) rel() string { return layout.ActorRel(a.actor.ID) }

// area resolves whose area a request works on. The actor parameter is
// honoured only for the admin token (Wesclaw: "admin token 才生效"); an
// actor token may name itself, and naming anyone else is forbidden whether
// or not that actor exists, so tokens cannot probe for actors.
func (s *Service) area(ctx context.Context, scope desk.FileScope) (*area, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if !desk.HasPrefix(scope.WorkspaceID, desk.PrefixWorkspace) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %q not found", scope.WorkspaceID)
	}
	w, err := s.workspaces.GetWorkspace(ctx, scope.WorkspaceID)
	if err != nil {
		return nil, err
	}
	var a *desk.Actor
	switch {
	case p.Admin && scope.Actor == "":
		a, err = s.workspaces.ResolveActor(ctx, w.ID, desk.OwnerActorName)
	case p.Admin:
		a, err = s.workspaces.ResolveActor(ctx, w.ID, scope.Actor)
	case scope.Actor == "":
		a, err = s.workspaces.ResolveActor(ctx, w.ID, p.ActorID)
	default:
		a, err = s.workspaces.ResolveActor(ctx, w.ID, scope.Actor)
		if err != nil || a.ID != p.ActorID {
			return nil, desk.Errorf(desk.EFORBIDDEN, "actor=%s is honoured only for the admin token; an actor token works on its own file area", scope.Actor)
		}
	}
	if err != nil {
		return nil, err
	}
	return &area{ws: w, actor: a, admin: p.Admin}, nil
}

// openArea opens an os.Root on the actor's area. With create the area is
// made first (an actor created before its directory, or a fresh import);
// without it a missing area is simply empty, which callers report as not
// found for the path they were asked about.
func (s *Service) openArea(a *area, create bool) (*os.Root, error) {
	return openArea(s.home, a, create)
}

func openArea(home layout.Home, a *area, create bool) (*os.Root, error) {
	dir := home.Abs(a.ws.ID, a.rel())
	if create {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, diskerr.Discarded("create the actor's file area", err)
		}
	}
	r, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errNoArea
	}
	if err != nil {
		return nil, fmt.Errorf("open the file area of %s: %w", a.actor.ID, err)
	}
	return r, nil
}

// errNoArea marks an area whose directory does not exist yet.
var errNoArea = desk.Errorf(desk.ENOTFOUND, "the actor's file area is empty")
