package desk

import "time"

// Session lifecycle states.
const (
	SessionActive  = "active"
	SessionRetired = "retired"
)

// Session is the unit of identity and ownership. It is bound at birth to one
// workspace and one actor and never moves.
type Session struct {
	ID          string `json:"id"`
	Signature   string `json:"signature"`
	WorkspaceID string `json:"workspace_id"`
	Actor       string `json:"actor"` // the owning actor's id
	Title       string `json:"title"`
	Pinned      bool   `json:"pinned"`
	Archived    bool   `json:"archived"`
	Unread      bool   `json:"unread"`
	Lifecycle   string `json:"lifecycle"`
	// SurfaceID is the session's orchestrator surface, created with it.
	SurfaceID string `json:"surface_id"`
	// Model is the session's model ("openai:gpt-4.1", "script", …); empty
	// means the server's default (DESK_MODEL).
	Model string `json:"model"`
	// ReasoningEffort is how hard the session's model reasons (low,
	// medium, high; "" the model's default).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Profile names the profile the session runs, and ProfileSnapshot is
	// that profile as it was when the session took it: later edits of
	// the profile do not change the session.
	Profile         string       `json:"profile,omitempty"`
	ProfileSnapshot *ProfileSpec `json:"profile_snapshot,omitempty"`
	// Script is the script of a "script" session; it is not shown.
	Script []byte `json:"-"`
	// Runtime names the registered external runtime that runs the
	// session's turns; empty means desk's own agent.
	Runtime string `json:"runtime,omitempty"`
	// NativeID is the runtime's own conversation id, recorded when the
	// runtime first reports it and reopened exactly on every later turn.
	NativeID string `json:"native_id,omitempty"`
	// ReconstructedFrom names the unavailable target a reconstructed
	// session stands in for; such a session is never presented as the
	// original author.
	ReconstructedFrom string `json:"reconstructed_from,omitempty"`
	// Worktree names the git worktree of the workspace's checkout the
	// session is bound to (its /workspace); empty for the checkout itself.
	Worktree string `json:"worktree,omitempty"`
	// Git is what the session's /workspace has checked out, read when the
	// session is read; nil when /workspace is not a git work tree.
	Git       *GitInfo  `json:"git,omitempty"`
	Origin    Origin    `json:"origin"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`

	// Deleting is set while a delete is in progress: the session is already
	// invisible, its files are being removed, and startup finishes the job
	// if desk stopped half-way.
	Deleting bool `json:"-"`
}

// GitInfo is the branch a session's /workspace has checked out.
type GitInfo struct {
	// Branch is the branch HEAD names ("" when HEAD is detached).
	Branch string `json:"branch,omitempty"`
	// Detached is set when HEAD is a commit rather than a branch; Commit
	// is that commit.
	Detached bool   `json:"detached,omitempty"`
	Commit   string `json:"commit,omitempty"`
	// Worktree is the worktree the session is bound to; empty for the
	// workspace's checkout itself.
	Worktree string `json:"worktree,omitempty"`
}

// SessionFilter selects sessions in ListSessions. Nil pointers do not filter.
type SessionFilter struct {
	WorkspaceID string
	ActorID     string
	Pinned      *bool
	Archived    *bool
}

// SessionUpdate changes the mutable fields of a session. Nil fields stay.
type SessionUpdate struct {
	Title     *string
	Pinned    *bool
	Archived  *bool
	Unread    *bool
	Lifecycle *string
	// Worktree binds the session to a worktree of the checkout ("" unbinds).
	Worktree *string
	// The session's agent, changed for its next turn (the service records
	// the change as a marker message). ProfileSnapshot goes with Profile.
	Model           *string
	ReasoningEffort *string
	Profile         *string
	ProfileSnapshot *ProfileSpec
}
