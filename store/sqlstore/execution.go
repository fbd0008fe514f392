package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/desk-runtime/desk"
)

// ---- surfaces ----

const surfaceCols = `id, session_id, workspace_id, kind, title, attached_until, last_activity, held, consecutive_failures, created_at`

func scanSurface(r interface{ Scan(...any) error }) (*desk.Surface, error) {
	var x desk.Surface
	var att, act, c int64
	if err := r.Scan(&x.ID, &x.SessionID, &x.WorkspaceID, &x.Kind, &x.Title, &att, &act, &x.Held, &x.ConsecutiveFailures, &c); err != nil {
		return nil, err
	}
	x.AttachedUntil, x.LastActivity, x.CreatedAt = optTime(att), optTime(act), fromMicros(c)
	return &x, nil
}

// optTime maps the zero column value to the zero time.
func optTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return fromMicros(v)
}

func optPtr(v int64) *time.Time {
	if v == 0 {
		return nil
	}
	t := fromMicros(v)
	return &t
}

func (s *DB) GetSurface(ctx context.Context, id string) (*desk.Surface, error) {
	return s.getSurface(ctx, s.db, id, "")
}

func (s *DB) getSurface(ctx context.Context, x querier, id, lock string) (*desk.Surface, error) {
	srf, err := scanSurface(s.queryRow(ctx, x, `SELECT `+surfaceCols+` FROM surfaces WHERE id = ?`+lock, id))
	if err != nil {
		return nil, notFound(err, "surface", id)
	}
	return srf, nil
}

func (s *DB) ListSurfaces(ctx context.Context, sessionID string) ([]*desk.Surface, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+surfaceCols+` FROM surfaces WHERE session_id = ? ORDER BY id`, sessionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanSurface)
}

func (s *DB) AttachSurface(ctx context.Context, id string, until time.Time) (*desk.Surface, error) {
	res, err := s.exec(ctx, s.db, `UPDATE surfaces SET attached_until = ? WHERE id = ?`, micros(until), id)
	if err != nil {
		return nil, err
	}
	if err := affected(res, "surface", id); err != nil {
		return nil, err
	}
	return s.GetSurface(ctx, id)
}

func (s *DB) ResumeSurface(ctx context.Context, id string) (*desk.Surface, error) {
	res, err := s.exec(ctx, s.db, `UPDATE surfaces SET held = ? WHERE id = ?`, false, id)
	if err != nil {
		return nil, err
	}
	if err := affected(res, "surface", id); err != nil {
		return nil, err
	}
	return s.GetSurface(ctx, id)
}

// ---- queue ----

const queueCols = `id, surface_id, session_id, workspace_id, kind, status, priority, position, origin, text,
	idempotency_key, channel, conversation_id, approved, claimed_by, lease_expires_at, lease_version, attempts,
	execution_id, error, created_at, updated_at, edit_of`

func scanQueueItem(r interface{ Scan(...any) error }) (*desk.QueueItem, error) {
	var q desk.QueueItem
	var origin string
	var lease, c, u int64
	if err := r.Scan(&q.ID, &q.SurfaceID, &q.SessionID, &q.WorkspaceID, &q.Kind, &q.Status, &q.Priority, &q.Position,
		&origin, &q.Text, &q.IdempotencyKey, &q.Channel, &q.ConversationID, &q.Approved, &q.ClaimedBy, &lease,
		&q.LeaseVersion, &q.Attempts, &q.ExecutionID, &q.Error, &c, &u, &q.EditOf); err != nil {
		return nil, err
	}
	o, err := decodeOrigin(origin)
	if err != nil {
		return nil, err
	}
	q.Origin, q.LeaseExpiresAt, q.CreatedAt, q.UpdatedAt = o, optPtr(lease), fromMicros(c), fromMicros(u)
	return &q, nil
}

func queueEvent(typ string, q *desk.QueueItem) event {
	return event{typ: typ, workspace: q.WorkspaceID, session: q.SessionID, surface: q.SurfaceID, execute: q.ExecutionID, data: q}
}

func (s *DB) hasActiveExecution(ctx context.Context, x querier, surfaceID string) (bool, error) {
	var n int
	err := s.queryRow(ctx, x, `SELECT COUNT(*) FROM executions WHERE surface_id = ? AND phase IN ('starting', 'running', 'stopping')`, surfaceID).Scan(&n)
	return n > 0, err
}

