package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/desk-runtime/desk"
)

func (s *DB) AcquireLeadership(ctx context.Context, name, holder string, now, until time.Time) (int64, bool, error) {
	if name == "" || holder == "" {
		return 0, false, desk.Errorf(desk.EINVALID, "a leader lease needs a name and a holder")
	}
	// One statement takes, renews or fails: the conditional upsert locks
	// the row, so of two nodes taking an expired lease one wins and the
	// other's WHERE then matches nothing.
	var term int64
	err := s.queryRow(ctx, s.db, `INSERT INTO leader_leases (name, holder, term, expires_at) VALUES (?, ?, 1, ?)
		ON CONFLICT (name) DO UPDATE SET
			term = CASE WHEN leader_leases.holder = excluded.holder AND leader_leases.expires_at > ?
				THEN leader_leases.term ELSE leader_leases.term + 1 END,
			holder = excluded.holder,
			expires_at = excluded.expires_at
		WHERE leader_leases.holder = excluded.holder OR leader_leases.expires_at <= ?
		RETURNING term`, name, holder, micros(until), micros(now), micros(now)).Scan(&term)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.full(err)
	}
	return term, true, nil
}

func (s *DB) ResignLeadership(ctx context.Context, name, holder string, term int64) error {
	_, err := s.exec(ctx, s.db, `UPDATE leader_leases SET expires_at = 0 WHERE name = ? AND holder = ? AND term = ?`, name, holder, term)
	return err
}

// checkLeaderFence refuses the transaction of ctx's write when it carries
// a leader fence that no longer holds: the lease has another holder or
// term, or has expired. The row is read FOR SHARE on Postgres, so a
// takeover (which updates it) waits for this write or this write for it.
func (s *DB) checkLeaderFence(ctx context.Context, tx *sql.Tx) error {
	f, ok := desk.LeaderFenceFrom(ctx)
	if !ok {
		return nil
	}
	var holder string
	var term, expires int64
	err := s.queryRow(ctx, tx, `SELECT holder, term, expires_at FROM leader_leases WHERE name = ?`+s.d.ForShare, f.Name).
		Scan(&holder, &term, &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%w (no leader lease %s)", desk.ErrFenced, f.Name)
	case err != nil:
		return fmt.Errorf("check the leader lease %s: %w", f.Name, err)
	case holder != f.Holder || term != f.Term:
		return fmt.Errorf("%w (leader lease %s is held by %s at term %d, not %s at %d)", desk.ErrFenced, f.Name, holder, term, f.Holder, f.Term)
	case expires <= micros(time.Now()):
		return fmt.Errorf("%w (leader lease %s of %s at term %d has expired)", desk.ErrFenced, f.Name, holder, term)
	}
	return nil
}
