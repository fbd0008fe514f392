// Package sqlite opens desk's embedded default store: a SQLite database file
// in WAL mode through the pure-Go modernc.org/sqlite driver, so desk needs no
// cgo and no server. The schema and queries are shared with Postgres in
// store/sqlstore.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/desk-runtime/desk/store/sqlstore"
)

// Open opens (creating if needed) the database at path and migrates it.
//
// synchronous=FULL makes every commit durable before it returns, which the
// "nothing lost on a crash" rule needs even on power loss; busy_timeout lets
// writers from several connections (or processes) queue instead of failing;
// _txlock=immediate takes the write lock at BEGIN so two transactions never
// deadlock upgrading a read lock.
func Open(ctx context.Context, path string) (*sqlstore.DB, error) {
	return OpenWith(ctx, path, Options{})
}

// Options tune the SQLite store.
type Options struct {
	// Synchronous is "full" (the default: every commit is fsynced and
	// survives power loss) or "normal" (commits survive a crash of desk or
	// of the machine's processes, but the last ones may be lost on power
	// loss; several times the write throughput).
	Synchronous string
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, o Options) (*sqlstore.DB, error) {
	sync := "FULL"
	switch strings.ToLower(o.Synchronous) {
	case "", "full":
	case "normal":
		sync = "NORMAL"
	default:
		return nil, fmt.Errorf("sqlite synchronous %q must be full or normal", o.Synchronous)
	}
	q := url.Values{}
	for _, p := range []string{"busy_timeout(30000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(" + sync + ")"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// Readers run in parallel under WAL; writes go through the store's one
	// committer.
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	s, err := sqlstore.Open(ctx, db, sqlstore.Dialect{
		Goose:             goose.DialectSQLite3,
		IsUniqueViolation: isUnique,
		IsDiskFull:        isFull,
		GroupCommit:       true,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func isUnique(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isFull reports SQLite's "database or disk is full" (SQLITE_FULL, whose
// extended codes share its low byte).
func isFull(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_FULL
}