func (s *DB) Enqueue(ctx context.Context, it *desk.QueueItem, o desk.EnqueueOptions) (*desk.QueueItem, bool, error) {
	var out *desk.QueueItem
	created := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if it.IdempotencyKey != "" {
			old, err := scanQueueItem(s.queryRow(ctx, tx, `SELECT `+queueCols+` FROM queue_items WHERE session_id = ? AND idempotency_key = ?`,
				it.SessionID, it.IdempotencyKey))
			if err == nil {
				out = old
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		srf, err := s.getSurface(ctx, tx, it.SurfaceID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		if srf.SessionID != it.SessionID {
			return desk.Errorf(desk.ENOTFOUND, "surface %s not found in session %s", it.SurfaceID, it.SessionID)
		}
		if o.RejectIfBusy {
			busy, err := s.hasActiveExecution(ctx, tx, it.SurfaceID)
			if err != nil {
				return err
			}
			if busy {
				return desk.Errorf(desk.EBUSY, "surface %s is running an execution; the message was not queued (multitask reject)", it.SurfaceID)
			}
		}
		if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(position), 0) + 1 FROM queue_items WHERE surface_id = ?`, it.SurfaceID).Scan(&it.Position); err != nil {
			return err
		}
		it.Status, it.UpdatedAt = desk.QueueStatusQueued, it.CreatedAt
		if _, err := s.exec(ctx, tx, `INSERT INTO queue_items (id, surface_id, session_id, workspace_id, kind, status, priority, position,
			origin, text, idempotency_key, channel, conversation_id, approved, created_at, updated_at, edit_of)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			it.ID, it.SurfaceID, it.SessionID, it.WorkspaceID, it.Kind, it.Status, it.Priority, it.Position,
			encodeJSON(it.Origin), it.Text, it.IdempotencyKey, it.Channel, it.ConversationID, it.Approved,
			micros(it.CreatedAt), micros(it.UpdatedAt), it.EditOf); err != nil {
			return s.conflict(err, "idempotency key "+it.IdempotencyKey+" is already used in this session")
		}
		evs := []event{queueEvent("queue.queued", it)}
		if o.UserWork {
			if _, err := s.exec(ctx, tx, `UPDATE surfaces SET held = ?, last_activity = ? WHERE id = ?`, false, micros(it.CreatedAt), it.SurfaceID); err != nil {
				return err
			}
			released, err := s.releaseBlocks(ctx, tx, it.SurfaceID, desk.BlockUserCooldown, it.Origin.Actor, it.CreatedAt)
			if err != nil {
				return err
			}
			for _, b := range released {
				evs = append(evs, blockEvent("block.released", b, srf.WorkspaceID))
			}
		}
		out, created = it, true
		return s.emit(ctx, tx, it.CreatedAt, evs...)
	})
	if err != nil && out == nil && it.IdempotencyKey != "" && desk.IsCode(err, desk.ECONFLICT) {
		// A concurrent submit with the same key won; answer with its row.
		if old, gerr := scanQueueItem(s.queryRow(ctx, s.db, `SELECT `+queueCols+` FROM queue_items WHERE session_id = ? AND idempotency_key = ?`,
			it.SessionID, it.IdempotencyKey)); gerr == nil {
			return old, false, nil
		}
	}
	return out, created, err
}

