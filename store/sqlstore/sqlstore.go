// Package sqlstore implements desk.Store over database/sql with one portable
// schema (TEXT, BIGINT and BOOLEAN only) and embedded goose migrations. The
// SQLite and Postgres adapters (store/sqlite, store/postgres) open the
// connection and supply a Dialect; everything else is shared here so the two
// stores cannot drift apart.
//
// It must never hold file bytes: files live in the blob area on disk and only
// their metadata is stored here.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/desk-runtime/desk"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Dialect is what differs between the SQL databases desk supports.
type Dialect struct {
	// Goose is the migration dialect.
	Goose goose.Dialect
	// Numbered is true when placeholders are $1, $2… instead of ?.
	Numbered bool
	// IsUniqueViolation reports whether err is a unique-constraint failure.
	IsUniqueViolation func(error) bool
	// IsDiskFull reports whether err is the database's "disk full"
	// (SQLITE_FULL, Postgres 53100); such a write error is wrapped around
	// syscall.ENOSPC so that it answers desk.ENOSPACE (see desk.NoSpace).
	IsDiskFull func(error) bool
	// Locker serializes migrations across processes, when the database can.
	Locker lock.SessionLocker
	// ForUpdate is appended to a SELECT that must lock the rows it reads
	// until the transaction ends (" FOR UPDATE" on Postgres). SQLite needs
	// none: its transactions take the database's write lock at BEGIN.
	ForUpdate string
	// ForShare is appended to a SELECT whose rows must not change, and
	// must not be locked FOR UPDATE by another transaction, until this
	// one ends (" FOR SHARE" on Postgres; none on SQLite, as ForUpdate).
	ForShare string
	// GroupCommit sends every write transaction through one committer that
	// commits concurrent transactions together (see commit.go). SQLite,
	// which admits one writer at a time, needs it; a server database with
	// cheap concurrent commits may do better without.
	GroupCommit bool
}

// DB is a desk.Store on a database/sql handle.
type DB struct {
	db *sql.DB
	d  Dialect

	txq           chan *txReq
	quit          chan struct{}
	committerDone chan struct{}

	mu     sync.Mutex
	rebind map[string]string
	stmts  map[string]*sql.Stmt

	closeOnce sync.Once
	closeErr  error
}

var _ desk.Store = (*DB)(nil)

