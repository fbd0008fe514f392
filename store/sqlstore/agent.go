package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// ---- transcript ----

const messageCols = `id, session_id, surface_id, execution_id, seq, role, text, tool_calls, tool_call_id, tool_name, is_error, meta, created_at, parent_id, edit_of`

func scanMessage(r interface{ Scan(...any) error }) (*desk.Message, error) {
	var m desk.Message
	var calls, meta string
	var c int64
	if err := r.Scan(&m.ID, &m.SessionID, &m.SurfaceID, &m.ExecutionID, &m.Seq, &m.Role, &m.Text, &calls,
		&m.ToolCallID, &m.ToolName, &m.IsError, &meta, &c, &m.ParentID, &m.EditOf); err != nil {
		return nil, err
	}
	if calls != "" {
		if err := json.Unmarshal([]byte(calls), &m.ToolCalls); err != nil {
			return nil, err
		}
	}
	if meta != "" {
		m.Meta = json.RawMessage(meta)
	}
	m.CreatedAt = fromMicros(c)
	return &m, nil
}

// AppendMessage assigns the message the next seq of its surface and links
// it to the surface's newest message, unless it is an edit (which keeps the
// parent it was given).
func (s *DB) AppendMessage(ctx context.Context, m *desk.Message) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var leaf string
		if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(seq), 0) + 1, COALESCE((SELECT id FROM messages WHERE surface_id = ? ORDER BY seq DESC LIMIT 1), '')
			FROM messages WHERE surface_id = ?`, m.SurfaceID, m.SurfaceID).Scan(&m.Seq, &leaf); err != nil {
			return err
		}
		if m.EditOf == "" {
			m.ParentID = leaf
		}
		calls := ""
		if len(m.ToolCalls) > 0 {
			calls = encodeJSON(m.ToolCalls)
		}
		_, err := s.exec(ctx, tx, `INSERT INTO messages (`+messageCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			m.ID, m.SessionID, m.SurfaceID, m.ExecutionID, m.Seq, m.Role, m.Text, calls, m.ToolCallID, m.ToolName, m.IsError,
			string(m.Meta), micros(m.CreatedAt), m.ParentID, m.EditOf)
		return err
	})
}

// activeBranch walks the path from a surface's newest message back
// towards its root, newest first, and stops once it has passed limit
// messages older than before: a page of the transcript costs its own
// length, not the whole branch's (the walk went to the root on every
// page, at every model step). Arguments, in order: before, surface,
// before, limit. A message with no parent that is neither its surface's
// first nor an edit (a row imported from an export made before the
// transcript was a tree) follows the message before it. n counts the
// walked messages older than before; seqs fall along the walk, so the
// first limit of them are the page.
const activeBranch = `WITH RECURSIVE branch(id, parent_id, edit_of, surface_id, seq, n) AS (
		SELECT id, parent_id, edit_of, surface_id, seq, CASE WHEN seq < ? THEN 1 ELSE 0 END FROM messages
		WHERE id = (SELECT id FROM messages WHERE surface_id = ? ORDER BY seq DESC LIMIT 1)
		UNION ALL
		SELECT m.id, m.parent_id, m.edit_of, m.surface_id, m.seq, b.n + CASE WHEN m.seq < ? THEN 1 ELSE 0 END FROM messages m JOIN branch b
		ON m.id = b.parent_id OR (b.parent_id = '' AND b.edit_of = '' AND m.surface_id = b.surface_id AND m.seq = b.seq - 1)
		WHERE b.n < ?
	)`

// ListMessages returns up to limit messages of the active branch before
// beforeSeq (0: the newest), oldest first. Seqs grow along a branch, so a
// page boundary on the branch is a seq.
func (s *DB) ListMessages(ctx context.Context, surfaceID string, beforeSeq int64, limit int) ([]*desk.Message, error) {
	if limit <= 0 {
		limit = 100000
	}
	if beforeSeq <= 0 {
		beforeSeq = 1 << 62
	}
	rows, err := s.query(ctx, s.db, activeBranch+` SELECT `+messageCols+` FROM messages WHERE id IN (SELECT id FROM branch WHERE seq < ?) ORDER BY seq DESC LIMIT ?`,
		beforeSeq, surfaceID, beforeSeq, limit, beforeSeq, limit)
	if err != nil {
		return nil, err
	}
	ms, err := collect(rows, scanMessage)
	if err != nil {
		return nil, err
	}
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	return ms, nil
}

// ListMessageTree returns every message of a surface, all branches, by seq.
func (s *DB) ListMessageTree(ctx context.Context, surfaceID string) ([]*desk.Message, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+messageCols+` FROM messages WHERE surface_id = ? ORDER BY seq`, surfaceID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanMessage)
}

// GetMessage reads one message.
func (s *DB) GetMessage(ctx context.Context, id string) (*desk.Message, error) {
	m, err := scanMessage(s.queryRow(ctx, s.db, `SELECT `+messageCols+` FROM messages WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, desk.Errorf(desk.ENOTFOUND, "message %s not found", id)
	}
	return m, err
}

