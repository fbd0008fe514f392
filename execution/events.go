package execution

import (
	"context"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// hub wakes live event streams after commits. Events live in the store; a
// stream re-reads everything after its last seq when woken, so a missed
// wake-up costs latency, never an event.
type hub struct {
	mu sync.Mutex
	ch chan struct{}
}

func newHub() *hub { return &hub{ch: make(chan struct{})} }

// notify wakes every waiting stream.
func (h *hub) notify() {
	h.mu.Lock()
	close(h.ch)
	h.ch = make(chan struct{})
	h.mu.Unlock()
}

// wait returns a channel closed at the next notify.
func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ch
}

// Gap reports that a stream asked to resume after events that retention
// already removed (see desk.EventGap).
type Gap = desk.EventGap

// Tail delivers every event matching f after f.AfterSeq in seq order, then
// follows new ones until ctx ends or fn fails. When f.AfterSeq is older
// than the retention window, gap is called first with what was lost.
// Events reach fn only after the transaction that wrote them committed.
func (s *Service) Tail(ctx context.Context, f desk.EventFilter, gap func(Gap) error, fn func(*desk.Event) error) error {
	if err := s.ScopeEvents(ctx, &f); err != nil {
		return err
	}
	min, max, err := s.store.EventBounds(ctx)
	if err != nil {
		return err
	}
	if f.AfterSeq < 0 {
		f.AfterSeq = max // from now on
	}
	if f.AfterSeq > 0 && f.AfterSeq+1 < min {
		if err := gap(Gap{Requested: f.AfterSeq, Oldest: min}); err != nil {
			return err
		}
	}
	f.Limit = 500
	for {
		wake := s.hub.wait()
		for {
			es, err := s.store.ListEvents(ctx, f)
			if err != nil {
				return err
			}
			for _, e := range es {
				if err := fn(e); err != nil {
					return err
				}
				f.AfterSeq = e.Seq
			}
			if len(es) < f.Limit {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(s.opts.PollInterval):
			// Events another desk process committed on a shared database.
		}
	}
}

// ScopeEvents checks an event filter against the caller and narrows it to
// what the caller may see: an actor token only its own sessions' events.
func (s *Service) ScopeEvents(ctx context.Context, f *desk.EventFilter) error {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if f.SessionID != "" {
		if _, err := s.session(ctx, f.SessionID); err != nil {
			return err
		}
	}
	if f.WorkspaceID != "" && !p.CanSeeWorkspace(f.WorkspaceID) {
		return desk.Errorf(desk.ENOTFOUND, "workspace %s not found", f.WorkspaceID)
	}
	if !p.Admin {
		f.ActorID = p.ActorID
	}
	return nil
}

var (
	_ desk.ExecutionService = (*Service)(nil)
	_ desk.UsageService     = (*Service)(nil)
)