// Open migrates db to the newest schema and returns the store. The store owns
// db from then on and closes it in Close.
func Open(ctx context.Context, db *sql.DB, d Dialect) (*DB, error) {
	p, err := provider(db, d)
	if err != nil {
		return nil, err
	}
	if _, err := p.Up(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	s := &DB{db: db, d: d, rebind: map[string]string{}, stmts: map[string]*sql.Stmt{}}
	s.startCommitter()
	return s, nil
}

// SQL exposes the underlying handle to the adapter packages and tests.
func (s *DB) SQL() *sql.DB { return s.db }

// Close stops the committer and closes the database. It is idempotent: a
// second call (an App.Close after a failed Open unwound, a test's cleanup
// after the code under test closed it) returns the first call's result.
func (s *DB) Close() error {
	s.closeOnce.Do(func() {
		s.stopCommitter()
		s.mu.Lock()
		for _, st := range s.stmts {
			st.Close()
		}
		s.stmts = nil
		s.mu.Unlock()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// stmt returns the prepared statement of a query, preparing it once. The
// queries are desk's own constants (and a few shapes built from them), so
// the cache stays small; parsing SQL on every call was a quarter of the
// CPU spent inside SQLite's write lock.
func (s *DB) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	st := s.stmts[query]
	s.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stmts == nil {
		st.Close()
		return nil, errors.New("store is closed")
	}
	if old := s.stmts[query]; old != nil {
		st.Close()
		return old, nil
	}
	s.stmts[query] = st
	return st, nil
}

// on returns the statement bound to x: the transaction's own copy inside a
// transaction, the shared one outside.
func (s *DB) on(ctx context.Context, x querier, query string) (*sql.Stmt, error) {
	st, err := s.stmt(ctx, s.q(query))
	if err != nil {
		return nil, err
	}
	if tx, ok := x.(*sql.Tx); ok {
		return tx.StmtContext(ctx, st), nil
	}
	return st, nil
}

// q rewrites ? placeholders for dialects that number them. Queries are
// constants, so the rewritten text is cached.
func (s *DB) q(query string) string {
	if !s.d.Numbered {
		return query
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.rebind[query]; ok {
		return r
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(query[i])
	}
	r := b.String()
	s.rebind[query] = r
	return r
}

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// inTx returns the context a statement of x runs with. Inside a group
// commit, the transaction is shared by every caller of the batch: a
// statement that one caller's cancellation interrupts makes SQLite roll the
// whole transaction back and makes pgx drop the connection, so the other
// callers' committed-looking writes would fail with it. A caller's context
// is therefore consulted only before its function starts (runBatch); once
// it runs, it runs to the end, and the caller waits for that real outcome.
func (s *DB) inTx(ctx context.Context, x querier) context.Context {
	if _, ok := x.(*sql.Tx); ok && s.d.GroupCommit {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (s *DB) exec(ctx context.Context, x querier, query string, args ...any) (sql.Result, error) {
	ctx = s.inTx(ctx, x)
	if x == querier(s.db) && s.d.GroupCommit {
		// Every write goes through the committer, even a single statement.
		var res sql.Result
		err := s.tx(ctx, func(tx *sql.Tx) error {
			var err error
			res, err = s.exec(ctx, tx, query, args...)
			return err
		})
		return res, err
	}
	st, err := s.on(ctx, x, query)
	if err != nil {
		return nil, err
	}
	res, err := st.ExecContext(ctx, args...)
	return res, s.full(err)
}

func (s *DB) queryRow(ctx context.Context, x querier, query string, args ...any) *sql.Row {
	ctx = s.inTx(ctx, x)
	st, err := s.on(ctx, x, query)
	if err != nil {
		// A Row that carries the error: Scan returns it.
		return x.QueryRowContext(ctx, s.q(query), args...)
	}
	return st.QueryRowContext(ctx, args...)
}

func (s *DB) query(ctx context.Context, x querier, query string, args ...any) (*sql.Rows, error) {
	ctx = s.inTx(ctx, x)
	st, err := s.on(ctx, x, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// conflict turns a unique violation into ECONFLICT with msg and passes other
// errors through with context.
func (s *DB) conflict(err error, msg string) error {
	if err == nil {
		return nil
	}
	if s.d.IsUniqueViolation != nil && s.d.IsUniqueViolation(err) {
		return desk.Errorf(desk.ECONFLICT, "%s", msg)
	}
	return err
}

// full wraps a "disk full" of the database around syscall.ENOSPC, the one
// sign of a full disk desk.ErrorCode knows, and passes other errors as
// they are.
func (s *DB) full(err error) error {
	if err == nil || s.d.IsDiskFull == nil || !s.d.IsDiskFull(err) || errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return fmt.Errorf("%w: %w", syscall.ENOSPC, err)
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func encodeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only desk's own plain structs are encoded here.
		panic("sqlstore: encode: " + err.Error())
	}
	return string(b)
}

func decodeOrigin(s string) (desk.Origin, error) {
	var o desk.Origin
	if s == "" {
		return o, nil
	}
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, fmt.Errorf("decode origin: %w", err)
	}
	return o, nil
}

func notFound(err error, what, id string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return desk.Errorf(desk.ENOTFOUND, "%s %s not found", what, id)
	}
	return err
}

func affected(res sql.Result, what, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return desk.Errorf(desk.ENOTFOUND, "%s %s not found", what, id)
	}
	return nil
}
