package desk

import (
	"context"
	"time"
)

// Runtime protocols: the structured stdio protocols desk's runtime host
// speaks (see runtimehost/wire).
const (
	RuntimeACP              = "acp"
	RuntimeCodexAppServer   = "codex-app-server"
	RuntimeClaudeStreamJSON = "claude-stream-json"
)

// RuntimeProtocols lists the protocols a runtime may be registered with.
var RuntimeProtocols = []string{RuntimeACP, RuntimeCodexAppServer, RuntimeClaudeStreamJSON}

// Runtime is an external agent an operator declared: desk's runtime host
// starts Argv inside a session's sandbox and speaks Protocol over its
// stdio. Env holds the names of host environment variables passed through
// to the child; their values are read at start and never stored.
type Runtime struct {
	Name      string    `json:"name"`
	Protocol  string    `json:"protocol"`
	Argv      []string  `json:"argv"`
	Env       []string  `json:"env"`
	CreatedAt time.Time `json:"created_at"`
}

// RuntimeStore keeps the registered runtimes and each runtime-backed
// session's native conversation id.
type RuntimeStore interface {
	// CreateRuntime fails with ECONFLICT when the name is taken.
	CreateRuntime(ctx context.Context, r *Runtime) error
	GetRuntime(ctx context.Context, name string) (*Runtime, error)
	ListRuntimes(ctx context.Context) ([]*Runtime, error)
	DeleteRuntime(ctx context.Context, name string) error
	// SetSessionNativeID records the runtime's conversation id on a
	// runtime-backed session. It fails with ECONFLICT when the session
	// already holds a different one: a session's native conversation is
	// fixed once known.
	SetSessionNativeID(ctx context.Context, sessionID, nativeID string) error
}

// RuntimeService registers runtimes (admin only).
type RuntimeService interface {
	Add(ctx context.Context, r Runtime) (*Runtime, error)
	List(ctx context.Context) ([]*Runtime, error)
	Remove(ctx context.Context, name string) error
}
