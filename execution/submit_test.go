package execution

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// raceStore lets a test put another dispatcher's claim between a submit's
// commit of its queue row and the submit's own claim: right after the
// first Enqueue commits it wakes the service the way the poll loop and
// Waker do, and holds that dispatcher's first claim until gate is closed.
type raceStore struct {
	desk.Store
	svc     atomic.Pointer[Service]
	armed   atomic.Bool
	entered chan struct{} // closed when the woken dispatcher's claim begins
	claimed chan struct{} // closed when that claim returned
	gate    chan struct{} // the claim proceeds once this is closed
	until   chan struct{} // what Enqueue waits for before it returns
	first   atomic.Bool
}

func newRaceStore(st desk.Store) *raceStore {
	return &raceStore{Store: st, entered: make(chan struct{}), claimed: make(chan struct{}), gate: make(chan struct{})}
}

func (r *raceStore) Enqueue(ctx context.Context, it *desk.QueueItem, o desk.EnqueueOptions) (*desk.QueueItem, bool, error) {
	row, created, err := r.Store.Enqueue(ctx, it, o)
	if err == nil && r.armed.CompareAndSwap(true, false) {
		r.first.Store(true)
		r.svc.Load().Wake()
		<-r.until
	}
	return row, created, err
}

func (r *raceStore) Claim(ctx context.Context, req desk.ClaimRequest) (*desk.QueueItem, *desk.Execution, error) {
	if !r.first.CompareAndSwap(true, false) {
		return r.Store.Claim(ctx, req)
	}
	close(r.entered)
	<-r.gate
	defer close(r.claimed)
	return r.Store.Claim(ctx, req)
}

// blockingExecutor runs turns until their context ends (Close interrupts
// them), so the surface stays occupied for the whole test.
func blockingExecutor(started chan<- string) Executor {
	return ExecutorFunc(func(ctx context.Context, t *Turn) (*Outcome, error) {
		if err := t.Started(); err != nil {
			return nil, err
		}
		started <- t.Execution.ID
		<-ctx.Done()
		return nil, ctx.Err()
	})
}

func submitRacing(t *testing.T, release func(r *raceStore)) {
	t.Helper()
	var rs *raceStore
	started := make(chan string, 4)
	s, x := serviceWith(t, func(st desk.Store) desk.Store { rs = newRaceStore(st); return rs }, blockingExecutor(started))
	rs.svc.Store(s)
	rs.armed.Store(true)
	release(rs)
	ctx := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
	res, err := s.Submit(ctx, x.ID, desk.SubmitInput{Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-rs.claimed:
	case <-time.After(30 * time.Second):
		t.Fatal("the woken dispatcher never claimed")
	}
	var ran string
	select {
	case ran = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the submitted message never started")
	}
	row, err := s.store.GetQueueItem(context.Background(), res.Item.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.ExecutionID != ran {
		t.Fatalf("row %s was taken by %q, but %s ran", row.ID, row.ExecutionID, ran)
	}
	if res.ExecutionID != ran {
		t.Fatalf("submit answered execution_id %q; the message started at once as %s", res.ExecutionID, ran)
	}
	if res.Item.ExecutionID != ran || res.Item.Status == desk.QueueStatusQueued {
		t.Fatalf("submit answered a stale row: %+v", res.Item)
	}

	// A message behind the running one really is queued: no execution,
	// and the row says where it waits.
	res2, err := s.Submit(ctx, x.ID, desk.SubmitInput{Text: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if res2.ExecutionID != "" || res2.Item.Status != desk.QueueStatusQueued {
		t.Fatalf("a message behind running work answered execution %q, status %s", res2.ExecutionID, res2.Item.Status)
	}
}

// TestSubmitNamesExecutionClaimedByConcurrentDispatcher: the poll loop's
// dispatcher takes the submitted row after it committed and before the
// submit's own claim (the claim completes first). The submit used to find
// a dispatcher running, leave the claim to it and answer without an
// execution_id although the message had started.
func TestSubmitNamesExecutionClaimedByConcurrentDispatcher(t *testing.T) {
	submitRacing(t, func(r *raceStore) {
		close(r.gate)
		r.until = r.claimed
	})
}

// TestSubmitWaitsForInFlightClaim: the concurrent dispatcher's claim is
// still in flight when the submit looks; the submit waits for it.
func TestSubmitWaitsForInFlightClaim(t *testing.T) {
	submitRacing(t, func(r *raceStore) {
		r.until = r.entered
		go func() {
			<-r.entered
			// On purpose: the claim stays in flight while the submit
			// looks, which must wait for it rather than answer early.
			time.Sleep(200 * time.Millisecond)
			close(r.gate)
		}()
	})
}

// TestInterruptingSubmitNamesItsExecution: a multitask-interrupt submit
// stops the running turn and waits for it; the dispatcher that ran it then
// claims the steered row, and the answer names that execution rather than
// racing the dispatcher between its turns.
func TestInterruptingSubmitNamesItsExecution(t *testing.T) {
	started := make(chan string, 4)
	s, x := serviceWith(t, nil, blockingExecutor(started))
	ctx := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
	first, err := s.Submit(ctx, x.ID, desk.SubmitInput{Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if first.ExecutionID == "" || <-started != first.ExecutionID {
		t.Fatalf("the first message did not start as its answer says: %+v", first)
	}
	for i := range 5 {
		next, err := s.Submit(ctx, x.ID, desk.SubmitInput{Text: "next", Multitask: desk.MultitaskInterrupt})
		if err != nil {
			t.Fatal(err)
		}
		var ran string
		select {
		case ran = <-started:
		case <-time.After(30 * time.Second):
			t.Fatalf("interrupt %d: the steered message never started", i)
		}
		if next.ExecutionID != ran {
			t.Fatalf("interrupt %d answered execution_id %q; %s started at once", i, next.ExecutionID, ran)
		}
	}
}
