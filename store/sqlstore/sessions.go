package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"

	"github.com/desk-runtime/desk"
)

const sessionCols = `id, signature, workspace_id, actor_id, title, pinned, archived, unread, lifecycle, origin, deleting, created_at, updated_at, surface_id, reconstructed_from, model, runtime, native_id, worktree, profile, profile_snapshot, reasoning_effort`

func scanSession(r interface{ Scan(...any) error }) (*desk.Session, error) {
	var x desk.Session
	var origin, snap string
	var c, u int64
	if err := r.Scan(&x.ID, &x.Signature, &x.WorkspaceID, &x.Actor, &x.Title, &x.Pinned, &x.Archived,
		&x.Unread, &x.Lifecycle, &origin, &x.Deleting, &c, &u, &x.SurfaceID, &x.ReconstructedFrom, &x.Model, &x.Runtime, &x.NativeID, &x.Worktree,
		&x.Profile, &snap, &x.ReasoningEffort); err != nil {
		return nil, err
	}
	if snap != "" {
		x.ProfileSnapshot = new(desk.ProfileSpec)
		if err := json.Unmarshal([]byte(snap), x.ProfileSnapshot); err != nil {
			return nil, err
		}
	}
	o, err := decodeOrigin(origin)
	if err != nil {
		return nil, err
	}
	x.Origin, x.CreatedAt, x.UpdatedAt = o, fromMicros(c), fromMicros(u)
	return &x, nil
}

// CreateSession inserts the session and its orchestrator surface together:
// a session never exists without the surface its work is queued on.
func (s *DB) CreateSession(ctx context.Context, x *desk.Session) error {
	if x.SurfaceID == "" {
		x.SurfaceID = desk.NewID(desk.PrefixSurface)
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO sessions (`+sessionCols+`, script) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			x.ID, x.Signature, x.WorkspaceID, x.Actor, x.Title, x.Pinned, x.Archived, x.Unread, x.Lifecycle,
			encodeJSON(x.Origin), false, micros(x.CreatedAt), micros(x.UpdatedAt), x.SurfaceID, x.ReconstructedFrom,
			x.Model, x.Runtime, x.NativeID, x.Worktree, x.Profile, snapshotJSON(x.ProfileSnapshot), x.ReasoningEffort, string(x.Script))
		if err != nil {
			return s.conflict(err, "session "+x.ID+" already exists")
		}
		_, err = s.exec(ctx, tx, `INSERT INTO surfaces (id, session_id, workspace_id, kind, title, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			x.SurfaceID, x.ID, x.WorkspaceID, desk.SurfaceOrchestrator, "", micros(x.CreatedAt))
		if err != nil {
			return s.conflict(err, "surface "+x.SurfaceID+" already exists")
		}
		// Every open sidebar of the workspace learns of the new session
		// (created from the CLI, the API or another tab) from this event.
		return s.emit(ctx, tx, x.CreatedAt, event{typ: "session.created", workspace: x.WorkspaceID, session: x.ID,
			data: map[string]any{"title": x.Title}})
	})
}

func (s *DB) GetSession(ctx context.Context, id string) (*desk.Session, error) {
	x, err := scanSession(s.queryRow(ctx, s.db,
		`SELECT `+sessionCols+` FROM sessions WHERE id = ? AND deleting = ?`, id, false))
	if err != nil {
		return nil, notFound(err, "session", id)
	}
	return x, nil
}

// SessionBySignature is the session whose signature is sig (unique).
func (s *DB) SessionBySignature(ctx context.Context, sig string) (*desk.Session, error) {
	x, err := scanSession(s.queryRow(ctx, s.db,
		`SELECT `+sessionCols+` FROM sessions WHERE signature = ? AND deleting = ?`, sig, false))
	if err != nil {
		return nil, notFound(err, "session", sig)
	}
	return x, nil
}

// ListSessions returns matching sessions, most recently updated first.
func (s *DB) ListSessions(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error) {
	where := []string{"deleting = ?"}
	args := []any{false}
	if f.WorkspaceID != "" {
		where, args = append(where, "workspace_id = ?"), append(args, f.WorkspaceID)
	}
	if f.ActorID != "" {
		where, args = append(where, "actor_id = ?"), append(args, f.ActorID)
	}
	if f.Pinned != nil {
		where, args = append(where, "pinned = ?"), append(args, *f.Pinned)
	}
	if f.Archived != nil {
		where, args = append(where, "archived = ?"), append(args, *f.Archived)
	}
	rows, err := s.query(ctx, s.db, `SELECT `+sessionCols+` FROM sessions WHERE `+
		strings.Join(where, " AND ")+` ORDER BY updated_at DESC, id DESC`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanSession)
}

func (s *DB) UpdateSession(ctx context.Context, id string, u desk.SessionUpdate) (*desk.Session, error) {
	set := []string{"updated_at = ?"}
	args := []any{micros(desk.Now())}
	if u.Title != nil {
		// A person's rename stops automatic titling for good.
		set, args = append(set, "title = ?", "title_source = 'manual'"), append(args, *u.Title)
	}
	if u.Pinned != nil {
		set, args = append(set, "pinned = ?"), append(args, *u.Pinned)
	}
	if u.Archived != nil {
		set, args = append(set, "archived = ?"), append(args, *u.Archived)
	}
	if u.Unread != nil {
		set, args = append(set, "unread = ?"), append(args, *u.Unread)
	}
	if u.Lifecycle != nil {
		set, args = append(set, "lifecycle = ?"), append(args, *u.Lifecycle)
	}
	if u.Worktree != nil {
		set, args = append(set, "worktree = ?"), append(args, *u.Worktree)
	}
	if u.Model != nil {
		set, args = append(set, "model = ?"), append(args, *u.Model)
	}
	if u.ReasoningEffort != nil {
		set, args = append(set, "reasoning_effort = ?"), append(args, *u.ReasoningEffort)
	}
	if u.Profile != nil {
		set, args = append(set, "profile = ?", "profile_snapshot = ?"), append(args, *u.Profile, snapshotJSON(u.ProfileSnapshot))
	}
	args = append(args, id, false)
	// Every page showing the session's row (another tab, another person)
	// learns of the change from the event committed with it.
	changed := map[string]any{}
	if u.Title != nil {
		changed["title"] = *u.Title
	}
	if u.Pinned != nil {
		changed["pinned"] = *u.Pinned
	}
	if u.Archived != nil {
		changed["archived"] = *u.Archived
	}
	if u.Unread != nil {
		changed["unread"] = *u.Unread
	}
	if u.Lifecycle != nil {
		changed["lifecycle"] = *u.Lifecycle
	}
	if u.Worktree != nil {
		changed["worktree"] = *u.Worktree
	}
	if u.Model != nil {
		changed["model"] = *u.Model
	}
	if u.ReasoningEffort != nil {
		changed["reasoning_effort"] = *u.ReasoningEffort
	}
	if u.Profile != nil {
		changed["profile"] = *u.Profile
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE sessions SET `+strings.Join(set, ", ")+` WHERE id = ? AND deleting = ?`, args...)
		if err != nil {
			return err
		}
		if err := affected(res, "session", id); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, id, event{typ: "session.updated", session: id, data: changed})
	})
	if err != nil {
		return nil, err
	}
	return s.GetSession(ctx, id)
}