func (s *DB) CountMessages(ctx context.Context, surfaceID string) (int, error) {
	var n int
	err := s.queryRow(ctx, s.db, `SELECT COUNT(*) FROM messages WHERE surface_id = ?`, surfaceID).Scan(&n)
	return n, err
}

// ---- commands ----

const commandCols = `id, execution_id, session_id, surface_id, call_id, tool, arguments, status, started_at, finished_at, output, facts, artifacts, error, created_at, result`

func scanCommand(r interface{ Scan(...any) error }) (*desk.Command, error) {
	var c desk.Command
	var args, facts, arts, result string
	var st, fin, cr int64
	if err := r.Scan(&c.ID, &c.ExecutionID, &c.SessionID, &c.SurfaceID, &c.CallID, &c.Tool, &args, &c.Status, &st, &fin,
		&c.Output, &facts, &arts, &c.Error, &cr, &result); err != nil {
		return nil, err
	}
	if result != "" {
		c.Result = new(desk.CommandResult)
		if err := json.Unmarshal([]byte(result), c.Result); err != nil {
			return nil, fmt.Errorf("decode command result: %w", err)
		}
	}
	c.Arguments = json.RawMessage(args)
	if facts != "" {
		c.Facts = json.RawMessage(facts)
	}
	if arts != "" {
		if err := json.Unmarshal([]byte(arts), &c.Artifacts); err != nil {
			return nil, err
		}
	}
	c.StartedAt, c.FinishedAt, c.CreatedAt = optPtr(st), optPtr(fin), fromMicros(cr)
	return &c, nil
}

func commandEvent(typ string, c *desk.Command) event {
	return event{typ: typ, session: c.SessionID, surface: c.SurfaceID, execute: c.ExecutionID, data: c}
}

func ptrMicros(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return micros(*t)
}

func (s *DB) CreateCommand(ctx context.Context, c *desk.Command) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO commands (`+commandCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.ExecutionID, c.SessionID, c.SurfaceID, c.CallID, c.Tool, string(c.Arguments), c.Status,
			ptrMicros(c.StartedAt), ptrMicros(c.FinishedAt), c.Output, string(c.Facts), artifactsJSON(c.Artifacts), c.Error, micros(c.CreatedAt),
			resultJSON(c.Result)); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, c.SessionID, commandEvent("command."+c.Status, c))
	})
}

func resultJSON(r *desk.CommandResult) string {
	if r == nil {
		return ""
	}
	return encodeJSON(r)
}

func artifactsJSON(a []string) string {
	if len(a) == 0 {
		return ""
	}
	return encodeJSON(a)
}

func (s *DB) UpdateCommand(ctx context.Context, c *desk.Command) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE commands SET arguments = ?, status = ?, started_at = ?, finished_at = ?, output = ?, facts = ?, artifacts = ?, error = ?,
			result = ? WHERE id = ?`, string(c.Arguments), c.Status, ptrMicros(c.StartedAt), ptrMicros(c.FinishedAt), c.Output, string(c.Facts), artifactsJSON(c.Artifacts), c.Error,
			resultJSON(c.Result), c.ID)
		if err != nil {
			return err
		}
		if err := affected(res, "command", c.ID); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, c.SessionID, commandEvent("command."+c.Status, c))
	})
}

