package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlstore"
	"github.com/desk-runtime/desk/webhook"
)

// twoNodes opens two stores (two connection pools: two desks) on one
// Postgres schema, each with its own dispatcher.
func twoNodes(t *testing.T, o webhook.Options) (*world, *webhook.Service, *webhook.Service) {
	t.Helper()
	dsn := pgtest.DSN(t)
	open := func() *sqlstore.DB {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	a, b := open(), open()
	w := newWorldOn(t, a)
	na := w.service(o)
	nb := webhook.New(b, o)
	if err := nb.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nb.Close(context.Background()) })
	return w, na, nb
}

// TestTwoNodesDeliverEachOnce: two desks on one Postgres dispatch the same
// outbox concurrently; every event reaches the receiver once, under one id.
func TestTwoNodesDeliverEachOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(204)
	}))
	defer srv.Close()
	o := fast()
	w, na, _ := twoNodes(t, o)
	h, err := na.Create(adminCtx, desk.WebhookCreate{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	const events = 40
	for range events {
		w.settle(desk.PhaseEnded)
	}
	testwait.Until(t, 60*time.Second, func() bool {
		ds, _ := na.Deliveries(adminCtx, h.ID, 100)
		done := 0
		for _, d := range ds {
			if d.Status == desk.WebhookDeliveryDelivered {
				done++
			}
		}
		return done == events
	}, "every delivery delivered")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != events {
		t.Fatalf("receiver saw %d ids, want %d", len(seen), events)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s reached the receiver %d times across two nodes", id, n)
		}
	}
}

// TestSlowNodeLosesItsLease: the node holding an attempt is slower than
// its lease; the other node takes the delivery over and delivers it. The
// receiver sees the one delivery id (twice, at least once), the delivery
// ends delivered, and the slow node's late outcome changes nothing.
func TestSlowNodeLosesItsLease(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(ids)
		ids = append(ids, r.Header.Get("webhook-id"))
		mu.Unlock()
		if n == 0 {
			<-release // the first attempt hangs past its lease
		}
		w.WriteHeader(204)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	o := fast()
	o.Lease = 300 * time.Millisecond
	w, na, nb := twoNodes(t, o)
	h, err := na.Create(adminCtx, desk.WebhookCreate{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w.settle(desk.PhaseEnded)
	testwait.Until(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) == 2 }, "the takeover attempt")
	close(release)
	d := waitDelivery(t, nb, h.ID, desk.WebhookDeliveryDelivered)
	// Let the slow node's answer land, then look again.
	testwait.Until(t, 10*time.Second, func() bool {
		x, _ := na.Delivery(adminCtx, h.ID, d.ID)
		return x != nil && x.Status == desk.WebhookDeliveryDelivered && len(x.AttemptLog) >= 1
	}, "the delivery to stay delivered")
	mu.Lock()
	defer mu.Unlock()
	if ids[0] != d.ID || ids[1] != d.ID {
		t.Fatalf("receiver saw %v, want %s both times", ids, d.ID)
	}
}
