package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// Migrations are the embedded SQL files in migrations/ plus the few written
// in Go below, for changes that one SQL text cannot make on both databases.
// A migration is never edited once it landed: a change is a new version.

// goMigrations returns the Go migrations for dialect d.
func goMigrations(d Dialect) []*goose.Migration {
	return []*goose.Migration{
		// 00011: the session's artifact counter. Every model step names the
		// session's artifact count in the world block; a counter kept with
		// the rows answers it in constant time, so a step does not slow
		// down as artifacts pile up (S-Q). It counts rows not being
		// deleted and changes in the transaction that changes them.
		//
		// It was first added by an edit of 00005 after that migration had
		// landed, so a database made since then already has the column at
		// version 5 while one made by the original 00005 does not. This
		// migration brings both to the same schema: it adds the column
		// where it is missing and recounts everywhere.
		goose.NewGoMigration(11,
			&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
				has, err := hasColumn(ctx, tx, d, "sessions", "artifact_count")
				if err != nil {
					return err
				}
				if !has {
					if _, err := tx.ExecContext(ctx, `ALTER TABLE sessions ADD COLUMN artifact_count BIGINT NOT NULL DEFAULT 0`); err != nil {
						return err
					}
				}
				_, err = tx.ExecContext(ctx, `UPDATE sessions SET artifact_count = (SELECT COUNT(*) FROM artifacts
					WHERE artifacts.session_id = sessions.id AND NOT artifacts.deleting)`)
				return err
			}},
			&goose.GoFunc{RunTx: func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `ALTER TABLE sessions DROP COLUMN artifact_count`)
				return err
			}}),
	}
}

// hasColumn reports whether table has column, asking the database's own
// catalogue (a failed probe query would abort a Postgres transaction).
func hasColumn(ctx context.Context, tx *sql.Tx, d Dialect, table, column string) (bool, error) {
	var q string
	switch d.Goose {
	case goose.DialectPostgres:
		q = `SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`
	case goose.DialectSQLite3:
		q = `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`
	default:
		return false, fmt.Errorf("migrations: no column probe for dialect %s", d.Goose)
	}
	var n int
	if err := tx.QueryRowContext(ctx, q, table, column).Scan(&n); err != nil {
		return false, fmt.Errorf("probe %s.%s: %w", table, column, err)
	}
	return n > 0, nil
}

// provider returns the migration provider of db for dialect d.
func provider(db *sql.DB, d Dialect) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithGoMigrations(goMigrations(d)...)}
	if d.Locker != nil {
		opts = append(opts, goose.WithSessionLocker(d.Locker))
	}
	p, err := goose.NewProvider(d.Goose, db, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}
