package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/desk-runtime/desk"
)

var _ desk.LifecycleStore = (*DB)(nil)

const catalogCols = `id, name, state, created_at, updated_at, lifecycle_reason, lifecycle_notes, successors, handoff,
	retired_sessions, offboarded_at, restored_at, purged_at, absorbed_into, absorbed_at, import_commit`

func catalogTime(v int64) *time.Time {
	if v == 0 {
		return nil
	}
	t := fromMicros(v)
	return &t
}

func scanCatalog(r interface{ Scan(...any) error }) (*desk.CatalogEntry, error) {
	var e desk.CatalogEntry
	var c, u, off, rest, purged, abs int64
	var succ, retired string
	if err := r.Scan(&e.WorkspaceID, &e.Name, &e.State, &c, &u, &e.Reason, &e.Notes, &succ, &e.Handoff,
		&retired, &off, &rest, &purged, &e.AbsorbedInto, &abs, &e.ImportCommit); err != nil {
		return nil, err
	}
	e.CreatedAt, e.UpdatedAt = fromMicros(c), fromMicros(u)
	e.OffboardedAt, e.RestoredAt, e.PurgedAt, e.AbsorbedAt = catalogTime(off), catalogTime(rest), catalogTime(purged), catalogTime(abs)
	if succ != "" && succ != "{}" {
		if err := json.Unmarshal([]byte(succ), &e.Successors); err != nil {
			return nil, fmt.Errorf("decode successors of workspace %s: %w", e.WorkspaceID, err)
		}
	}
	if retired != "" && retired != "[]" {
		if err := json.Unmarshal([]byte(retired), &e.RetiredSessions); err != nil {
			return nil, fmt.Errorf("decode retired sessions of workspace %s: %w", e.WorkspaceID, err)
		}
	}
	return &e, nil
}