func (s *DB) ListCommands(ctx context.Context, executionIDs []string) ([]*desk.Command, error) {
	if len(executionIDs) == 0 {
		return nil, nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(executionIDs)), ", ")
	args := make([]any, len(executionIDs))
	for i, id := range executionIDs {
		args[i] = id
	}
	rows, err := s.query(ctx, s.db, `SELECT `+commandCols+` FROM commands WHERE execution_id IN (`+marks+`) ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanCommand)
}

// emitIn writes an event whose workspace is looked up from its session.
func (s *DB) emitIn(ctx context.Context, tx *sql.Tx, sessionID string, e event) error {
	if e.workspace == "" {
		if err := s.queryRow(ctx, tx, `SELECT COALESCE((SELECT workspace_id FROM sessions WHERE id = ?), '')`, sessionID).Scan(&e.workspace); err != nil {
			return err
		}
	}
	return s.emit(ctx, tx, desk.Now(), e)
}

// ---- approvals ----

const approvalCols = `id, session_id, execution_id, command_id, tool, summary, status, decided_by, reason, created_at, decided_at, request, option_id`

func scanApproval(r interface{ Scan(...any) error }) (*desk.Approval, error) {
	var a desk.Approval
	var c, d int64
	var req string
	if err := r.Scan(&a.ID, &a.SessionID, &a.ExecutionID, &a.CommandID, &a.Tool, &a.Summary, &a.Status, &a.DecidedBy, &a.Reason, &c, &d, &req, &a.OptionID); err != nil {
		return nil, err
	}
	if req != "" {
		if err := json.Unmarshal([]byte(req), &a.ApprovalRequest); err != nil {
			return nil, fmt.Errorf("approval %s: request: %w", a.ID, err)
		}
	}
	a.CreatedAt, a.DecidedAt = fromMicros(c), optPtr(d)
	return &a, nil
}

func (s *DB) CreateApproval(ctx context.Context, a *desk.Approval) error {
	req, err := json.Marshal(a.ApprovalRequest)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO approvals (`+approvalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.SessionID, a.ExecutionID, a.CommandID, a.Tool, a.Summary, a.Status, a.DecidedBy, a.Reason, micros(a.CreatedAt), ptrMicros(a.DecidedAt), string(req), a.OptionID); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, a.SessionID, event{typ: "approval.requested", session: a.SessionID, execute: a.ExecutionID, data: a})
	})
}

func (s *DB) DecideApproval(ctx context.Context, id, status, optionID, by, reason string, at time.Time) (*desk.Approval, error) {
	var out *desk.Approval
	err := s.tx(ctx, func(tx *sql.Tx) error {
		a, err := scanApproval(s.queryRow(ctx, tx, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return notFound(err, "approval", id)
		}
		if a.Status != desk.ApprovalPending {
			out = a
			return desk.Errorf(desk.ECONFLICT, "approval %s is already %s", id, a.Status)
		}
		a.Status, a.OptionID, a.DecidedBy, a.Reason, a.DecidedAt = status, optionID, by, reason, &at
		if _, err := s.exec(ctx, tx, `UPDATE approvals SET status = ?, option_id = ?, decided_by = ?, reason = ?, decided_at = ? WHERE id = ?`,
			status, optionID, by, reason, micros(at), id); err != nil {
			return err
		}
		out = a
		return s.emitIn(ctx, tx, a.SessionID, event{typ: "approval.resolved", session: a.SessionID, execute: a.ExecutionID, data: a})
	})
	return out, err
}

func (s *DB) GetApproval(ctx context.Context, id string) (*desk.Approval, error) {
	a, err := scanApproval(s.queryRow(ctx, s.db, `SELECT `+approvalCols+` FROM approvals WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "approval", id)
	}
	return a, nil
}

func (s *DB) ListApprovals(ctx context.Context, sessionID string, pendingOnly bool) ([]*desk.Approval, error) {
	q := `SELECT ` + approvalCols + ` FROM approvals WHERE session_id = ?`
	args := []any{sessionID}
	if pendingOnly {
		q += ` AND status = ?`
		args = append(args, desk.ApprovalPending)
	}
	rows, err := s.query(ctx, s.db, q+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanApproval)
}

// ---- input requests ----

const inputCols = `id, session_id, surface_id, execution_id, command_id, questions, blocking, status, answers, created_at, answered_at, deadline`

func scanInput(r interface{ Scan(...any) error }) (*desk.InputRequest, error) {
	var x desk.InputRequest
	var qs, ans string
	var c, a, dl int64
	if err := r.Scan(&x.ID, &x.SessionID, &x.SurfaceID, &x.ExecutionID, &x.CommandID, &qs, &x.Blocking, &x.Status, &ans, &c, &a, &dl); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(qs), &x.Questions); err != nil {
		return nil, err
	}
	if ans != "" {
		if err := json.Unmarshal([]byte(ans), &x.Answers); err != nil {
			return nil, err
		}
	}
	x.CreatedAt, x.AnsweredAt, x.Deadline = fromMicros(c), optPtr(a), optPtr(dl)
	return &x, nil
}

func (s *DB) CreateInputRequest(ctx context.Context, r *desk.InputRequest) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO input_requests (`+inputCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.SessionID, r.SurfaceID, r.ExecutionID, r.CommandID, encodeJSON(r.Questions), r.Blocking, r.Status, "",
			micros(r.CreatedAt), 0, ptrMicros(r.Deadline)); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, r.SessionID, event{typ: "input.requested", session: r.SessionID, surface: r.SurfaceID, execute: r.ExecutionID, data: r})
	})
}

