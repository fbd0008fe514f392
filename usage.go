package desk

import (
	"context"
	"time"
)

// What a model call served: a step of a turn, an auto-review decision, or a
// session title. Every call a provider answered is recorded, whatever it
// served, because every one of them spends the workspace's tokens.
const (
	UsageTurn   = "turn"
	UsageReview = "review"
	UsageTitle  = "title"
)

// ModelUsage is what one model call used, as the provider reported it.
// A call that serves a turn (its steps and its auto-review decisions) names
// the execution; a title call serves the session and names none.
type ModelUsage struct {
	ID          string `json:"id"`
	WorkspaceID string `json:"workspace_id"`
	SessionID   string `json:"session_id"`
	SurfaceID   string `json:"surface_id"`
	ExecutionID string `json:"execution_id,omitempty"`
	// ActorID is the session's actor, so what an actor token may see is
	// summed without a join to sessions that may be gone.
	ActorID string `json:"actor_id"`
	Purpose string `json:"purpose"` // turn, review or title
	// Model is the session's model reference (openai:gpt-4.1, script, …).
	Model        string `json:"model"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	// CachedTokens is the part of InputTokens served from the provider's
	// prompt cache.
	CachedTokens int64     `json:"cached_tokens"`
	CreatedAt    time.Time `json:"created_at"`
}

// Reported says whether the provider reported counts for the call at all
// (some OpenAI-compatible servers send none): a real request always has
// input tokens.
func (u *ModelUsage) Reported() bool { return u != nil && u.InputTokens > 0 }

// UsageTotals sums model calls. TotalTokens is input plus output (cached
// tokens are part of the input), the figure a token budget is compared with.
type UsageTotals struct {
	Calls        int64 `json:"calls"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// ModelTotals are the totals of one model.
type ModelTotals struct {
	Model string `json:"model"`
	UsageTotals
}

// UsageSum is what a set of model calls used: in total and per model
// (ordered by model name).
type UsageSum struct {
	Total  UsageTotals   `json:"total"`
	Models []ModelTotals `json:"models"`
}

// UsageFilter selects model calls; empty fields select everything.
type UsageFilter struct {
	WorkspaceID string
	SessionID   string
	ExecutionID string
	ActorID     string
}

// UsageStore records model calls and sums them.
type UsageStore interface {
	// RecordUsage stores one call's counts; the id and time are set when
	// empty.
	RecordUsage(ctx context.Context, u *ModelUsage) error
	SumUsage(ctx context.Context, f UsageFilter) (*UsageSum, error)
	// LastTurnUsage is the newest turn call of a surface, or nil.
	LastTurnUsage(ctx context.Context, surfaceID string) (*ModelUsage, error)
}

// SessionUsage is what a session's model calls used.
type SessionUsage struct {
	SessionID string `json:"session_id"`
	UsageSum
}

// Scopes of a workspace usage sum.
const (
	UsageScopeWorkspace = "workspace" // the admin token: every session
	UsageScopeActor     = "actor"     // an actor token: its own sessions
)

// WorkspaceUsage is what a workspace's model calls used, as far as the
// caller may see: every session for the admin, the actor's own sessions for
// an actor token. TokenBudget and BudgetUsed are the workspace's figures
// for every caller: a budget block names them, so whoever it holds back can
// see why.
type WorkspaceUsage struct {
	WorkspaceID string `json:"workspace_id"`
	Scope       string `json:"scope"`
	ActorID     string `json:"actor_id,omitempty"`
	UsageSum
	TokenBudget int64 `json:"token_budget"`
	// BudgetUsed is the whole workspace's input plus output tokens, the
	// figure the budget is compared with.
	BudgetUsed int64 `json:"budget_used"`
}
