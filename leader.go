package desk

import (
	"context"
	"time"
)

// Leadership elects one node of a database to do the work only one node
// may do at a time (routine schedules, dispatch follow-ups): a lease row
// in the database, held by one node for a term and renewed before it
// expires, as River's elector does.
type Leadership interface {
	// Lead answers, when this node leads now, a context derived from ctx
	// that ends when it stops leading (its lease lost or no longer
	// trusted locally), and whose transactional writes the store commits
	// only while the lease still has this node's term (see LeaderFence);
	// release ends that context. ok is false when another node leads.
	Lead(ctx context.Context) (lctx context.Context, release context.CancelFunc, ok bool)
}

// LeaderStore keeps the leader leases.
type LeaderStore interface {
	// AcquireLeadership takes the lease name for holder until until when
	// it is free or expired at now (a new term), or renews it when holder
	// holds it (the same term while it had not expired, a new one
	// otherwise). ok is false when another holder's lease is live.
	AcquireLeadership(ctx context.Context, name, holder string, now, until time.Time) (term int64, ok bool, err error)
	// ResignLeadership ends holder's lease at term at once, so a peer
	// need not wait for it to expire; another holder's lease is no error.
	ResignLeadership(ctx context.Context, name, holder string, term int64) error
}

// LeaderFence is what a leader's writes carry: the lease, its holder and
// term. The store commits a transactional write that carries one only
// while the lease has that holder and term and has not expired, checked
// in the write's own transaction under the lock a takeover takes, so a
// leader frozen past its lease (a GC pause, SIGSTOP) cannot write when
// it wakes: a peer's term has begun, or the lease is expired.
type LeaderFence struct {
	Name   string
	Holder string
	Term   int64
}

type leaderFenceKey struct{}

// WithLeaderFence returns ctx whose transactional writes are fenced by f.
func WithLeaderFence(ctx context.Context, f LeaderFence) context.Context {
	return context.WithValue(ctx, leaderFenceKey{}, &f)
}

// LeaderFenceFrom returns the leader fence ctx carries, if any.
func LeaderFenceFrom(ctx context.Context) (*LeaderFence, bool) {
	f, ok := ctx.Value(leaderFenceKey{}).(*LeaderFence)
	return f, ok && f != nil
}
