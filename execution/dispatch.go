package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/layout"
)

// dispatcher is the one goroutine of this process that claims and runs a
// surface's rows (one writer per surface). Its counters let a submit that
// found it running learn what it decided about the submit's row; they and
// every field are guarded by Service.mu.
type dispatcher struct {
	surface string
	// again is set by a wake while the dispatcher runs: look once more
	// before exiting.
	again bool
	// begun and ended count the claims it began and that returned.
	begun, ended uint64
	// exe is the execution it runs now ("" between turns).
	exe string
	// changed is closed, and replaced, whenever any of the above changes.
	changed chan struct{}
}

func newDispatcher(surface string) *dispatcher {
	return &dispatcher{surface: surface, changed: make(chan struct{})}
}

// signal wakes whoever waits on the dispatcher's state; mu is held.
func (d *dispatcher) signal() {
	close(d.changed)
	d.changed = make(chan struct{})
}

// wake makes sure a dispatcher runs for the surface. An idle surface costs
// no goroutine: the dispatcher exists only while its queue has admissible
// work. The first claim happens in the caller's goroutine, so a submit to an
// idle surface can answer with the execution that took its row.
func (s *Service) wake(surfaceID string) *desk.QueueItem {
	item, _, _ := s.wakeFor(surfaceID)
	return item
}

// wakeAsync is wake without the first claim in the caller's goroutine, for
// callers that wake many surfaces at once (startup, the sweep).
func (s *Service) wakeAsync(surfaceID string) { s.wakeWith(surfaceID, false) }

// wakeFor is wake for a submit: besides what its own claim took, it returns
// the dispatcher that was already running, if one was, and how many claims
// that one had begun by then (see settledClaim).
func (s *Service) wakeFor(surfaceID string) (*desk.QueueItem, *dispatcher, uint64) {
	return s.wakeWith(surfaceID, true)
}

func (s *Service) wakeWith(surfaceID string, claimNow bool) (*desk.QueueItem, *dispatcher, uint64) {
	s.mu.Lock()
	// The closed check and the Add happen under the lock that Close holds
	// while it cancels: once Close starts waiting, no dispatcher can be
	// added behind its back (sync.WaitGroup: an Add that starts from zero
	// must happen before the Wait).
	if s.ctx == nil || s.ctx.Err() != nil {
		s.mu.Unlock()
		return nil, nil, 0
	}
	if d := s.dispatchers[surfaceID]; d != nil {
		d.again = true
		ticket := d.begun
		s.mu.Unlock()
		return nil, d, ticket
	}
	d := newDispatcher(surfaceID)
	s.dispatchers[surfaceID] = d
	s.wg.Add(1)
	s.mu.Unlock()
	if !claimNow {
		go func() {
			defer s.wg.Done()
			item, exe := s.dispatchClaim(d)
			s.dispatchLoop(d, item, exe)
		}()
		return nil, nil, 0
	}
	// The claim's results are handed to the dispatcher as arguments: the
	// caller keeps reading item while the dispatcher runs it.
	item, exe := s.dispatchClaim(d)
	go func(item *desk.QueueItem, exe *desk.Execution) {
		defer s.wg.Done()
		s.dispatchLoop(d, item, exe)
	}(item, exe)
	return item, nil, 0
}

// dispatchLoop runs claimed rows one after the other until the queue has
// nothing admissible, then exits.
func (s *Service) dispatchLoop(d *dispatcher, item *desk.QueueItem, exe *desk.Execution) {
	for {
		for item != nil {
			s.run(item, exe, false)
			item, exe = s.dispatchClaim(d)
		}
		s.mu.Lock()
		if !d.again || s.ctx.Err() != nil {
			delete(s.dispatchers, d.surface)
			d.signal()
			s.mu.Unlock()
			return
		}
		d.again = false
		s.mu.Unlock()
		item, exe = s.dispatchClaim(d)
	}
}

// dispatchClaim is dispatcher d's claim, counted so that a concurrent
// submit can tell a claim that saw its row from one that began before.
func (s *Service) dispatchClaim(d *dispatcher) (*desk.QueueItem, *desk.Execution) {
	s.mu.Lock()
	d.begun++
	d.signal()
	s.mu.Unlock()
	item, exe := s.claim(d.surface)
	s.mu.Lock()
	d.ended++
	if exe != nil {
		d.exe = exe.ID
	}
	d.signal()
	s.mu.Unlock()
	return item, exe
}

