// Package absorb owns Workspace Absorb: folding one workspace (the source)
// into another (the target). The source's user files are copied into the
// target under the same paths, collisions take an explicit resolution, the
// target commits the import when its checkout is a git repository, and the
// source is then offboarded intact through the lifecycle (its sessions
// retire, its directory moves to departed-workspaces/ untouched) with the
// catalog recording absorbed_into, absorbed_at and the import commit.
//
// User files are those of the source's checkout/ (in a git repository:
// tracked and untracked-but-not-ignored files), skills/ and knowledge/.
// Actor areas and session artifacts are not moved: they belong to the
// source's actors and sessions, which retire with it and come back with a
// restore. Never moved: .git, desk's own state, managed template files,
// .env*, credentials, caches and symbolic links (see Exclude).
//
// It imports lifecycle (the guard and offboarding are the lifecycle's) and
// template (what a managed template file is, and the running-session
// check). Provenance is never rewritten: the source keeps every session,
// artifact and record as it was.
package absorb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
	"github.com/desk-runtime/desk/template"
)

const op = desk.OpAbsorb

// Areas are the workspace directories whose files an absorb moves.
var Areas = []string{layout.CheckoutDir, "skills", "knowledge"}

// Lifecycle is what absorb needs of the lifecycle service.
type Lifecycle interface {
	Guard() *lifecycle.Guard
	Offboard(ctx context.Context, ws string, in lifecycle.OffboardInput) (*lifecycle.OffboardResult, error)
}

// Options tune the service.
type Options struct {
	Logger *slog.Logger
	// Hook, when set, is called at named steps of an absorb ("copy" after
	// each file, "copied", "committed", "offboard", "offboarded"); an
	// error it returns fails the absorb there. Tests use it.
	Hook func(step string) error
	// Children, when set, stops the source's runtime children before its
	// files are read (and the source offboarded).
	Children desk.RuntimeChildren
}

// Service plans and applies absorbs.
type Service struct {
	store Store
	home  layout.Home
	life  Lifecycle
	opt   Options
}

var _ desk.Recoverer = (*Service)(nil)

// New returns the absorb service.
func New(store Store, home layout.Home, life Lifecycle, opt Options) *Service {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, home: home, life: life, opt: opt}
}

func (s *Service) hook(step string) error {
	if s.opt.Hook == nil {
		return nil
	}
	return s.opt.Hook(step)
}

// Exclusion reasons.
const (
	ReasonGit        = "git"
	ReasonDeskState  = "desk-state"
	ReasonManaged    = "template-managed"
	ReasonEnv        = "env"
	ReasonCredential = "credential"
	ReasonCache      = "cache"
	ReasonLink       = "symlink"
	ReasonSpecial    = "not-a-regular-file"
)

// Directories never moved, by name, wherever they are.
var (
	deskDirs = map[string]bool{".system": true, ".scratch": true, ".alice": true, ".desk": true}
	// cacheDirs are build outputs, dependency trees and tool caches: they
	// are rebuilt, not moved.
	cacheDirs = map[string]bool{
		"node_modules": true, "bower_components": true, "__pycache__": true, ".cache": true,
		"target": true, "dist": true, ".venv": true, "venv": true, ".tox": true, ".nox": true,
		".pytest_cache": true, ".mypy_cache": true, ".ruff_cache": true, ".gradle": true,
		".next": true, ".nuxt": true, ".turbo": true, ".parcel-cache": true, ".terraform": true,
		".sass-cache": true, ".eggs": true,
	}
	credentialDirs = map[string]bool{".ssh": true, ".aws": true, ".gnupg": true, ".azure": true, ".kube": true, ".docker": true}
	// credentialNames are files that hold secrets by convention.
	credentialNames = map[string]bool{
		".netrc": true, "_netrc": true, ".npmrc": true, ".pypirc": true, ".git-credentials": true,
		"credentials.json": true, "credentials": true, ".htpasswd": true, "secrets.json": true,
		"service-account.json": true, ".dockercfg": true,
	}
	credentialExts  = []string{".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx", ".ppk", ".asc", ".gpg"}
	credentialStems = []string{"id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"}
	cacheFiles      = map[string]bool{".DS_Store": true, "Thumbs.db": true}
	cacheExts       = []string{".pyc", ".pyo", ".class"}
)

