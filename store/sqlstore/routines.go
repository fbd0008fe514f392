package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/desk-runtime/desk"
)

const routineCols = `id, workspace_id, name, schedule, time_zone, session_id, title_template, model, runtime,
	prompt, overlap, enabled, actor, next_run_at, created_at, updated_at`

func scanRoutine(sc interface{ Scan(...any) error }) (*desk.Routine, error) {
	r := &desk.Routine{}
	var next, created, updated int64
	if err := sc.Scan(&r.ID, &r.WorkspaceID, &r.Name, &r.Schedule, &r.TimeZone, &r.SessionID, &r.TitleTemplate,
		&r.Model, &r.Runtime, &r.Prompt, &r.Overlap, &r.Enabled, &r.Actor, &next, &created, &updated); err != nil {
		return nil, err
	}
	r.NextRunAt, r.CreatedAt, r.UpdatedAt = fromMicros(next), fromMicros(created), fromMicros(updated)
	return r, nil
}

func (s *DB) CreateRoutine(ctx context.Context, r *desk.Routine) error {
	_, err := s.exec(ctx, s.db, `INSERT INTO routines (`+routineCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.WorkspaceID, r.Name, r.Schedule, r.TimeZone, r.SessionID, r.TitleTemplate, r.Model, r.Runtime,
		r.Prompt, r.Overlap, r.Enabled, r.Actor, micros(r.NextRunAt), micros(r.CreatedAt), micros(r.UpdatedAt))
	return s.conflict(err, "routine exists")
}

func (s *DB) GetRoutine(ctx context.Context, id string) (*desk.Routine, error) {
	r, err := scanRoutine(s.queryRow(ctx, s.db, `SELECT `+routineCols+` FROM routines WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, desk.Errorf(desk.ENOTFOUND, "routine %s not found", id)
	}
	return r, err
}

func (s *DB) listRoutines(ctx context.Context, where string, args ...any) ([]*desk.Routine, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+routineCols+` FROM routines WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.Routine
	for rows.Next() {
		r, err := scanRoutine(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *DB) ListRoutines(ctx context.Context, workspaceID string) ([]*desk.Routine, error) {
	return s.listRoutines(ctx, `workspace_id = ?`, workspaceID)
}

func (s *DB) DueRoutines(ctx context.Context, now time.Time) ([]*desk.Routine, error) {
	return s.listRoutines(ctx, `enabled = ? AND next_run_at <= ?`, true, micros(now))
}

func (s *DB) UpdateRoutine(ctx context.Context, r *desk.Routine) error {
	res, err := s.exec(ctx, s.db, `UPDATE routines SET name = ?, schedule = ?, time_zone = ?, title_template = ?, prompt = ?,
		overlap = ?, enabled = ?, next_run_at = ?, updated_at = ? WHERE id = ?`,
		r.Name, r.Schedule, r.TimeZone, r.TitleTemplate, r.Prompt, r.Overlap, r.Enabled, micros(r.NextRunAt), micros(r.UpdatedAt), r.ID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = desk.Errorf(desk.ENOTFOUND, "routine %s not found", r.ID)
		}
		return err
	}
	return nil
}

func (s *DB) DeleteRoutine(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `DELETE FROM routine_runs WHERE routine_id = ?`, id); err != nil {
			return err
		}
		_, err := s.exec(ctx, tx, `DELETE FROM routines WHERE id = ?`, id)
		return err
	})
}

func (s *DB) ClaimRoutineRun(ctx context.Context, routineID string, expectNext *time.Time, next time.Time, run *desk.RoutineRun) (bool, error) {
	claimed := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		claimed = false
		// The conditional UPDATE is the claim: on Postgres the row lock
		// makes a second node's UPDATE wait and then match nothing, on
		// SQLite writers are serialised anyway.
		var res sql.Result
		var err error
		if expectNext != nil {
			res, err = s.exec(ctx, tx, `UPDATE routines SET next_run_at = ? WHERE id = ? AND next_run_at = ?`,
				micros(next), routineID, micros(*expectNext))
		} else {
			res, err = s.exec(ctx, tx, `UPDATE routines SET next_run_at = next_run_at WHERE id = ?`, routineID)
		}
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO routine_runs (id, routine_id, workspace_id, trigger_kind, scheduled_for, status,
			session_id, queue_item_id, execution_id, error, started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			run.ID, run.RoutineID, run.WorkspaceID, run.Trigger, micros(run.ScheduledFor), run.Status, run.SessionID,
			run.QueueItemID, run.ExecutionID, run.Error, micros(run.StartedAt), finishedMicros(run.FinishedAt)); err != nil {
			return err
		}
		claimed = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return claimed, nil
}

