// Package tickloop owns the background loop of the services that follow
// the store on an interval (routines, dispatches): started once, it ticks
// at once and then every interval, and Stop ends it and waits for it.
package tickloop

import (
	"context"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// Loop is one background loop. The zero value is ready to Start.
type Loop struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Start runs tick now and then every interval, on a context that outlives
// ctx's cancellation (the loop ends with Stop, not with the caller's
// request). A second Start, or one after Stop, does nothing.
func (l *Loop) Start(ctx context.Context, interval time.Duration, tick func(context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started || l.stopped {
		return
	}
	l.started = true
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			tick(lctx)
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends the loop and waits for it, or for ctx. It is idempotent, and
// a loop never started stays so.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	l.stopped = true
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Led wraps tick so that it runs only on the node that leads (l nil: on
// every node), on the leader's context: the tick ends when leadership
// does, and its transactional writes are fenced by the leader's term.
func Led(l desk.Leadership, tick func(context.Context)) func(context.Context) {
	if l == nil {
		return tick
	}
	return func(ctx context.Context) {
		lctx, release, ok := l.Lead(ctx)
		if !ok {
			return
		}
		defer release()
		tick(lctx)
	}
}