// Exclude says whether a file of the source stays behind, and why. area
// is the workspace directory the file is in (checkout, skills, knowledge)
// and rel its slash-separated path inside; at is the path (a directory,
// or the file itself) the reason applies to, relative to area.
func Exclude(area, rel string) (reason, at string) {
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		at = strings.Join(parts[:i+1], "/")
		dir := i < len(parts)-1
		switch {
		case c == ".git":
			return ReasonGit, at
		case deskDirs[c] || strings.HasPrefix(c, ".desk-tmp-"):
			return ReasonDeskState, at
		case dir && cacheDirs[c]:
			return ReasonCache, at
		case dir && credentialDirs[c]:
			return ReasonCredential, at
		}
	}
	base := parts[len(parts)-1]
	lower := strings.ToLower(base)
	switch {
	case strings.HasPrefix(base, ".env"):
		return ReasonEnv, rel
	case credentialNames[lower]:
		return ReasonCredential, rel
	case hasAny(lower, credentialExts, strings.HasSuffix) || hasAny(lower, credentialStems, strings.HasPrefix):
		return ReasonCredential, rel
	case cacheFiles[base] || hasAny(lower, cacheExts, strings.HasSuffix):
		return ReasonCache, rel
	}
	if area == layout.CheckoutDir {
		for _, d := range managedDirs {
			if strings.HasPrefix(rel, d+"/") {
				return ReasonManaged, d
			}
		}
		if template.Managed(rel) {
			return ReasonManaged, rel
		}
	}
	return "", ""
}

// managedDirs are the checkout's template-owned skill trees (.pi/skills is
// the seed's legacy one).
var managedDirs = []string{".agents/skills", ".claude/skills", ".pi/skills"}

func hasAny(s string, list []string, f func(string, string) bool) bool {
	for _, x := range list {
		if f(s, x) {
			return true
		}
	}
	return false
}

// ImportTag names the directory a kept-both source copy goes to:
// <source name>-<last 6 characters of the source id>.
func ImportTag(w *desk.Workspace) string {
	var b strings.Builder
	dash := false
	for _, r := range w.Name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	name := strings.Trim(b.String(), "-.")
	if name == "" {
		name = "workspace"
	}
	id := w.ID
	if len(id) > 6 {
		id = id[len(id)-6:]
	}
	return name + "-" + id
}

// importPath is where "both" puts the source's copy of p.
func importPath(p, tag string) string {
	area, rel, _ := strings.Cut(p, "/")
	return area + "/imports/" + tag + "/" + rel
}

// sourceFile is one file the plan would move.
type sourceFile struct {
	path string // workspace-relative
	size int64
	sha  string
	mode fs.FileMode
}

