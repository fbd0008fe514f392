package files

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/hostpath"
)

// PatchWorkspace sets the workspace's host paths and primary root (admin).
// Host paths are checked at their boundary only (INV-IO-07, the rules are
// hostpath.Check's, which records each directory's identity for the checks
// at every use); desk never creates, changes, collects or exports them. The
// primary root must lie within a host path or the actor's own area as the
// guest sees it (/artifacts), or the workspace's /workspace; "" clears it.
func (s *Service) PatchWorkspace(ctx context.Context, id string, p desk.WorkspacePatch) (*desk.Workspace, error) {
	pr, ok := desk.PrincipalFrom(ctx)
	if !ok || !pr.Admin {
		return nil, desk.Errorf(desk.EFORBIDDEN, "only the admin token may change a workspace's host paths or primary root")
	}
	if !desk.HasPrefix(id, desk.PrefixWorkspace) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %q not found", id)
	}
	w, err := s.workspaces.GetWorkspace(ctx, id)
	if err != nil {
		return nil, err
	}
	hps, root := w.HostPaths, w.PrimaryRoot
	if p.HostPaths != nil {
		hps = *p.HostPaths
	}
	if p.PrimaryRoot != nil {
		root = *p.PrimaryRoot
	}
	if hps, err = hostpath.Check(s.home.Root, hps); err != nil {
		return nil, err
	}
	if root, err = hostpath.CheckPrimaryRoot(root, hps); err != nil {
		return nil, err
	}
	return s.store.UpdateWorkspacePaths(ctx, id, hps, root)
}
