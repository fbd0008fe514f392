package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/hostpath"
	"github.com/desk-runtime/desk/layout"
)

// View describes what one guest file system shows: the session, the groups
// it binds, and the scratch directory of the running execution, if any.
type View struct {
	Session   *desk.Session
	GroupIDs  []string
	Execution string // empty outside an execution: no /scratch
	// HostPaths are the workspace's declared host directories, mounted at
	// their own path, read-only unless declared "rw" (Wesclaw HostPaths).
	HostPaths []desk.HostPath
	// GitWritable is the workspace's git_writable setting: without it,
	// the hooks and config of /workspace's repository are read-only
	// (GitReadOnly).
	GitWritable bool
}

// GitReadOnly are the entries of a git directory the agent may not write
// unless its workspace sets git_writable: what would name programs for
// git to run (hooks, and the config that names filters, drivers,
// fsmonitor, hooksPath). Host-side git runs none of them anyway
// (checkout.Git); this keeps a repository the agent works in free of
// them for the people and tools that use it later. The config is listed
// only when it exists as a regular file (a missing one cannot be bound);
// hooks is created when missing.
func GitReadOnly(gitDir string) []string {
	ro := []string{"hooks"}
	if fi, err := os.Lstat(filepath.Join(gitDir, "config")); err == nil && fi.Mode().IsRegular() {
		ro = append(ro, "config")
	}
	return ro
}

// Mounts returns the guest mounts of a view (DESIGN "What an agent sees").
// /artifacts/immutable is read-only to executions; /context is read-only to
// everyone.
func Mounts(home layout.Home, v View) []fsjail.Mount {
	x := v.Session
	ws := x.WorkspaceID
	m := []fsjail.Mount{
		{Guest: "/artifacts", Host: home.Abs(ws, layout.SessionRel(x.Actor, x.ID)), ReadOnlyDirs: []string{ImmutableDir}},
		{Guest: "/workspace", Host: WorkspaceDir(home, x)},
	}
	// The carve-out needs a .git directory there at the time (a worktree's
	// .git is a file; its git directory is GitMounts').
	if fi, err := os.Lstat(filepath.Join(m[1].Host, ".git")); err == nil && fi.IsDir() && !v.GitWritable {
		for _, d := range GitReadOnly(filepath.Join(m[1].Host, ".git")) {
			m[1].ReadOnlyDirs = append(m[1].ReadOnlyDirs, ".git/"+d)
		}
	}
	for _, g := range v.GroupIDs {
		m = append(m, fsjail.Mount{Guest: "/context/" + g, Host: home.Abs(ws, layout.GroupRel(g)), ReadOnly: true})
	}
	if v.Execution != "" {
		m = append(m, fsjail.Mount{Guest: "/scratch", Host: home.Abs(ws, layout.ScratchRel(v.Execution))})
	}
	// desk only checks a host path's boundary (INV-IO-07): the jail refuses
	// everything outside it and writes to a read-only one; the directory
	// itself is never created or changed here. It is pinned to the
	// directory recorded at declaration, so a path swapped since (for a
	// link to desk's home, say) is refused at every use.
	for _, hp := range v.HostPaths {
		m = append(m, fsjail.Mount{Guest: hp.Path, Host: hp.Path, ReadOnly: hp.Mode != desk.HostPathRW, Pin: hostpath.Pin(hp)})
	}
	return m
}

// Guest directories of the working-directory rule.
const (
	guestArtifacts = "/artifacts"
	guestScratch   = "/scratch"
)

// PrimaryRoot is the guest directory a workspace names as its agents' main
// working context: the declared primary_root, else the first host path
// (Wesclaw: explicit > AllowPaths[0]), else "" (none declared). The seed's
// last fallback, the artifact directory, is the last step of WorkDir
// instead, so that scratch keeps its place before it (INV-IO-03).
func PrimaryRoot(w *desk.Workspace) string {
	if w == nil {
		return ""
	}
	if w.PrimaryRoot != "" {
		return w.PrimaryRoot
	}
	if len(w.HostPaths) > 0 {
		return w.HostPaths[0].Path
	}
	return ""
}

// WorkDir resolves a command's guest working directory (Wesclaw INV-IO-03):
// the explicit cwd, else the primary root, else the execution's scratch,
// else the session's artifact directory. A relative explicit cwd is taken
// relative to the directory the rule would choose without it. The answer
// always resolves in j; an explicit cwd outside the guest file system is
// the caller's error (EFORBIDDEN or EINVALID), never silently replaced.
func WorkDir(j *fsjail.Jail, w *desk.Workspace, v View, explicit string) (string, error) {
	scratch := ""
	if v.Execution != "" {
		scratch = guestScratch
	}
	if explicit != "" && !strings.HasPrefix(explicit, "/") {
		base, err := j.WorkDir("", PrimaryRoot(w), scratch, guestArtifacts)
		if err != nil {
			return "", err
		}
		explicit = base + "/" + explicit
	}
	return j.WorkDir(explicit, PrimaryRoot(w), scratch, guestArtifacts)
}

func (s *Service) jail(ctx context.Context, sessionID string) (*fsjail.Jail, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	groups, err := s.store.ListBindings(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	w, err := s.store.GetWorkspace(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	st, err := s.store.GetAgentSettings(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	v := View{Session: x, HostPaths: w.HostPaths, GitWritable: st.GitWritable}
	for _, g := range groups {
		v.GroupIDs = append(v.GroupIDs, g.ID)
	}
	// While a turn runs on the session's orchestrator surface its /scratch
	// is part of what that execution sees, so it is part of this view too.
	run, err := s.store.ActiveExecution(ctx, x.SurfaceID)
	if err != nil {
		return nil, err
	}
	if run != nil {
		v.Execution = run.ID
	}
	return fsjail.New(Mounts(s.home, v))
}

func entry(e fsjail.Entry) desk.GuestEntry { return desk.GuestEntry(e) }

// GuestList lists a guest directory as an execution of the session would
// see it, without desk's own temporary files.
func (s *Service) GuestList(ctx context.Context, sessionID, guestPath string) ([]desk.GuestEntry, error) {
	j, err := s.jail(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	ents, err := j.ReadDir(guestPath)
	if err != nil {
		return nil, err
	}
	out := make([]desk.GuestEntry, 0, len(ents))
	for _, e := range ents {
		if atomicfile.IsTemp(e.Name) {
			continue
		}
		out = append(out, entry(e))
	}
	return out, nil
}

// GuestOpen opens a guest file for reading.
func (s *Service) GuestOpen(ctx context.Context, sessionID, guestPath string) (*os.File, desk.GuestEntry, error) {
	j, err := s.jail(ctx, sessionID)
	if err != nil {
		return nil, desk.GuestEntry{}, err
	}
	defer j.Close()
	st, err := j.Stat(guestPath)
	if err != nil {
		return nil, desk.GuestEntry{}, err
	}
	f, err := j.Open(guestPath)
	if err != nil {
		return nil, desk.GuestEntry{}, err
	}
	return f, entry(st), nil
}
