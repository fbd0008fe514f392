package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/desk-runtime/desk"
)

const threadCols = `id, session_id, workspace_id, surface_id, group_id, title, objective, state, history, worktree, command_id, created_at, updated_at`

func scanThread(r interface{ Scan(...any) error }) (*desk.Thread, error) {
	var t desk.Thread
	var c, u int64
	if err := r.Scan(&t.ID, &t.SessionID, &t.WorkspaceID, &t.SurfaceID, &t.GroupID, &t.Title, &t.Objective, &t.State, &t.History,
		&t.Worktree, &t.CommandID, &c, &u); err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt = fromMicros(c), fromMicros(u)
	return &t, nil
}

const episodeCols = `id, thread_id, session_id, workspace_id, kind, outcome, title, body, origin, command_id, execution_id, artifacts, notification_id, created_at`

func scanEpisode(r interface{ Scan(...any) error }) (*desk.Episode, error) {
	var e desk.Episode
	var origin, arts string
	var c int64
	if err := r.Scan(&e.ID, &e.ThreadID, &e.SessionID, &e.WorkspaceID, &e.Kind, &e.Outcome, &e.Title, &e.Body, &origin,
		&e.CommandID, &e.ExecutionID, &arts, &e.NotificationID, &c); err != nil {
		return nil, err
	}
	var err error
	if e.Origin, err = decodeOrigin(origin); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(arts), &e.Artifacts); err != nil {
		return nil, err
	}
	if e.Artifacts == nil {
		e.Artifacts = []string{}
	}
	e.CreatedAt = fromMicros(c)
	return &e, nil
}

func threadEvent(typ string, t *desk.Thread) event {
	return event{typ: typ, workspace: t.WorkspaceID, session: t.SessionID, surface: t.SurfaceID, data: t}
}

// insertQueued inserts a queue row at the end of its surface's queue
// inside tx (the part of Enqueue a thread write shares) and returns its
// event.
func (s *DB) insertQueued(ctx context.Context, tx *sql.Tx, it *desk.QueueItem) (event, error) {
	if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(position), 0) + 1 FROM queue_items WHERE surface_id = ?`, it.SurfaceID).Scan(&it.Position); err != nil {
		return event{}, err
	}
	it.Status, it.UpdatedAt = desk.QueueStatusQueued, it.CreatedAt
	if _, err := s.exec(ctx, tx, `INSERT INTO queue_items (id, surface_id, session_id, workspace_id, kind, status, priority, position,
		origin, text, idempotency_key, channel, conversation_id, approved, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		it.ID, it.SurfaceID, it.SessionID, it.WorkspaceID, it.Kind, it.Status, it.Priority, it.Position,
		encodeJSON(it.Origin), it.Text, it.IdempotencyKey, it.Channel, it.ConversationID, it.Approved,
		micros(it.CreatedAt), micros(it.UpdatedAt)); err != nil {
		return event{}, s.conflict(err, "idempotency key "+it.IdempotencyKey+" is already used in this session")
	}
	return queueEvent("queue.queued", it), nil
}

func (s *DB) StartThreads(ctx context.Context, g *desk.ThreadGroup, newGroup bool, starts []desk.ThreadStart) (bool, error) {
	if len(starts) == 0 {
		return false, desk.Errorf(desk.EINVALID, "no threads to start")
	}
	created := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		created = false
		if cmd := starts[0].Thread.CommandID; cmd != "" {
			var n int
			if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM threads WHERE command_id = ?`, cmd).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
		}
		if newGroup {
			if _, err := s.exec(ctx, tx, `INSERT INTO thread_groups (id, session_id, workspace_id, created_at) VALUES (?, ?, ?, ?)`,
				g.ID, g.SessionID, g.WorkspaceID, micros(g.CreatedAt)); err != nil {
				return s.conflict(err, "thread group "+g.ID+" already exists")
			}
		} else {
			var ses string
			err := s.queryRow(ctx, tx, `SELECT session_id FROM thread_groups WHERE id = ?`, g.ID).Scan(&ses)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && ses != g.SessionID) {
				return desk.Errorf(desk.ENOTFOUND, "thread group %s not found in session %s", g.ID, g.SessionID)
			}
			if err != nil {
				return err
			}
		}
		var evs []event
		for _, st := range starts {
			t, it := st.Thread, st.Item
			t.GroupID = g.ID
			if _, err := s.exec(ctx, tx, `INSERT INTO surfaces (id, session_id, workspace_id, kind, title, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				t.SurfaceID, t.SessionID, t.WorkspaceID, desk.SurfaceHandler, t.Title, micros(t.CreatedAt)); err != nil {
				return s.conflict(err, "surface "+t.SurfaceID+" already exists")
			}
			if _, err := s.exec(ctx, tx, `INSERT INTO threads (`+threadCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				t.ID, t.SessionID, t.WorkspaceID, t.SurfaceID, t.GroupID, t.Title, t.Objective, t.State, t.History, t.Worktree,
				t.CommandID, micros(t.CreatedAt), micros(t.UpdatedAt)); err != nil {
				return s.conflict(err, "thread "+t.ID+" already exists")
			}
			ev, err := s.insertQueued(ctx, tx, it)
			if err != nil {
				return err
			}
			evs = append(evs, threadEvent("thread.started", t), ev)
		}
		created = true
		return s.emit(ctx, tx, starts[0].Thread.CreatedAt, evs...)
	})
	return created, err
}

