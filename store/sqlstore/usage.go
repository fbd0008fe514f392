package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// ---- model usage and token budgets ----

func (s *DB) RecordUsage(ctx context.Context, u *desk.ModelUsage) error {
	if u.ID == "" {
		u.ID = desk.NewID("use")
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = desk.Now()
	}
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CachedTokens < 0 {
		return desk.Errorf(desk.EINVALID, "model usage of session %s has a negative count (%d in, %d out, %d cached)",
			u.SessionID, u.InputTokens, u.OutputTokens, u.CachedTokens)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO model_usage (id, workspace_id, session_id, surface_id, execution_id, actor_id, purpose, model,
			input_tokens, output_tokens, cached_tokens, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			u.ID, u.WorkspaceID, u.SessionID, u.SurfaceID, u.ExecutionID, u.ActorID, u.Purpose, u.Model,
			u.InputTokens, u.OutputTokens, u.CachedTokens, micros(u.CreatedAt))
		return s.conflict(err, "model usage "+u.ID+" already recorded")
	})
}

func (s *DB) SumUsage(ctx context.Context, f desk.UsageFilter) (*desk.UsageSum, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, v string }{{"workspace_id", f.WorkspaceID}, {"session_id", f.SessionID},
		{"execution_id", f.ExecutionID}, {"actor_id", f.ActorID}} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	q := `SELECT model, COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cached_tokens), 0)
		FROM model_usage`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	rows, err := s.query(ctx, s.db, q+` GROUP BY model ORDER BY model`, args...)
	if err != nil {
		return nil, err
	}
	models, err := collect(rows, func(r interface{ Scan(...any) error }) (*desk.ModelTotals, error) {
		var m desk.ModelTotals
		if err := r.Scan(&m.Model, &m.Calls, &m.InputTokens, &m.OutputTokens, &m.CachedTokens); err != nil {
			return nil, err
		}
		m.TotalTokens = m.InputTokens + m.OutputTokens
		return &m, nil
	})
	if err != nil {
		return nil, err
	}
	out := &desk.UsageSum{Models: []desk.ModelTotals{}}
	for _, m := range models {
		out.Models = append(out.Models, *m)
		t := &out.Total
		t.Calls += m.Calls
		t.InputTokens += m.InputTokens
		t.OutputTokens += m.OutputTokens
		t.CachedTokens += m.CachedTokens
		t.TotalTokens += m.TotalTokens
	}
	return out, nil
}

const usageCols = `id, workspace_id, session_id, surface_id, execution_id, actor_id, purpose, model, input_tokens, output_tokens, cached_tokens, created_at`

func (s *DB) LastTurnUsage(ctx context.Context, surfaceID string) (*desk.ModelUsage, error) {
	var u desk.ModelUsage
	var c int64
	err := s.queryRow(ctx, s.db, `SELECT `+usageCols+` FROM model_usage WHERE surface_id = ? AND purpose = ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, surfaceID, desk.UsageTurn).Scan(&u.ID, &u.WorkspaceID, &u.SessionID, &u.SurfaceID,
		&u.ExecutionID, &u.ActorID, &u.Purpose, &u.Model, &u.InputTokens, &u.OutputTokens, &u.CachedTokens, &c)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	u.CreatedAt = fromMicros(c)
	return &u, nil
}

// workspaceTokens is the workspace's usage a budget is compared with.
func (s *DB) workspaceTokens(ctx context.Context, x querier, ws string) (int64, error) {
	var n int64
	err := s.queryRow(ctx, x, `SELECT COALESCE(SUM(input_tokens + output_tokens), 0) FROM model_usage WHERE workspace_id = ?`, ws).Scan(&n)
	return n, err
}

// budgetAdmits decides a claim's budget admission in its transaction.
// Over budget (a budget is set and the workspace's usage is at or past it)
// the surface gets a budget block naming both figures, unless it has one,
// and nothing is admitted. Under it, a budget block left from before (a
// budget raised by another process between two claims) is released.
func (s *DB) budgetAdmits(ctx context.Context, tx *sql.Tx, srf *desk.Surface, budget int64, active []*desk.Block, now time.Time) (bool, []event, error) {
	var used int64
	if budget > 0 {
		var err error
		if used, err = s.workspaceTokens(ctx, tx, srf.WorkspaceID); err != nil {
			return false, nil, err
		}
	}
	if budget > 0 && used >= budget {
		if hasKind(active, desk.BlockBudget) {
			return false, nil, nil
		}
		b := &desk.Block{ID: desk.NewID("blk"), SurfaceID: srf.ID, SessionID: srf.SessionID, Kind: desk.BlockBudget,
			Reason: budgetReason(srf.WorkspaceID, budget, used), CreatedAt: now, Active: true, Budget: budget, Used: used}
		if err := s.insertBlock(ctx, tx, b); err != nil {
			return false, nil, err
		}
		return false, []event{blockEvent("block.created", b, srf.WorkspaceID)}, nil
	}
	if !hasKind(active, desk.BlockBudget) {
		return true, nil, nil
	}
	rel, err := s.releaseBlocks(ctx, tx, srf.ID, desk.BlockBudget, "budget", now)
	if err != nil {
		return false, nil, err
	}
	var evs []event
	for _, b := range rel {
		evs = append(evs, blockEvent("block.released", b, srf.WorkspaceID))
	}
	return true, evs, nil
}

func budgetReason(ws string, budget, used int64) string {
	return fmt.Sprintf("workspace %s has used %d tokens of its token budget of %d; raise or clear the budget to let work start (desk workspace budget %s TOKENS, or PATCH /v1/workspaces/%s/agent {\"token_budget\": …})", ws, used, budget, ws, ws)
}

// releaseBudgetBlocks releases every active budget block of a workspace
// whose budget changed: the next claim of each surface decides again with
// the new budget, and blocks again, naming it, if the usage is still past
// it.
func (s *DB) releaseBudgetBlocks(ctx context.Context, tx *sql.Tx, ws string, now time.Time) ([]event, error) {
	rows, err := s.query(ctx, tx, `SELECT b.id, b.surface_id FROM blocks b JOIN surfaces f ON f.id = b.surface_id
		WHERE f.workspace_id = ? AND b.kind = ? AND b.released_at = 0`, ws, desk.BlockBudget)
	if err != nil {
		return nil, err
	}
	type pair struct{ id, surface string }
	ps, err := collect(rows, func(r interface{ Scan(...any) error }) (pair, error) {
		var p pair
		return p, r.Scan(&p.id, &p.surface)
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var evs []event
	for _, p := range ps {
		if seen[p.surface] {
			continue
		}
		seen[p.surface] = true
		rel, err := s.releaseBlocks(ctx, tx, p.surface, desk.BlockBudget, "budget", now)
		if err != nil {
			return nil, err
		}
		for _, b := range rel {
			evs = append(evs, blockEvent("block.released", b, ws))
		}
	}
	return evs, nil
}
