package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
)

const dispatchCols = `id, created_at, caller, caller_workspace_id, caller_session_id, target, target_session_id,
	target_workspace_id, subject, text, reply, reply_surface_id, status, queue_item_id, execution_id, reply_item_id,
	reply_text, error, settled_at`

func scanDispatch(sc interface{ Scan(...any) error }) (*desk.Dispatch, error) {
	d := &desk.Dispatch{}
	var created, settled int64
	var caller, target, cws, cses string
	if err := sc.Scan(&d.ID, &created, &caller, &cws, &cses, &target, &d.TargetSessionID, &d.TargetWorkspaceID,
		&d.Subject, &d.Text, &d.Reply, &d.ReplySurfaceID, &d.Status, &d.QueueItemID, &d.ExecutionID, &d.ReplyItemID,
		&d.ReplyText, &d.Error, &settled); err != nil {
		return nil, err
	}
	d.CreatedAt = fromMicros(created)
	if settled != 0 {
		t := fromMicros(settled)
		d.SettledAt = &t
	}
	o, err := decodeOrigin(caller)
	if err != nil {
		return nil, err
	}
	d.Caller = o
	if err := json.Unmarshal([]byte(target), &d.Target); err != nil {
		return nil, fmt.Errorf("decode dispatch target: %w", err)
	}
	return d, nil
}

func (s *DB) CreateDispatch(ctx context.Context, d *desk.Dispatch) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO dispatches (`+dispatchCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, micros(d.CreatedAt), encodeJSON(d.Caller), d.Caller.WorkspaceID, d.Caller.SessionID, encodeJSON(d.Target),
			d.TargetSessionID, d.TargetWorkspaceID, d.Subject, d.Text, d.Reply, d.ReplySurfaceID, d.Status, d.QueueItemID,
			d.ExecutionID, d.ReplyItemID, d.ReplyText, d.Error, 0); err != nil {
			return s.conflict(err, "dispatch "+d.ID+" already exists")
		}
		return s.emit(ctx, tx, d.CreatedAt, event{typ: "dispatch.created", workspace: d.TargetWorkspaceID, session: d.TargetSessionID, data: d})
	})
}

func (s *DB) GetDispatch(ctx context.Context, id string) (*desk.Dispatch, error) {
	d, err := scanDispatch(s.queryRow(ctx, s.db, `SELECT `+dispatchCols+` FROM dispatches WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, desk.Errorf(desk.ENOTFOUND, "dispatch %s not found", id)
	}
	return d, err
}

func (s *DB) listDispatches(ctx context.Context, q string, args ...any) ([]*desk.Dispatch, error) {
	rows, err := s.query(ctx, s.db, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.Dispatch
	for rows.Next() {
		d, err := scanDispatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (s *DB) ListDispatches(ctx context.Context, f desk.DispatchFilter) ([]*desk.Dispatch, error) {
	var where []string
	var args []any
	if f.SessionID != "" {
		where = append(where, `(caller_session_id = ? OR target_session_id = ?)`)
		args = append(args, f.SessionID, f.SessionID)
	}
	if f.WorkspaceID != "" {
		where = append(where, `(caller_workspace_id = ? OR target_workspace_id = ?)`)
		args = append(args, f.WorkspaceID, f.WorkspaceID)
	}
	q := `SELECT ` + dispatchCols + ` FROM dispatches`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	return s.listDispatches(ctx, q, append(args, limit)...)
}

func (s *DB) OpenDispatches(ctx context.Context, limit int) ([]*desk.Dispatch, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.listDispatches(ctx, `SELECT `+dispatchCols+` FROM dispatches WHERE status IN (?, ?) ORDER BY created_at, id LIMIT ?`,
		desk.DispatchPending, desk.DispatchDispatched, limit)
}

func (s *DB) MarkDispatched(ctx context.Context, id, sessionID, workspaceID, queueItemID string) (bool, error) {
	res, err := s.exec(ctx, s.db, `UPDATE dispatches SET status = ?, target_session_id = ?, target_workspace_id = ?, queue_item_id = ?
		WHERE id = ? AND status = ?`,
		desk.DispatchDispatched, sessionID, workspaceID, queueItemID, id, desk.DispatchPending)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *DB) DeletePendingDispatch(ctx context.Context, id string) error {
	_, err := s.exec(ctx, s.db, `DELETE FROM dispatches WHERE id = ? AND status = ?`, id, desk.DispatchPending)
	return err
}

func (s *DB) SettleDispatch(ctx context.Context, d *desk.Dispatch, reply *desk.QueueItem) (bool, error) {
	won := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		won = false
		settled := int64(0)
		if d.SettledAt != nil {
			settled = micros(*d.SettledAt)
		}
		res, err := s.exec(ctx, tx, `UPDATE dispatches SET status = ?, execution_id = ?, reply_item_id = ?, reply_text = ?, error = ?,
			settled_at = ? WHERE id = ? AND status IN (?, ?)`,
			d.Status, d.ExecutionID, d.ReplyItemID, d.ReplyText, d.Error, settled, d.ID, desk.DispatchPending, desk.DispatchDispatched)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		won = true
		evs := []event{{typ: "dispatch.settled", workspace: d.TargetWorkspaceID, session: d.TargetSessionID, data: d}}
		if reply != nil {
			ev, err := s.insertQueued(ctx, tx, reply)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
		}
		return s.emit(ctx, tx, desk.Now(), evs...)
	})
	if err != nil {
		won = false
	}
	return won, err
}