// fill adds the latest episode summary and the episode count.
func (s *DB) fillThread(ctx context.Context, t *desk.Thread) error {
	if err := s.queryRow(ctx, s.db, `SELECT COUNT(*) FROM episodes WHERE thread_id = ?`, t.ID).Scan(&t.EpisodeCount); err != nil {
		return err
	}
	if t.EpisodeCount == 0 {
		return nil
	}
	e, err := scanEpisode(s.queryRow(ctx, s.db, `SELECT `+episodeCols+` FROM episodes WHERE thread_id = ? ORDER BY id DESC LIMIT 1`, t.ID))
	if err != nil {
		return err
	}
	t.LatestEpisode = e.Summary()
	return nil
}

func (s *DB) GetThread(ctx context.Context, id string) (*desk.Thread, error) {
	t, err := scanThread(s.queryRow(ctx, s.db, `SELECT `+threadCols+` FROM threads WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "thread", id)
	}
	return t, s.fillThread(ctx, t)
}

func (s *DB) ThreadBySurface(ctx context.Context, surfaceID string) (*desk.Thread, error) {
	t, err := scanThread(s.queryRow(ctx, s.db, `SELECT `+threadCols+` FROM threads WHERE surface_id = ?`, surfaceID))
	if err != nil {
		return nil, notFound(err, "thread of surface", surfaceID)
	}
	return t, s.fillThread(ctx, t)
}

func (s *DB) ListThreads(ctx context.Context, sessionID, groupID string) ([]*desk.Thread, error) {
	q, args := `SELECT `+threadCols+` FROM threads WHERE session_id = ?`, []any{sessionID}
	if groupID != "" {
		q, args = q+` AND group_id = ?`, append(args, groupID)
	}
	rows, err := s.query(ctx, s.db, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	ts, err := collect(rows, scanThread)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if err := s.fillThread(ctx, t); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func (s *DB) groupThreads(ctx context.Context, g *desk.ThreadGroup) error {
	rows, err := s.query(ctx, s.db, `SELECT id FROM threads WHERE group_id = ? ORDER BY id`, g.ID)
	if err != nil {
		return err
	}
	g.ThreadIDs, err = collect(rows, func(r interface{ Scan(...any) error }) (string, error) {
		var id string
		return id, r.Scan(&id)
	})
	if g.ThreadIDs == nil {
		g.ThreadIDs = []string{}
	}
	return err
}

func scanThreadGroup(r interface{ Scan(...any) error }) (*desk.ThreadGroup, error) {
	var g desk.ThreadGroup
	var c int64
	if err := r.Scan(&g.ID, &g.SessionID, &g.WorkspaceID, &c); err != nil {
		return nil, err
	}
	g.CreatedAt = fromMicros(c)
	return &g, nil
}

func (s *DB) GetThreadGroup(ctx context.Context, id string) (*desk.ThreadGroup, error) {
	g, err := scanThreadGroup(s.queryRow(ctx, s.db, `SELECT id, session_id, workspace_id, created_at FROM thread_groups WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "thread group", id)
	}
	return g, s.groupThreads(ctx, g)
}

func (s *DB) ListThreadGroups(ctx context.Context, sessionID string) ([]*desk.ThreadGroup, error) {
	rows, err := s.query(ctx, s.db, `SELECT id, session_id, workspace_id, created_at FROM thread_groups WHERE session_id = ? ORDER BY id`, sessionID)
	if err != nil {
		return nil, err
	}
	gs, err := collect(rows, scanThreadGroup)
	if err != nil {
		return nil, err
	}
	for _, g := range gs {
		if err := s.groupThreads(ctx, g); err != nil {
			return nil, err
		}
	}
	return gs, nil
}

