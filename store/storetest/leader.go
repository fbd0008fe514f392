package storetest

import (
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testLeader covers the leader lease: the first holder gets term 1, a
// live lease refuses another holder, its holder renews in the same term,
// an expired lease goes to a new holder in a new term, a resigned lease
// is free at once; and a write fenced by a term commits only while the
// lease has that term and has not expired.
func testLeader(t *testing.T, s desk.Store) {
	now := time.Now()
	ttl := time.Minute
	_, _, err := s.AcquireLeadership(ctx, "", "a", now, now.Add(ttl))
	wantCode(t, err, desk.EINVALID)
	acquire := func(holder string, at time.Time) (int64, bool) {
		t.Helper()
		term, ok, err := s.AcquireLeadership(ctx, "l", holder, at, at.Add(ttl))
		must(t, err)
		return term, ok
	}
	if term, ok := acquire("a", now); !ok || term != 1 {
		t.Fatalf("first acquire = %d %v, want term 1", term, ok)
	}
	if _, ok := acquire("b", now.Add(time.Second)); ok {
		t.Fatal("b took a live lease")
	}
	if term, ok := acquire("a", now.Add(2*time.Second)); !ok || term != 1 {
		t.Fatalf("renewal = %d %v, want term 1", term, ok)
	}
	write := func(f desk.LeaderFence) error {
		w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: desk.NewID("n"), State: desk.WorkspaceActive, CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
		a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: desk.Now()}
		return s.CreateWorkspace(desk.WithLeaderFence(ctx, f), w, a, true)
	}
	fa := desk.LeaderFence{Name: "l", Holder: "a", Term: 1}
	must(t, write(fa))
	// b takes the lease once a's expired: a new term, and a's writes are
	// refused.
	later := now.Add(2*time.Second + ttl)
	if term, ok := acquire("b", later); !ok || term != 2 {
		t.Fatalf("takeover = %d %v, want term 2", term, ok)
	}
	if err := write(fa); !desk.IsFenced(err) {
		t.Fatalf("the old leader's write = %v, want fenced", err)
	}
	must(t, write(desk.LeaderFence{Name: "l", Holder: "b", Term: 2}))
	if err := write(desk.LeaderFence{Name: "none", Holder: "b", Term: 2}); !desk.IsFenced(err) {
		t.Fatalf("a write fenced by an unknown lease = %v, want fenced", err)
	}
	// Resigned: free at once, for a new term; b's fence no longer holds.
	must(t, s.ResignLeadership(ctx, "l", "a", 2)) // not a's: no effect
	if _, ok := acquire("a", later); ok {
		t.Fatal("a resignation by a non-holder freed the lease")
	}
	must(t, s.ResignLeadership(ctx, "l", "b", 2))
	if err := write(desk.LeaderFence{Name: "l", Holder: "b", Term: 2}); !desk.IsFenced(err) {
		t.Fatalf("a write after resigning = %v, want fenced", err)
	}
	if term, ok := acquire("a", later); !ok || term != 3 {
		t.Fatalf("acquire after resign = %d %v, want term 3", term, ok)
	}
	// A lease expired by the clock fences its own holder's writes too.
	past := time.Now().Add(-2 * ttl)
	if term, ok := acquire("c", past.Add(3*ttl)); ok {
		t.Fatalf("c took a's live lease (term %d)", term)
	}
	_, _, err = s.AcquireLeadership(ctx, "old", "c", past, past.Add(time.Second))
	must(t, err)
	if err := write(desk.LeaderFence{Name: "old", Holder: "c", Term: 1}); !desk.IsFenced(err) {
		t.Fatalf("a write under an expired lease = %v, want fenced", err)
	}
}
