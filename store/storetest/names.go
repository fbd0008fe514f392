package storetest

import (
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk"
)

func newWorkspaceRow(name string) (*desk.Workspace, *desk.Actor) {
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: name, State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	return w, a
}

// testWorkspaceNames: a name a workspace that is not purged has is refused
// unless duplicates are allowed; the refusal names the holder and how to
// force it, and leaves nothing behind; departed workspaces keep their
// names, purged ones free them.
func testWorkspaceNames(t *testing.T, s desk.Store) {
	first, a := newWorkspaceRow("acme")
	must(t, s.CreateWorkspace(ctx, first, a, false))

	dup, da := newWorkspaceRow("acme")
	err := s.CreateWorkspace(ctx, dup, da, false)
	wantCode(t, err, desk.ECONFLICT)
	for _, want := range []string{`"acme"`, first.ID, "allow_duplicate_name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("conflict %q does not mention %s", err, want)
		}
	}
	if _, err := s.GetWorkspace(ctx, dup.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("the refused workspace was stored: %v", err)
	}
	if _, err := s.GetActor(ctx, da.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("the refused workspace's owner was stored: %v", err)
	}

	// Other names, and the same name on request, are fine.
	other, oa := newWorkspaceRow("acme2")
	must(t, s.CreateWorkspace(ctx, other, oa, false))
	must(t, s.CreateWorkspace(ctx, dup, da, true))

	// A departed workspace holds its name (it may be restored); a purged
	// one does not.
	gone, ga := newWorkspaceRow("gone")
	must(t, s.CreateWorkspace(ctx, gone, ga, false))
	_, err = s.TransitionWorkspace(ctx, gone.ID, desk.WorkspaceActive, desk.WorkspaceDeparted, desk.CatalogChange{}, desk.Now())
	must(t, err)
	again, aa := newWorkspaceRow("gone")
	wantCode(t, s.CreateWorkspace(ctx, again, aa, false), desk.ECONFLICT)
	for _, st := range [][2]string{{desk.WorkspaceDeparted, desk.WorkspacePurging}, {desk.WorkspacePurging, desk.WorkspacePurged}} {
		_, err = s.TransitionWorkspace(ctx, gone.ID, st[0], st[1], desk.CatalogChange{}, desk.Now())
		must(t, err)
		if st[1] == desk.WorkspacePurging {
			wantCode(t, s.CreateWorkspace(ctx, again, aa, false), desk.ECONFLICT)
		}
	}
	must(t, s.CreateWorkspace(ctx, again, aa, false))
}

// testWorkspaceNameRace: of concurrent creates with one name, exactly one
// succeeds and the others are ECONFLICT.
func testWorkspaceNameRace(t *testing.T, s desk.Store) {
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, a := newWorkspaceRow("race")
			<-start
			errs[i] = s.CreateWorkspace(ctx, w, a, false)
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !desk.IsCode(err, desk.ECONFLICT):
			t.Errorf("create: %v, want nil or ECONFLICT", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent creates of one name succeeded, want 1", won, n)
	}
	list, err := s.ListWorkspaces(ctx)
	must(t, err)
	named := 0
	for _, w := range list {
		if w.Name == "race" {
			named++
		}
	}
	if named != 1 {
		t.Fatalf("%d workspaces named race stored, want 1", named)
	}
}