func (s *DB) FollowupThreads(ctx context.Context, items []*desk.QueueItem, activate bool) ([]*desk.Thread, error) {
	var out []*desk.Thread
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		var evs []event
		var at time.Time
		for _, it := range items {
			t, err := scanThread(s.queryRow(ctx, tx, `SELECT `+threadCols+` FROM threads WHERE surface_id = ?`+s.d.ForUpdate, it.SurfaceID))
			if err != nil {
				return notFound(err, "thread of surface", it.SurfaceID)
			}
			if t.SessionID != it.SessionID {
				return desk.Errorf(desk.ENOTFOUND, "thread %s not found in session %s", t.ID, it.SessionID)
			}
			ev, err := s.insertQueued(ctx, tx, it)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
			at = it.CreatedAt
			if activate && t.State == desk.ThreadConcluded {
				t.State, t.UpdatedAt = desk.ThreadActive, it.CreatedAt
				if _, err := s.exec(ctx, tx, `UPDATE threads SET state = ?, updated_at = ? WHERE id = ?`, t.State, micros(t.UpdatedAt), t.ID); err != nil {
					return err
				}
				evs = append(evs, threadEvent("thread.updated", t))
			}
			out = append(out, t)
		}
		return s.emit(ctx, tx, at, evs...)
	})
	if err != nil {
		return nil, err
	}
	for _, t := range out {
		if err := s.fillThread(ctx, t); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *DB) RecordEpisode(ctx context.Context, e *desk.Episode, n *desk.QueueItem) (*desk.Episode, bool, error) {
	var out *desk.Episode
	created := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out, created = nil, false
		if e.CommandID != "" {
			old, err := scanEpisode(s.queryRow(ctx, tx, `SELECT `+episodeCols+` FROM episodes WHERE command_id = ?`, e.CommandID))
			if err == nil {
				out = old
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		t, err := scanThread(s.queryRow(ctx, tx, `SELECT `+threadCols+` FROM threads WHERE id = ?`+s.d.ForUpdate, e.ThreadID))
		if err != nil {
			return notFound(err, "thread", e.ThreadID)
		}
		if e.Artifacts == nil {
			e.Artifacts = []string{}
		}
		e.NotificationID = n.ID
		if _, err := s.exec(ctx, tx, `INSERT INTO episodes (`+episodeCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.ThreadID, e.SessionID, e.WorkspaceID, e.Kind, e.Outcome, e.Title, e.Body, encodeJSON(e.Origin),
			e.CommandID, e.ExecutionID, encodeJSON(e.Artifacts), e.NotificationID, micros(e.CreatedAt)); err != nil {
			return s.conflict(err, "episode "+e.ID+" already exists")
		}
		t.UpdatedAt = e.CreatedAt
		if e.Kind == desk.EpisodeConclusion {
			t.State = desk.ThreadConcluded
		}
		if _, err := s.exec(ctx, tx, `UPDATE threads SET state = ?, updated_at = ? WHERE id = ?`, t.State, micros(t.UpdatedAt), t.ID); err != nil {
			return err
		}
		ev, err := s.insertQueued(ctx, tx, n)
		if err != nil {
			return err
		}
		t.LatestEpisode = e.Summary()
		out, created = e, true
		return s.emit(ctx, tx, e.CreatedAt,
			event{typ: "episode.recorded", workspace: e.WorkspaceID, session: e.SessionID, surface: t.SurfaceID, execute: e.ExecutionID, data: e},
			threadEvent("thread.updated", t), ev)
	})
	return out, created, err
}

func (s *DB) GetEpisode(ctx context.Context, id string) (*desk.Episode, error) {
	e, err := scanEpisode(s.queryRow(ctx, s.db, `SELECT `+episodeCols+` FROM episodes WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "episode", id)
	}
	return e, nil
}

func (s *DB) ListEpisodes(ctx context.Context, threadID string) ([]*desk.Episode, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+episodeCols+` FROM episodes WHERE thread_id = ? ORDER BY id`, threadID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanEpisode)
}

func (s *DB) NextThreadScriptStep(ctx context.Context, threadID string) (int, error) {
	var next int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		return s.queryRow(ctx, tx, `UPDATE threads SET script_cursor = script_cursor + 1 WHERE id = ? RETURNING script_cursor`, threadID).Scan(&next)
	})
	if err != nil {
		return 0, notFound(err, "thread", threadID)
	}
	return next - 1, nil
}