// AnswerInputRequest records the answers of a pending request (or its
// defaults); an answered one is ECONFLICT.
func (s *DB) AnswerInputRequest(ctx context.Context, id, status string, answers map[string]string, at time.Time) (*desk.InputRequest, error) {
	var out *desk.InputRequest
	err := s.tx(ctx, func(tx *sql.Tx) error {
		r, err := scanInput(s.queryRow(ctx, tx, `SELECT `+inputCols+` FROM input_requests WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return notFound(err, "input request", id)
		}
		out = r
		if r.Status != desk.InputPending {
			return desk.Errorf(desk.ECONFLICT, "input request %s is already %s", id, r.Status)
		}
		r.Status, r.Answers, r.AnsweredAt = status, answers, &at
		if _, err := s.exec(ctx, tx, `UPDATE input_requests SET status = ?, answers = ?, answered_at = ? WHERE id = ?`,
			status, encodeJSON(answers), micros(at), id); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, r.SessionID, event{typ: "input." + status, session: r.SessionID, surface: r.SurfaceID, execute: r.ExecutionID, data: r})
	})
	return out, err
}

func (s *DB) GetInputRequest(ctx context.Context, id string) (*desk.InputRequest, error) {
	r, err := scanInput(s.queryRow(ctx, s.db, `SELECT `+inputCols+` FROM input_requests WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "input request", id)
	}
	return r, nil
}

func (s *DB) ListInputRequests(ctx context.Context, sessionID string) ([]*desk.InputRequest, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+inputCols+` FROM input_requests WHERE session_id = ? ORDER BY created_at, id`, sessionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanInput)
}

// ---- plans ----

const planCols = `id, session_id, execution_id, command_id, card, status, notes, created_at, decided_at`

func scanPlan(r interface{ Scan(...any) error }) (*desk.Plan, error) {
	var p desk.Plan
	var card string
	var c, d int64
	if err := r.Scan(&p.ID, &p.SessionID, &p.ExecutionID, &p.CommandID, &card, &p.Status, &p.Notes, &c, &d); err != nil {
		return nil, err
	}
	p.Card, p.CreatedAt, p.DecidedAt = json.RawMessage(card), fromMicros(c), optPtr(d)
	return &p, nil
}

func (s *DB) CreatePlan(ctx context.Context, p *desk.Plan) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `INSERT INTO plans (`+planCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.SessionID, p.ExecutionID, p.CommandID, string(p.Card), p.Status, p.Notes, micros(p.CreatedAt), 0); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, p.SessionID, event{typ: "plan.proposed", session: p.SessionID, execute: p.ExecutionID, data: p})
	})
}

func (s *DB) DecidePlan(ctx context.Context, id, status, notes string, at time.Time) (*desk.Plan, error) {
	var out *desk.Plan
	err := s.tx(ctx, func(tx *sql.Tx) error {
		p, err := scanPlan(s.queryRow(ctx, tx, `SELECT `+planCols+` FROM plans WHERE id = ?`+s.d.ForUpdate, id))
		if err != nil {
			return notFound(err, "plan", id)
		}
		out = p
		if p.Status != desk.PlanProposed {
			return desk.Errorf(desk.ECONFLICT, "plan %s is already %s", id, p.Status)
		}
		p.Status, p.Notes, p.DecidedAt = status, notes, &at
		if _, err := s.exec(ctx, tx, `UPDATE plans SET status = ?, notes = ?, decided_at = ? WHERE id = ?`, status, notes, micros(at), id); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, p.SessionID, event{typ: "plan." + status, session: p.SessionID, execute: p.ExecutionID, data: p})
	})
	return out, err
}

