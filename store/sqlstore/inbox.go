package sqlstore

import (
	"context"

	"github.com/desk-runtime/desk"
)

// sessionScope restricts a query of session_id rows to the filter's
// sessions (all live ones for the zero filter).
func sessionScope(f desk.InboxFilter) (string, []any) {
	if f.WorkspaceID == "" && f.ActorID == "" {
		return ` AND session_id IN (SELECT id FROM sessions WHERE deleting = ?)`, []any{false}
	}
	return ` AND session_id IN (SELECT id FROM sessions WHERE deleting = ? AND workspace_id = ? AND actor_id = ?)`,
		[]any{false, f.WorkspaceID, f.ActorID}
}

func (s *DB) PendingApprovals(ctx context.Context, f desk.InboxFilter, limit int) ([]*desk.Approval, error) {
	scope, args := sessionScope(f)
	rows, err := s.query(ctx, s.db, `SELECT `+approvalCols+` FROM approvals WHERE status = ?`+scope+` ORDER BY created_at, id LIMIT ?`,
		append(append([]any{desk.ApprovalPending}, args...), limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanApproval)
}

func (s *DB) PendingInputRequests(ctx context.Context, f desk.InboxFilter, limit int) ([]*desk.InputRequest, error) {
	scope, args := sessionScope(f)
	rows, err := s.query(ctx, s.db, `SELECT `+inputCols+` FROM input_requests WHERE status = ?`+scope+` ORDER BY created_at, id LIMIT ?`,
		append(append([]any{desk.InputPending}, args...), limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanInput)
}

func (s *DB) ProposedPlans(ctx context.Context, f desk.InboxFilter, limit int) ([]*desk.Plan, error) {
	scope, args := sessionScope(f)
	rows, err := s.query(ctx, s.db, `SELECT `+planCols+` FROM plans WHERE status = ?`+scope+` ORDER BY created_at, id LIMIT ?`,
		append(append([]any{desk.PlanProposed}, args...), limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPlan)
}

func (s *DB) FailedRoutineRuns(ctx context.Context, f desk.InboxFilter, limit int) ([]*desk.RoutineRun, error) {
	q := `SELECT ` + routineRunCols + ` FROM routine_runs r WHERE status = ?
		AND id = (SELECT MAX(id) FROM routine_runs r2 WHERE r2.routine_id = r.routine_id AND r2.status IN (?, ?, ?))`
	args := []any{desk.RoutineRunFailed, desk.RoutineRunSucceeded, desk.RoutineRunFailed, desk.RoutineRunCancelled}
	if f.WorkspaceID != "" || f.ActorID != "" {
		q += ` AND routine_id IN (SELECT id FROM routines WHERE workspace_id = ? AND actor = ?)`
		args = append(args, f.WorkspaceID, f.ActorID)
	}
	rows, err := s.query(ctx, s.db, q+` ORDER BY started_at, id LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanRoutineRun)
}
