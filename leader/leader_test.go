package leader_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/leader"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlite"
)

var ctx = context.Background()

// stores opens two handles on one database, as two nodes have.
func stores(t *testing.T, pg bool) [2]desk.Store {
	t.Helper()
	var out [2]desk.Store
	dsn := ""
	if pg {
		dsn = pgtest.DSN(t)
	} else {
		dsn = filepath.Join(t.TempDir(), "desk.db")
	}
	for i := range out {
		var s desk.Store
		var err error
		if pg {
			s, err = postgres.Open(ctx, dsn)
		} else {
			s, err = sqlite.Open(ctx, dsn)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

func leading(e *leader.Elector) bool {
	_, release, ok := e.Lead(ctx)
	release()
	return ok
}

func TestTwoElectors(t *testing.T) {
	t.Parallel()
	for _, pg := range []bool{false, true} {
		t.Run(map[bool]string{false: "sqlite", true: "postgres"}[pg], func(t *testing.T) {
			t.Parallel()
			s := stores(t, pg)
			ttl := 900 * time.Millisecond
			a := leader.New(s[0], leader.Options{TTL: ttl, Holder: "a"})
			b := leader.New(s[1], leader.Options{TTL: ttl, Holder: "b"})
			if err := a.Open(ctx); err != nil {
				t.Fatal(err)
			}
			if err := b.Open(ctx); err != nil {
				t.Fatal(err)
			}
			defer b.Close(ctx)
			if !leading(a) || leading(b) {
				t.Fatalf("a leads %v, b leads %v: want a only (it opened first)", leading(a), leading(b))
			}
			lctx, release, _ := a.Lead(ctx)
			defer release()
			// a keeps leading across renewals; b never does meanwhile.
			testwait.Never(t, 2*ttl, func() bool { return leading(b) || !leading(a) }, "leadership moved while a renewed")
			// a resigns: b takes over within one attempt interval, in a
			// new term, and a's leader context ends.
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if lctx.Err() == nil {
				t.Fatal("a's leader context outlived its leadership")
			}
			testwait.Until(t, 2*ttl, func() bool { return leading(b) }, "b to take over")
			if b.Term() != 2 {
				t.Fatalf("b's term = %d, want 2", b.Term())
			}
			if leading(a) {
				t.Fatal("a closed and still leads")
			}
		})
	}
}

// TestFrozenLeaderIsFenced: a leader's lease that another node takes
// over (here: a store whose lease a failed to renew, as when a is frozen)
// refuses a's writes and ends its leader context when it next tries.
func TestFrozenLeaderIsFenced(t *testing.T) {
	t.Parallel()
	s := stores(t, true)
	ttl := 900 * time.Millisecond
	a := leader.New(s[0], leader.Options{TTL: ttl, Holder: "a"})
	if err := a.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	lctx, release, ok := a.Lead(ctx)
	defer release()
	if !ok {
		t.Fatal("a single elector does not lead")
	}
	// b takes the lease as if a's had expired (a frozen past it: no
	// renewal of a's reached the store).
	now := time.Now().Add(2 * ttl)
	if _, took, err := s[1].AcquireLeadership(ctx, leader.Name, "b", now, now.Add(time.Hour)); err != nil || !took {
		t.Fatalf("b's takeover = %v %v", took, err)
	}
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "late", State: desk.WorkspaceActive, CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
	act := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: desk.Now()}
	if err := s[0].CreateWorkspace(lctx, w, act, true); !desk.IsFenced(err) {
		t.Fatalf("the deposed leader's write = %v, want fenced", err)
	}
	if _, err := s[0].GetWorkspace(ctx, w.ID); desk.ErrorCode(err) != desk.ENOTFOUND {
		t.Fatalf("the refused write left a workspace: %v", err)
	}
	// a's next renewal finds b's lease and a steps down.
	testwait.Until(t, 2*ttl, func() bool { return lctx.Err() != nil && !leading(a) }, "a to step down")
}
