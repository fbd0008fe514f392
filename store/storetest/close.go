package storetest

import (
	"testing"

	"github.com/desk-runtime/desk"
)

// testClose: Close is idempotent (a second call neither panics nor fails),
// and a store used after Close answers an error instead of hanging.
func testClose(t *testing.T, s desk.Store) {
	w, _ := fixture(t, s, "close")
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("second Close panicked: %v", r)
			}
		}()
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	}()
	now := desk.Now()
	err := s.CreateWorkspace(ctx, &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "after", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}, nil, true)
	if err == nil {
		t.Fatal("a write after Close succeeded")
	}
	if _, err := s.GetWorkspace(ctx, w.ID); err == nil {
		t.Fatal("a read after Close succeeded")
	}
}
