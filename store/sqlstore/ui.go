package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/desk-runtime/desk"
)

// uiMaxViewer bounds a viewer name, like logMaxViewer.
const uiMaxViewer = 256

func (s *DB) GetDraft(ctx context.Context, sessionID, surfaceID string) (*desk.Draft, error) {
	d := &desk.Draft{SessionID: sessionID, SurfaceID: surfaceID}
	var at int64
	err := s.queryRow(ctx, s.db, `SELECT text, updated_at FROM ui_drafts WHERE surface_id = ? AND session_id = ?`, surfaceID, sessionID).
		Scan(&d.Text, &at)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return d, nil
	case err != nil:
		return nil, err
	}
	d.UpdatedAt = fromMicros(at)
	return d, nil
}

func (s *DB) SaveDraft(ctx context.Context, d *desk.Draft) error {
	if d.SessionID == "" || d.SurfaceID == "" {
		return desk.Errorf(desk.EINVALID, "a draft needs a session and a surface")
	}
	if len(d.Text) > desk.MaxDraftBytes {
		return desk.Errorf(desk.ETOOLARGE, "a draft holds at most %d bytes", desk.MaxDraftBytes)
	}
	d.UpdatedAt = desk.Now()
	return s.tx(ctx, func(tx *sql.Tx) error {
		// The surface must be the session's: a draft never lands on a
		// surface of another session, whatever the caller says.
		var n int
		if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM surfaces s JOIN sessions x ON x.id = s.session_id
			WHERE s.id = ? AND s.session_id = ? AND x.deleting = ?`, d.SurfaceID, d.SessionID, false).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return desk.Errorf(desk.ENOTFOUND, "surface %s not found in session %s", d.SurfaceID, d.SessionID)
		}
		if d.Text == "" {
			_, err := s.exec(ctx, tx, `DELETE FROM ui_drafts WHERE surface_id = ?`, d.SurfaceID)
			return err
		}
		_, err := s.exec(ctx, tx, `INSERT INTO ui_drafts (surface_id, session_id, text, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (surface_id) DO UPDATE SET text = excluded.text, updated_at = excluded.updated_at`,
			d.SurfaceID, d.SessionID, d.Text, micros(d.UpdatedAt))
		return err
	})
}

func checkUIViewer(viewer string) error {
	if viewer == "" || len(viewer) > uiMaxViewer {
		return desk.Errorf(desk.EINVALID, "viewer must be 1 to %d bytes", uiMaxViewer)
	}
	return nil
}

// sessionForUpdate reads a visible session's workspace and unread flag,
// locking the row until the transaction ends.
func (s *DB) sessionForUpdate(ctx context.Context, tx *sql.Tx, id string) (ws string, unread bool, err error) {
	err = s.queryRow(ctx, tx, `SELECT workspace_id, unread FROM sessions WHERE id = ? AND deleting = ?`+s.d.ForUpdate, id, false).
		Scan(&ws, &unread)
	return ws, unread, notFound(err, "session", id)
}

func (s *DB) OpenSession(ctx context.Context, sessionID, viewer string, until time.Time) error {
	if err := checkUIViewer(viewer); err != nil {
		return err
	}
	now := desk.Now()
	return s.tx(ctx, func(tx *sql.Tx) error {
		ws, unread, err := s.sessionForUpdate(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		// Holds that ran out are dropped here, so the table stays as small
		// as the number of sessions people have open.
		if _, err := s.exec(ctx, tx, `DELETE FROM ui_session_views WHERE session_id = ? AND open_until <= ?`, sessionID, micros(now)); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO ui_session_views (session_id, viewer, open_until) VALUES (?, ?, ?)
			ON CONFLICT (session_id, viewer) DO UPDATE SET open_until = excluded.open_until`,
			sessionID, viewer, micros(until)); err != nil {
			return err
		}
		if !unread {
			return nil
		}
		if _, err := s.exec(ctx, tx, `UPDATE sessions SET unread = ? WHERE id = ?`, false, sessionID); err != nil {
			return err
		}
		return s.emit(ctx, tx, now, event{typ: "session.read", workspace: ws, session: sessionID, data: map[string]any{"unread": false}})
	})
}

func (s *DB) CloseSession(ctx context.Context, sessionID, viewer string) error {
	if err := checkUIViewer(viewer); err != nil {
		return err
	}
	_, err := s.exec(ctx, s.db, `DELETE FROM ui_session_views WHERE session_id = ? AND viewer = ?`, sessionID, viewer)
	return err
}

func (s *DB) MarkUnreadIfClosed(ctx context.Context, sessionID string, now time.Time) (bool, error) {
	marked := false
	err := s.tx(ctx, func(tx *sql.Tx) error {
		ws, unread, err := s.sessionForUpdate(ctx, tx, sessionID)
		if err != nil || unread {
			return err
		}
		var open int
		if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM ui_session_views WHERE session_id = ? AND open_until > ?`,
			sessionID, micros(now)).Scan(&open); err != nil {
			return err
		}
		if open > 0 {
			return nil
		}
		if _, err := s.exec(ctx, tx, `UPDATE sessions SET unread = ? WHERE id = ?`, true, sessionID); err != nil {
			return err
		}
		marked = true
		return s.emit(ctx, tx, now, event{typ: "session.unread", workspace: ws, session: sessionID, data: map[string]any{"unread": true}})
	})
	if err != nil {
		marked = false
	}
	return marked, err
}