// claim takes the surface's next admissible row with a starting
// execution, or nothing.
func (s *Service) claim(surfaceID string) (*desk.QueueItem, *desk.Execution) {
	if s.ctx.Err() != nil || s.journalFailed() != nil || s.with.Executor == nil {
		return nil, nil
	}
	if s.lapsed.Load() {
		// Past its own heartbeat deadline this process may be taken for
		// dead at any moment: it starts nothing (watchdog.go).
		return nil, nil
	}
	if s.draining.Load() {
		// Stopping: the row stays queued for another process.
		return nil, nil
	}
	// A slot is taken before the claim, so concurrent claims on several
	// surfaces cannot together pass the cap; run gives it back.
	if s.slots.Add(1) > int64(s.opts.MaxExecutions) && s.opts.MaxExecutions > 0 {
		s.slots.Add(-1)
		return nil, nil
	}
	now := s.opts.Now()
	item, exe, err := s.store.Claim(s.ctx, desk.ClaimRequest{
		SurfaceID: surfaceID, Owner: s.owner.ID, ExecutionID: desk.NewID(desk.PrefixExecution),
		Now: now, LeaseUntil: now.Add(s.opts.LeaseTTL), TakeoverIdle: s.opts.TakeoverIdle,
		OwnerStaleBefore: now.Add(-s.opts.OwnerTTL),
	})
	if err != nil || item == nil {
		s.slots.Add(-1)
	}
	if err != nil {
		// A surface that vanished (its session was deleted) is no journal
		// failure; a database that cannot be written is.
		if s.ctx.Err() == nil && desk.ErrorCode(err) == desk.EINTERNAL {
			s.journalResult(err)
		}
		return nil, nil
	}
	if item != nil {
		s.hub.notify()
	}
	return item, exe
}

// run takes one claimed row through its execution: re-check admission,
// scratch, executor, settle, archive, scratch removal. A resumed execution
// (adopted from a dead owner, see Resumer) was admitted and started
// already: it goes straight to the executor, and keeps its scratch.
func (s *Service) run(item *desk.QueueItem, exe *desk.Execution, resumed bool) {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	r := &running{exe: exe, cancel: cancel, done: make(chan struct{})}
	// Every write of the execution carries its fence: the executor's
	// through ctx, the service's own through r.fence.
	fence := desk.Fence{ExecutionID: exe.ID, Owner: s.owner.ID, LeaseVersion: exe.LeaseVersion, Lost: s.fenceLost(r)}
	ctx = desk.WithFence(ctx, fence)
	r.fence = desk.WithFence(context.Background(), fence)
	r.started.Store(resumed)
	s.mu.Lock()
	s.active[exe.ID] = r
	s.mu.Unlock()
	if !resumed {
		defer s.slots.Add(-1) // taken by claim
	}
	defer func() {
		s.mu.Lock()
		delete(s.active, exe.ID)
		// Under the same lock as the active entry goes: whoever saw the
		// turn end (an interrupt waiting on done) and submits next finds
		// the dispatcher between turns, about to claim.
		if d := s.dispatchers[exe.SurfaceID]; d != nil && d.exe == exe.ID {
			d.exe = ""
			d.signal()
		}
		s.mu.Unlock()
		close(r.done)
	}()
	log := s.log.With("execution_id", exe.ID, "session_id", exe.SessionID, "workspace_id", exe.WorkspaceID)

	// Admission is checked again after the starting row committed: a block
	// or a retirement that raced with the claim wins, and the row goes back
	// to the front of its queue untouched.
	if !resumed {
		if why := s.recheck(exe); why != "" {
			s.settle(log, r, item, desk.PhaseInterrupted, "admission revoked: "+why, nil, true)
			return
		}
	}
	scratch := s.home.Abs(exe.WorkspaceID, layout.ScratchRel(exe.ID))
	suspended := false
	defer func() {
		if !suspended {
			os.RemoveAll(scratch)
		}
	}()
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		s.settle(log, r, item, desk.PhaseFailed, "create scratch: "+err.Error(), nil, false)
		return
	}
	x, err := s.store.GetSession(ctx, exe.SessionID)
	if err != nil {
		s.settle(log, r, item, desk.PhaseFailed, "load session: "+err.Error(), nil, false)
		return
	}
	turn := &Turn{Execution: exe, Item: item, Session: x, Scratch: scratch, Resumed: resumed}
	turn.Started = func() error { return s.markRunning(r) }
	turn.Emit = func(typ string, data any) { s.emit(exe, typ, data) }
	turn.Writes = r.fence
	turn.Closing = func() bool { return s.ctx.Err() != nil }

	out, err := s.with.Executor.Execute(ctx, turn)
	if why := r.lost.Load(); why != nil {
		// Another process holds the execution now, or ended it: nothing
		// here is this process's to settle. Its scratch stays for the
		// adopter, which runs the turn on in it, and goes otherwise.
		if cur, gerr := s.store.GetExecution(context.Background(), exe.ID); gerr == nil && desk.PhaseActive(cur.Phase) && cur.Owner != s.owner.ID {
			suspended = true
		}
		log.Warn("stopped an execution this desk process no longer holds; not settling it", "why", *why, "err", err)
		return
	}
	if errors.Is(err, ErrSuspended) && s.ctx.Err() != nil && r.started.Load() {
		// Desk is shutting down while the turn waits on a person: the
		// execution stays running, its wait pending, and the next process
		// adopts it (the owner is marked stopped on Close).
		suspended = true
		log.Info("left waiting on a person for the next desk process")
		return
	}
	if r.stop.Load() {
		if cur, gerr := s.store.GetExecution(context.Background(), exe.ID); gerr == nil && cur.Owner != s.owner.ID {
			// Adopted by another process, which runs it in the same
			// scratch now: nothing here is this process's to settle or
			// remove.
			suspended = true
			log.Warn("let go of an execution another desk process adopted", "owner", cur.Owner)
			return
		}
	}
	// The scratch goes before the terminal phase commits, so whoever sees
	// the execution settled never finds its scratch (PawWork S-H).
	if rerr := os.RemoveAll(scratch); rerr != nil {
		log.Error("remove scratch", "err", rerr)
	}
	if !r.started.Load() && err == nil && !r.stop.Load() {
		// An executor that never signalled its handshake but finished
		// cleanly did start.
		if merr := s.markRunning(r); merr != nil {
			err = merr
		}
	}
	switch {
	case r.stop.Load():
		reason := "interrupted"
		if cur, gerr := s.store.GetExecution(context.Background(), exe.ID); gerr == nil && cur.Interruption != nil {
			reason = cur.Interruption.Reason
		} else if r.lapsed.Load() {
			reason = reasonHeartbeatMissed
		} else if s.ctx.Err() != nil {
			reason = "owner-stopping"
		}
		s.settle(log, r, item, desk.PhaseInterrupted, reason, out, false)
	case err != nil && !r.started.Load():
		s.settle(log, r, item, desk.PhaseFailed, "start failed: "+err.Error(), out, false)
	case err != nil:
		s.settle(log, r, item, desk.PhaseFailed, err.Error(), out, false)
	default:
		s.settle(log, r, item, desk.PhaseEnded, "completed", out, false)
	}
}

