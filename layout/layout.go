// Package layout owns where desk keeps things under DESK_HOME. Every host
// path desk uses is derived here from ids (Wesclaw INV-IO-01: the actor's area
// is computed from workspace and actor, never taken from a request), and
// every path below a workspace is also available relative to the workspace
// directory, for use through an os.Root opened on it.
package layout

import (
	"path"
	"path/filepath"
	"strconv"
)

// Home is the root of one desk installation.
type Home struct{ Root string }

// DB is the SQLite database file of the embedded default store.
func (h Home) DB() string { return filepath.Join(h.Root, "desk.db") }

// AdminToken is the file holding the generated admin token (mode 0600).
func (h Home) AdminToken() string { return filepath.Join(h.Root, "admin.token") }

// Workspaces is the directory holding active workspaces.
func (h Home) Workspaces() string { return filepath.Join(h.Root, "workspaces") }

// Workspace is the directory of one active workspace.
func (h Home) Workspace(ws string) string { return filepath.Join(h.Root, "workspaces", ws) }

// Departed is where an offboarded workspace is moved whole.
func (h Home) Departed(ws string) string { return filepath.Join(h.Root, "departed-workspaces", ws) }

// Templates holds the registered templates, one directory per name and
// version (templates/<name>/<version>/).
func (h Home) Templates() string { return filepath.Join(h.Root, "templates") }

// Abs turns a workspace-relative path (as returned by the Rel functions) into
// a host path.
func (h Home) Abs(ws, rel string) string {
	return filepath.Join(h.Workspace(ws), filepath.FromSlash(rel))
}

// Paths relative to a workspace directory, slash separated.
const (
	CheckoutDir = "checkout"
	ActorsDir   = "workspace"
	ScratchDir  = ".scratch"
	// WorktreesDir holds the git worktrees of the checkout that sessions
	// are bound to (not exported: they are branches of the checkout).
	WorktreesDir = "worktrees"
	SystemDir    = ".system"
	RevisionsDir = ".system/revisions"
	ItemsDir     = ".system/items"
	GroupsDir    = ".system/groups"
	ArchiveDir   = ".system/archive"
	// RuntimeStateDir holds the runtimes' state directories, one per
	// session (the child's HOME, /runtime-home): inside the workspace so
	// it moves with an offboarding and goes with a purge, under .system
	// so neither the file API, exports nor absorb ever reach it.
	RuntimeStateDir = ".system/runtime-state"
	// TemplateBaseline is what a templated workspace got from its
	// template, the base of its three-way upgrades.
	TemplateBaseline = ".system/template/baseline.json"
)

// WorktreeRel is the worktree name of the checkout.
func WorktreeRel(name string) string { return path.Join(WorktreesDir, name) }

// ActorRel is the actor's durable file area (Wesclaw ArtifactDir).
func ActorRel(actor string) string { return path.Join(ActorsDir, actor) }

// SessionRel is a session's artifact directory, the guest's /artifacts.
func SessionRel(actor, session string) string {
	return path.Join(ActorsDir, actor, "sessions", session)
}

// RuntimeStateRel is the state directory of a runtime-backed session:
// its runtime's HOME, holding its native conversations (and whatever
// credentials the runtime keeps), seen by that session's child only.
func RuntimeStateRel(session string) string { return path.Join(RuntimeStateDir, session) }

// ScratchRel is an execution's scratch directory, the guest's /scratch.
func ScratchRel(execution string) string { return path.Join(ScratchDir, execution) }

// RevisionRel is where a kept earlier revision of an artifact is stored.
func RevisionRel(artifact string, revision int64) string {
	return path.Join(RevisionsDir, artifact, strconv.FormatInt(revision, 10))
}

// RevisionDirRel holds every kept revision of one artifact.
func RevisionDirRel(artifact string) string { return path.Join(RevisionsDir, artifact) }

// ItemRel is the materialized bytes of a web item.
func ItemRel(item string) string { return path.Join(ItemsDir, item) }

// GroupRel is the materialized view of a selection group, the guest's
// /context/<group>: one hard link per member item.
func GroupRel(group string) string { return path.Join(GroupsDir, group) }