func (s *DB) MarkSessionDeleting(ctx context.Context, id string) error {
	res, err := s.exec(ctx, s.db, `UPDATE sessions SET deleting = ? WHERE id = ? AND deleting = ?`, true, id, false)
	if err != nil {
		return err
	}
	return affected(res, "session", id)
}

// PurgeSession removes the session's rows and everything that hangs off it.
// Selection groups are the workspace's and stay; only the bindings go.
func (s *DB) PurgeSession(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DELETE FROM artifacts WHERE session_id = ?`,
			`DELETE FROM session_bindings WHERE session_id = ?`,
			`DELETE FROM queue_items WHERE session_id = ?`,
			`DELETE FROM messages WHERE session_id = ?`,
			`DELETE FROM commands WHERE session_id = ?`,
			`DELETE FROM approvals WHERE session_id = ?`,
			`DELETE FROM input_requests WHERE session_id = ?`,
			`DELETE FROM plans WHERE session_id = ?`,
			`DELETE FROM title_jobs WHERE session_id = ?`,
			`DELETE FROM loaded_extensions WHERE session_id = ?`,
			`DELETE FROM item_leases WHERE execution_id IN (SELECT id FROM executions WHERE session_id = ?)`,
			`DELETE FROM executions WHERE session_id = ?`,
			`DELETE FROM blocks WHERE session_id = ?`,
			`DELETE FROM ui_drafts WHERE session_id = ?`,
			`DELETE FROM ui_session_views WHERE session_id = ?`,
			`DELETE FROM episodes WHERE session_id = ?`,
			`DELETE FROM threads WHERE session_id = ?`,
			`DELETE FROM thread_groups WHERE session_id = ?`,
			`DELETE FROM surfaces WHERE session_id = ?`,
			`DELETE FROM sessions WHERE id = ?`,
		} {
			if _, err := s.exec(ctx, tx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *DB) ListDeletingSessions(ctx context.Context) ([]*desk.Session, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+sessionCols+` FROM sessions WHERE deleting = ? ORDER BY id`, true)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanSession)
}

// snapshotJSON is a session's profile snapshot as stored (” for none).
func snapshotJSON(p *desk.ProfileSpec) string {
	if p == nil {
		return ""
	}
	b, _ := json.Marshal(p)
	return string(b)
}
