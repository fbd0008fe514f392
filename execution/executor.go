package execution

import (
	"context"
	"errors"

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
	// Resumed marks a turn that continues an execution a dead desk process
	// left waiting on a person (see Resumer): the executor picks the turn
	// up where it waited, without repeating what its records say is done.
	Resumed bool
	// Closing reports whether this desk process is shutting down. A turn
	// that waits on a person when it is may return ErrSuspended instead of
	// withdrawing the wait, and the next process continues it.
	Closing func() bool
	// Emit records an event of the turn (assistant text deltas, tool call
	// progress) in the event log and delivers it to live streams.
	Emit func(typ string, data any)
	// Writes is the context for the turn's records that must be written
	// even after the turn's context ended (a command's final status, a
	// cancelled call): never cancelled, it carries the turn's fence
	// (desk.Fence), so a process that lost the execution writes nothing
	// more of it. Nil in a Turn built by hand: use context.Background.
	Writes context.Context
}

// WriteContext is t.Writes, or context.Background when it is unset.
func (t *Turn) WriteContext() context.Context {
	if t.Writes != nil {
		return t.Writes
	}
	return context.Background()
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

// ErrSuspended is what an executor returns when desk shuts down while the
// turn waits on a person: the execution is left running, its wait pending,
// for the next desk process to continue (Resumer). Returned at any other
// time it is an ordinary failure.
var ErrSuspended = errors.New("the turn waits on a person; desk is shutting down, and the next start continues it")

// Resumer is an Executor that keeps durable records of its turns. When a
// desk process died (or shut down) with executions active, recovery asks
// it to settle its own records of each one — calls that were running
// have an unknown outcome — and whether the turn was waiting on a person
// and can continue in this process (only an execution still running is
// asked about continuing). A turn that can is adopted by this process and
// run again with Turn.Resumed; any other is interrupted (owner-restarted)
// and never re-run.
//
// canResume is false when the turn cannot continue whatever its records
// say (it was stopping, or its owner is not a process of this desk, as
// after an import): then the executor settles every record of the turn.
type Resumer interface {
	RecoverTurn(ctx context.Context, x *desk.Execution, canResume bool) (resume bool, err error)
}
