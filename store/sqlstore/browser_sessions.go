package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/desk-runtime/desk"
)

func (s *DB) CreateBrowserSession(ctx context.Context, b *desk.BrowserSession) error {
	if b.IDHash == "" || b.TokenHash == "" || b.Actor == "" {
		return desk.Errorf(desk.EINVALID, "a browser session needs an id hash, a token hash and an actor")
	}
	_, err := s.exec(ctx, s.db, `INSERT INTO browser_sessions (id_hash, token_hash, actor, workspace_id, created_at, last_seen)
		VALUES (?, ?, ?, ?, ?, ?)`, b.IDHash, b.TokenHash, b.Actor, b.WorkspaceID, micros(b.CreatedAt), micros(b.LastSeen))
	return s.conflict(err, "browser session exists")
}

func (s *DB) GetBrowserSession(ctx context.Context, idHash string) (*desk.BrowserSession, error) {
	b := &desk.BrowserSession{IDHash: idHash}
	var created, seen int64
	err := s.queryRow(ctx, s.db, `SELECT token_hash, actor, workspace_id, created_at, last_seen FROM browser_sessions WHERE id_hash = ?`, idHash).
		Scan(&b.TokenHash, &b.Actor, &b.WorkspaceID, &created, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		// The hash stays out of the message: it names a sign-in.
		return nil, desk.Errorf(desk.ENOTFOUND, "browser session not found")
	}
	if err != nil {
		return nil, err
	}
	b.CreatedAt, b.LastSeen = fromMicros(created), fromMicros(seen)
	return b, nil
}

func (s *DB) TouchBrowserSession(ctx context.Context, idHash string, at time.Time) error {
	res, err := s.exec(ctx, s.db, `UPDATE browser_sessions SET last_seen = ? WHERE id_hash = ?`, micros(at), idHash)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = desk.Errorf(desk.ENOTFOUND, "browser session not found")
		}
		return err
	}
	return nil
}

func (s *DB) DeleteBrowserSession(ctx context.Context, idHash string) error {
	_, err := s.exec(ctx, s.db, `DELETE FROM browser_sessions WHERE id_hash = ?`, idHash)
	return err
}

func (s *DB) DeleteBrowserSessions(ctx context.Context, actor string) (int, error) {
	q, args := `DELETE FROM browser_sessions`, []any(nil)
	if actor != "" {
		q, args = q+` WHERE actor = ?`, []any{actor}
	}
	return s.deleted(s.exec(ctx, s.db, q, args...))
}

func (s *DB) DeleteExpiredBrowserSessions(ctx context.Context, idleBefore, createdBefore time.Time) (int, error) {
	return s.deleted(s.exec(ctx, s.db, `DELETE FROM browser_sessions WHERE last_seen < ? OR created_at < ?`,
		micros(idleBefore), micros(createdBefore)))
}

func (s *DB) deleted(res sql.Result, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