func finishedMicros(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return micros(*t)
}

func (s *DB) UpdateRoutineRun(ctx context.Context, run *desk.RoutineRun, fromStatus string, fromExecution *string) (bool, error) {
	q := `UPDATE routine_runs SET status = ?, session_id = ?, queue_item_id = ?, execution_id = ?,
		error = ?, finished_at = ? WHERE id = ? AND status = ?`
	args := []any{run.Status, run.SessionID, run.QueueItemID, run.ExecutionID, run.Error, finishedMicros(run.FinishedAt), run.ID, fromStatus}
	if fromExecution != nil {
		q, args = q+` AND execution_id = ?`, append(args, *fromExecution)
	}
	applied := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		applied = false
		res, err := s.exec(ctx, tx, q, args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil || n == 0 {
			return err
		}
		applied = true
		// A run's final status commits with its routine.finished webhook
		// deliveries (a skipped run never started, so it finished nothing).
		switch run.Status {
		case desk.RoutineRunSucceeded, desk.RoutineRunFailed, desk.RoutineRunCancelled:
			now := time.Now()
			if run.FinishedAt != nil {
				now = *run.FinishedAt
			}
			return s.enqueueWebhooks(ctx, tx, run.WorkspaceID, run.RoutineID, desk.WebhookRoutineFinished, now, desk.WebhookRoutineData{
				WorkspaceID: run.WorkspaceID, RoutineID: run.RoutineID, RunID: run.ID, Status: run.Status,
				SessionID: run.SessionID, ExecutionID: run.ExecutionID, Error: run.Error})
		}
		return nil
	})
	return applied, err
}

const routineRunCols = `id, routine_id, workspace_id, trigger_kind, scheduled_for, status, session_id, queue_item_id,
	execution_id, error, started_at, finished_at`

func scanRoutineRun(sc interface{ Scan(...any) error }) (*desk.RoutineRun, error) {
	r := &desk.RoutineRun{}
	var sched, started, finished int64
	if err := sc.Scan(&r.ID, &r.RoutineID, &r.WorkspaceID, &r.Trigger, &sched, &r.Status, &r.SessionID, &r.QueueItemID,
		&r.ExecutionID, &r.Error, &started, &finished); err != nil {
		return nil, err
	}
	r.ScheduledFor, r.StartedAt = fromMicros(sched), fromMicros(started)
	if finished != 0 {
		f := fromMicros(finished)
		r.FinishedAt = &f
	}
	return r, nil
}

func (s *DB) GetRoutineRun(ctx context.Context, id string) (*desk.RoutineRun, error) {
	r, err := scanRoutineRun(s.queryRow(ctx, s.db, `SELECT `+routineRunCols+` FROM routine_runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, desk.Errorf(desk.ENOTFOUND, "routine run %s not found", id)
	}
	return r, err
}

func (s *DB) listRoutineRuns(ctx context.Context, q string, args ...any) ([]*desk.RoutineRun, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+routineRunCols+` FROM routine_runs WHERE `+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.RoutineRun
	for rows.Next() {
		r, err := scanRoutineRun(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *DB) ListRoutineRuns(ctx context.Context, routineID, status string, limit int) ([]*desk.RoutineRun, error) {
	if limit <= 0 {
		limit = 100
	}
	if status == "" {
		return s.listRoutineRuns(ctx, `routine_id = ? ORDER BY id DESC LIMIT ?`, routineID, limit)
	}
	return s.listRoutineRuns(ctx, `routine_id = ? AND status = ? ORDER BY id DESC LIMIT ?`, routineID, status, limit)
}

func (s *DB) RunningRoutineRuns(ctx context.Context) ([]*desk.RoutineRun, error) {
	return s.listRoutineRuns(ctx, `status = ? ORDER BY id`, desk.RoutineRunRunning)
}
