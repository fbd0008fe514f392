package execution

import (
	"context"
	"time"

	"github.com/desk-runtime/desk"
)

// stopCall is one stop in progress; concurrent interrupts of the same
// execution share it.
type stopCall struct {
	done chan struct{}
	res  *desk.InterruptResult
	err  error
}

// Interrupt stops the exact execution. Unknown → not_found; already over →
// stopped:false; not the surface's current execution → conflict. The actor
// is the caller's; a user interrupt also creates a user-cooldown block.
func (s *Service) Interrupt(ctx context.Context, sessionID, executionID string) (*desk.InterruptResult, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	exe, err := s.store.GetExecution(ctx, executionID)
	if err != nil || exe.SessionID != x.ID {
		return nil, desk.Errorf(desk.ENOTFOUND, "execution %s not found in session %s", executionID, x.ID)
	}
	if exe.Terminal() {
		return &desk.InterruptResult{Stopped: false, Execution: exe}, nil
	}
	cur, err := s.store.ActiveExecution(ctx, exe.SurfaceID)
	if err != nil {
		return nil, err
	}
	if cur == nil || cur.ID != exe.ID {
		if cur == nil {
			// It settled between the two reads.
			exe, err = s.store.GetExecution(ctx, executionID)
			if err != nil {
				return nil, err
			}
			return &desk.InterruptResult{Stopped: false, Execution: exe}, nil
		}
		return nil, desk.Errorf(desk.ECONFLICT, "execution changed; refresh: %s is not the current execution of its surface (%s is)", executionID, cur.ID)
	}
	return s.stop(ctx, exe, desk.Interruption{By: actorOf(ctx), At: s.opts.Now(), Reason: "user-interrupt"}, true)
}

// stop asks an active execution to stop and waits up to StopTimeout for
// the executor to confirm. Without confirmation the execution stays
// stopping with stop_error and its surface occupied: it is never assumed
// dead.
func (s *Service) stop(ctx context.Context, exe *desk.Execution, in desk.Interruption, cooldown bool) (*desk.InterruptResult, error) {
	s.mu.Lock()
	if c := s.stops[exe.ID]; c != nil {
		s.mu.Unlock()
		select {
		case <-c.done:
			return c.res, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &stopCall{done: make(chan struct{})}
	s.stops[exe.ID] = c
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.stops, exe.ID)
		s.mu.Unlock()
		close(c.done)
	}()
	c.res, c.err = s.doStop(ctx, exe, in, cooldown)
	return c.res, c.err
}

func (s *Service) doStop(ctx context.Context, exe *desk.Execution, in desk.Interruption, cooldown bool) (*desk.InterruptResult, error) {
	var until *time.Time
	if cooldown && s.opts.Cooldown > 0 {
		t := in.At.Add(s.opts.Cooldown)
		until = &t
	}
	x, _, err := s.store.RequestStop(ctx, exe.ID, in, until)
	if err != nil {
		return nil, err
	}
	if x.Terminal() {
		return &desk.InterruptResult{Stopped: false, Execution: x}, nil
	}
	s.hub.notify()
	// In this process, cancel the executor directly; another process sees
	// the stopping phase at its next poll and cancels its own.
	s.mu.Lock()
	r := s.active[exe.ID]
	s.mu.Unlock()
	if r != nil {
		r.stop.Store(true)
		r.cancel()
	}
	deadline := time.NewTimer(s.opts.StopTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if r != nil {
			select {
			case <-r.done:
			case <-deadline.C:
				return s.stopTimedOut(exe.ID)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			r = nil
		}
		cur, err := s.store.GetExecution(context.Background(), exe.ID)
		if err != nil {
			return nil, err
		}
		if cur.Terminal() {
			return &desk.InterruptResult{Stopped: true, Execution: cur}, nil
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return s.stopTimedOut(exe.ID)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *Service) stopTimedOut(id string) (*desk.InterruptResult, error) {
	x, err := s.store.SetStopError(context.Background(), id,
		"the executor did not confirm the stop within "+s.opts.StopTimeout.String()+"; the surface stays occupied until it does")
	if err != nil {
		return nil, err
	}
	s.hub.notify()
	if x.Terminal() {
		return &desk.InterruptResult{Stopped: true, Execution: x}, nil
	}
	return &desk.InterruptResult{Stopped: false, Pending: true, Execution: x}, nil
}

// StopSession interrupts every active execution of a session that is being
// deleted and waits for them (up to StopTimeout each), so nothing writes
// into a session whose files are about to go.
func (s *Service) StopSession(ctx context.Context, x *desk.Session) error {
	srfs, err := s.store.ListSurfaces(ctx, x.ID)
	if err != nil {
		return err
	}
	for _, srf := range srfs {
		cur, err := s.store.ActiveExecution(ctx, srf.ID)
		if err != nil {
			return err
		}
		if cur == nil {
			continue
		}
		if _, err := s.stop(ctx, cur, desk.Interruption{By: actorOf(ctx), At: s.opts.Now(), Reason: "session-deleted"}, false); err != nil {
			return err
		}
	}
	if s.with.Children != nil {
		return s.with.Children.StopSession(ctx, x)
	}
	return nil
}

// StopWorkspace stops the processes the executor keeps for the sessions
// of workspace ws (desk.RuntimeChildren) and waits for them; the
// lifecycle calls it once no execution of the workspace runs or can be
// admitted (offboarding, purging, absorbing the workspace).
func (s *Service) StopWorkspace(ctx context.Context, ws string) error {
	if s.with.Children != nil {
		return s.with.Children.StopWorkspace(ctx, ws)
	}
	return nil
}

var _ desk.RuntimeChildren = (*Service)(nil)