func (s *DB) GetQueueItem(ctx context.Context, id string) (*desk.QueueItem, error) {
	q, err := scanQueueItem(s.queryRow(ctx, s.db, `SELECT `+queueCols+` FROM queue_items WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "queue item", id)
	}
	return q, nil
}

func (s *DB) ListQueue(ctx context.Context, sessionID string, pending bool) ([]*desk.QueueItem, error) {
	q := `SELECT ` + queueCols + ` FROM queue_items WHERE session_id = ?`
	if pending {
		q += ` AND status IN ('queued', 'dispatching')`
	}
	// Dispatching rows first, then queued rows in dispatch order, then the
	// finished ones by creation.
	rows, err := s.query(ctx, s.db, q+` ORDER BY CASE status WHEN 'dispatching' THEN 0 WHEN 'queued' THEN 1 ELSE 2 END,
		CASE WHEN status = 'queued' THEN priority ELSE 0 END, CASE WHEN status = 'queued' THEN position ELSE 0 END, created_at, id`, sessionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanQueueItem)
}

func (s *DB) UpdateQueued(ctx context.Context, id string, op desk.QueueOp) (*desk.QueueItem, error) {
	var out *desk.QueueItem
	err := s.tx(ctx, func(tx *sql.Tx) error {
		q, err := scanQueueItem(s.queryRow(ctx, tx, `SELECT `+queueCols+` FROM queue_items WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return notFound(err, "queue item", id)
		}
		if q.Status != desk.QueueStatusQueued {
			return desk.Errorf(desk.ECONFLICT, "queue item %s is %s; only queued rows can be changed", id, q.Status)
		}
		now := desk.Now()
		typ := "queue.updated"
		switch op {
		case desk.QueueSteer:
			// Steered rows go first, in the order they were steered.
			if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(position), 0) + 1 FROM queue_items WHERE surface_id = ?`, q.SurfaceID).Scan(&q.Position); err != nil {
				return err
			}
			q.Priority = desk.PrioritySteered
		case desk.QueueCancel:
			q.Status, typ = desk.QueueStatusCancelled, "queue.cancelled"
		case desk.QueueFront:
			if err := s.queryRow(ctx, tx, `SELECT COALESCE(MIN(position), 1) - 1 FROM queue_items WHERE surface_id = ? AND status = 'queued' AND priority = ?`,
				q.SurfaceID, q.Priority).Scan(&q.Position); err != nil {
				return err
			}
		case desk.QueueBack:
			if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(position), 0) + 1 FROM queue_items WHERE surface_id = ?`, q.SurfaceID).Scan(&q.Position); err != nil {
				return err
			}
		case desk.QueueApprove:
			q.Approved = true
		default:
			return desk.Errorf(desk.EINVALID, "unknown queue operation %q", op)
		}
		q.UpdatedAt = now
		if _, err := s.exec(ctx, tx, `UPDATE queue_items SET status = ?, priority = ?, position = ?, approved = ?, updated_at = ? WHERE id = ?`,
			q.Status, q.Priority, q.Position, q.Approved, micros(now), q.ID); err != nil {
			return err
		}
		out = q
		return s.emit(ctx, tx, now, queueEvent(typ, q))
	})
	return out, err
}

func (s *DB) SurfacesWithQueuedWork(ctx context.Context, limit int) ([]string, error) {
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.query(ctx, s.db, `SELECT DISTINCT q.surface_id FROM queue_items q
		WHERE q.status = 'queued' AND NOT EXISTS (SELECT 1 FROM executions e WHERE e.surface_id = q.surface_id
		AND e.phase IN ('starting', 'running', 'stopping')) LIMIT ?`, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r interface{ Scan(...any) error }) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
}

// ---- claims and executions ----

const executionCols = `id, session_id, surface_id, workspace_id, queue_item_id, phase, origin, owner, requested_at,
	started_at, finished_at, reason, interruption, stop_error, lease_version`

func scanExecution(r interface{ Scan(...any) error }) (*desk.Execution, error) {
	var x desk.Execution
	var origin, intr string
	var req, st, fin int64
	if err := r.Scan(&x.ID, &x.SessionID, &x.SurfaceID, &x.WorkspaceID, &x.QueueItemID, &x.Phase, &origin, &x.Owner,
		&req, &st, &fin, &x.Reason, &intr, &x.StopError, &x.LeaseVersion); err != nil {
		return nil, err
	}
	o, err := decodeOrigin(origin)
	if err != nil {
		return nil, err
	}
	if intr != "" {
		x.Interruption = new(desk.Interruption)
		if err := json.Unmarshal([]byte(intr), x.Interruption); err != nil {
			return nil, fmt.Errorf("decode interruption: %w", err)
		}
	}
	x.Origin, x.RequestedAt, x.StartedAt, x.FinishedAt = o, fromMicros(req), optPtr(st), optPtr(fin)
	x.Outcome = desk.OutcomeOf(x.Phase)
	return &x, nil
}

func executionEvent(typ string, x *desk.Execution) event {
	x.Outcome = desk.OutcomeOf(x.Phase)
	return event{typ: typ, workspace: x.WorkspaceID, session: x.SessionID, surface: x.SurfaceID, execute: x.ID, data: x}
}

func (s *DB) getExecution(ctx context.Context, q querier, id, lock string) (*desk.Execution, error) {
	x, err := scanExecution(s.queryRow(ctx, q, `SELECT `+executionCols+` FROM executions WHERE id = ?`+lock, id))
	if err != nil {
		return nil, notFound(err, "execution", id)
	}
	return x, nil
}

func (s *DB) GetExecution(ctx context.Context, id string) (*desk.Execution, error) {
	return s.getExecution(ctx, s.db, id, "")
}

func (s *DB) ListExecutions(ctx context.Context, sessionID string, limit int) ([]*desk.Execution, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	rows, err := s.query(ctx, s.db, `SELECT `+executionCols+` FROM executions WHERE session_id = ? ORDER BY requested_at DESC, id DESC LIMIT ?`, sessionID, limit)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanExecution)
}

