package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) desk.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "desk.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestReopen checks that data and the schema version survive closing and
// reopening the file, and that migrating an up-to-date database is a no-op.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "desk.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "keep", State: desk.WorkspaceActive, CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
	if err := s.CreateWorkspace(ctx, w, nil, false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.GetWorkspace(ctx, w.ID)
	if err != nil || got.Name != "keep" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	var mode string
	if err := s.SQL().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
}
