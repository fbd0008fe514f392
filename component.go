package desk

import "context"

// Component is the lifecycle contract of every stateful part of a running
// desk — anything that owns goroutines, handles or startup recovery (the
// app log, the execution service, the agent, the UI state, the event
// stream registry, …). app.Open opens the components in dependency order
// and App.Close closes them in reverse, under one deadline.
//
// Open starts the component; when it fails, nothing of the component is
// left running. Close stops it: it is idempotent (calling it again is
// harmless), honours ctx (when ctx ends first, Close returns ctx's error,
// with every goroutine told to stop), and otherwise returns only once
// every goroutine the component started has returned.
//
// The execution service keeps the contract with one difference: its Open
// takes an execution.Run, the executor and recoverers built on top of it
// (see execution.Run for why they cannot be given to its constructor).
// The store and the archive are opened by their constructors.
type Component interface {
	Open(ctx context.Context) error
	Close(ctx context.Context) error
}

// The hooks below are how one service reaches another it does not own.
// Each is passed to a constructor, so a reader sees every dependency where
// the service is built; none is installed afterwards.

// Submitter queues work on a session's surface: the execution service's
// submit door, for services built on top of it (the agent queues answer
// rows, the lifecycle queues ask prompts).
type Submitter interface {
	Submit(ctx context.Context, sessionID string, in SubmitInput) (*SubmitResult, error)
}

// Waker is told that queued work may be admissible now, because something
// that held it back went away (a workspace lease was given back).
type Waker interface {
	Wake()
}

// SessionStopper stops whatever runs in a session; the session service
// calls it when a session is deleted, before its files and rows go.
type SessionStopper interface {
	StopSession(ctx context.Context, x *Session) error
}

// RuntimeChildren stops the processes that outlive a session's turns (an
// external runtime's child, kept between turns): before a session is
// deleted, or its workspace offboarded, purged or absorbed, none of them
// may keep running or writing. Both return once the processes are gone
// (a protocol close first, then the process tree killed), and stop
// nothing of other sessions or workspaces.
type RuntimeChildren interface {
	StopSession(ctx context.Context, x *Session) error
	StopWorkspace(ctx context.Context, ws string) error
}

// Recoverer finishes or rolls back what a crash interrupted. Startup runs
// every recoverer before anything is dispatched or served.
type Recoverer interface {
	Recover(ctx context.Context) error
}