func (s *DB) GetPlan(ctx context.Context, id string) (*desk.Plan, error) {
	p, err := scanPlan(s.queryRow(ctx, s.db, `SELECT `+planCols+` FROM plans WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "plan", id)
	}
	return p, nil
}

func (s *DB) ListPlans(ctx context.Context, executionID string) ([]*desk.Plan, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+planCols+` FROM plans WHERE execution_id = ? ORDER BY created_at, id`, executionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPlan)
}

// ---- leases ----

func (s *DB) LeaseItem(ctx context.Context, itemID, executionID string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM item_leases WHERE item_id = ? AND execution_id = ?`, itemID, executionID).Scan(&n); err != nil || n > 0 {
			return err
		}
		_, err := s.exec(ctx, tx, `INSERT INTO item_leases (item_id, execution_id) VALUES (?, ?)`, itemID, executionID)
		return err
	})
}

func (s *DB) HasLease(ctx context.Context, itemID, executionID string) (bool, error) {
	var n int
	err := s.queryRow(ctx, s.db, `SELECT COUNT(*) FROM item_leases WHERE item_id = ? AND execution_id = ?`, itemID, executionID).Scan(&n)
	return n > 0, err
}

func (s *DB) ReleaseLeases(ctx context.Context, executionID string) error {
	_, err := s.exec(ctx, s.db, `DELETE FROM item_leases WHERE execution_id = ?`, executionID)
	return err
}

// ---- session agent and workspace settings ----

func (s *DB) GetSessionAgent(ctx context.Context, sessionID string) (*desk.SessionAgent, error) {
	var a desk.SessionAgent
	var script, focus string
	err := s.queryRow(ctx, s.db, `SELECT model, script, script_cursor, title_source, focus FROM sessions WHERE id = ?`, sessionID).
		Scan(&a.Model, &script, &a.ScriptCursor, &a.TitleSource, &focus)
	if err != nil {
		return nil, notFound(err, "session", sessionID)
	}
	if script != "" {
		a.Script = json.RawMessage(script)
	}
	if focus != "" {
		a.Focus = json.RawMessage(focus)
	}
	return &a, nil
}

func (s *DB) SetSessionAgent(ctx context.Context, sessionID string, a *desk.SessionAgent) error {
	res, err := s.exec(ctx, s.db, `UPDATE sessions SET model = ?, script = ?, script_cursor = ?, title_source = ?, focus = ? WHERE id = ?`,
		a.Model, string(a.Script), a.ScriptCursor, a.TitleSource, string(a.Focus), sessionID)
	if err != nil {
		return err
	}
	return affected(res, "session", sessionID)
}

func (s *DB) NextScriptStep(ctx context.Context, sessionID string) (int, error) {
	var next int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		return s.queryRow(ctx, tx, `UPDATE sessions SET script_cursor = script_cursor + 1 WHERE id = ? RETURNING script_cursor`, sessionID).Scan(&next)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, desk.Errorf(desk.ENOTFOUND, "session %s not found", sessionID)
	}
	return next - 1, err
}

func (s *DB) SetAutoTitle(ctx context.Context, sessionID, title string) (bool, error) {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE sessions SET title = ?, updated_at = ? WHERE id = ? AND title_source = 'auto'`, title, micros(desk.Now()), sessionID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

// ---- title jobs ----

func (s *DB) BeginTitleJob(ctx context.Context, sessionID, first string, at time.Time) (int, error) {
	var n int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		err := s.queryRow(ctx, tx, `SELECT attempts FROM title_jobs WHERE session_id = ?`+s.d.ForUpdate, sessionID).Scan(&n)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			n = 1
			_, err = s.exec(ctx, tx, `INSERT INTO title_jobs (session_id, first_message, attempts, created_at) VALUES (?, ?, ?, ?)`,
				sessionID, first, n, micros(at))
			return err
		case err != nil:
			return err
		}
		n++
		_, err = s.exec(ctx, tx, `UPDATE title_jobs SET attempts = ? WHERE session_id = ?`, n, sessionID)
		return err
	})
	return n, err
}

func (s *DB) ListTitleJobs(ctx context.Context) ([]*desk.TitleJob, error) {
	rows, err := s.query(ctx, s.db, `SELECT session_id, first_message, attempts, created_at FROM title_jobs ORDER BY created_at, session_id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r interface{ Scan(...any) error }) (*desk.TitleJob, error) {
		var j desk.TitleJob
		var c int64
		if err := r.Scan(&j.SessionID, &j.FirstMessage, &j.Attempts, &c); err != nil {
			return nil, err
		}
		j.CreatedAt = fromMicros(c)
		return &j, nil
	})
}