// listSource walks the source's user areas.
func (s *Service) listSource(ctx context.Context, src string, root *os.Root) ([]sourceFile, []desk.AbsorbExclusion, error) {
	var files []sourceFile
	excluded := map[string]string{}
	consider := func(area, rel string) error {
		if reason, at := Exclude(area, rel); reason != "" {
			excluded[area+"/"+at] = reason
			return nil
		}
		p := area + "/" + rel
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // tracked but deleted in the work tree
		}
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			excluded[p] = ReasonLink
			return nil
		case fi.IsDir():
			// A tracked directory is a submodule: a repository of its own.
			excluded[p] = ReasonGit
			return nil
		case !fi.Mode().IsRegular():
			excluded[p] = ReasonSpecial
			return nil
		}
		sum, err := hashFile(root, p)
		if err != nil {
			return err
		}
		files = append(files, sourceFile{path: p, size: fi.Size(), sha: sum, mode: fi.Mode().Perm()})
		return nil
	}
	for _, area := range Areas {
		fi, err := root.Lstat(area)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if !fi.IsDir() {
			excluded[area] = ReasonSpecial
			continue
		}
		if repo := checkout.OpenRepo(s.home.Abs(src, area)); area == layout.CheckoutDir && repo != nil {
			rels, err := repo.Files(ctx)
			if err != nil {
				return nil, nil, unreadableGit(err, src)
			}
			excluded[area+"/.git"] = ReasonGit
			for _, rel := range rels {
				if err := consider(area, rel); err != nil {
					return nil, nil, err
				}
			}
			continue
		}
		err = fs.WalkDir(root.FS(), area, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == area {
				return nil
			}
			rel := strings.TrimPrefix(p, area+"/")
			if d.IsDir() {
				// A directory is left out whole when a file in it would be
				// for the directory's sake.
				if reason, at := Exclude(area, rel+"/x"); reason != "" && at == rel {
					excluded[area+"/"+at] = reason
					return fs.SkipDir
				}
				return nil
			}
			return consider(area, rel)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("list the source's %s: %w", area, err)
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	var ex []desk.AbsorbExclusion
	for p, r := range excluded {
		ex = append(ex, desk.AbsorbExclusion{Path: p, Reason: r})
	}
	sort.Slice(ex, func(i, j int) bool { return ex[i].Path < ex[j].Path })
	return files, ex, nil
}

func hashFile(root *os.Root, p string) (string, error) {
	f, err := root.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// targetState describes what the target has at p: its file's hash, or a
// note when something other than a file is there or on the way.
func targetState(root *os.Root, p string) (sha, note string, err error) {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		fi, err := root.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return "", "", nil
		}
		if err != nil {
			return "", "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", "the target has a symbolic link at " + dir, nil
		}
		if !fi.IsDir() {
			return "", "the target has a file at " + dir, nil
		}
	}
	fi, err := root.Lstat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", "the target has a symbolic link here", nil
	case fi.IsDir():
		return "", "the target has a directory here", nil
	case !fi.Mode().IsRegular():
		return "", "the target has a special file here", nil
	}
	sum, err := hashFile(root, p)
	return sum, "", err
}

// planned is a plan with what applying it needs.
type planned struct {
	plan  *desk.AbsorbPlan
	files map[string]sourceFile
}

// Plan computes what absorbing source into target would do. It changes
// nothing.
func (s *Service) Plan(ctx context.Context, target, source string) (*desk.AbsorbPlan, error) {
	if err := desk.RequireAdmin(ctx, "absorb workspaces"); err != nil {
		return nil, err
	}
	if err := errors.Join(desk.RefuseManager(target, "absorbed into"), desk.RefuseManager(source, "absorbed")); err != nil {
		return nil, err
	}
	tw, sw, err := s.pair(ctx, target, source)
	if err != nil {
		return nil, err
	}
	troot, sroot, err := s.roots(target, source)
	if err != nil {
		return nil, err
	}
	defer troot.Close()
	defer sroot.Close()
	p, err := s.plan(ctx, tw, sw, troot, sroot)
	if err != nil {
		return nil, err
	}
	return p.plan, nil
}

// unreadableGit turns a git command that failed on a checkout's own
// repository (a .git that is not a repository, a corrupt index or HEAD)
// into a conflict naming the workspace and its .git: the caller can repair
// it, and desk has nothing to retry. Other errors pass through.
func unreadableGit(err error, ws string) error {
	var ge *checkout.GitError
	if !errors.As(err, &ge) {
		if desk.IsCode(err, desk.ECONFLICT) {
			// checkout.Git refused the repository (a .git leading
			// elsewhere, a config key it cannot neutralise).
			return desk.Errorf(desk.ECONFLICT, "the checkout of workspace %s: %s; repair %s/.git, then plan the absorb again", ws, desk.ErrorMessage(err), layout.CheckoutDir)
		}
		return err
	}
	msg := strings.TrimSpace(ge.Stderr)
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return desk.Errorf(desk.ECONFLICT, "the checkout of workspace %s has a .git that git cannot read (git %s: exit %d: %s); repair or remove %s/.git, then plan the absorb again",
		ws, ge.Args[0], ge.Code, msg, layout.CheckoutDir)
}

