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
