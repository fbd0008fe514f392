// Package template owns workspace templates: registering immutable
// template versions under DESK_HOME/templates, creating a workspace from
// one (its files land in checkout/ and desk records the baseline), and
// upgrading a workspace to another version with a three-way plan that
// never loses a local edit and never writes conflict markers.
//
// Only managed paths are ever upgraded (README.md, AGENTS.md, CLAUDE.md,
// .agents/skills/**, .claude/skills/**); every other file a template
// installs belongs to the workspace from then on. Changes to a checkout go
// through package checkout's journal, so an upgrade a crash interrupted is
// finished or undone by Recover.
package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
)

// Operation names: the journals of this package and the guard lease.
const (
	opInstall = "template-install"
	opUpgrade = desk.OpTemplateUpgrade
)

// Limits of one template version.
const (
	MaxFiles      = 10000
	MaxTotalBytes = 64 << 20
	// maxManagedBytes bounds a managed file read for a plan: these are
	// instructions and skills, read whole into memory to merge.
	maxManagedBytes = 16 << 20
)

// Managed reports whether the checkout-relative, slash-separated path p is
// one a template upgrade reconciles.
func Managed(p string) bool {
	switch p {
	case "README.md", "AGENTS.md", "CLAUDE.md":
		return true
	}
	return strings.HasPrefix(p, ".agents/skills/") || strings.HasPrefix(p, ".claude/skills/")
}

// Leases hands out the operation guard. The lifecycle service owns it
// (that is why this package imports lifecycle) and has it only once this
// process is a registered owner, so it is asked for at each operation.
type Leases interface {
	Guard() *lifecycle.Guard
}

// acquire takes the workspaces' leases for op.
func acquire(ctx context.Context, l Leases, op string, ws ...string) (func(), error) {
	g := l.Guard()
	if g == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "workspace operations are not available yet: desk is still starting")
	}
	return g.Acquire(ctx, op, ws...)
}

// Options tune the service.
type Options struct {
	Logger *slog.Logger
	// Hook, when set, is called at named steps: "install" after each file
	// a new workspace gets, and of an upgrade "apply" after each file,
	// "applied" and "committed". An error it returns fails the operation
	// there. Tests use it to inject failures.
	Hook func(step string) error
}

// Service registers templates and upgrades workspaces.
type Service struct {
	store      Store
	home       layout.Home
	workspaces desk.WorkspaceService
	leases     Leases
	opt        Options
}

var _ desk.Recoverer = (*Service)(nil)

// New returns the template service.
func New(store Store, home layout.Home, workspaces desk.WorkspaceService, leases Leases, opt Options) *Service {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, home: home, workspaces: workspaces, leases: leases, opt: opt}
}

func (s *Service) hook(step string) error {
	if s.opt.Hook == nil {
		return nil
	}
	return s.opt.Hook(step)
}

var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	versionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)
)

