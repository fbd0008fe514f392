package files

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// maxHostPaths bounds a workspace's declarations; each is a mount of every
// guest file system of the workspace.
const maxHostPaths = 64

// reservedGuest are the guest directories desk mounts itself. A host path
// at, above or below one of them would shadow it (the guest sees a host path
// at its own path), so such declarations are refused.
var reservedGuest = []string{"/artifacts", "/context", "/scratch", "/workspace"}

// PatchWorkspace sets the workspace's host paths and primary root (admin).
// Host paths are checked at their boundary only (INV-IO-07): each must be
// an absolute, clean path of an existing directory, outside DESK_HOME and
// not at, above or below a guest directory desk mounts itself, and no two
// may nest (the guest file system cannot nest mounts). desk never creates,
// changes, collects or exports them. The primary root must lie within a
// host path or the actor's own area as the guest sees it (/artifacts), or
// the workspace's /workspace; "" clears it.
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
	if hps, err = s.checkHostPaths(hps); err != nil {
		return nil, err
	}
	if root, err = checkPrimaryRoot(root, hps); err != nil {
		return nil, err
	}
	return s.store.UpdateWorkspacePaths(ctx, id, hps, root)
}

func (s *Service) checkHostPaths(hps []desk.HostPath) ([]desk.HostPath, error) {
	if len(hps) > maxHostPaths {
		return nil, desk.Errorf(desk.EINVALID, "%d host paths declared; at most %d are allowed", len(hps), maxHostPaths)
	}
	home, err := realPath(s.home.Root)
	if err != nil {
		return nil, err
	}
	out := make([]desk.HostPath, 0, len(hps))
	for i, hp := range hps {
		if hp.Mode == "" {
			hp.Mode = desk.HostPathRO
		}
		if hp.Mode != desk.HostPathRO && hp.Mode != desk.HostPathRW {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].mode %q must be %q or %q", i, hp.Mode, desk.HostPathRO, desk.HostPathRW)
		}
		c, err := fsjail.Clean(hp.Path)
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path: %s", i, desk.ErrorMessage(err))
		}
		if c != hp.Path || c == "/" {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q must be an absolute, clean directory path other than / (e.g. %q)", i, hp.Path, c)
		}
		for _, g := range reservedGuest {
			if nested(c, g) || nested(g, c) {
				return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q overlaps %s, which desk mounts itself in the guest", i, c, g)
			}
		}
		real, err := realPath(c)
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q must be an existing directory: %v", i, c, unwrapPath(err))
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q is not a directory", i, c)
		}
		// Both the spelling and the resolved directory are compared, so a
		// link cannot smuggle desk's own data into a guest.
		for _, x := range []string{c, real} {
			if nested(x, home) || nested(home, x) {
				return nil, desk.Errorf(desk.EFORBIDDEN, "host_paths[%d].path %q overlaps desk's home directory; desk's own data is never a host path", i, c)
			}
		}
		for j, prev := range out {
			if nested(c, prev.Path) || nested(prev.Path, c) {
				return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q and host_paths[%d].path %q nest; declare one of them", i, c, j, prev.Path)
			}
		}
		out = append(out, desk.HostPath{Path: c, Mode: hp.Mode})
	}
	return out, nil
}

// checkPrimaryRoot checks that the primary root is a guest directory the
// agent owns or was given: within a host path, /artifacts (the actor's area
// as the session sees it) or /workspace.
func checkPrimaryRoot(root string, hps []desk.HostPath) (string, error) {
	if root == "" {
		return "", nil
	}
	c, err := fsjail.Clean(root)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "primary_root: %s", desk.ErrorMessage(err))
	}
	for _, hp := range hps {
		if nested(c, hp.Path) {
			return c, nil
		}
	}
	if nested(c, "/artifacts") || nested(c, "/workspace") {
		return c, nil
	}
	return "", desk.Errorf(desk.EINVALID, "primary_root %q must lie within a declared host path, /artifacts (the actor's area) or /workspace", root)
}

// nested reports whether p equals dir or lies below it.
func nested(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(abs)
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
