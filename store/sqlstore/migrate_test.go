package sqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/store/sqlstore"
)

// stores opens a fresh store of each kind (Postgres when configured).
func stores(t *testing.T, fn func(t *testing.T, s *sqlstore.DB)) {
	t.Run("SQLite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "desk.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
	t.Run("Postgres", func(t *testing.T) {
		s, err := postgres.Open(context.Background(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		fn(t, s)
	})
}

// schema describes every table's columns and every index of the store's
// database, in a form that does not depend on the order columns were added.
func schema(t *testing.T, s *sqlstore.DB) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	add := func(rows *sql.Rows, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			parts := make([]string, len(vals))
			for i, v := range vals {
				parts[i] = v.String
			}
			out = append(out, strings.Join(parts, " | "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	db := s.SQL()
	if s.Postgres() {
		add(db.QueryContext(ctx, `SELECT table_name, column_name, data_type, is_nullable, column_default
			FROM information_schema.columns WHERE table_schema = current_schema() AND table_name <> 'goose_db_version'`))
		add(db.QueryContext(ctx, `SELECT tablename, indexname, indexdef FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename <> 'goose_db_version'`))
	} else {
		add(db.QueryContext(ctx, `SELECT m.name, c.name, c.type, c."notnull", c.dflt_value, c.pk
			FROM sqlite_master m JOIN pragma_table_info(m.name) c
			WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> 'goose_db_version'`))
		add(db.QueryContext(ctx, `SELECT tbl_name, name, sql FROM sqlite_master
			WHERE type = 'index' AND name NOT LIKE 'sqlite_%'`))
	}
	slices.Sort(out)
	return out
}

// TestMigrationsDownAndUp runs every migration down to version 0 and up
// again: each Down must undo its Up exactly (a migration's Down then Up
// gives back the schema it had, nothing of desk's schema is left at 0) and
// the schema after the second Up is the first one.
func TestMigrationsDownAndUp(t *testing.T) {
	stores(t, func(t *testing.T, s *sqlstore.DB) {
		ctx := context.Background()
		want := schema(t, s)
		if len(want) == 0 {
			t.Fatal("no schema after migrating up")
		}
		p, err := s.Migrator()
		if err != nil {
			t.Fatal(err)
		}
		latest, err := p.GetDBVersion(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// One version at a time, so a failure names its migration: at
		// each version, its Down and then its Up again must give back the
		// schema it had, before the walk goes one further down.
		for v := latest; v > 0; {
			at := schema(t, s)
			res, err := p.Down(ctx)
			if err != nil {
				t.Fatalf("down from version %d: %v", v, err)
			}
			m := res.Source.Version
			if _, err := p.UpByOne(ctx); err != nil {
				t.Fatalf("migration %d: up again after its down: %v", m, err)
			}
			if got := schema(t, s); !slices.Equal(got, at) {
				t.Fatalf("migration %d: its down and up again changed the schema:\n%s", m, diff(at, got))
			}
			if _, err := p.Down(ctx); err != nil {
				t.Fatalf("down from version %d: %v", m, err)
			}
			if v, err = p.GetDBVersion(ctx); err != nil {
				t.Fatal(err)
			}
			if v >= m {
				t.Fatalf("still at version %d after migrating %d down", v, m)
			}
		}
		if left := schema(t, s); len(left) != 0 {
			t.Fatalf("at version 0 the schema still has:\n%s", strings.Join(left, "\n"))
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up again: %v", err)
		}
		if got := schema(t, s); !slices.Equal(got, want) {
			t.Fatalf("schema after down and up differs:\n%s", diff(want, got))
		}
	})
}

// TestMigrationFromEditedAgentSchema: 00005 was once edited after it
// landed to add sessions.artifact_count, so some databases have that
// column at version 5 and others do not. Both must reach the same schema,
// with counts that match their artifact rows.
func TestMigrationFromEditedAgentSchema(t *testing.T) {
	stores(t, func(t *testing.T, s *sqlstore.DB) {
		ctx := context.Background()
		want := schema(t, s)
		p, err := s.Migrator()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.DownTo(ctx, 5); err != nil {
			t.Fatal(err)
		}
		// What the edited 00005 made, with one session holding two
		// artifacts and one being deleted.
		db := s.SQL()
		q := func(query string) {
			t.Helper()
			if _, err := db.ExecContext(ctx, query); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		}
		q(`ALTER TABLE sessions ADD COLUMN artifact_count BIGINT NOT NULL DEFAULT 0`)
		q(`INSERT INTO workspaces (id, name, state, created_at, updated_at) VALUES ('ws_1', 'w', 'active', 0, 0)`)
		q(`INSERT INTO actors (id, workspace_id, name, kind, created_at) VALUES ('act_1', 'ws_1', 'owner', 'human', 0)`)
		q(`INSERT INTO sessions (id, signature, workspace_id, actor_id, title, lifecycle, origin, created_at, updated_at) VALUES ('ses_1', '@s', 'ws_1', 'act_1', '', 'active', '{}', 0, 0)`)
		for i, deleting := range []string{"FALSE", "FALSE", "TRUE"} {
			q(fmt.Sprintf(`INSERT INTO artifacts (id, session_id, workspace_id, actor_id, name, rel_path, kind, media_type, size, sha256,
				immutable, revision, missing, origin, prev, pending, deleting, created_at, updated_at)
				VALUES ('art_%d', 'ses_1', 'ws_1', 'act_1', 'a%d', 'a%d', 'text', 'text/plain', 1, 'x', FALSE, 1, FALSE, '{}', '', '', %s, 0, 0)`, i, i, i, deleting))
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatalf("up from the edited 00005: %v", err)
		}
		if got := schema(t, s); !slices.Equal(got, want) {
			t.Fatalf("schema from the edited 00005 differs:\n%s", diff(want, got))
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT artifact_count FROM sessions WHERE id = 'ses_1'`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("artifact_count = %d (%v), want 2", n, err)
		}
	})
}

func diff(want, got []string) string {
	var b strings.Builder
	for _, w := range want {
		if !slices.Contains(got, w) {
			b.WriteString("- " + w + "\n")
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			b.WriteString("+ " + g + "\n")
		}
	}
	return b.String()
}