func (s *DB) EndTitleJob(ctx context.Context, sessionID string) error {
	_, err := s.exec(ctx, s.db, `DELETE FROM title_jobs WHERE session_id = ?`, sessionID)
	return err
}

func (s *DB) GetAgentSettings(ctx context.Context, workspaceID string) (*desk.AgentSettings, error) {
	var a desk.AgentSettings
	var limits string
	err := s.queryRow(ctx, s.db, `SELECT approval_mode, network, blocking_input, token_budget, external_instructions, sandbox_limits, git_writable FROM workspaces WHERE id = ?`, workspaceID).
		Scan(&a.ApprovalMode, &a.Network, &a.BlockingInput, &a.TokenBudget, &a.ExternalInstructions, &limits, &a.GitWritable)
	if err != nil {
		return nil, notFound(err, "workspace", workspaceID)
	}
	if err := json.Unmarshal([]byte(limits), &a.Sandbox); err != nil {
		return nil, fmt.Errorf("workspace %s: sandbox_limits: %w", workspaceID, err)
	}
	return &a, nil
}

// SetAgentSettings stores the settings; a changed token budget releases
// the workspace's budget blocks in the same transaction (see
// releaseBudgetBlocks).
func (s *DB) SetAgentSettings(ctx context.Context, workspaceID string, a *desk.AgentSettings) error {
	if a.TokenBudget < 0 {
		return desk.Errorf(desk.EINVALID, "token_budget %d must not be negative (0 means no budget)", a.TokenBudget)
	}
	limits, err := json.Marshal(a.Sandbox)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		var old int64
		if err := s.queryRow(ctx, tx, `SELECT token_budget FROM workspaces WHERE id = ?`+s.d.ForUpdate, workspaceID).Scan(&old); err != nil {
			return notFound(err, "workspace", workspaceID)
		}
		if _, err := s.exec(ctx, tx, `UPDATE workspaces SET approval_mode = ?, network = ?, blocking_input = ?, token_budget = ?, external_instructions = ?, sandbox_limits = ?, git_writable = ? WHERE id = ?`,
			a.ApprovalMode, a.Network, a.BlockingInput, a.TokenBudget, a.ExternalInstructions, string(limits), a.GitWritable, workspaceID); err != nil {
			return err
		}
		if old == a.TokenBudget {
			return nil
		}
		now := desk.Now()
		evs, err := s.releaseBudgetBlocks(ctx, tx, workspaceID, now)
		if err != nil {
			return err
		}
		return s.emit(ctx, tx, now, evs...)
	})
}

// ---- loaded extensions ----

const loadedExtensionCols = `surface_id, name, session_id, path, digest, execution_id, command_id, loaded_at`

// LoadExtension inserts the surface's load of an extension, once per name.
func (s *DB) LoadExtension(ctx context.Context, e *desk.LoadedExtension) (bool, error) {
	if e.SurfaceID == "" || e.Name == "" {
		return false, desk.Errorf(desk.EINVALID, "a loaded extension needs a surface and a name")
	}
	res, err := s.exec(ctx, s.db, `INSERT INTO loaded_extensions (`+loadedExtensionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (surface_id, name) DO NOTHING`,
		e.SurfaceID, e.Name, e.SessionID, e.Path, e.Digest, e.ExecutionID, e.CommandID, micros(e.LoadedAt))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// LoadedExtensions lists a surface's loads, oldest first.
func (s *DB) LoadedExtensions(ctx context.Context, surfaceID string) ([]*desk.LoadedExtension, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+loadedExtensionCols+` FROM loaded_extensions WHERE surface_id = ? ORDER BY loaded_at, name`, surfaceID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.LoadedExtension
	for rows.Next() {
		var e desk.LoadedExtension
		var at int64
		if err := rows.Scan(&e.SurfaceID, &e.Name, &e.SessionID, &e.Path, &e.Digest, &e.ExecutionID, &e.CommandID, &at); err != nil {
			return nil, err
		}
		e.LoadedAt = fromMicros(at)
		out = append(out, &e)
	}
	return out, rows.Err()
}
