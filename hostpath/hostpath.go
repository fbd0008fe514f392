// Package hostpath owns the rules for a workspace's host paths (Wesclaw
// HostPaths, INV-IO-07): which host directories may be declared, what a
// primary root may name, and the identity (device and inode) recorded at
// declaration that every later use checks again (fsjail pins the mount).
// PATCH of a workspace and an import both call Check, so a value one
// refuses the other refuses with the same message.
//
// What it must never do: create, change or look inside a host path; accept
// desk's own home, a directory that contains it, or the kernel's and the
// system's configuration trees (/proc, /sys, /dev, /etc) as a host path.
package hostpath

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// Max bounds a workspace's declarations; each is a mount of every guest
// file system of the workspace.
const Max = 64

// reservedGuest are the guest directories desk mounts itself. A host path
// at, above or below one of them would shadow it (the guest sees a host path
// at its own path), so such declarations are refused.
var reservedGuest = []string{"/artifacts", "/context", "/scratch", "/workspace"}

// systemDirs are host trees that are never a host path, nor anything below
// them: the kernel's views of processes and devices, the devices, and the
// system's configuration (credentials, keys). A directory above them (/)
// is refused by the clean-path rule.
var systemDirs = []string{"/proc", "/sys", "/dev", "/etc"}

// Check validates declarations and returns them cleaned, each with the
// identity of the directory it names now. Each must be an absolute, clean
// path of an existing directory, outside DESK_HOME (home) and the system
// trees, not at, above or below a guest directory desk mounts itself, and
// no two may nest (the guest file system cannot nest mounts). Overlapping
// desk's home or a system tree is EFORBIDDEN; anything else wrong is
// EINVALID.
func Check(home string, hps []desk.HostPath) ([]desk.HostPath, error) {
	if len(hps) > Max {
		return nil, desk.Errorf(desk.EINVALID, "%d host paths declared; at most %d are allowed", len(hps), Max)
	}
	realHome, err := realPath(home)
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
			if Nested(c, g) || Nested(g, c) {
				return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q overlaps %s, which desk mounts itself in the guest", i, c, g)
			}
		}
		real, err := realPath(c)
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q must be an existing directory: %v", i, c, unwrapPath(err))
		}
		// Both the spelling and the resolved directory are compared, so a
		// link cannot smuggle desk's own data or the system's into a guest.
		for _, x := range []string{c, real} {
			if Nested(x, realHome) || Nested(realHome, x) || Nested(x, home) || Nested(home, x) {
				return nil, desk.Errorf(desk.EFORBIDDEN, "host_paths[%d].path %q overlaps desk's home directory; desk's own data is never a host path", i, c)
			}
			for _, d := range systemDirs {
				if Nested(x, d) {
					return nil, desk.Errorf(desk.EFORBIDDEN, "host_paths[%d].path %q lies in %s, which is never a host path", i, c, d)
				}
			}
		}
		// The identity is taken from the path as declared, without
		// following a link at its last element: that is what every use
		// opens (fsjail pins it).
		fi, err := os.Lstat(c)
		if err != nil || !fi.IsDir() {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q is not a directory (a symbolic link is not accepted; declare the directory it leads to)", i, c)
		}
		id, ok := fsjail.IdentityOf(fi)
		if !ok {
			return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q: this platform does not report which directory it is", i, c)
		}
		for j, prev := range out {
			if Nested(c, prev.Path) || Nested(prev.Path, c) {
				return nil, desk.Errorf(desk.EINVALID, "host_paths[%d].path %q and host_paths[%d].path %q nest; declare one of them", i, c, j, prev.Path)
			}
		}
		out = append(out, desk.HostPath{Path: c, Mode: hp.Mode, Dev: id.Dev, Ino: id.Ino})
	}
	return out, nil
}

// CheckPrimaryRoot checks that the primary root is a guest directory the
// agent owns or was given: within a host path, /artifacts (the actor's area
// as the session sees it) or /workspace. "" clears it.
func CheckPrimaryRoot(root string, hps []desk.HostPath) (string, error) {
	if root == "" {
		return "", nil
	}
	c, err := fsjail.Clean(root)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "primary_root: %s", desk.ErrorMessage(err))
	}
	for _, hp := range hps {
		if Nested(c, hp.Path) {
			return c, nil
		}
	}
	if Nested(c, "/artifacts") || Nested(c, "/workspace") {
		return c, nil
	}
	return "", desk.Errorf(desk.EINVALID, "primary_root %q must lie within a declared host path, /artifacts (the actor's area) or /workspace", root)
}

// Pin is the identity fsjail checks at every use of a declared host path.
func Pin(hp desk.HostPath) *fsjail.FileID {
	return &fsjail.FileID{Dev: hp.Dev, Ino: hp.Ino}
}

// Nested reports whether p equals dir or lies below it.
func Nested(p, dir string) bool {
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
