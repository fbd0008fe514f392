package lifecycle

import (
	"context"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/hostid"
)

// DefaultOwnerTTL is how long an owner may miss heartbeats before its
// leases are taken over; it matches the execution service's default.
const DefaultOwnerTTL = 15 * time.Second

// Guard hands out one lease per workspace for checkout-changing operations
// (offboard, restore, purge, template-upgrade, absorb).
//
// Leases live in the store, so they are shared by every desk process on
// one database. A lease names the owner (the desk process, as registered
// by the execution service) that holds it; a lease whose owner stopped,
// is not registered, is a gone process on this machine, or missed its
// heartbeats for OwnerTTL is taken over by the next Acquire. The owner
// passed to NewGuard must therefore be a registered, heartbeating owner
// (the execution service's OwnerID), or other processes will take its
// leases away.
type Guard struct {
	store    Store
	owner    string
	ttl      time.Duration
	now      func() time.Time
	released desk.Waker
}

// GuardOptions tune a guard; zero values take the defaults noted.
type GuardOptions struct {
	// OwnerTTL is how long an owner may miss heartbeats before its leases
	// are reclaimable (DefaultOwnerTTL).
	OwnerTTL time.Duration
	// Now is the clock (desk.Now).
	Now func() time.Time
	// Released, when set, is woken after a lease is given back: queued
	// work the lease held back (claims skip a leased workspace) may run
	// now, so the app passes the execution service.
	Released desk.Waker
}

// NewGuard returns a guard that takes leases for owner, this process's
// owner id.
func NewGuard(store Store, owner string, opts GuardOptions) *Guard {
	if opts.OwnerTTL <= 0 {
		opts.OwnerTTL = DefaultOwnerTTL
	}
	if opts.Now == nil {
		opts.Now = desk.Now
	}
	return &Guard{store: store, owner: owner, ttl: opts.OwnerTTL, now: opts.Now, released: opts.Released}
}

// Owner is the owner id the guard takes leases for.
func (g *Guard) Owner() string { return g.owner }

// Acquire takes the leases of all the given workspaces, all-or-nothing, in a fixed
// (sorted) order. A held lease answers desk.Errorf(desk.ECONFLICT, "workspace %s is busy with %s", ws, op).
//
// release gives the leases back; it may be called more than once and
// uses its own short context, so a cancelled request still releases.
func (g *Guard) Acquire(ctx context.Context, op string, workspaceIDs ...string) (release func(), err error) {
	if op == "" {
		return nil, desk.Errorf(desk.EINVALID, "a lease needs an operation name")
	}
	if len(workspaceIDs) == 0 {
		return nil, desk.Errorf(desk.EINVALID, "a lease needs at least one workspace")
	}
	dead, err := g.deadOwners(ctx)
	if err != nil {
		return nil, err
	}
	now := g.now()
	id := desk.NewID("lse")
	err = g.store.AcquireWorkspaceLeases(ctx, desk.LeaseRequest{
		LeaseID: id, Op: op, Owner: g.owner, WorkspaceIDs: workspaceIDs, Now: now,
		StaleBefore: now.Add(-g.ttl), DeadOwners: dead,
	})
	if err != nil {
		return nil, err
	}
	released := false
	return func() {
		if released {
			return
		}
		released = true
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// A release that fails leaves a lease that a restart (the owner
		// stops) or the heartbeat timeout frees; nothing is lost.
		_ = g.store.ReleaseWorkspaceLeases(rctx, id)
		if g.released != nil {
			g.released.Wake()
		}
	}, nil
}

// deadOwners lists the registered owners whose process is gone: on this
// machine and boot, a pid that no longer runs. The store decides the rest
// (stopped, unregistered, stale heartbeat) itself.
func (g *Guard) deadOwners(ctx context.Context) ([]string, error) {
	owners, err := g.store.ListOwners(ctx)
	if err != nil {
		return nil, err
	}
	host := hostid.Identity()
	var dead []string
	for _, o := range owners {
		if o.ID != g.owner && o.StoppedAt.IsZero() && o.Host == host && !hostid.PIDAlive(o.PID) {
			dead = append(dead, o.ID)
		}
	}
	return dead, nil
}