// pair checks the two workspaces: distinct, known and active.
func (s *Service) pair(ctx context.Context, target, source string) (*desk.Workspace, *desk.Workspace, error) {
	if source == "" {
		return nil, nil, desk.Errorf(desk.EINVALID, "source is required: name the workspace to absorb (?source=ws_…)")
	}
	if target == source {
		return nil, nil, desk.Errorf(desk.EINVALID, "a workspace cannot absorb itself (%s)", target)
	}
	tw, err := s.store.GetWorkspace(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	sw, err := s.store.GetWorkspace(ctx, source)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, nil, desk.Errorf(desk.EINVALID, "source workspace %s not found", source)
	}
	if err != nil {
		return nil, nil, err
	}
	if err := lifecycle.NotActive(tw); err != nil {
		return nil, nil, err
	}
	if err := lifecycle.NotActive(sw); err != nil {
		return nil, nil, err
	}
	return tw, sw, nil
}

func (s *Service) roots(target, source string) (*os.Root, *os.Root, error) {
	troot, err := os.OpenRoot(s.home.Workspace(target))
	if err != nil {
		return nil, nil, fmt.Errorf("open workspace %s: %w", target, err)
	}
	sroot, err := os.OpenRoot(s.home.Workspace(source))
	if err != nil {
		troot.Close()
		return nil, nil, fmt.Errorf("open workspace %s: %w", source, err)
	}
	return troot, sroot, nil
}

func (s *Service) plan(ctx context.Context, tw, sw *desk.Workspace, troot, sroot *os.Root) (*planned, error) {
	files, excluded, err := s.listSource(ctx, sw.ID, sroot)
	if err != nil {
		return nil, err
	}
	tag := ImportTag(sw)
	pl := &planned{files: map[string]sourceFile{}, plan: &desk.AbsorbPlan{
		TargetID: tw.ID, SourceID: sw.ID, SourceName: sw.Name, ImportTag: tag,
		Entries: []desk.AbsorbEntry{}, Excluded: excluded,
		Summary: map[string]int{desk.AbsorbReady: 0, desk.AbsorbDuplicate: 0, desk.AbsorbConflict: 0, "excluded": len(excluded)},
	}}
	if pl.plan.Excluded == nil {
		pl.plan.Excluded = []desk.AbsorbExclusion{}
	}
	for _, f := range files {
		pl.files[f.path] = f
		e := desk.AbsorbEntry{Path: f.path, Size: f.size, SourceSHA256: f.sha}
		sha, note, err := targetState(troot, f.path)
		if err != nil {
			return nil, err
		}
		switch {
		case note != "":
			e.Status, e.Note = desk.AbsorbConflict, note
		case sha == "":
			e.Status = desk.AbsorbReady
		case sha == f.sha:
			e.Status, e.TargetSHA256 = desk.AbsorbDuplicate, sha
		default:
			e.Status, e.TargetSHA256 = desk.AbsorbConflict, sha
		}
		if e.Status == desk.AbsorbConflict {
			e.ImportPath = importPath(f.path, tag)
		}
		pl.plan.Summary[e.Status]++
		pl.plan.Entries = append(pl.plan.Entries, e)
	}
	pl.plan.Digest = absorbDigest(pl.plan)
	return pl, nil
}

