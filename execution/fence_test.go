package execution

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
)

// fencedTurn is an executor whose turn signals it started, waits for the
// test's go-ahead, then writes one event through its context (as every
// executor's writes go) and reports what became of the write and of its
// context.
type fencedTurn struct {
	store   desk.Store
	started chan *desk.Execution
	proceed chan struct{}
	wrote   chan error
	stopped chan bool // the turn's context ended right after the write
}

func newFencedTurn() *fencedTurn {
	return &fencedTurn{started: make(chan *desk.Execution, 1), proceed: make(chan struct{}), wrote: make(chan error, 1), stopped: make(chan bool, 1)}
}

func (f *fencedTurn) Execute(ctx context.Context, t *Turn) (*Outcome, error) {
	if err := t.Started(); err != nil {
		return nil, err
	}
	f.started <- t.Execution
	select {
	case <-f.proceed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	err := f.store.AppendEvents(ctx, []*desk.Event{{At: desk.Now(), Type: "assistant.delta", WorkspaceID: t.Execution.WorkspaceID,
		SessionID: t.Execution.SessionID, SurfaceID: t.Execution.SurfaceID, ExecutionID: t.Execution.ID, Data: []byte(`{}`)}})
	f.wrote <- err
	f.stopped <- ctx.Err() != nil // checked at once: no poll has run (PollInterval is an hour)
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *Service) activeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

// A process whose execution a peer adopted (it took this one for dead)
// gets ErrFenced at its next write, stops the turn at once, and does not
// settle it: the execution stays running under the peer.
func TestFencedExecutionStopsWithoutSettling(t *testing.T) {
	t.Parallel()
	f := newFencedTurn()
	s, x := serviceWith(t, func(st desk.Store) desk.Store { f.store = st; return st }, f)
	enqueue(t, s, x, "hello")
	s.wake(x.SurfaceID)
	exe := <-f.started

	adopted, err := f.store.AdoptExecution(context.Background(), exe.ID, s.OwnerID(), "own_peer", desk.Now(), desk.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	close(f.proceed)
	if err := <-f.wrote; !desk.IsFenced(err) {
		t.Fatalf("a write after the takeover = %v, want ErrFenced", err)
	}
	if !<-f.stopped {
		t.Fatal("the fenced write did not stop the turn at once")
	}
	testwait.Until(t, 10*time.Second, func() bool { return s.activeCount() == 0 }, "the fenced turn to end here")
	got, err := f.store.GetExecution(context.Background(), exe.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != desk.PhaseRunning || got.Owner != "own_peer" || got.LeaseVersion != adopted.LeaseVersion {
		t.Fatalf("the fenced process changed the execution: %s owner %s lease %d", got.Phase, got.Owner, got.LeaseVersion)
	}
	es, _ := f.store.ListEvents(context.Background(), desk.EventFilter{ExecutionID: exe.ID, Limit: 100})
	for _, e := range es {
		if e.Type == "assistant.delta" || e.Type == "execution.interrupted" || e.Type == "execution.failed" {
			t.Fatalf("the fenced process wrote %s", e.Type)
		}
	}
}

// A process that notices (at its poll) that a peer ended its execution —
// the peer judged it dead and settled it — stops the turn without
// settling it again; noticeRemoteStops used to skip terminal rows.
func TestExecutionEndedByPeerIsNoticed(t *testing.T) {
	t.Parallel()
	f := newFencedTurn()
	s, x := serviceWith(t, func(st desk.Store) desk.Store { f.store = st; return st }, f)
	enqueue(t, s, x, "hello")
	s.wake(x.SurfaceID)
	exe := <-f.started
	if _, _, err := f.store.Settle(context.Background(), desk.SettleRequest{ExecutionID: exe.ID, Owner: s.OwnerID(), Phase: desk.PhaseInterrupted,
		Reason: "owner-restarted", ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}
	s.noticeRemoteStops(context.Background())
	testwait.Until(t, 10*time.Second, func() bool { return s.activeCount() == 0 }, "the turn a peer ended to stop here")
	select {
	case err := <-f.wrote:
		t.Fatalf("the turn went on to write (%v) after the peer ended it", err)
	default:
	}
	got, _ := f.store.GetExecution(context.Background(), exe.ID)
	if got.Phase != desk.PhaseInterrupted || got.Reason != "owner-restarted" {
		t.Fatalf("the execution is %s (%s), want the peer's interrupted (owner-restarted)", got.Phase, got.Reason)
	}
}

// A process past its own heartbeat deadline stops its executions (they
// settle interrupted, owner-heartbeat-missed, while it still holds them)
// and claims nothing until a heartbeat succeeds again.
func TestHeartbeatWatchdogStopsExecutions(t *testing.T) {
	t.Parallel()
	f := newFencedTurn()
	s, x := serviceWith(t, func(st desk.Store) desk.Store { f.store = st; return st }, f)
	enqueue(t, s, x, "one")
	s.wake(x.SurfaceID)
	exe := <-f.started

	s.checkDeadline(time.Unix(0, s.lastBeat.Load()).Add(s.opts.HeartbeatTimeout / 2))
	if s.lapsed.Load() {
		t.Fatal("the watchdog tripped within the heartbeat timeout")
	}
	s.checkDeadline(time.Unix(0, s.lastBeat.Load()).Add(s.opts.HeartbeatTimeout + time.Millisecond))
	testwait.Until(t, 10*time.Second, func() bool { return s.activeCount() == 0 }, "the watchdog to stop the turn")
	got, _ := f.store.GetExecution(context.Background(), exe.ID)
	if got.Phase != desk.PhaseInterrupted || got.Reason != reasonHeartbeatMissed {
		t.Fatalf("the execution is %s (%s), want interrupted (%s)", got.Phase, got.Reason, reasonHeartbeatMissed)
	}
	enqueue(t, s, x, "two")
	// The heartbeat goroutine may have cleared the lapse meanwhile (its
	// writes succeed here): set it again right before the claim.
	s.lapsed.Store(true)
	if item, _ := s.claim(x.SurfaceID); item != nil {
		t.Fatalf("a lapsed process claimed %s", item.ID)
	}
	if s.opts.OwnerTTL-s.opts.HeartbeatTimeout < 2*s.opts.beatInterval() {
		t.Fatalf("default timings leave no margin: owner TTL %s, heartbeat timeout %s", s.opts.OwnerTTL, s.opts.HeartbeatTimeout)
	}
	bad := Options{OwnerTTL: 10 * time.Second, HeartbeatTimeout: 10 * time.Second}
	bad.defaults()
	if bad.checkLease() == nil {
		t.Fatal("a heartbeat timeout equal to the owner TTL was accepted")
	}
}

// Acceptance round (c) of issue 25, at the level of recovery: a live peer
// with this machine's hostname and boot but another PID namespace, whose
// pid does not exist here, keeps its running execution; only once its
// heartbeats stop is the execution taken over.
func TestPeerInAnotherPIDNamespaceKeepsItsExecution(t *testing.T) {
	t.Parallel()
	f := newFencedTurn()
	s, x := serviceWith(t, func(st desk.Store) desk.Store { f.store = st; return st }, f)
	ctx := context.Background()
	const gone = 1 << 22 // above pid_max's default: no process has it here
	host := s.host
	if i := strings.LastIndex(host, "/"); i >= 0 {
		host = host[:i+1] + "pid:[1]" // same hostname and boot, another namespace
	}
	now := desk.Now()
	peer := &desk.Owner{ID: desk.NewID("own"), Host: host, PID: gone, StartedAt: now, HeartbeatAt: now}
	if err := f.store.RegisterOwner(ctx, peer); err != nil {
		t.Fatal(err)
	}
	enqueue(t, s, x, "the peer's turn")
	_, exe, err := f.store.Claim(ctx, desk.ClaimRequest{SurfaceID: x.SurfaceID, Owner: peer.ID, ExecutionID: desk.NewID(desk.PrefixExecution),
		Now: now, LeaseUntil: now.Add(time.Minute), TakeoverIdle: time.Minute})
	if err != nil || exe == nil {
		t.Fatalf("the peer's claim: %v %v", exe, err)
	}
	if _, err := f.store.MarkRunning(ctx, exe.ID, peer.ID, now); err != nil {
		t.Fatal(err)
	}
	if err := s.recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.store.GetExecution(ctx, exe.ID); got.Phase != desk.PhaseRunning || got.Owner != peer.ID {
		t.Fatalf("a live peer in another PID namespace lost its execution: %s (%s), owner %s", got.Phase, got.Reason, got.Owner)
	}
	// Its heartbeats stop: now it is dead, and its turn is taken over.
	if err := f.store.HeartbeatOwner(ctx, peer.ID, now.Add(-2*s.opts.OwnerTTL)); err != nil {
		t.Fatal(err)
	}
	if err := s.recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.store.GetExecution(ctx, exe.ID); got.Phase != desk.PhaseInterrupted || got.Reason != "owner-restarted" {
		t.Fatalf("a peer past its lease kept its execution: %s (%s)", got.Phase, got.Reason)
	}
}
