package desk

import "time"

// Workspace lifecycle states (the catalog lifecycle of the OpenAlice seed).
const (
	WorkspaceActive      = "active"
	WorkspaceOffboarding = "offboarding"
	WorkspaceDeparted    = "departed"
	WorkspaceRestoring   = "restoring"
	WorkspacePurging     = "purging"
	WorkspacePurged      = "purged"
)

// Workspace is an isolated, durable container: its own directory tree,
// actors, sessions and selection groups.
type Workspace struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// HostPaths are host directories the workspace's agents may use, seen
	// at the same path in the guest; PrimaryRoot is the guest directory
	// commands start in unless they name one (Wesclaw PrimaryRoot).
	HostPaths   []HostPath `json:"host_paths,omitempty"`
	PrimaryRoot string     `json:"primary_root,omitempty"`
}

// WorkspaceCreate is the input of WorkspaceService.CreateWorkspace.
//
// Workspace names are unique among the workspaces that are not purged: a
// name that an active, offboarding, departed, restoring or purging
// workspace has is taken (a departed workspace may be restored, and a
// purging one is not gone until its purge completes), so creating another one answers
// ECONFLICT unless AllowDuplicateName is set. A purged workspace keeps its
// catalog row and its id forever, but not its name. Names compare exactly,
// after trimming surrounding space.
type WorkspaceCreate struct {
	Name string `json:"name"`
	// AllowDuplicateName creates the workspace even when another one has
	// the same name; the catalog then tells them apart by id.
	AllowDuplicateName bool `json:"allow_duplicate_name,omitempty"`
}

// Actor kinds.
const (
	ActorHuman = "human"
	ActorAgent = "agent"
)

// OwnerActorName is the name of the human actor every workspace is created
// with. Requests made with the admin token that do not name an actor act as
// this actor, so a new workspace is usable without creating actors first.
const OwnerActorName = "owner"

// Actor is a principal inside a workspace. It owns a durable file area and
// holds tokens scoped to itself.
type Actor struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	CreatedAt   time.Time `json:"created_at"`
}
