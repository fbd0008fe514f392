package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/desk-runtime/desk"
)

// Fenced writes. A write made on behalf of a running execution carries
// its fence (desk.WithFence): the execution, its owner and lease version.
// Before the write's own function runs, in the same transaction (and, in
// a group commit, in the same savepoint), the execution's row is read
// under the lock a takeover takes (FOR UPDATE on Postgres; SQLite admits
// one writer at a time), and the write is refused with desk.ErrFenced
// unless the execution is still active, with that owner and that lease
// version. A takeover (AdoptExecution) or a settle by another process
// therefore either commits before the write, which then fails and changes
// nothing, or after it, when the write is part of the history the
// takeover saw. Nothing is written after an execution's terminal event.

// fencedIdleTimeout bounds how long a fenced transaction may sit idle
// on Postgres: well under the leases (DESK_OWNER_TTL, DESK_LEADER_LEASE,
// 15 s each by default), far over any pause between its statements.
const fencedIdleTimeout = "5s"

// checkFence refuses the transaction of ctx's fenced write when its fence
// no longer holds.
func (s *DB) checkFence(ctx context.Context, tx *sql.Tx) error {
	_, leading := desk.LeaderFenceFrom(ctx)
	f, ok := desk.FenceFrom(ctx)
	if (leading || ok) && s.d.ForShare != "" {
		// A fenced transaction locks the row a takeover must write. Were
		// its process frozen (SIGSTOP, a VM pause) in the middle of it,
		// the lock would stop every takeover until it woke: Postgres
		// ends the transaction instead once it sat idle this long.
		if _, err := s.exec(ctx, tx, `SET LOCAL idle_in_transaction_session_timeout = '`+fencedIdleTimeout+`'`); err != nil {
			return err
		}
	}
	if err := s.checkLeaderFence(ctx, tx); err != nil { // leader.go
		return err
	}
	if !ok {
		return nil
	}
	var owner, phase string
	var version int64
	err := s.queryRow(ctx, tx, `SELECT owner, phase, lease_version FROM executions WHERE id = ?`+s.d.ForUpdate, f.ExecutionID).
		Scan(&owner, &phase, &version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// The session (and its executions) was deleted: nothing of the
		// execution may be written any more.
		return fmt.Errorf("%w (execution %s is gone)", desk.ErrFenced, f.ExecutionID)
	case err != nil:
		return fmt.Errorf("check the fence of execution %s: %w", f.ExecutionID, err)
	case !desk.PhaseActive(phase):
		return fmt.Errorf("%w (execution %s is %s)", desk.ErrFenced, f.ExecutionID, phase)
	case owner != f.Owner || version != f.LeaseVersion:
		return fmt.Errorf("%w (execution %s is held by %s at lease version %d, not %s at %d)",
			desk.ErrFenced, f.ExecutionID, owner, version, f.Owner, f.LeaseVersion)
	}
	return nil
}

// fenceLost tells the fence's holder that its write was refused, so that
// it stops the execution at once.
func fenceLost(ctx context.Context, err error) {
	if err == nil || !desk.IsFenced(err) {
		return
	}
	if f, ok := desk.FenceFrom(ctx); ok && f.Lost != nil {
		f.Lost()
	}
}
