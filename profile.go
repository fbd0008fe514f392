package desk

import (
	"context"
	"time"
)

// SessionChange is a change of a session's agent — its profile, model or
// reasoning effort — made between turns. It is recorded in the
// transcript as a marker message where it takes effect (the next turn),
// never in the middle of one.
type SessionChange struct {
	// The new values; empty fields did not change.
	Profile         string `json:"profile,omitempty"`
	Model           string `json:"model,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// The values before the change, for the record.
	FromProfile         string    `json:"from_profile,omitempty"`
	FromModel           string    `json:"from_model,omitempty"`
	FromReasoningEffort string    `json:"from_reasoning_effort,omitempty"`
	By                  string    `json:"by,omitempty"` // the actor who asked
	At                  time.Time `json:"at"`
}

// Profile is a workspace's named way to run an agent (svvy's agent
// profiles): which executor runs the turns — desk's agent with a model
// the operator declared, or a runtime the admin registered — how hard it
// reasons, how its tool calls are approved, what it is told, which tools
// it has, and which profile its handler threads run. A session is made
// from a profile and keeps a snapshot of it; editing the profile later
// changes only sessions made after.
type Profile struct {
	WorkspaceID string `json:"workspace_id"`
	// Name is unique in the workspace: [a-z0-9][a-z0-9._-]{0,63}.
	Name string `json:"name"`
	// Builtin marks one of desk's default profiles (not stored; a
	// workspace's own profile of the same name replaces it).
	Builtin bool `json:"builtin,omitempty"`
	ProfileSpec
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ProfileSpec is what a profile sets.
type ProfileSpec struct {
	// Model is one of the operator's declared models (GET /v1/models);
	// "" is the default model. Not with Runtime.
	Model string `json:"model,omitempty"`
	// Runtime names a registered runtime (GET /v1/runtimes) that runs the
	// turns instead of desk's agent. Not with Model.
	Runtime string `json:"runtime,omitempty"`
	// ReasoningEffort is low, medium or high ("" the model's default),
	// for a model declared as reasoning (DESK_MODELS "…;reasoning"):
	// OpenAI's reasoning_effort, an Anthropic thinking budget.
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// ApprovalMode overrides the workspace's approval mode for the
	// profile's sessions: user, auto-review or full-access ("" keeps the
	// workspace's).
	ApprovalMode string `json:"approval_mode,omitempty"`
	// Instructions are appended to the agent's system prompt.
	Instructions string `json:"instructions,omitempty"`
	// Tools is the tool set: empty for all of desk's tools, else the
	// names of the only tools offered.
	Tools []string `json:"tools,omitempty"`
	// ThreadProfile is the profile the handler threads of thread_start
	// run ("" for this one).
	ThreadProfile string `json:"thread_profile,omitempty"`
}

// Reasoning efforts.
const (
	EffortLow    = "low"
	EffortMedium = "medium"
	EffortHigh   = "high"
)

// CheckEffort refuses anything but the reasoning efforts ("" is none).
func CheckEffort(field, e string) error {
	switch e {
	case "", EffortLow, EffortMedium, EffortHigh:
		return nil
	}
	return Errorf(EINVALID, "%s %q must be low, medium or high", field, e)
}

// ProfileService manages a workspace's agent profiles.
type ProfileService interface {
	// ListProfiles lists the workspace's profiles and desk's defaults
	// it does not replace, by name.
	ListProfiles(ctx context.Context, workspaceID string) ([]*Profile, error)
	GetProfile(ctx context.Context, workspaceID, name string) (*Profile, error)
	// PutProfile creates or replaces a profile (create: ECONFLICT when it
	// exists). Every field is checked against what the operator declared
	// (models, runtimes); a bad one is EINVALID naming the field.
	PutProfile(ctx context.Context, p *Profile, create bool) (*Profile, error)
	DeleteProfile(ctx context.Context, workspaceID, name string) error
}

// ProfileStore keeps workspaces' profiles.
type ProfileStore interface {
	ListProfiles(ctx context.Context, workspaceID string) ([]*Profile, error)
	// GetProfile is ENOTFOUND for a name the workspace has not stored.
	GetProfile(ctx context.Context, workspaceID, name string) (*Profile, error)
	// CreateProfile is ECONFLICT when the name is taken.
	CreateProfile(ctx context.Context, p *Profile) error
	// UpdateProfile is ENOTFOUND when there is no such profile.
	UpdateProfile(ctx context.Context, p *Profile) error
	DeleteProfile(ctx context.Context, workspaceID, name string) error
}