func (s *DB) ActiveExecution(ctx context.Context, surfaceID string) (*desk.Execution, error) {
	x, err := scanExecution(s.queryRow(ctx, s.db, `SELECT `+executionCols+` FROM executions
		WHERE surface_id = ? AND phase IN ('starting', 'running', 'stopping')`, surfaceID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return x, err
}

func (s *DB) ListActiveExecutions(ctx context.Context) ([]*desk.Execution, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+executionCols+` FROM executions WHERE phase IN ('starting', 'running', 'stopping') ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanExecution)
}

// Claim implements the admission rules in one transaction: the surface row
// is locked, it must have no active execution and no hold, an
// execution-fault block admits nothing, a user-cooldown block admits only
// user work, and an attached surface admits work from other origins only
// once approved or idle. The claim and the starting execution commit
// together; the partial unique index on executions is the last word on
// the single-writer rule.
func (s *DB) Claim(ctx context.Context, r desk.ClaimRequest) (*desk.QueueItem, *desk.Execution, error) {
	var item *desk.QueueItem
	var exe *desk.Execution
	err := s.tx(ctx, func(tx *sql.Tx) error {
		srf, err := s.getSurface(ctx, tx, r.SurfaceID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		if srf.Held {
			return nil
		}
		// Work of a session being deleted or retired waits (and goes with
		// the session when it is deleted).
		var deleting bool
		var lifecycle string
		if err := s.queryRow(ctx, tx, `SELECT deleting, lifecycle FROM sessions WHERE id = ?`, srf.SessionID).Scan(&deleting, &lifecycle); err != nil {
			return notFound(err, "session", srf.SessionID)
		}
		if deleting || lifecycle == desk.SessionRetired {
			return nil
		}
		// Nothing starts in a workspace that is not active (offboarding,
		// departed, restoring, purged): offboarding's check for running
		// work relies on it.
		// The row is read with a shared lock that a workspace lease's
		// acquisition conflicts with, so a claim and an operation taking
		// the workspace's lease are ordered: either the claim commits
		// first and the operation sees its execution running, or the
		// lease is committed first and the claim sees it below.
		// Nothing starts either while a live desk process changes the
		// workspace's checkout (template upgrade, absorb, offboard…):
		// its lease's owner has not stopped and beat recently. Giving
		// the lease back wakes the dispatchers.
		var state string
		var leased bool
		var budget int64
		if err := s.queryRow(ctx, tx, `SELECT w.state, EXISTS (SELECT 1 FROM workspace_leases l JOIN owners o ON o.id = l.owner
				WHERE l.workspace_id = w.id AND o.stopped_at = 0 AND o.heartbeat_at >= ?), w.token_budget
			FROM workspaces w WHERE w.id = ?`+s.d.ForShare, micros(r.OwnerStaleBefore), srf.WorkspaceID).Scan(&state, &leased, &budget); err != nil {
			return notFound(err, "workspace", srf.WorkspaceID)
		}
		if state != desk.WorkspaceActive || leased {
			return nil
		}
		busy, err := s.hasActiveExecution(ctx, tx, r.SurfaceID)
		if err != nil || busy {
			return err
		}
		blocks, err := s.activeBlocks(ctx, tx, r.SurfaceID, r.Now)
		if err != nil {
			return err
		}
		cooldown := false
		for _, b := range blocks {
			switch b.Kind {
			case desk.BlockExecutionFault:
				return nil
			case desk.BlockUserCooldown:
				cooldown = true
			}
		}
		attached := srf.AttachedUntil.After(r.Now)
		idle := r.Now.Sub(srf.LastActivity) >= r.TakeoverIdle
		rows, err := s.query(ctx, tx, `SELECT `+queueCols+` FROM queue_items WHERE surface_id = ? AND status = 'queued'
			ORDER BY priority, position LIMIT 200`, r.SurfaceID)
		if err != nil {
			return err
		}
		cands, err := collect(rows, scanQueueItem)
		if err != nil {
			return err
		}
		for _, c := range cands {
			user := c.Origin.Kind == desk.OriginUser
			if cooldown && !user {
				continue // approval never overrides a block
			}
			if attached && !user && !c.Approved && !idle {
				continue
			}
			item = c
			break
		}
		if item == nil {
			return nil
		}
		// The budget is decided last, so a block names work that was
		// really held back by it.
		admit, budgetEvents, err := s.budgetAdmits(ctx, tx, srf, budget, blocks, r.Now)
		if err != nil {
			return err
		}
		if !admit {
			item = nil
			return s.emit(ctx, tx, r.Now, budgetEvents...)
		}
		item.Status, item.ClaimedBy, item.LeaseVersion = desk.QueueStatusDispatching, r.Owner, item.LeaseVersion+1
		item.Attempts++
		item.ExecutionID, item.UpdatedAt = r.ExecutionID, r.Now
		lease := r.LeaseUntil
		item.LeaseExpiresAt = &lease
		res, err := s.exec(ctx, tx, `UPDATE queue_items SET status = ?, claimed_by = ?, lease_expires_at = ?, lease_version = ?,
			attempts = ?, execution_id = ?, updated_at = ? WHERE id = ? AND status = 'queued'`,
			item.Status, item.ClaimedBy, micros(lease), item.LeaseVersion, item.Attempts, item.ExecutionID, micros(r.Now), item.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			item = nil // another claimant won the row
			return nil
		}
		origin := item.Origin
		origin.ExecutionID, origin.SurfaceID = r.ExecutionID, r.SurfaceID
		exe = &desk.Execution{ID: r.ExecutionID, SessionID: item.SessionID, SurfaceID: item.SurfaceID, WorkspaceID: item.WorkspaceID,
			QueueItemID: item.ID, Phase: desk.PhaseStarting, Origin: origin, Owner: r.Owner, RequestedAt: r.Now, LeaseVersion: item.LeaseVersion}
		if _, err := s.exec(ctx, tx, `INSERT INTO executions (id, session_id, surface_id, workspace_id, queue_item_id, phase, origin, owner, requested_at, lease_version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, exe.ID, exe.SessionID, exe.SurfaceID, exe.WorkspaceID, exe.QueueItemID, exe.Phase,
			encodeJSON(exe.Origin), exe.Owner, micros(exe.RequestedAt), exe.LeaseVersion); err != nil {
			return s.conflict(err, "surface "+r.SurfaceID+" already has an active execution")
		}
		return s.emit(ctx, tx, r.Now, append(budgetEvents, queueEvent("queue.dispatching", item), executionEvent("execution.starting", exe))...)
	})
	if err != nil {
		if desk.IsCode(err, desk.ECONFLICT) {
			return nil, nil, nil // lost the race to another process
		}
		return nil, nil, err
	}
	if item == nil {
		return nil, nil, nil
	}
	return item, exe, nil
}