// recheck returns why a just-claimed execution may not run, or "".
func (s *Service) recheck(exe *desk.Execution) string {
	ctx := s.ctx
	x, err := s.store.GetSession(ctx, exe.SessionID)
	if err != nil {
		return "session is gone"
	}
	if x.Lifecycle == desk.SessionRetired {
		return "session is retired"
	}
	bs, err := s.store.ListBlocks(ctx, exe.SessionID, s.opts.Now())
	if err != nil {
		return "blocks unreadable: " + err.Error()
	}
	for _, b := range bs {
		if !b.Active || b.SurfaceID != exe.SurfaceID {
			continue
		}
		if b.Kind == desk.BlockExecutionFault || b.Kind == desk.BlockBudget || exe.Origin.Kind != desk.OriginUser {
			return b.Kind + " block " + b.ID
		}
	}
	return ""
}

func (s *Service) markRunning(r *running) error {
	if r.started.Load() {
		return nil
	}
	if r.stop.Load() {
		return desk.Errorf(desk.ECONFLICT, "execution %s is stopping", r.exe.ID)
	}
	_, err := s.store.MarkRunning(r.fence, r.exe.ID, s.owner.ID, s.opts.Now())
	if err != nil {
		if desk.ErrorCode(err) == desk.EINTERNAL {
			s.journalResult(err)
		}
		return err
	}
	r.started.Store(true)
	s.hub.notify()
	return nil
}

// emit stores an executor's event and wakes streams. Events of an
// execution that is no longer this process's are dropped (stale callbacks).
func (s *Service) emit(exe *desk.Execution, typ string, data any) {
	s.mu.Lock()
	r := s.active[exe.ID]
	s.mu.Unlock()
	if r == nil || r.lost.Load() != nil {
		return
	}
	b, err := jsonMarshal(data)
	if err != nil {
		s.log.Error("encode execution event", "err", err, "type", typ)
		return
	}
	e := &desk.Event{At: s.opts.Now(), Type: typ, WorkspaceID: exe.WorkspaceID, SessionID: exe.SessionID,
		SurfaceID: exe.SurfaceID, ExecutionID: exe.ID, Data: b}
	if err := s.store.AppendEvents(r.fence, []*desk.Event{e}); err != nil {
		if !desk.IsFenced(err) {
			s.journalResult(err)
		}
		return
	}
	s.hub.notify()
}

