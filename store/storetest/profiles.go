package storetest

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// testProfiles covers a workspace's agent profiles: created once per
// name, read back with their whole spec, listed by name and only in their
// workspace, updated and deleted by name, with not-found and conflict
// answers for what is not there or there already.
func testProfiles(t *testing.T, s desk.Store) {
	w, _ := fixture(t, s, "alpha")
	other, _ := fixture(t, s, "beta")
	now := desk.Now()
	p := &desk.Profile{WorkspaceID: w.ID, Name: "reviewer", CreatedAt: now, UpdatedAt: now,
		ProfileSpec: desk.ProfileSpec{Model: "openai:o4", ReasoningEffort: "high", ApprovalMode: desk.ApprovalModeUser,
			Instructions: "Review only.", Tools: []string{"read_file", "list_files"}}}
	must(t, s.CreateProfile(ctx, p))
	must(t, s.CreateProfile(ctx, &desk.Profile{WorkspaceID: w.ID, Name: "author", CreatedAt: now, UpdatedAt: now}))
	wantCode(t, s.CreateProfile(ctx, &desk.Profile{WorkspaceID: w.ID, Name: "reviewer", CreatedAt: now, UpdatedAt: now}), desk.ECONFLICT)
	// The same name in another workspace is another profile.
	must(t, s.CreateProfile(ctx, &desk.Profile{WorkspaceID: other.ID, Name: "reviewer", CreatedAt: now, UpdatedAt: now}))

	got, err := s.GetProfile(ctx, w.ID, "reviewer")
	must(t, err)
	if got.Model != "openai:o4" || got.ReasoningEffort != "high" || got.Instructions != "Review only." || len(got.Tools) != 2 || got.Tools[1] != "list_files" {
		t.Fatalf("GetProfile: %+v", got)
	}
	_, err = s.GetProfile(ctx, w.ID, "nobody")
	wantCode(t, err, desk.ENOTFOUND)

	ps, err := s.ListProfiles(ctx, w.ID)
	must(t, err)
	if len(ps) != 2 || ps[0].Name != "author" || ps[1].Name != "reviewer" {
		t.Fatalf("ListProfiles: %+v", ps)
	}

	got.Instructions, got.Tools, got.UpdatedAt = "Review and fix.", nil, desk.Now()
	must(t, s.UpdateProfile(ctx, got))
	if again, err := s.GetProfile(ctx, w.ID, "reviewer"); err != nil || again.Instructions != "Review and fix." || len(again.Tools) != 0 {
		t.Fatalf("after UpdateProfile: %+v %v", again, err)
	}
	wantCode(t, s.UpdateProfile(ctx, &desk.Profile{WorkspaceID: w.ID, Name: "nobody", UpdatedAt: now}), desk.ENOTFOUND)

	must(t, s.DeleteProfile(ctx, w.ID, "reviewer"))
	wantCode(t, s.DeleteProfile(ctx, w.ID, "reviewer"), desk.ENOTFOUND)
	if ps, _ := s.ListProfiles(ctx, w.ID); len(ps) != 1 || ps[0].Name != "author" {
		t.Fatalf("after DeleteProfile: %+v", ps)
	}
	if o, err := s.GetProfile(ctx, other.ID, "reviewer"); err != nil || o.WorkspaceID != other.ID {
		t.Fatalf("the other workspace's profile: %+v %v", o, err)
	}
}