func (s *DB) ListCatalog(ctx context.Context) ([]*desk.CatalogEntry, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+catalogCols+` FROM workspaces ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanCatalog)
}

func (s *DB) GetCatalogEntry(ctx context.Context, workspaceID string) (*desk.CatalogEntry, error) {
	return s.getCatalog(ctx, s.db, workspaceID, "")
}

func (s *DB) getCatalog(ctx context.Context, x querier, id, lock string) (*desk.CatalogEntry, error) {
	e, err := scanCatalog(s.queryRow(ctx, x, `SELECT `+catalogCols+` FROM workspaces WHERE id = ?`+lock, id))
	if err != nil {
		return nil, notFound(err, "workspace", id)
	}
	return e, nil
}

// TransitionWorkspace checks and changes the state in one transaction, so
// two processes racing for one transition see exactly one succeed.
func (s *DB) TransitionWorkspace(ctx context.Context, workspaceID, from, to string, ch desk.CatalogChange, at time.Time) (*desk.CatalogEntry, error) {
	var out *desk.CatalogEntry
	err := s.tx(ctx, func(tx *sql.Tx) error {
		cur, err := s.getCatalog(ctx, tx, workspaceID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		if cur.State != from {
			return desk.Errorf(desk.ECONFLICT, "workspace %s is %s, not %s", workspaceID, cur.State, from)
		}
		set := "state = ?, updated_at = ?"
		args := []any{to, micros(at)}
		add := func(col string, v any) {
			set += ", " + col + " = ?"
			args = append(args, v)
		}
		if ch.Reason != nil {
			add("lifecycle_reason", *ch.Reason)
		}
		if ch.Notes != nil {
			add("lifecycle_notes", *ch.Notes)
		}
		if ch.Handoff != nil {
			add("handoff", *ch.Handoff)
		}
		if ch.Successors != nil {
			add("successors", encodeJSON(ch.Successors))
		}
		if ch.RetiredSessions != nil {
			add("retired_sessions", encodeJSON(ch.RetiredSessions))
		}
		for _, t := range []struct {
			col string
			v   *time.Time
		}{{"offboarded_at", ch.OffboardedAt}, {"restored_at", ch.RestoredAt}, {"purged_at", ch.PurgedAt}} {
			if t.v != nil {
				add(t.col, micros(*t.v))
			}
		}
		if _, err := s.exec(ctx, tx, `UPDATE workspaces SET `+set+` WHERE id = ?`, append(args, workspaceID)...); err != nil {
			return err
		}
		out, err = s.getCatalog(ctx, tx, workspaceID, "")
		return err
	})
	return out, err
}

func (s *DB) MarkAbsorbed(ctx context.Context, source, target, commit string, at time.Time) error {
	res, err := s.exec(ctx, s.db, `UPDATE workspaces SET absorbed_into = ?, absorbed_at = ?, import_commit = ?, updated_at = ? WHERE id = ?`,
		target, micros(at), commit, micros(at), source)
	if err != nil {
		return err
	}
	return affected(res, "workspace", source)
}

const leaseCols = `workspace_id, lease_id, op, owner, acquired_at`

func scanLease(r interface{ Scan(...any) error }) (*desk.WorkspaceLease, error) {
	var l desk.WorkspaceLease
	var at int64
	if err := r.Scan(&l.WorkspaceID, &l.LeaseID, &l.Op, &l.Owner, &at); err != nil {
		return nil, err
	}
	l.AcquiredAt = fromMicros(at)
	return &l, nil
}

// AcquireWorkspaceLeases takes the leases in sorted order inside one
// transaction: either every lease is taken or none is, and two callers
// asking for overlapping sets cannot each hold a part.
func (s *DB) AcquireWorkspaceLeases(ctx context.Context, r desk.LeaseRequest) error {
	ids := slices.Clone(r.WorkspaceIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, ws := range ids {
			// Lock the workspace row against claims reading it (see
			// Claim); a lease of a workspace not (or no longer) in the
			// catalog locks nothing.
			var locked string
			if err := s.queryRow(ctx, tx, `SELECT id FROM workspaces WHERE id = ?`+s.d.ForUpdate, ws).Scan(&locked); err != nil && err != sql.ErrNoRows {
				return err
			}
			held, err := scanLease(s.queryRow(ctx, tx, `SELECT `+leaseCols+` FROM workspace_leases WHERE workspace_id = ?`+s.d.ForUpdate, ws))
			switch {
			case err == sql.ErrNoRows:
			case err != nil:
				return err
			default:
				dead, err := s.leaseOwnerDead(ctx, tx, held.Owner, r)
				if err != nil {
					return err
				}
				if !dead {
					return desk.Errorf(desk.ECONFLICT, "workspace %s is busy with %s", ws, held.Op)
				}
				if _, err := s.exec(ctx, tx, `DELETE FROM workspace_leases WHERE workspace_id = ? AND lease_id = ?`, ws, held.LeaseID); err != nil {
					return err
				}
			}
			// A concurrent transaction may have inserted the row after our
			// read; then nothing is inserted and the lease is busy.
			res, err := s.exec(ctx, tx, `INSERT INTO workspace_leases (`+leaseCols+`) VALUES (?, ?, ?, ?, ?)
				ON CONFLICT (workspace_id) DO NOTHING`, ws, r.LeaseID, r.Op, r.Owner, micros(r.Now))
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				op := "another operation"
				_ = s.queryRow(ctx, tx, `SELECT op FROM workspace_leases WHERE workspace_id = ?`, ws).Scan(&op)
				return desk.Errorf(desk.ECONFLICT, "workspace %s is busy with %s", ws, op)
			}
		}
		return nil
	})
}

// leaseOwnerDead reports whether a lease's owner can no longer hold it: it
// is not registered, it stopped, the caller found its process gone, or it
// missed its heartbeats.
func (s *DB) leaseOwnerDead(ctx context.Context, tx *sql.Tx, owner string, r desk.LeaseRequest) (bool, error) {
	if slices.Contains(r.DeadOwners, owner) {
		return true, nil
	}
	var beat, stopped int64
	err := s.queryRow(ctx, tx, `SELECT heartbeat_at, stopped_at FROM owners WHERE id = ?`, owner).Scan(&beat, &stopped)
	if err == sql.ErrNoRows {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return stopped != 0 || beat < micros(r.StaleBefore), nil
}

func (s *DB) ReleaseWorkspaceLeases(ctx context.Context, leaseID string) error {
	_, err := s.exec(ctx, s.db, `DELETE FROM workspace_leases WHERE lease_id = ?`, leaseID)
	return err
}

func (s *DB) ListWorkspaceLeases(ctx context.Context) ([]*desk.WorkspaceLease, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+leaseCols+` FROM workspace_leases ORDER BY workspace_id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanLease)
}

const journalCols = `id, op, workspace_id, owner, step, data, created_at, updated_at`

func scanJournal(r interface{ Scan(...any) error }) (*desk.LifecycleJournal, error) {
	var j desk.LifecycleJournal
	var data string
	var c, u int64
	if err := r.Scan(&j.ID, &j.Op, &j.WorkspaceID, &j.Owner, &j.Step, &data, &c, &u); err != nil {
		return nil, err
	}
	if data != "" {
		j.Data = json.RawMessage(data)
	}
	j.CreatedAt, j.UpdatedAt = fromMicros(c), fromMicros(u)
	return &j, nil
}

