package execution

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Executor runs one turn of a surface. The agent's tool loop is the
// production executor; tests plug in their own.
type Executor interface {
	// Execute runs the turn. It must call t.Started once its handshake
	// succeeded (the model call may begin after it); an error before that
	// is a failed start. It must return promptly when ctx is cancelled —
	// an interrupt — killing whatever it runs; if it does not, the
	// execution stays stopping and its surface occupied.
	Execute(ctx context.Context, t *Turn) (*Outcome, error)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, t *Turn) (*Outcome, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, t *Turn) (*Outcome, error) { return f(ctx, t) }

// Turn is what an executor gets for one execution.
type Turn struct {
	Execution *desk.Execution
	Item      *desk.QueueItem
	Session   *desk.Session
	// Scratch is the host directory of the guest's /scratch; it exists for
	// the turn and is removed when the execution settles.
	Scratch string
	// Started records the end of the handshake: the execution moves to
	// running. It returns an error when the execution is no longer this
	// process's to run (a stale callback), and the executor must stop.
	Started func() error
	// Emit records an event of the turn (assistant text deltas, tool call
	// progress) in the event log and delivers it to live streams.
	Emit func(typ string, data any)
}

// Outcome is what a finished turn produced.
type Outcome struct {
	// Reply is the final assistant reply, archived as
	// message_outbound_runtime.
	Reply string
}

// Availability tells whether a session can take work at all (for example,
// whether a model is configured for it). A nil error means yes.
type Availability func(ctx context.Context, s *desk.Session) error
