package runtimehost

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/gateway"
	"github.com/desk-runtime/desk/layout"
)

var (
	runtimeName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envName     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Registry is the operator's list of runtimes (desk.RuntimeService):
// only the admin token registers, lists or removes one. argv[0] is
// resolved on the host at registration, so a session never starts a
// program the operator did not name.
type Registry struct {
	store desk.RuntimeStore
	o     RegistryOptions
}

// RegistryOptions are what the registry checks a registration against.
type RegistryOptions struct {
	// Home is DESK_HOME: a program whose bound directory contains it, or
	// lies inside it, is refused (the sandbox would show the child desk's
	// database and admin token).
	Home layout.Home
}

// NewRegistry returns the registry over the store.
func NewRegistry(store desk.RuntimeStore, o RegistryOptions) *Registry {
	return &Registry{store: store, o: o}
}

func admin(ctx context.Context) error {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if !p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token registers runtimes; an actor may pick a registered runtime by name when creating a session")
	}
	return nil
}

// Add validates and registers r.
func (g *Registry) Add(ctx context.Context, r desk.Runtime) (*desk.Runtime, error) {
	if err := admin(ctx); err != nil {
		return nil, err
	}
	if !runtimeName.MatchString(r.Name) {
		return nil, desk.Errorf(desk.EINVALID, "runtime name %q: use 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", r.Name)
	}
	if !slices.Contains(desk.RuntimeProtocols, r.Protocol) {
		return nil, desk.Errorf(desk.EINVALID, "unknown runtime protocol %q: use one of %s", r.Protocol, strings.Join(desk.RuntimeProtocols, ", "))
	}
	if len(r.Argv) == 0 || r.Argv[0] == "" {
		return nil, desk.Errorf(desk.EINVALID, "argv is required: the program to start and its arguments")
	}
	bin, err := Resolve(r.Argv[0])
	if err != nil {
		return nil, err
	}
	if err := CheckInstall(bin, g.o.Home); err != nil {
		return nil, err
	}
	for _, e := range r.Env {
		if !envName.MatchString(e) {
			return nil, desk.Errorf(desk.EINVALID, "env %q: give names of environment variables (values are read from desk's environment when the runtime starts)", e)
		}
		if why, refused := gateway.Refused(e); refused {
			return nil, desk.Errorf(desk.EINVALID, "env %s: %s (docs/runtimes.md); keep env for other variables", e, why)
		}
	}
	x := &desk.Runtime{Name: r.Name, Protocol: r.Protocol, Argv: append([]string{bin}, r.Argv[1:]...),
		Env: slices.Compact(slices.Sorted(slices.Values(r.Env))), CreatedAt: desk.Now()}
	if x.Env == nil {
		x.Env = []string{}
	}
	if err := g.store.CreateRuntime(ctx, x); err != nil {
		return nil, err
	}
	return x, nil
}

// List returns the registered runtimes.
func (g *Registry) List(ctx context.Context) ([]*desk.Runtime, error) {
	if err := admin(ctx); err != nil {
		return nil, err
	}
	return g.store.ListRuntimes(ctx)
}

// Remove deletes a registration.
func (g *Registry) Remove(ctx context.Context, name string) error {
	if err := admin(ctx); err != nil {
		return err
	}
	return g.store.DeleteRuntime(ctx, name)
}

// Resolve finds argv[0] on the host (through PATH when it has no slash)
// and checks it is an executable regular file; the result is absolute
// with its symbolic links resolved, the file the sandbox binds.
func Resolve(arg0 string) (string, error) {
	p := arg0
	if !strings.Contains(arg0, "/") {
		lp, err := exec.LookPath(arg0)
		if err != nil {
			return "", desk.Errorf(desk.EINVALID, "argv[0] %q is not a program on desk's PATH", arg0)
		}
		p = lp
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "argv[0] %q: %v", arg0, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "argv[0] %q does not exist on the desk host", arg0)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "argv[0] %q: %v", arg0, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", desk.Errorf(desk.EINVALID, "argv[0] %q (%s) is not an executable file", arg0, real)
	}
	return real, nil
}

// CheckInstall refuses a program whose install directory — what the
// sandbox binds read-only for it (installRoot) — contains DESK_HOME or
// lies inside it: the child would see desk's database, its admin token and
// every workspace. Both are host paths compared after their symbolic
// links are resolved, so a link to either side is no way around it. The
// registry checks at registration, the host again before every child
// starts (a registration older than the check, or a DESK_HOME moved since).
func CheckInstall(bin string, home layout.Home) error {
	if home.Root == "" {
		return nil
	}
	dir := installRoot(bin)[0]
	realDir, err := realPath(dir)
	if err != nil {
		return desk.Errorf(desk.EINVALID, "the program's directory %s: %v", dir, err)
	}
	realHome, err := realPath(home.Root)
	if err != nil {
		return desk.Errorf(desk.EINVALID, "DESK_HOME %s: %v", home.Root, err)
	}
	switch {
	case inside(realHome, realDir):
		return desk.Errorf(desk.EINVALID, "the program's directory %s, which the sandbox binds read-only, contains DESK_HOME %s (its database and admin token): install the runtime outside DESK_HOME's parent directories (e.g. /usr/local/bin or an npm prefix of its own)", realDir, realHome)
	case inside(realDir, realHome):
		return desk.Errorf(desk.EINVALID, "the program's directory %s, which the sandbox binds read-only, lies inside DESK_HOME %s (its database and admin token): install the runtime outside DESK_HOME", realDir, realHome)
	}
	return nil
}

func inside(p, dir string) bool { _, ok := within(p, dir); return ok }

// realPath is p absolute with its symbolic links resolved; a path that
// does not exist (yet) is taken as far as it does.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for d := abs; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if d == "/" {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

var _ desk.RuntimeService = (*Registry)(nil)

// errNotRegistered is the failure of a turn whose runtime was removed.
func errNotRegistered(name string) error {
	return desk.Errorf(desk.EUNAVAILABLE, "runtime %s is not registered on this desk; ask the operator to register it (desk runtime add %s --protocol … -- ARGV…)", name, name)
}
