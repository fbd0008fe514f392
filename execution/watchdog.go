package execution

import (
	"fmt"
	"time"
)

// Leases, heartbeats and the watchdog. A running execution is held under
// its process's owner row: peers take it over (recover.go) once that row
// has not been renewed for OwnerTTL. This process renews it every
// beatInterval and watches its own deadline: once it has not renewed it
// for HeartbeatTimeout, which is shorter than OwnerTTL by a safety margin,
// it stops its executions itself (they settle interrupted, reason
// owner-heartbeat-missed, if the store still lets this process write
// them) and claims nothing until a heartbeat succeeds again. A process
// that could not run at all meanwhile (frozen by SIGSTOP, a VM stall)
// cannot stop anything while frozen; when it thaws, its writes are fenced
// (desk.Fence) and it stops at the first one a peer's takeover refused.

// reasonHeartbeatMissed is the reason of an execution the watchdog stopped.
const reasonHeartbeatMissed = "owner-heartbeat-missed"

// beatInterval is how often the owner row is renewed: every poll, but at
// least five times per heartbeat timeout.
func (o *Options) beatInterval() time.Duration {
	return min(o.PollInterval, o.HeartbeatTimeout/5)
}

// checkLease refuses timings under which a process could still be running
// an execution when a peer may take it over.
func (o *Options) checkLease() error {
	if o.HeartbeatTimeout <= 0 || o.OwnerTTL-o.HeartbeatTimeout < 2*o.beatInterval() {
		return fmt.Errorf("execution: the heartbeat timeout (%s) must be shorter than the owner TTL (%s) by at least two heartbeat intervals (%s), so that a desk process stops its executions before a peer may take them over",
			o.HeartbeatTimeout, o.OwnerTTL, 2*o.beatInterval())
	}
	return nil
}

// heartbeat renews the owner row and the claims' leases.
func (s *Service) heartbeat() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.beatInterval())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		now := s.opts.Now()
		err := s.store.HeartbeatOwner(s.ctx, s.owner.ID, now)
		if err == nil {
			// The deadline counts from the time written, which is what
			// peers judge this process by.
			s.lastBeat.Store(now.UnixNano())
			if s.lapsed.CompareAndSwap(true, false) {
				s.log.Info("owner heartbeats succeed again; claiming work")
				s.hub.notify()
			}
			err = s.store.ExtendLeases(s.ctx, s.owner.ID, now.Add(s.opts.LeaseTTL))
		}
		if s.ctx.Err() != nil {
			return
		}
		s.journalResult(err)
	}
}

// watchdog stops this process's executions once its own heartbeat
// deadline passed. It runs apart from heartbeat, whose write may hang
// for as long as the database does.
func (s *Service) watchdog() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.beatInterval())
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.checkDeadline(s.opts.Now())
	}
}

// checkDeadline stops every execution of this process when its last
// heartbeat is older than HeartbeatTimeout at now.
func (s *Service) checkDeadline(now time.Time) {
	last := time.Unix(0, s.lastBeat.Load())
	if now.Sub(last) <= s.opts.HeartbeatTimeout {
		return
	}
	if !s.lapsed.Swap(true) {
		s.log.Error("this desk process missed its own heartbeat deadline: stopping its executions before a peer may take them over",
			"last_heartbeat", last, "heartbeat_timeout", s.opts.HeartbeatTimeout, "owner_ttl", s.opts.OwnerTTL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.active {
		if r.lost.Load() == nil && !r.lapsed.Swap(true) {
			r.stop.Store(true)
			r.cancel()
		}
	}
}

// lose stops an execution this process no longer holds, at once and
// without settling it here: its new holder (or the peer that ended it)
// has the last word.
func (s *Service) lose(r *running, why string) {
	if !r.lost.CompareAndSwap(nil, &why) {
		return
	}
	s.log.Warn("this desk process no longer holds the execution; stopping it here without settling it",
		"execution_id", r.exe.ID, "session_id", r.exe.SessionID, "why", why)
	r.cancel()
}

// fenceLost is the Lost hook of an execution's fence: a write of it was
// refused because another process took it over or ended it.
func (s *Service) fenceLost(r *running) func() {
	return func() { s.lose(r, "a write was fenced off: another desk process took the execution over or ended it") }
}