func (s *DB) ExtendLeases(ctx context.Context, owner string, until time.Time) error {
	_, err := s.exec(ctx, s.db, `UPDATE queue_items SET lease_expires_at = ? WHERE claimed_by = ? AND status = 'dispatching'`, micros(until), owner)
	return err
}

// AdoptExecution moves a running execution and its row's claim from a
// dead owner to this one, in one transaction, so the turn it waits in
// continues here and nobody else can claim the surface meanwhile.
func (s *DB) AdoptExecution(ctx context.Context, executionID, from, owner string, now, leaseUntil time.Time) (*desk.Execution, error) {
	var out *desk.Execution
	err := s.tx(ctx, func(tx *sql.Tx) error {
		x, err := s.getExecution(ctx, tx, executionID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		if x.Phase != desk.PhaseRunning || x.Owner != from {
			return desk.Errorf(desk.ECONFLICT, "execution %s is %s (owner %s); it cannot be adopted from %s", x.ID, x.Phase, x.Owner, from)
		}
		// A takeover is a new claim: its lease version is one more, so
		// every write still in flight under the old claim is fenced off
		// (even one of this very owner, should the execution come back
		// to it after another takeover).
		x.Owner = owner
		x.LeaseVersion++
		if _, err := s.exec(ctx, tx, `UPDATE executions SET owner = ?, lease_version = ? WHERE id = ?`, owner, x.LeaseVersion, x.ID); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `UPDATE queue_items SET claimed_by = ?, lease_expires_at = ?, lease_version = ?, updated_at = ? WHERE id = ? AND status = 'dispatching'`,
			owner, micros(leaseUntil), x.LeaseVersion, micros(now), x.QueueItemID); err != nil {
			return err
		}
		out = x
		return s.emit(ctx, tx, now, executionEvent("execution.resumed", x))
	})
	return out, err
}