// absorbDigest is the SHA-256 of the plan's canonical form: both
// workspaces, the import tag, and per file its status, size and the
// hashes on both sides.
func absorbDigest(p *desk.AbsorbPlan) string {
	h := sha256.New()
	fmt.Fprintf(h, "desk absorb plan v1\x00%s\x00%s\x00%s\n", p.TargetID, p.SourceID, p.ImportTag)
	for _, e := range p.Entries {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00%s\x00%s\x00%s\n", e.Path, e.Status, e.Size, e.SourceSHA256, e.TargetSHA256, e.ImportPath, e.Note)
	}
	for _, x := range p.Excluded {
		fmt.Fprintf(h, "x\x00%s\x00%s\n", x.Path, x.Reason)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// write is one file the absorb writes into the target: dest from the
// source's from.
type write struct {
	dest, from string
	file       sourceFile
}

// writes turns a plan and its resolutions into the files to write.
func (s *Service) writes(pl *planned, troot *os.Root, res map[string]string) ([]write, error) {
	status := map[string]desk.AbsorbEntry{}
	var unresolved []string
	for _, e := range pl.plan.Entries {
		status[e.Path] = e
		if e.Status == desk.AbsorbConflict && res[e.Path] == "" {
			unresolved = append(unresolved, e.Path)
		}
	}
	for p, r := range res {
		e, ok := status[p]
		switch {
		case !ok:
			return nil, desk.Errorf(desk.EINVALID, "resolution for %s: the plan has no such path", p)
		case e.Status != desk.AbsorbConflict:
			return nil, desk.Errorf(desk.EINVALID, "resolution for %s: it is %s, not a conflict; only conflicts take a resolution", p, e.Status)
		case r == desk.AbsorbUseSource && e.Note != "":
			return nil, desk.Errorf(desk.EINVALID, "resolution for %s: %q cannot replace what is there (%s); choose %q or %q", p, r, e.Note, desk.AbsorbKeepTarget, desk.AbsorbKeepBoth)
		}
	}
	if len(unresolved) > 0 {
		sort.Strings(unresolved)
		shown := unresolved
		if len(shown) > 20 {
			shown = append(shown[:20:20], fmt.Sprintf("and %d more", len(unresolved)-20))
		}
		return nil, desk.Errorf(desk.ECONFLICT, "unresolved conflicts: %s; resolve each with %q, %q or %q", strings.Join(shown, ", "), desk.AbsorbKeepTarget, desk.AbsorbUseSource, desk.AbsorbKeepBoth)
	}
	var out []write
	for _, e := range pl.plan.Entries {
		f := pl.files[e.Path]
		switch {
		case e.Status == desk.AbsorbReady:
			out = append(out, write{dest: e.Path, from: e.Path, file: f})
		case e.Status == desk.AbsorbConflict && res[e.Path] == desk.AbsorbUseSource:
			out = append(out, write{dest: e.Path, from: e.Path, file: f})
		case e.Status == desk.AbsorbConflict && res[e.Path] == desk.AbsorbKeepBoth:
			sha, note, err := targetState(troot, e.ImportPath)
			if err != nil {
				return nil, err
			}
			if sha == f.sha {
				continue // imported before: the same bytes are there
			}
			if sha != "" || note != "" {
				return nil, desk.Errorf(desk.EINVALID, "resolution for %s: its import path %s is taken in the target; choose %q or %q", e.Path, e.ImportPath, desk.AbsorbKeepTarget, desk.AbsorbUseSource)
			}
			out = append(out, write{dest: e.ImportPath, from: e.Path, file: f})
		}
	}
	seen := map[string]string{}
	for _, w := range out {
		if other, dup := seen[w.dest]; dup {
			return nil, desk.Errorf(desk.EINVALID, "%s and %s would both be written to %s; resolve one differently", other, w.from, w.dest)
		}
		seen[w.dest] = w.from
	}
	// A file written where another write needs a directory cannot work.
	for _, w := range out {
		for d := path.Dir(w.dest); d != "." && d != "/"; d = path.Dir(d) {
			if other, ok := seen[d]; ok {
				return nil, desk.Errorf(desk.EINVALID, "%s would be written to %s, where %s needs a directory", other, d, w.from)
			}
		}
	}
	return out, nil
}

var _ desk.AbsorbService = (*Service)(nil)
