// Package oplog puts the events an operator should know about into the app
// log: executions that failed or were interrupted by desk, admission
// blocks, and approvals cancelled under a waiting person. It follows the
// committed event log (as the unread watcher does) instead of logging at
// each place that changes state, so one package owns what "operator
// relevant" means and the services stay free of it. It writes only log
// lines; it never changes state.
package oplog

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/execution"
)

// Tailer follows the live event log (the execution service's Tail).
type Tailer interface {
	Tail(ctx context.Context, f desk.EventFilter, gap func(execution.Gap) error, fn func(*desk.Event) error) error
}

// Options tune the follower; zero values take the defaults noted.
type Options struct {
	// Retry paces restarts of the follower after a store failure (1s).
	Retry time.Duration
}

// Follower logs operator-relevant events. Open starts it, Close stops it.
type Follower struct {
	tail Tailer
	log  *slog.Logger
	opts Options

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a follower that logs to log (the app log's logger).
func New(tail Tailer, log *slog.Logger, opts Options) *Follower {
	if opts.Retry == 0 {
		opts.Retry = time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower{tail: tail, log: log.With(desk.LogComponent, "execution"), opts: opts}
}

// Open starts following events from now on: what happened while desk was
// down was logged by the process it happened in, or by recovery.
func (f *Follower) Open(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancel != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	// The follower reads every workspace's events.
	ctx = desk.WithPrincipal(ctx, desk.Principal{Admin: true})
	f.wg.Go(func() { f.follow(ctx) })
	return nil
}

// Close stops the follower and waits for it, or for ctx. A second Close
// does nothing more.
func (f *Follower) Close(ctx context.Context) error {
	f.mu.Lock()
	if f.cancel != nil {
		f.cancel()
	}
	f.mu.Unlock()
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *Follower) follow(ctx context.Context) {
	after := int64(-1)
	for ctx.Err() == nil {
		err := f.tail.Tail(ctx, desk.EventFilter{AfterSeq: after}, func(execution.Gap) error { return nil }, func(e *desk.Event) error {
			after = e.Seq
			f.Log(ctx, e)
			return nil
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		f.log.Error("operator event follower", desk.LogErr, err)
		select {
		case <-ctx.Done():
		case <-time.After(f.opts.Retry):
		}
	}
}

// Log writes the log line an event deserves, if any: warn for what needs
// the operator (a turn that failed, one desk interrupted, a fault block),
// info for what a person did and may want to find again (an interrupt, a
// cooldown block, a cancelled approval).
func (f *Follower) Log(ctx context.Context, e *desk.Event) {
	ids := []any{desk.LogWorkspaceID, e.WorkspaceID, desk.LogSessionID, e.SessionID}
	if e.ExecutionID != "" {
		ids = append(ids, desk.LogExecutionID, e.ExecutionID)
	}
	switch e.Type {
	case "execution." + desk.PhaseFailed:
		var x desk.Execution
		_ = json.Unmarshal(e.Data, &x)
		f.log.WarnContext(ctx, "execution failed", append(ids, "reason", x.Reason)...)
	case "execution." + desk.PhaseInterrupted:
		var x desk.Execution
		_ = json.Unmarshal(e.Data, &x)
		by, why := "", x.Reason
		if x.Interruption != nil {
			by, why = x.Interruption.By, x.Interruption.Reason
		}
		args := append(ids, "by", by, "reason", why)
		if by == desk.OriginSystem || by == "" {
			// desk stopped the turn (a restart, a shutdown, a fault): the
			// person did not ask for it.
			f.log.WarnContext(ctx, "execution interrupted by desk", args...)
			return
		}
		f.log.InfoContext(ctx, "execution interrupted", args...)
	case "block.created":
		var b desk.Block
		_ = json.Unmarshal(e.Data, &b)
		args := append(ids, "block_id", b.ID, "kind", b.Kind, "reason", b.Reason)
		if b.Kind == desk.BlockUserCooldown {
			f.log.InfoContext(ctx, "admission blocked", args...)
			return
		}
		f.log.WarnContext(ctx, "admission blocked: new work on the surface waits until the block is released", args...)
	case "approval.resolved":
		var a desk.Approval
		_ = json.Unmarshal(e.Data, &a)
		if a.Status == desk.ApprovalCancelled {
			f.log.InfoContext(ctx, "approval cancelled", append(ids, "approval_id", a.ID, "tool", a.Tool, "reason", a.Reason)...)
		}
	}
}