func (s *DB) MarkRunning(ctx context.Context, executionID, owner string, at time.Time) (*desk.Execution, error) {
	var out *desk.Execution
	err := s.tx(ctx, func(tx *sql.Tx) error {
		x, err := s.getExecution(ctx, tx, executionID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		if x.Phase != desk.PhaseStarting || x.Owner != owner {
			return desk.Errorf(desk.ECONFLICT, "execution %s is %s (owner %s); it cannot start running", x.ID, x.Phase, x.Owner)
		}
		x.Phase, x.StartedAt = desk.PhaseRunning, &at
		if _, err := s.exec(ctx, tx, `UPDATE executions SET phase = ?, started_at = ? WHERE id = ?`, x.Phase, micros(at), x.ID); err != nil {
			return err
		}
		out = x
		return s.emit(ctx, tx, at, executionEvent("execution.running", x))
	})
	return out, err
}

func (s *DB) RequestStop(ctx context.Context, executionID string, in desk.Interruption, cooldownUntil *time.Time) (*desk.Execution, *desk.Block, error) {
	var out *desk.Execution
	var blk *desk.Block
	err := s.tx(ctx, func(tx *sql.Tx) error {
		x, err := s.getExecution(ctx, tx, executionID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		out = x
		if !desk.PhaseActive(x.Phase) || x.Phase == desk.PhaseStopping {
			return nil // finished, or a stop is already under way: share it
		}
		x.Phase, x.Interruption = desk.PhaseStopping, &in
		if _, err := s.exec(ctx, tx, `UPDATE executions SET phase = ?, interruption = ? WHERE id = ?`,
			x.Phase, encodeJSON(in), x.ID); err != nil {
			return err
		}
		evs := []event{executionEvent("execution.stopping", x)}
		if cooldownUntil != nil {
			blk = &desk.Block{ID: desk.NewID("blk"), SurfaceID: x.SurfaceID, SessionID: x.SessionID, Kind: desk.BlockUserCooldown,
				Reason: "interrupted by " + in.By, CreatedAt: in.At, ExpiresAt: cooldownUntil, Active: true}
			if err := s.insertBlock(ctx, tx, blk); err != nil {
				return err
			}
			evs = append(evs, blockEvent("block.created", blk, x.WorkspaceID))
		}
		return s.emit(ctx, tx, in.At, evs...)
	})
	return out, blk, err
}

func (s *DB) SetStopError(ctx context.Context, executionID, msg string) (*desk.Execution, error) {
	var out *desk.Execution
	err := s.tx(ctx, func(tx *sql.Tx) error {
		x, err := s.getExecution(ctx, tx, executionID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		out = x
		if !desk.PhaseActive(x.Phase) {
			return nil
		}
		x.StopError = msg
		if _, err := s.exec(ctx, tx, `UPDATE executions SET stop_error = ? WHERE id = ?`, msg, x.ID); err != nil {
			return err
		}
		return s.emit(ctx, tx, desk.Now(), executionEvent("execution.stop_error", x))
	})
	return out, err
}

func (s *DB) Settle(ctx context.Context, r desk.SettleRequest) (*desk.Execution, *desk.Block, error) {
	var out *desk.Execution
	var blk *desk.Block
	err := s.tx(ctx, func(tx *sql.Tx) error {
		x, err := s.getExecution(ctx, tx, r.ExecutionID, s.d.ForUpdate)
		if err != nil {
			return err
		}
		if !desk.PhaseActive(x.Phase) || (r.Owner != "" && x.Owner != r.Owner) {
			out = x
			return desk.Errorf(desk.ECONFLICT, "execution %s is %s (owner %s); stale settle ignored", x.ID, x.Phase, x.Owner)
		}
		now := r.Now
		x.Phase, x.Reason, x.FinishedAt = r.Phase, r.Reason, &now
		if _, err := s.exec(ctx, tx, `UPDATE executions SET phase = ?, reason = ?, finished_at = ? WHERE id = ?`,
			x.Phase, x.Reason, micros(now), x.ID); err != nil {
			return err
		}
		q, err := scanQueueItem(s.queryRow(ctx, tx, `SELECT `+queueCols+` FROM queue_items WHERE id = ?`+s.d.ForUpdate, x.QueueItemID))
		if err != nil {
			return err
		}
		qtyp := "queue." + r.ItemStatus
		if r.Requeue {
			// Back to the very front: it never started, so running it next
			// is running it for the first time.
			var front int64
			if err := s.queryRow(ctx, tx, `SELECT COALESCE(MIN(position), 1) - 1 FROM queue_items WHERE surface_id = ? AND status = 'queued'`,
				q.SurfaceID).Scan(&front); err != nil {
				return err
			}
			q.Status, q.Priority, q.Position, q.ClaimedBy, q.LeaseExpiresAt, q.ExecutionID = desk.QueueStatusQueued, desk.PrioritySteered, front, "", nil, ""
			qtyp = "queue.requeued"
		} else {
			q.Status, q.Error, q.LeaseExpiresAt = r.ItemStatus, r.ItemError, nil
		}
		q.UpdatedAt = now
		if _, err := s.exec(ctx, tx, `UPDATE queue_items SET status = ?, priority = ?, position = ?, claimed_by = ?, lease_expires_at = 0,
			execution_id = ?, error = ?, updated_at = ? WHERE id = ?`,
			q.Status, q.Priority, q.Position, q.ClaimedBy, q.ExecutionID, q.Error, micros(now), q.ID); err != nil {
			return err
		}
		evs := []event{executionEvent("execution."+x.Phase, x), queueEvent(qtyp, q)}
		// Consecutive failures decide the execution-fault block; a success
		// resets the count and an interruption leaves it as it was.
		switch x.Phase {
		case desk.PhaseEnded:
			_, err = s.exec(ctx, tx, `UPDATE surfaces SET consecutive_failures = 0, last_activity = ? WHERE id = ?`, micros(now), x.SurfaceID)
		case desk.PhaseFailed:
			var n int
			if err = s.queryRow(ctx, tx, `UPDATE surfaces SET consecutive_failures = consecutive_failures + 1, last_activity = ? WHERE id = ?
				RETURNING consecutive_failures`, micros(now), x.SurfaceID).Scan(&n); err == nil && r.FaultThreshold > 0 && n >= r.FaultThreshold {
				var active []*desk.Block
				if active, err = s.activeBlocks(ctx, tx, x.SurfaceID, now); err == nil && !hasKind(active, desk.BlockExecutionFault) {
					blk = &desk.Block{ID: desk.NewID("blk"), SurfaceID: x.SurfaceID, SessionID: x.SessionID, Kind: desk.BlockExecutionFault,
						Reason: fmt.Sprintf("%d executions in a row failed; the last: %s", n, r.Reason), CreatedAt: now, Active: true}
					if err = s.insertBlock(ctx, tx, blk); err == nil {
						evs = append(evs, blockEvent("block.created", blk, x.WorkspaceID))
					}
				}
			}
		default:
			_, err = s.exec(ctx, tx, `UPDATE surfaces SET last_activity = ? WHERE id = ?`, micros(now), x.SurfaceID)
		}
		if err != nil {
			return err
		}
		out = x
		// The webhook outbox commits with the settle: a turn that is over
		// always has its deliveries (a requeued one is not over).
		if !r.Requeue {
			if err := s.enqueueWebhooks(ctx, tx, x.WorkspaceID, "", "execution."+x.Phase, now, executionWebhookData(x)); err != nil {
				return err
			}
		}
		return s.emit(ctx, tx, now, evs...)
	})
	if err != nil && desk.IsCode(err, desk.ECONFLICT) {
		return out, nil, err
	}
	return out, blk, err
}

func hasKind(bs []*desk.Block, kind string) bool {
	for _, b := range bs {
		if b.Kind == kind {
			return true
		}
	}
	return false
}

// ---- blocks ----

const blockCols = `id, surface_id, session_id, kind, reason, created_at, expires_at, released_at, released_by, budget, used`

func scanBlock(now time.Time) func(r interface{ Scan(...any) error }) (*desk.Block, error) {
	return func(r interface{ Scan(...any) error }) (*desk.Block, error) {
		var b desk.Block
		var c, exp, rel int64
		if err := r.Scan(&b.ID, &b.SurfaceID, &b.SessionID, &b.Kind, &b.Reason, &c, &exp, &rel, &b.ReleasedBy, &b.Budget, &b.Used); err != nil {
			return nil, err
		}
		b.CreatedAt, b.ExpiresAt, b.ReleasedAt = fromMicros(c), optPtr(exp), optPtr(rel)
		b.Active = b.ReleasedAt == nil && (b.ExpiresAt == nil || b.ExpiresAt.After(now))
		return &b, nil
	}
}

func blockEvent(typ string, b *desk.Block, ws string) event {
	return event{typ: typ, workspace: ws, session: b.SessionID, surface: b.SurfaceID, data: b}
}

func (s *DB) insertBlock(ctx context.Context, tx *sql.Tx, b *desk.Block) error {
	var exp int64
	if b.ExpiresAt != nil {
		exp = micros(*b.ExpiresAt)
	}
	_, err := s.exec(ctx, tx, `INSERT INTO blocks (id, surface_id, session_id, kind, reason, created_at, expires_at, budget, used) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.SurfaceID, b.SessionID, b.Kind, b.Reason, micros(b.CreatedAt), exp, b.Budget, b.Used)
	return err
}

func (s *DB) activeBlocks(ctx context.Context, x querier, surfaceID string, now time.Time) ([]*desk.Block, error) {
	rows, err := s.query(ctx, x, `SELECT `+blockCols+` FROM blocks WHERE surface_id = ? AND released_at = 0 AND (expires_at = 0 OR expires_at > ?)
		ORDER BY created_at`, surfaceID, micros(now))
	if err != nil {
		return nil, err
	}
	return collect(rows, scanBlock(now))
}

// releaseBlocks releases the surface's active blocks of one kind.
func (s *DB) releaseBlocks(ctx context.Context, tx *sql.Tx, surfaceID, kind, by string, now time.Time) ([]*desk.Block, error) {
	bs, err := s.activeBlocks(ctx, tx, surfaceID, now)
	if err != nil {
		return nil, err
	}
	var out []*desk.Block
	for _, b := range bs {
		if b.Kind != kind {
			continue
		}
		if _, err := s.exec(ctx, tx, `UPDATE blocks SET released_at = ?, released_by = ? WHERE id = ?`, micros(now), by, b.ID); err != nil {
			return nil, err
		}
		b.ReleasedAt, b.ReleasedBy, b.Active = &now, by, false
		out = append(out, b)
	}
	return out, nil
}

func (s *DB) ListBlocks(ctx context.Context, sessionID string, now time.Time) ([]*desk.Block, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+blockCols+` FROM blocks WHERE session_id = ? ORDER BY created_at DESC, id DESC LIMIT 200`, sessionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanBlock(now))
}

func (s *DB) GetBlock(ctx context.Context, id string, now time.Time) (*desk.Block, error) {
	b, err := scanBlock(now)(s.queryRow(ctx, s.db, `SELECT `+blockCols+` FROM blocks WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "block", id)
	}
	return b, nil
}

func (s *DB) ReleaseBlock(ctx context.Context, id, by string, now time.Time) (*desk.Block, error) {
	var out *desk.Block
	err := s.tx(ctx, func(tx *sql.Tx) error {
		b, err := scanBlock(now)(s.queryRow(ctx, tx, `SELECT `+blockCols+` FROM blocks WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return notFound(err, "block", id)
		}
		out = b
		if !b.Active {
			return nil
		}
		if _, err := s.exec(ctx, tx, `UPDATE blocks SET released_at = ?, released_by = ? WHERE id = ?`, micros(now), by, id); err != nil {
			return err
		}
		// Releasing starts nothing: the surface holds its queue until the
		// next submit or an explicit resume.
		if _, err := s.exec(ctx, tx, `UPDATE surfaces SET held = ?, consecutive_failures = 0 WHERE id = ?`, true, b.SurfaceID); err != nil {
			return err
		}
		b.ReleasedAt, b.ReleasedBy, b.Active = &now, by, false
		var ws string
		if err := s.queryRow(ctx, tx, `SELECT workspace_id FROM surfaces WHERE id = ?`, b.SurfaceID).Scan(&ws); err != nil {
			return err
		}
		return s.emit(ctx, tx, now, blockEvent("block.released", b, ws))
	})
	return out, err
}

// ---- owners ----

func (s *DB) RegisterOwner(ctx context.Context, o *desk.Owner) error {
	_, err := s.exec(ctx, s.db, `INSERT INTO owners (id, host, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?, ?)`,
		o.ID, o.Host, o.PID, micros(o.StartedAt), micros(o.HeartbeatAt))
	return s.conflict(err, "owner "+o.ID+" already registered")
}

func (s *DB) HeartbeatOwner(ctx context.Context, id string, at time.Time) error {
	res, err := s.exec(ctx, s.db, `UPDATE owners SET heartbeat_at = ? WHERE id = ?`, micros(at), id)
	if err != nil {
		return err
	}
	return affected(res, "owner", id)
}

func (s *DB) StopOwner(ctx context.Context, id string, at time.Time) error {
	_, err := s.exec(ctx, s.db, `UPDATE owners SET stopped_at = ? WHERE id = ?`, micros(at), id)
	return err
}

func (s *DB) ListOwners(ctx context.Context) ([]*desk.Owner, error) {
	rows, err := s.query(ctx, s.db, `SELECT id, host, pid, started_at, heartbeat_at, stopped_at FROM owners ORDER BY started_at`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r interface{ Scan(...any) error }) (*desk.Owner, error) {
		var o desk.Owner
		var st, hb, sp int64
		if err := r.Scan(&o.ID, &o.Host, &o.PID, &st, &hb, &sp); err != nil {
			return nil, err
		}
		o.StartedAt, o.HeartbeatAt, o.StoppedAt = fromMicros(st), fromMicros(hb), optTime(sp)
		return &o, nil
	})
}
