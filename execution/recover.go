package execution

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// hostIdentity names this machine and boot, so a pid seen in an owner row
// can be checked for liveness only when it belongs to this very boot.
func hostIdentity() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("hostname: %w", err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + "/" + strings.TrimSpace(string(boot)), nil
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// dead reports whether an owner can no longer own anything: it stopped
// cleanly, its process is gone (same machine and boot), or it missed its
// heartbeats for OwnerTTL.
func (s *Service) dead(o *desk.Owner, now time.Time) bool {
	switch {
	case o.ID == s.owner.ID:
		return false
	case !o.StoppedAt.IsZero():
		return true
	case o.Host == s.host && !pidAlive(o.PID):
		return true
	default:
		return now.Sub(o.HeartbeatAt) > s.opts.OwnerTTL
	}
}

// recover settles the active executions of dead owners: one that never got
// past starting goes back to the front of its queue (nothing ran); one that
// was running or stopping is interrupted with reason owner-restarted and
// not re-run, since its model call may already have started. Running it
// twice changes nothing more.
func (s *Service) recover(ctx context.Context) error {
	owners, err := s.store.ListOwners(ctx)
	if err != nil {
		return err
	}
	byID := map[string]*desk.Owner{}
	for _, o := range owners {
		byID[o.ID] = o
	}
	active, err := s.store.ListActiveExecutions(ctx)
	if err != nil {
		return err
	}
	now := s.opts.Now()
	var dead []*desk.Execution
	for _, x := range active {
		if o := byID[x.Owner]; o == nil || s.dead(o, now) {
			dead = append(dead, x)
		}
	}
	// Settle them side by side: the store commits concurrent settles
	// together, so a thousand take a few commits, not a thousand.
	work := make(chan *desk.Execution)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range min(32, len(dead)) {
		wg.Go(func() {
			for x := range work {
				if err := s.recoverOne(ctx, x, now); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for _, x := range dead {
		work <- x
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	recovered := len(dead)
	if recovered > 0 {
		s.hub.notify()
	}
	return nil
}

func (s *Service) recoverOne(ctx context.Context, x *desk.Execution, now time.Time) error {
	req := desk.SettleRequest{ExecutionID: x.ID, Owner: x.Owner, Phase: desk.PhaseInterrupted, Reason: "owner-restarted",
		ItemStatus: desk.QueueStatusDelivered, Now: now}
	if x.Phase == desk.PhaseStarting {
		req.Requeue = true
	}
	if _, _, err := s.store.Settle(ctx, req); err != nil && !desk.IsCode(err, desk.ECONFLICT) {
		return err
	}
	_ = os.RemoveAll(s.home.Abs(x.WorkspaceID, layout.ScratchRel(x.ID)))
	s.log.Warn("recovered an execution of a dead desk process", "execution_id", x.ID, "session_id", x.SessionID,
		"phase", x.Phase, "requeued", req.Requeue, "owner", x.Owner)
	return nil
}

// sweepScratch removes scratch directories of executions that are not
// active: a crash can leave them behind (S-H).
func (s *Service) sweepScratch(ctx context.Context) error {
	ents, err := os.ReadDir(s.home.Workspaces())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, w := range ents {
		dir := s.home.Abs(w.Name(), layout.ScratchDir)
		exes, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range exes {
			running, err := s.Running(ctx, e.Name())
			if err != nil {
				return err
			}
			if !running {
				if err := os.RemoveAll(s.home.Abs(w.Name(), layout.ScratchRel(e.Name()))); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// loop is the service's background work: heartbeats and lease renewal,
// noticing stops requested from another process, recovering dead owners,
// dispatching work other processes queued or that became admissible (an
// expired cooldown, an idle takeover), and pruning old events.
func (s *Service) loop() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	lastPrune := time.Time{}
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		ctx := s.ctx
		now := s.opts.Now()
		err := s.store.HeartbeatOwner(ctx, s.owner.ID, now)
		if err == nil {
			err = s.store.ExtendLeases(ctx, s.owner.ID, now.Add(s.opts.LeaseTTL))
		}
		if ctx.Err() != nil {
			return
		}
		s.journalResult(err)
		s.noticeRemoteStops(ctx)
		if err := s.recover(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("recover executions", "err", err)
		}
		s.dispatchQueued(ctx)
		if now.Sub(lastPrune) > time.Minute {
			lastPrune = now
			if _, err := s.store.PruneEvents(ctx, now.Add(-s.opts.EventRetention)); err != nil && ctx.Err() == nil {
				s.log.Error("prune events", "err", err)
			}
		}
		// Events other processes committed reach this process's streams.
		s.hub.notify()
	}
}

// noticeRemoteStops cancels executions of this process that another
// process asked to stop.
func (s *Service) noticeRemoteStops(ctx context.Context) {
	s.mu.Lock()
	var rs []*running
	for _, r := range s.active {
		if !r.stop.Load() {
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	for _, r := range rs {
		x, err := s.store.GetExecution(ctx, r.exe.ID)
		if err == nil && x.Phase == desk.PhaseStopping {
			r.stop.Store(true)
			r.cancel()
		}
	}
}

func (s *Service) dispatchQueued(ctx context.Context) {
	ids, err := s.store.SurfacesWithQueuedWork(ctx, 1000)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("list queued work", "err", err)
		}
		return
	}
	for _, id := range ids {
		s.wakeAsync(id)
	}
}
