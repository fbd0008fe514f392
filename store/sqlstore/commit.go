package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Group commit. Every write transaction of the store goes through one
// committer goroutine, which runs all the transactions waiting at that
// moment inside one database transaction, each in its own savepoint, and
// commits them with one fsync. Each caller still gets its own outcome (a
// failing one is rolled back to its savepoint and sees its error; the
// others are unaffected), and still returns only after its changes are
// durable. The event counter row, which makes event seqs follow commit
// order, is then taken once per batch instead of once per transaction.
// On SQLite, which admits one writer at a time, this is also what keeps
// writers from queueing on the busy handler.

// maxBatch bounds the transactions committed together.
const maxBatch = 256

type txReq struct {
	ctx  context.Context
	fn   func(*sql.Tx) error
	done chan error
}

// errClosed answers writes after Close.
var errClosed = errors.New("store is closed")

func (s *DB) startCommitter() {
	s.txq = make(chan *txReq) // unbuffered: a request is either taken or still the sender's
	s.quit = make(chan struct{})
	s.committerDone = make(chan struct{})
	go s.committer()
}

func (s *DB) stopCommitter() {
	if s.quit == nil {
		return
	}
	close(s.quit)
	<-s.committerDone
}

func (s *DB) committer() {
	defer close(s.committerDone)
	for {
		var first *txReq
		select {
		case first = <-s.txq:
		case <-s.quit:
			return
		}
		batch := []*txReq{first}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-s.txq:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		s.runBatch(batch)
	}
}

// tx runs fn in a transaction and returns once it committed or failed.
// Every write goes through here, so this is where a database's "disk
// full" is given its meaning (see DB.full).
func (s *DB) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	err := s.runTx(ctx, fn)
	fenceLost(ctx, err) // fence.go
	return s.full(err)
}

func (s *DB) runTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if !s.d.GroupCommit {
		return s.plainTx(ctx, fn)
	}
	r := &txReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.txq <- r:
	case <-s.quit:
		return errClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once taken, fn may be running: wait for its real outcome even if ctx
	// ends, so a caller never believes a committed change was not made.
	return <-r.done
}

func (s *DB) runBatch(batch []*txReq) {
	fail := func(err error) {
		for _, r := range batch {
			r.done <- err
		}
	}
	tx, err := s.db.BeginTx(context.Background(), nil)
	if err != nil {
		fail(fmt.Errorf("begin: %w", err))
		return
	}
	// Across servers sharing one Postgres, two batches that each lock a row
	// (a surface, a session) and then the event counter, in opposite
	// orders, deadlock; and nearly every write emits events. Taking the
	// counter first gives every batch the same lock order, at no cost in
	// concurrency: the counter serialized the batches anyway.
	if s.d.ForUpdate != "" {
		var last int64
		if err := tx.QueryRowContext(context.Background(), "SELECT last_seq FROM event_counter WHERE id = 1"+s.d.ForUpdate).Scan(&last); err != nil {
			tx.Rollback()
			fail(fmt.Errorf("lock event counter: %w", err))
			return
		}
	}
	one := len(batch) == 1
	results := make([]error, len(batch))
	ok := 0
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if !one {
			if _, err := tx.ExecContext(context.Background(), "SAVEPOINT desk_tx"); err != nil {
				tx.Rollback()
				fail(fmt.Errorf("savepoint: %w", err))
				return
			}
		}
		// A fenced write is checked in its own savepoint (fence.go).
		err := s.checkFence(r.ctx, tx)
		if err == nil {
			err = r.fn(tx)
		}
		if err == nil {
			if !one {
				if _, err = tx.ExecContext(context.Background(), "RELEASE SAVEPOINT desk_tx"); err != nil {
					tx.Rollback()
					fail(fmt.Errorf("release savepoint: %w", err))
					return
				}
			}
			ok++
			continue
		}
		results[i] = err
		if one {
			break
		}
		if _, rerr := tx.ExecContext(context.Background(), "ROLLBACK TO SAVEPOINT desk_tx"); rerr != nil {
			tx.Rollback()
			fail(fmt.Errorf("rollback to savepoint: %w (after %v)", rerr, err))
			return
		}
		if _, rerr := tx.ExecContext(context.Background(), "RELEASE SAVEPOINT desk_tx"); rerr != nil {
			tx.Rollback()
			fail(fmt.Errorf("release savepoint: %w", rerr))
			return
		}
	}
	if ok == 0 {
		tx.Rollback()
	} else if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
		return
	}
	for i, r := range batch {
		r.done <- results[i]
	}
}

// plainTx runs fn in a transaction of its own, for databases that run
// concurrent writers well by themselves.
func (s *DB) plainTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	err = s.checkFence(ctx, tx) // fence.go
	if err == nil {
		err = fn(tx)
	}
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