func (s *DB) PutLifecycleJournal(ctx context.Context, j *desk.LifecycleJournal) error {
	if j.ID == "" || j.Op == "" || j.WorkspaceID == "" {
		return desk.Errorf(desk.EINVALID, "a lifecycle journal needs an id, an op and a workspace")
	}
	data := string(j.Data)
	if data == "" {
		data = "{}"
	}
	if !json.Valid([]byte(data)) {
		return desk.Errorf(desk.EINVALID, "lifecycle journal %s: data is not JSON", j.ID)
	}
	if j.CreatedAt.IsZero() {
		j.CreatedAt = desk.Now()
	}
	if j.UpdatedAt.IsZero() {
		j.UpdatedAt = j.CreatedAt
	}
	_, err := s.exec(ctx, s.db, `INSERT INTO lifecycle_journals (`+journalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET op = excluded.op, workspace_id = excluded.workspace_id, owner = excluded.owner,
			step = excluded.step, data = excluded.data, updated_at = excluded.updated_at`,
		j.ID, j.Op, j.WorkspaceID, j.Owner, j.Step, data, micros(j.CreatedAt), micros(j.UpdatedAt))
	return err
}

func (s *DB) ListLifecycleJournals(ctx context.Context) ([]*desk.LifecycleJournal, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+journalCols+` FROM lifecycle_journals ORDER BY created_at, id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanJournal)
}

func (s *DB) DeleteLifecycleJournal(ctx context.Context, id string) error {
	_, err := s.exec(ctx, s.db, `DELETE FROM lifecycle_journals WHERE id = ?`, id)
	return err
}

// purgeStatements delete a workspace's data, children before parents;
// every ? is the workspace id. The sessions, actors, surfaces and
// executions stay: they are the identities and the provenance.
var purgeStatements = []string{
	`DELETE FROM artifacts WHERE workspace_id = ?`,
	`DELETE FROM messages WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM commands WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM approvals WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM input_requests WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM plans WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM title_jobs WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM loaded_extensions WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM item_leases WHERE execution_id IN (SELECT id FROM executions WHERE workspace_id = ?)`,
	`DELETE FROM queue_items WHERE workspace_id = ?`,
	`DELETE FROM blocks WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM events WHERE workspace_id = ?`,
	`DELETE FROM session_bindings WHERE session_id IN (SELECT id FROM sessions WHERE workspace_id = ?)`,
	`DELETE FROM group_items WHERE group_id IN (SELECT id FROM selection_groups WHERE workspace_id = ?)`,
	`DELETE FROM selection_groups WHERE workspace_id = ?`,
	`DELETE FROM items WHERE workspace_id = ?`,
	`DELETE FROM actor_usage WHERE workspace_id = ?`,
	`DELETE FROM profiles WHERE workspace_id = ?`,
	`DELETE FROM actor_tokens WHERE actor_id IN (SELECT id FROM actors WHERE workspace_id = ?)`,
	// A session's model script is its instructions, not its identity.
	`UPDATE sessions SET script = '', focus = '' WHERE workspace_id = ?`,
}

// PurgeWorkspaceRows runs in one transaction: a purge interrupted before
// it committed deleted nothing, and one that committed is complete.
func (s *DB) PurgeWorkspaceRows(ctx context.Context, workspaceID string, at time.Time) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.getCatalog(ctx, tx, workspaceID, s.d.ForUpdate); err != nil {
			return err
		}
		// Tombstones first, while the artifact rows still exist.
		if _, err := s.exec(ctx, tx, `INSERT INTO artifact_tombstones (id, session_id, workspace_id, name, sha256, origin, created_at, purged_at)
			SELECT id, session_id, workspace_id, name, sha256, origin, created_at, ? FROM artifacts
			WHERE workspace_id = ? AND id NOT IN (SELECT id FROM artifact_tombstones WHERE workspace_id = ?)`,
			micros(at), workspaceID, workspaceID); err != nil {
			return fmt.Errorf("purge %s: tombstones: %w", workspaceID, err)
		}
		for _, q := range purgeStatements {
			if _, err := s.exec(ctx, tx, q, wsArgs(q, workspaceID)...); err != nil {
				return fmt.Errorf("purge %s: %w", workspaceID, err)
			}
		}
		return nil
	})
}

func (s *DB) GetArtifactTombstone(ctx context.Context, id string) (*desk.ArtifactTombstone, error) {
	var t desk.ArtifactTombstone
	var origin string
	var c, p int64
	err := s.queryRow(ctx, s.db, `SELECT id, session_id, workspace_id, name, sha256, origin, created_at, purged_at
		FROM artifact_tombstones WHERE id = ?`, id).Scan(&t.ID, &t.SessionID, &t.WorkspaceID, &t.Name, &t.SHA256, &origin, &c, &p)
	if err != nil {
		return nil, notFound(err, "artifact", id)
	}
	if t.Origin, err = decodeOrigin(origin); err != nil {
		return nil, err
	}
	t.CreatedAt, t.PurgedAt = fromMicros(c), fromMicros(p)
	return &t, nil
}
