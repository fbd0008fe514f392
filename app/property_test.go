package app_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
)

// modelExecutor runs each turn until the test decides its outcome.
type modelExecutor struct {
	mu       sync.Mutex
	started  map[string]int        // item id → times started
	running  string                // item id being executed, or ""
	decide   map[string]chan error // item id → outcome (nil: success)
	maxConc  int
	inFlight int
}

func newModelExecutor() *modelExecutor {
	return &modelExecutor{started: map[string]int{}, decide: map[string]chan error{}}
}

func (m *modelExecutor) ch(id string) chan error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.decide[id]
	if c == nil {
		c = make(chan error, 1)
		m.decide[id] = c
	}
	return c
}

func (m *modelExecutor) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	id := t.Item.ID
	m.mu.Lock()
	m.started[id]++
	m.inFlight++
	if m.inFlight > m.maxConc {
		m.maxConc = m.inFlight
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inFlight--
		if m.running == id {
			m.running = ""
		}
		m.mu.Unlock()
	}()
	if err := t.Started(); err != nil {
		return nil, err
	}
	// Only now is the turn running (its phase committed): the model's
	// quiescence waits for this.
	m.mu.Lock()
	m.running = id
	m.mu.Unlock()
	select {
	case err := <-m.ch(id):
		if err != nil {
			return nil, err
		}
		return &execution.Outcome{Reply: "done"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (m *modelExecutor) current() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// queueModel is the reference: what the queue should hold and run.
type queueModel struct {
	steered, normal []string // queued item ids in dispatch order
	running         string
	final           map[string]string // item id → final queue status
}

func (q *queueModel) queued() []string {
	return append(append([]string(nil), q.steered...), q.normal...)
}

func (q *queueModel) remove(id string) {
	for _, l := range []*[]string{&q.steered, &q.normal} {
		for i, x := range *l {
			if x == id {
				*l = append((*l)[:i:i], (*l)[i+1:]...)
				return
			}
		}
	}
}

// advance starts the head of the queue when nothing runs.
func (q *queueModel) advance() {
	if q.running != "" {
		return
	}
	all := q.queued()
	if len(all) == 0 {
		return
	}
	q.running = all[0]
	q.remove(all[0])
}

// TestQueuePropertyModel drives random submits, steers, cancels,
// completions, failures, interrupts and restarts against the real service
// and a simple model, and checks dispatch order, one writer per surface and
// exactly-once delivery.
func TestQueuePropertyModel(t *testing.T) {
	apptest.Parallel(t)
	// 30 random runs by default keep go test ./... quick; pass
	// -rapid.checks=1000 for a longer search.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "rapid.checks" })
	if !explicit {
		flag.Set("rapid.checks", "30")
	}
	rapid.Check(t, func(rt *rapid.T) {
		home, err := os.MkdirTemp("", "desk-prop-")
		if err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(home)
		ex := newModelExecutor()
		cfg := app.Config{Home: home, AdminToken: "prop", Executor: ex, Execution: execution.Options{
			PollInterval: 10 * time.Millisecond, StopTimeout: 3 * time.Second, FaultThreshold: 1 << 30}}
		ctx := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
		a, err := app.Open(ctx, cfg)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { a.Close(context.Background()) }()
		w, err := a.Workspaces.CreateWorkspace(ctx, desk.WorkspaceCreate{Name: "prop"})
		if err != nil {
			rt.Fatal(err)
		}
		x, err := a.Sessions.Create(ctx, desk.SessionCreate{WorkspaceID: w.ID})
		if err != nil {
			rt.Fatal(err)
		}
		m := &queueModel{final: map[string]string{}}
		n := 0

		lastFinished := ""
		settle := func(rt *rapid.T) {
			deadline := time.Now().Add(5 * time.Second)
			// The last finished row has settled in the store...
			for lastFinished != "" {
				it, err := a.Store.GetQueueItem(ctx, lastFinished)
				if err != nil {
					rt.Fatal(err)
				}
				if it.Status == m.final[lastFinished] {
					break
				}
				if time.Now().After(deadline) {
					rt.Fatalf("item %s stays %s, model says %s", lastFinished, it.Status, m.final[lastFinished])
				}
				time.Sleep(2 * time.Millisecond)
			}
			// ...and the executor runs what the model says runs.
			for ex.current() != m.running {
				if time.Now().After(deadline) {
					rt.Fatalf("executor runs %q, model expects %q (queued %v)", ex.current(), m.running, m.queued())
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
		finish := func(status string) {
			m.final[m.running] = status
			lastFinished = m.running
			m.running = ""
			m.advance()
		}
		actions := map[string]func(*rapid.T){
			"submit": func(rt *rapid.T) {
				n++
				res, err := a.Exec.Submit(ctx, x.ID, desk.SubmitInput{Text: fmt.Sprintf("m%d", n)})
				if err != nil {
					rt.Fatal(err)
				}
				m.normal = append(m.normal, res.Item.ID)
				m.advance()
				settle(rt)
			},
			"steer": func(rt *rapid.T) {
				q := m.queued()
				if len(q) == 0 {
					rt.Skip("nothing queued")
				}
				id := q[rapid.IntRange(0, len(q)-1).Draw(rt, "i")]
				if _, err := a.Exec.QueueOp(ctx, x.ID, id, desk.QueueSteer); err != nil {
					rt.Fatal(err)
				}
				m.remove(id)
				m.steered = append(m.steered, id)
			},
			"cancel": func(rt *rapid.T) {
				q := m.queued()
				if len(q) == 0 {
					rt.Skip("nothing queued")
				}
				id := q[rapid.IntRange(0, len(q)-1).Draw(rt, "i")]
				if _, err := a.Exec.QueueOp(ctx, x.ID, id, desk.QueueCancel); err != nil {
					rt.Fatal(err)
				}
				m.remove(id)
				m.final[id] = desk.QueueStatusCancelled
			},
			"complete": func(rt *rapid.T) {
				if m.running == "" {
					rt.Skip("nothing running")
				}
				ex.ch(m.running) <- nil
				finish(desk.QueueStatusDelivered)
				settle(rt)
			},
			"fail": func(rt *rapid.T) {
				if m.running == "" {
					rt.Skip("nothing running")
				}
				ex.ch(m.running) <- errors.New("injected failure")
				finish(desk.QueueStatusFailed)
				settle(rt)
			},
			"interrupt": func(rt *rapid.T) {
				if m.running == "" {
					rt.Skip("nothing running")
				}
				it, err := a.Store.GetQueueItem(ctx, m.running)
				if err != nil {
					rt.Fatal(err)
				}
				res, err := a.Exec.Interrupt(ctx, x.ID, it.ExecutionID)
				if err != nil || !res.Stopped {
					rt.Fatalf("interrupt: %+v %v", res, err)
				}
				finish(desk.QueueStatusDelivered)
				settle(rt)
			},
			"restart": func(rt *rapid.T) {
				if err := a.Close(context.Background()); err != nil {
					rt.Fatal(err)
				}
				// What ran is interrupted by the stop, never re-run.
				if m.running != "" {
					finish(desk.QueueStatusDelivered)
				}
				if a, err = app.Open(ctx, cfg); err != nil {
					rt.Fatal(err)
				}
				settle(rt)
			},
			"": func(rt *rapid.T) {
				// Order: the store's queue is the model's.
				rows, err := a.Store.ListQueue(ctx, x.ID, true)
				if err != nil {
					rt.Fatal(err)
				}
				var got []string
				for _, r := range rows {
					if r.Status == desk.QueueStatusQueued {
						got = append(got, r.ID)
					}
				}
				if strings.Join(got, ",") != strings.Join(m.queued(), ",") {
					rt.Fatalf("queue order %v, model %v", got, m.queued())
				}
				// Exactly once: nothing started twice.
				ex.mu.Lock()
				for id, k := range ex.started {
					if k > 1 {
						ex.mu.Unlock()
						rt.Fatalf("item %s started %d times", id, k)
					}
				}
				conc := ex.maxConc
				ex.mu.Unlock()
				if conc > 1 {
					rt.Fatalf("%d executions ran at once on one surface", conc)
				}
				// Finished rows have the model's status.
				for id, want := range m.final {
					it, err := a.Store.GetQueueItem(ctx, id)
					if err != nil {
						rt.Fatal(err)
					}
					if it.Status != want {
						rt.Fatalf("item %s is %s, model says %s", id, it.Status, want)
					}
				}
			},
		}
		rt.Repeat(actions)
	})
}
