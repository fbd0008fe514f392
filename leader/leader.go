// Package leader elects one node of a database as the leader, for the work
// only one node may do at a time: routine schedules and dispatch
// follow-ups. It is River's elector on a desk store: a lease row
// (desk.LeaderStore) taken for a TTL and renewed every TTL/3; a node that
// takes it after it expired, or takes it first, starts a new term.
//
// A leader trusts its lease locally only until the renewal's start plus
// the TTL minus a safety margin, measured on this process's monotonic
// clock: a leader frozen past its lease (a GC pause, SIGSTOP) steps down
// as soon as it runs again, before its next renewal could fail. What it
// was writing in the meantime carries the term (desk.LeaderFence), and the
// store refuses it once a peer's term began or the lease expired.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// Name is the lease desk's leader holds.
const Name = "desk"

// DefaultTTL is the lease's length when Options gives none.
const DefaultTTL = 15 * time.Second

// Options configure an Elector.
type Options struct {
	// TTL is the lease's length (DefaultTTL when 0). A dead leader's
	// work resumes on a peer within TTL plus one renewal interval.
	TTL time.Duration
	// Holder names this node in the lease row ("host/pid/random" when "").
	Holder string
	Logger *slog.Logger
}

// Elector takes and renews the leader lease. It implements
// desk.Leadership.
type Elector struct {
	store  desk.LeaderStore
	ttl    time.Duration
	margin time.Duration
	holder string
	log    *slog.Logger

	mu      sync.Mutex
	term    int64 // 0: not leading
	trusted time.Time
	lctx    context.Context
	cancel  context.CancelFunc
	timer   *time.Timer

	wake     chan struct{}
	stop     context.CancelFunc
	done     chan struct{}
	opened   bool
	closeErr error
	once     sync.Once
}

var _ desk.Leadership = (*Elector)(nil)

// New returns an elector; Open starts it.
func New(store desk.LeaderStore, o Options) *Elector {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		o.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{store: store, ttl: o.TTL, margin: o.TTL / 5, holder: o.Holder, log: o.Logger,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// Holder is this node's name in the lease row.
func (e *Elector) Holder() string { return e.holder }

// Open makes a first attempt at once, so a single node leads from its
// start, then renews or retries every TTL/3 in the background.
func (e *Elector) Open(ctx context.Context) error {
	e.mu.Lock()
	if e.opened {
		e.mu.Unlock()
		return nil
	}
	e.opened = true
	e.mu.Unlock()
	e.attempt(ctx)
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.stop = stop
	go e.loop(lctx)
	return nil
}

func (e *Elector) loop(ctx context.Context) {
	defer close(e.done)
	t := time.NewTicker(e.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.wake:
		}
		e.attempt(ctx)
	}
}

// attempt takes or renews the lease once.
func (e *Elector) attempt(ctx context.Context) {
	start := time.Now()
	// The attempt may not outlast the time the lease is still trusted:
	// an answer after that could not be trusted either.
	actx, cancel := context.WithTimeout(ctx, e.ttl-e.margin)
	defer cancel()
	term, ok, err := e.store.AcquireLeadership(actx, Name, e.holder, start, start.Add(e.ttl))
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case err != nil:
		// Keep leading while still trusted; the timer steps down after.
		if ctx.Err() == nil {
			e.log.Warn("leader lease: cannot reach the store", desk.LogErr, err)
		}
		return
	case !ok:
		if e.term != 0 {
			e.stepDownLocked("another node holds the lease")
		}
		return
	}
	trusted := start.Add(e.ttl - e.margin)
	if !time.Now().Before(trusted) {
		// The answer came too late to build on.
		e.stepDownLocked("the renewal answered after the lease's trusted time")
		return
	}
	if term != e.term {
		if e.term != 0 {
			e.stepDownLocked("the lease started a new term")
		}
		e.term = term
		e.lctx, e.cancel = context.WithCancel(context.Background())
		e.log.Info("leader: elected", "holder", e.holder, "term", term)
	}
	e.trusted = trusted
	if e.timer == nil {
		e.timer = time.AfterFunc(time.Until(trusted), e.expire)
	} else {
		e.timer.Reset(time.Until(trusted))
	}
}

// expire runs when the lease is no longer trusted locally.
func (e *Elector) expire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term != 0 && !time.Now().Before(e.trusted) {
		e.stepDownLocked("the lease was not renewed in time")
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

func (e *Elector) stepDownLocked(why string) {
	e.log.Warn("leader: stepped down", "holder", e.holder, "term", e.term, "reason", why)
	e.cancel()
	e.term, e.lctx, e.cancel = 0, nil, nil
}

// Lead implements desk.Leadership.
func (e *Elector) Lead(ctx context.Context) (context.Context, context.CancelFunc, bool) {
	e.mu.Lock()
	term, lctx, trusted := e.term, e.lctx, e.trusted
	e.mu.Unlock()
	if term == 0 || !time.Now().Before(trusted) {
		return nil, func() {}, false
	}
	c, cancel := context.WithCancel(desk.WithLeaderFence(ctx, desk.LeaderFence{Name: Name, Holder: e.holder, Term: term}))
	stop := context.AfterFunc(lctx, cancel)
	return c, func() { stop(); cancel() }, true
}

// Term is the term this node leads in, or 0.
func (e *Elector) Term() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term != 0 && !time.Now().Before(e.trusted) {
		return 0
	}
	return e.term
}

// Close stops the elector and resigns the lease, so a peer takes over at
// its next attempt rather than after the lease expires. Idempotent.
func (e *Elector) Close(ctx context.Context) error {
	e.once.Do(func() {
		if e.stop != nil {
			e.stop()
			select {
			case <-e.done:
			case <-ctx.Done():
				e.closeErr = ctx.Err()
				return
			}
		}
		e.mu.Lock()
		term := e.term
		if e.timer != nil {
			e.timer.Stop()
		}
		if term != 0 {
			e.stepDownLocked("closing")
		}
		e.mu.Unlock()
		// Giving the lease back only spares a peer the wait for it to
		// expire: a failure (the store already closed) is no error.
		if term != 0 {
			if err := e.store.ResignLeadership(ctx, Name, e.holder, term); err != nil {
				e.log.Warn("leader: cannot give the lease back; a peer takes it when it expires", desk.LogErr, err)
			}
		}
	})
	return e.closeErr
}
