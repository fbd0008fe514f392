package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testCancelledWriters runs many concurrent writes, some of whose contexts
// are cancelled at random moments while they wait or run. A store that
// commits concurrent writes together (group commit) must not let one
// caller's cancellation fail the others: every write whose context stayed
// alive commits, and every write that reported success is stored.
func testCancelledWriters(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	const writers, perWriter = 16, 50
	type result struct {
		a   *desk.Artifact
		err error
	}
	results := make([][]result, writers)
	var wg sync.WaitGroup
	for g := range writers {
		results[g] = make([]result, perWriter)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 11))
			for i := range perWriter {
				wctx, cancel := context.WithCancel(context.Background())
				r := &results[g][i]
				if g%2 == 1 {
					// Cancel soon, at a moment that lands before, during or
					// after the write's turn in a batch.
					d := time.Duration(rng.IntN(400)) * time.Microsecond
					time.AfterFunc(d, cancel)
				}
				now := desk.Now()
				r.a = &desk.Artifact{
					ID: desk.NewID(desk.PrefixArtifact), SessionID: x.ID, WorkspaceID: w.ID, ActorID: owner.ID,
					Name: fmt.Sprintf("f-%d-%d.md", g, i), RelPath: fmt.Sprintf("f-%d-%d.md", g, i), Kind: "markdown",
					MediaType: "text/markdown", Size: 1, SHA256: "x", Revision: 1, CreatedAt: now, UpdatedAt: now,
					Origin: desk.Origin{WorkspaceID: w.ID, SessionID: x.ID, Actor: owner.ID, Kind: desk.OriginUser},
				}
				r.err = s.CreateArtifact(wctx, r.a)
				cancel()
			}
		})
	}
	wg.Wait()
	failed, stored := 0, 0
	for g := range writers {
		for _, r := range results[g] {
			if r.err != nil && g%2 == 0 {
				failed++
				t.Errorf("write %s with a live context failed: %v", r.a.Name, r.err)
			}
			got, err := s.ArtifactByPath(ctx, x.ID, r.a.RelPath)
			switch {
			case r.err == nil && err != nil:
				t.Errorf("write %s reported success but is not stored: %v", r.a.Name, err)
			case r.err != nil && err == nil:
				t.Errorf("write %s reported %v but is stored as %s", r.a.Name, r.err, got.ID)
			case err == nil:
				stored++
			}
		}
	}
	n, err := s.CountArtifacts(ctx, x.ID)
	must(t, err)
	if n != stored {
		t.Fatalf("artifact count %d, but %d rows are stored", n, stored)
	}
	if failed > 0 {
		t.Fatalf("%d of %d writes with live contexts failed because other callers' contexts were cancelled", failed, writers/2*perWriter)
	}
}
