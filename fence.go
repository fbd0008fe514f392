package desk

import (
	"context"
	"errors"
)

// ErrFenced is the root of every error a write gets when it was made on
// behalf of an execution whose claim its process no longer holds: another
// desk process took the execution over (adopted it, or settled it after
// judging this process dead), or the execution is over. Nothing of such a
// write is kept. Its code is ECONFLICT; errors.Is(err, ErrFenced) tells it
// from other conflicts.
var ErrFenced = &Error{Code: ECONFLICT, Message: "this desk process no longer holds the execution (fenced): another process took it over or it is over; the write was not kept"}

// Fence is what a running execution's writes carry: the execution, the
// owner (desk process) that runs it and the lease version it was claimed
// or adopted with. The store commits a write that carries a fence only
// while the execution is active and still has that owner and that lease
// version, checked in the write's own transaction under a lock a takeover
// also takes, so a takeover and a stale write are ordered: the write
// either commits before the takeover or not at all.
type Fence struct {
	ExecutionID  string
	Owner        string
	LeaseVersion int64
	// Lost, when set, is called when a write under this fence was refused
	// with ErrFenced, so that the process stops the execution at once
	// (no more model calls or tool runs) instead of when its next poll
	// notices. It may be called more than once and from any goroutine.
	Lost func()
}

type fenceKey struct{}

// WithFence returns ctx whose writes are fenced by f.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, &f)
}

// FenceFrom returns the fence ctx carries, if any.
func FenceFrom(ctx context.Context) (*Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(*Fence)
	return f, ok && f != nil
}

// IsFenced reports whether err is, or wraps, ErrFenced.
func IsFenced(err error) bool { return errors.Is(err, ErrFenced) }
