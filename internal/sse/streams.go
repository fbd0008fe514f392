package sse

import (
	"context"
	"net/http"
	"sync"

	"github.com/desk-runtime/desk"
)

// Streams owns the open event streams of a server: the API's /v1/events
// and /v1/logs/stream and the web UI's page and log streams. A stream's
// handler runs until its client leaves, and http.Server.Shutdown waits for
// handlers, so without an owner one open `curl -N …/v1/events` held every
// shutdown for its whole grace period. Close tells every stream to end —
// its handler then returns normally and the client sees a clean end of the
// body — and waits for each stream's goroutines, keep-alives included.
//
// The zero value is not usable; NewStreams returns one that is open.
type Streams struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// NewStreams returns an open registry.
func NewStreams() *Streams {
	ctx, cancel := context.WithCancel(context.Background())
	return &Streams{ctx: ctx, cancel: cancel}
}

// Open is part of the component contract; the registry is open from
// NewStreams on.
func (h *Streams) Open(context.Context) error { return nil }

// Begin registers a stream of request r. Its context ends when the client
// leaves or the registry closes; end must be called when the stream's
// handler and every goroutine it started are done. After Close, Begin
// refuses with EUNAVAILABLE.
func (h *Streams) Begin(r *http.Request) (ctx context.Context, end func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, desk.Errorf(desk.EUNAVAILABLE, "desk is shutting down; reconnect to the next server")
	}
	h.wg.Add(1)
	ctx, cancel := context.WithCancel(r.Context())
	stop := context.AfterFunc(h.ctx, cancel)
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			stop()
			cancel()
			h.wg.Done()
		})
	}, nil
}

// Go runs f beside a stream (its keep-alive) and returns a function that
// waits for f to return; the stream's handler calls it before end, so no
// goroutine of a stream outlives the stream.
func (h *Streams) Go(f func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return func() { <-done }
}

// Shutdown tells every open stream to end and refuses new ones, without
// waiting; http.Server.RegisterOnShutdown calls it, so the server's own
// Shutdown then finds the handlers returning.
func (h *Streams) Shutdown() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
}

// Close ends every stream and waits, until ctx ends, for their handlers
// and goroutines to return. It may be called more than once.
func (h *Streams) Close(ctx context.Context) error {
	h.Shutdown()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return desk.Errorf(desk.EUNAVAILABLE, "event streams did not end: %v", ctx.Err())
	}
}
