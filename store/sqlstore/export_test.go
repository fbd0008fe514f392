package sqlstore

import (
	"context"
	"database/sql"

	"github.com/pressly/goose/v3"
)

// Tx exposes the store's transaction path (the group committer) to the
// external tests of this package.
func (s *DB) Tx(ctx context.Context, fn func(tx *sql.Tx) error) error { return s.tx(ctx, fn) }

// Exec runs one statement of a transaction the way the store's own
// methods do.
func (s *DB) Exec(ctx context.Context, tx *sql.Tx, query string, args ...any) error {
	_, err := s.exec(ctx, tx, query, args...)
	return err
}

// Migrator returns the store's migration provider.
func (s *DB) Migrator() (*goose.Provider, error) { return provider(s.db, s.d) }

// Postgres reports whether the store is on Postgres.
func (s *DB) Postgres() bool { return s.d.Goose == goose.DialectPostgres }