func validName(name string) error {
	if !nameRE.MatchString(name) {
		return desk.Errorf(desk.EINVALID, "template name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

func validVersion(v string) error {
	if !versionRE.MatchString(v) {
		return desk.Errorf(desk.EINVALID, "template version %q must be 1-64 letters, digits, '.', '_', '+' or '-', starting with a letter or digit", v)
	}
	return nil
}

// validFilePath accepts a clean, relative, slash-separated file path that
// does not reach into a .git directory.
func validFilePath(p string) error {
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") ||
		strings.ContainsAny(p, "\\\x00") {
		return desk.Errorf(desk.EINVALID, "template file path %q must be clean, relative and slash separated", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".git" {
			return desk.Errorf(desk.EINVALID, "template file path %q reaches into .git", p)
		}
		if atomicfile.IsTemp(part) {
			return desk.Errorf(desk.EINVALID, "template file path %q uses desk's temporary-file prefix", p)
		}
	}
	return nil
}

func (s *Service) versionDir(name, version string) string {
	return filepath.Join(s.home.Templates(), name, version)
}

const manifestName = "manifest.json"

// Add registers a template version. Versions are immutable: adding one
// that exists is ECONFLICT. The files become visible all at once.
func (s *Service) Add(ctx context.Context, name, version string, files []desk.TemplateFile) (*desk.TemplateVersion, error) {
	if err := desk.RequireAdmin(ctx, "register templates"); err != nil {
		return nil, err
	}
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := validVersion(version); err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, desk.Errorf(desk.EINVALID, "template %s %s has no files", name, version)
	}
	if len(files) > MaxFiles {
		return nil, desk.Errorf(desk.ETOOLARGE, "template %s %s has %d files; at most %d are allowed", name, version, len(files), MaxFiles)
	}
	var total int64
	seen := map[string]bool{}
	tv := &desk.TemplateVersion{Name: name, Version: version, CreatedAt: desk.Now()}
	for _, f := range files {
		if err := validFilePath(f.Path); err != nil {
			return nil, err
		}
		if seen[f.Path] {
			return nil, desk.Errorf(desk.EINVALID, "template file %s is listed twice", f.Path)
		}
		seen[f.Path] = true
		total += int64(len(f.Content))
		if total > MaxTotalBytes {
			return nil, desk.Errorf(desk.ETOOLARGE, "template %s %s is larger than %d bytes", name, version, MaxTotalBytes)
		}
		tv.Files = append(tv.Files, desk.TemplateFile{Path: f.Path, Size: int64(len(f.Content)), SHA256: checkout.SHA256(f.Content), Managed: Managed(f.Path)})
	}
	// A file and a directory of the same name cannot both exist.
	for p := range seen {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if seen[d] {
				return nil, desk.Errorf(desk.EINVALID, "template path %s is both a file and a directory", d)
			}
		}
	}
	sort.Slice(tv.Files, func(i, j int) bool { return tv.Files[i].Path < tv.Files[j].Path })
	if _, err := os.Stat(s.versionDir(name, version)); err == nil {
		return nil, desk.Errorf(desk.ECONFLICT, "template %s version %s already exists; versions are immutable, register a new one", name, version)
	}

	// Stage the whole version beside its place and rename it in: a crash
	// leaves either nothing or the complete version.
	if err := os.MkdirAll(filepath.Join(s.home.Templates(), name), 0o755); err != nil {
		return nil, fmt.Errorf("create template directory: %w", err)
	}
	stage, err := os.MkdirTemp(s.home.Templates(), ".staging-")
	if err != nil {
		return nil, fmt.Errorf("stage template: %w", err)
	}
	defer os.RemoveAll(stage)
	root, err := os.OpenRoot(stage)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	for _, f := range files {
		if err := checkout.WriteFile(root, "files/"+f.Path, f.Content); err != nil {
			return nil, fmt.Errorf("stage template file %s: %w", f.Path, err)
		}
	}
	b, err := json.MarshalIndent(tv, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := checkout.WriteFile(root, manifestName, b); err != nil {
		return nil, fmt.Errorf("stage template manifest: %w", err)
	}
	if err := os.Rename(stage, s.versionDir(name, version)); err != nil {
		if errors.Is(err, fs.ErrExist) || isNotEmpty(err) {
			return nil, desk.Errorf(desk.ECONFLICT, "template %s version %s already exists; versions are immutable, register a new one", name, version)
		}
		return nil, fmt.Errorf("install template: %w", err)
	}
	syncDir(filepath.Join(s.home.Templates(), name))
	s.opt.Logger.Info("template registered", desk.LogTemplate, name, "version", version, "files", len(tv.Files))
	return tv, nil
}

func isNotEmpty(err error) bool {
	var le *os.LinkError
	return errors.As(err, &le) && strings.Contains(le.Err.Error(), "not empty")
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// List returns every registered version, by name and then registration
// time.
func (s *Service) List(ctx context.Context) ([]*desk.TemplateVersion, error) {
	if err := desk.RequireAdmin(ctx, "list templates"); err != nil {
		return nil, err
	}
	return s.list("")
}

func (s *Service) list(only string) ([]*desk.TemplateVersion, error) {
	names, err := os.ReadDir(s.home.Templates())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*desk.TemplateVersion
	for _, n := range names {
		if !n.IsDir() || validName(n.Name()) != nil || (only != "" && n.Name() != only) {
			continue
		}
		versions, err := os.ReadDir(filepath.Join(s.home.Templates(), n.Name()))
		if err != nil {
			return nil, err
		}
		for _, v := range versions {
			if !v.IsDir() || validVersion(v.Name()) != nil {
				continue
			}
			tv, err := s.manifest(n.Name(), v.Name())
			if err != nil {
				return nil, err
			}
			out = append(out, tv)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].Version < out[j].Version
	})
	return out, nil
}

func (s *Service) manifest(name, version string) (*desk.TemplateVersion, error) {
	b, err := os.ReadFile(filepath.Join(s.versionDir(name, version), manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, desk.Errorf(desk.ENOTFOUND, "template %s version %s not found", name, version)
	}
	if err != nil {
		return nil, err
	}
	var tv desk.TemplateVersion
	if err := json.Unmarshal(b, &tv); err != nil {
		return nil, fmt.Errorf("read template %s %s: %w", name, version, err)
	}
	return &tv, nil
}

// Get returns a version of the named template; version "" means the one
// registered last.
func (s *Service) Get(name, version string) (*desk.TemplateVersion, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if version != "" {
		if err := validVersion(version); err != nil {
			return nil, err
		}
		return s.manifest(name, version)
	}
	all, err := s.list(name)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, desk.Errorf(desk.ENOTFOUND, "template %s not found", name)
	}
	return all[len(all)-1], nil
}

// ParseRef splits "name" or "name@version".
func ParseRef(ref string) (name, version string) {
	name, version, _ = strings.Cut(ref, "@")
	return name, version
}

// content reads the files of a version.
func (s *Service) content(tv *desk.TemplateVersion, paths []string) (map[string][]byte, error) {
	root, err := os.OpenRoot(filepath.Join(s.versionDir(tv.Name, tv.Version), "files"))
	if err != nil {
		return nil, fmt.Errorf("open template %s %s: %w", tv.Name, tv.Version, err)
	}
	defer root.Close()
	out := map[string][]byte{}
	for _, p := range paths {
		b, ok, err := checkout.ReadFile(root, p, 0)
		if err != nil {
			return nil, fmt.Errorf("read template %s %s file %s: %w", tv.Name, tv.Version, p, err)
		}
		if !ok {
			return nil, fmt.Errorf("template %s %s lost its file %s", tv.Name, tv.Version, p)
		}
		out[p] = b
	}
	return out, nil
}

func (s *Service) openVersionFile(tv *desk.TemplateVersion, p string) (*os.File, error) {
	root, err := os.OpenRoot(filepath.Join(s.versionDir(tv.Name, tv.Version), "files"))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Open(p)
}

// Baseline returns the workspace's recorded baseline, or nil when it was
// not created from a template.
func (s *Service) Baseline(ctx context.Context, wsID string) (*desk.TemplateBaseline, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, wsID); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.home.Workspace(wsID))
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", wsID, err)
	}
	defer root.Close()
	return readBaseline(root)
}

func readBaseline(root *os.Root) (*desk.TemplateBaseline, error) {
	b, ok, err := checkout.ReadFile(root, layout.TemplateBaseline, 0)
	if err != nil || !ok {
		return nil, err
	}
	var bl desk.TemplateBaseline
	if err := json.Unmarshal(b, &bl); err != nil {
		return nil, fmt.Errorf("read template baseline: %w", err)
	}
	return &bl, nil
}

var _ desk.TemplateService = (*Service)(nil)