// settle ends the execution and its row in one transaction, retrying while
// the journal cannot be written: an unsettled execution keeps its surface
// occupied, which is safe, but it must not be forgotten.
func (s *Service) settle(log interface {
	Error(string, ...any)
}, r *running, item *desk.QueueItem, phase, reason string, out *Outcome, requeue bool) {
	itemStatus, itemErr := desk.QueueStatusDelivered, ""
	switch {
	case requeue:
	case phase == desk.PhaseFailed:
		itemStatus, itemErr = desk.QueueStatusFailed, reason
	case phase == desk.PhaseInterrupted && !r.started.Load():
		itemStatus, itemErr = desk.QueueStatusCancelled, "interrupted before it started"
	}
	req := desk.SettleRequest{ExecutionID: r.exe.ID, Owner: s.owner.ID, Phase: phase, Reason: reason, Requeue: requeue,
		ItemStatus: itemStatus, ItemError: itemErr, FaultThreshold: s.opts.FaultThreshold}
	var x *desk.Execution
	for attempt := 0; ; attempt++ {
		req.Now = s.opts.Now()
		var err error
		x, _, err = s.store.Settle(r.fence, req)
		if err == nil {
			s.journalResult(nil)
			break
		}
		if desk.IsFenced(err) {
			// A peer took the execution over or ended it (this process
			// was taken for dead): it is the peer's to settle.
			log.Error("settle execution: fenced off; another desk process holds it", "err", err)
			return
		}
		if desk.IsCode(err, desk.ECONFLICT) || desk.IsCode(err, desk.ENOTFOUND) {
			// Someone else settled it (recovery after this owner was taken
			// for dead), or its session was deleted: their word stands.
			return
		}
		s.journalResult(err)
		log.Error("settle execution", "err", err, "attempt", attempt)
		if attempt >= 20 {
			return // recovery finishes it
		}
		select {
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		case <-s.abandon:
			return // Close stopped waiting; the next start's recovery finishes it
		}
	}
	s.hub.notify()
	// The ledger record is durable when its append returns; the next turn
	// of the surface need not wait for that fsync.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.archiveSettled(x, item, out)
	}()
}

func (s *Service) archiveSettled(x *desk.Execution, q *desk.QueueItem, out *Outcome) {
	if s.opts.Archive == nil {
		return
	}
	o := x.Origin
	env := archive.Envelope{At: s.opts.Now(), Channel: q.Channel, ConversationID: q.ConversationID, Origin: &o, TurnID: x.ID}
	var rec archive.Record
	switch x.Phase {
	case desk.PhaseEnded:
		reply := ""
		if out != nil {
			reply = out.Reply
		}
		rec = &archive.MessageOutboundRuntime{Envelope: env, Status: "completed", Reply: reply, ReplyPreview: preview(reply)}
	case desk.PhaseFailed:
		rec = &archive.TurnFailed{Envelope: env, Error: x.Reason}
	case desk.PhaseInterrupted:
		if x.Reason != "" && len(x.Reason) > 19 && x.Reason[:19] == "admission revoked: " {
			return // it never ran: nothing crossed the boundary
		}
		if out != nil && out.Reply != "" {
			// What the turn said before it was stopped crossed the
			// boundary (the user saw it stream): the ledger keeps it.
			part := &archive.MessageOutboundRuntime{Envelope: env, Status: "interrupted", Reply: out.Reply, ReplyPreview: preview(out.Reply)}
			if err := s.opts.Archive.Append(context.Background(), x.WorkspaceID, part); err != nil {
				s.log.Error("archive interrupted reply", "err", err, "execution_id", x.ID)
			}
		}
		rec = &archive.TurnInterrupted{Envelope: env, Reason: x.Reason}
	default:
		return
	}
	if err := s.opts.Archive.Append(context.Background(), x.WorkspaceID, rec); err != nil {
		s.log.Error("archive settled turn", "err", err, "execution_id", x.ID)
	}
}

// preview is the first 200 characters of a reply.
func preview(s string) string {
	if utf8.RuneCountInString(s) <= 200 {
		return s
	}
	r := []rune(s)
	return string(r[:200]) + "…"
}

func jsonMarshal(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode event: %w", err)
	}
	return b, nil
}
