package execution

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/hostid"
	"github.com/desk-runtime/desk/layout"
)

// dead reports whether an owner can no longer own anything: it stopped
// cleanly, its process is gone (same machine and boot), or it missed its
// heartbeats for OwnerTTL.
func (s *Service) dead(o *desk.Owner, now time.Time) bool {
	switch {
	case o.ID == s.owner.ID:
		return false
	case !o.StoppedAt.IsZero():
		return true
	case o.Host == s.host && !hostid.PIDAlive(o.PID):
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
				if err := s.recoverOne(ctx, x, byID[x.Owner] != nil, now); err != nil {
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

func (s *Service) recoverOne(ctx context.Context, x *desk.Execution, known bool, now time.Time) error {
	if x.Phase != desk.PhaseStarting {
		if done, err := s.resumeOne(ctx, x, known, now); done || err != nil {
			return err
		}
	}
	req := desk.SettleRequest{ExecutionID: x.ID, Owner: x.Owner, Phase: desk.PhaseInterrupted, Reason: "owner-restarted",
		ItemStatus: desk.QueueStatusDelivered, Now: now}
	if x.Phase == desk.PhaseStarting {
		req.Requeue = true
	}
	settled, _, err := s.store.Settle(ctx, req)
	if err != nil && !desk.IsCode(err, desk.ECONFLICT) {
		return err
	}
	if err == nil && !req.Requeue {
		// The turn died with its desk process: the archive says so, as it
		// does for every turn that ends without a reply.
		if item, ierr := s.store.GetQueueItem(ctx, x.QueueItemID); ierr == nil {
			s.archiveSettled(settled, item, nil)
		}
	}
	_ = os.RemoveAll(s.home.Abs(x.WorkspaceID, layout.ScratchRel(x.ID)))
	s.log.Warn("recovered an execution of a dead desk process", desk.LogExecutionID, x.ID, desk.LogSessionID, x.SessionID,
		"phase", x.Phase, "requeued", req.Requeue, "owner", x.Owner)
	return nil
}

// resumeOne lets the executor settle its records of a dead owner's
// execution that may have started, and adopts the execution when its turn
// was waiting on a person: it continues in this process once dispatch
// begins (startResumed). done reports that the execution needs no settle
// here (adopted, or another process took it first).
func (s *Service) resumeOne(ctx context.Context, x *desk.Execution, known bool, now time.Time) (done bool, err error) {
	rs, ok := s.with.Executor.(Resumer)
	if !ok {
		return false, nil
	}
	can := known && x.Phase == desk.PhaseRunning
	resume, err := rs.RecoverTurn(ctx, x, can)
	if err != nil {
		return false, fmt.Errorf("recover the records of execution %s: %w", x.ID, err)
	}
	if !resume || !can {
		return false, nil
	}
	adopted, err := s.store.AdoptExecution(ctx, x.ID, x.Owner, s.owner.ID, now, now.Add(s.opts.LeaseTTL))
	if desk.IsCode(err, desk.ECONFLICT) {
		return true, nil // another process adopted or settled it
	}
	if err != nil {
		return false, err
	}
	item, err := s.store.GetQueueItem(ctx, adopted.QueueItemID)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	s.resumes = append(s.resumes, resumption{item: item, exe: adopted})
	s.mu.Unlock()
	s.log.Warn("adopted an execution of a dead desk process: its turn waits on a person and continues here", "execution_id", x.ID,
		"session_id", x.SessionID, "owner", x.Owner)
	return true, nil
}

// resumption is an adopted execution waiting for dispatch to begin.
type resumption struct {
	item *desk.QueueItem
	exe  *desk.Execution
}

// startResumed runs the adopted executions, each as its surface's
// dispatcher: the rows queued behind it run after it, in order. One whose
// surface already has a dispatcher in this process (it exits soon: the
// surface is occupied) waits for the next round.
func (s *Service) startResumed() {
	if s.ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var later []resumption
	for _, r := range s.resumes {
		surface := r.exe.SurfaceID
		if s.dispatchers[surface] != nil {
			later = append(later, r)
			continue
		}
		d := newDispatcher(surface)
		d.exe = r.exe.ID
		s.dispatchers[surface] = d
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.run(r.item, r.exe, true)
			item, exe := s.dispatchClaim(d)
			s.dispatchLoop(d, item, exe)
		}()
	}
	s.resumes = later
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

// loop is the service's background work: noticing stops requested from another process, recovering dead owners,
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
		// Heartbeats have their own goroutine (watchdog.go): a slow
		// recovery or dispatch must not make this process miss them.
		s.noticeRemoteStops(ctx)
		// A draining process adopts nothing: a peer will.
		if !s.draining.Load() {
			if err := s.recover(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("recover executions", desk.LogErr, err)
			}
		}
		s.startResumed()
		s.dispatchQueued(ctx)
		if now.Sub(lastPrune) > time.Minute {
			lastPrune = now
			if _, err := s.store.PruneEvents(ctx, now.Add(-s.opts.EventRetention)); err != nil && ctx.Err() == nil {
				s.log.Error("prune events", desk.LogErr, err)
			}
		}
		// Events other processes committed reach this process's streams.
		s.hub.notify()
	}
}

// noticeRemoteStops cancels executions of this process that another
// process asked to stop, adopted, or ended: a peer that took this process
// for dead (it was frozen past its lease) settles its executions as
// owner-restarted, and this process must then stop them here without
// settling them again. A fenced write notices the same at once; this
// catches an execution that writes nothing for a while (a long model
// call, a tool run).
func (s *Service) noticeRemoteStops(ctx context.Context) {
	s.mu.Lock()
	var rs []*running
	for _, r := range s.active {
		if !r.stop.Load() && r.lost.Load() == nil {
			rs = append(rs, r)
		}
	}
	s.mu.Unlock()
	for _, r := range rs {
		x, err := s.store.GetExecution(ctx, r.exe.ID)
		if desk.IsCode(err, desk.ENOTFOUND) {
			s.lose(r, "its session was deleted")
			continue
		}
		if err != nil {
			continue
		}
		switch {
		case !desk.PhaseActive(x.Phase):
			s.lose(r, "another desk process ended it ("+x.Phase+": "+x.Reason+")")
		case x.Owner != s.owner.ID && x.Owner != "":
			// Another process took this one for dead and adopted the
			// execution (its turn waits on a person): that process runs it
			// now, and this one lets go.
			s.lose(r, "another desk process adopted it (owner "+x.Owner+")")
		case x.LeaseVersion != r.exe.LeaseVersion:
			s.lose(r, fmt.Sprintf("it was taken over (lease version %d, this process holds %d)", x.LeaseVersion, r.exe.LeaseVersion))
		case x.Phase == desk.PhaseStopping:
			r.stop.Store(true)
			r.cancel()
		}
	}
}

func (s *Service) dispatchQueued(ctx context.Context) {
	ids, err := s.store.SurfacesWithQueuedWork(ctx, 1000)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("list queued work", desk.LogErr, err)
		}
		return
	}
	for _, id := range ids {
		s.wakeAsync(id)
	}
}
