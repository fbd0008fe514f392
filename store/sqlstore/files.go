package sqlstore

import (
	"context"

	"github.com/desk-runtime/desk"
)

var _ desk.FilesStore = (*DB)(nil)

// GetActorUsage returns the actor's running usage total, ENOTFOUND when the
// area has never been measured.
func (s *DB) GetActorUsage(ctx context.Context, actorID string) (*desk.ActorUsage, error) {
	var u desk.ActorUsage
	var at int64
	err := s.queryRow(ctx, s.db, `SELECT actor_id, workspace_id, bytes, files, updated_at FROM actor_usage WHERE actor_id = ?`,
		actorID).Scan(&u.ActorID, &u.WorkspaceID, &u.Bytes, &u.Files, &at)
	if err != nil {
		return nil, notFound(err, "usage of actor", actorID)
	}
	u.UpdatedAt = fromMicros(at)
	return &u, nil
}

// SetActorUsage stores a measured total. The upsert syntax is shared by
// SQLite (3.24+) and Postgres.
func (s *DB) SetActorUsage(ctx context.Context, u *desk.ActorUsage) error {
	_, err := s.exec(ctx, s.db, `INSERT INTO actor_usage (actor_id, workspace_id, bytes, files, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (actor_id) DO UPDATE SET bytes = excluded.bytes, files = excluded.files, updated_at = excluded.updated_at`,
		u.ActorID, u.WorkspaceID, u.Bytes, u.Files, micros(u.UpdatedAt))
	return err
}

// AddActorUsage adds to the running total in one statement, so concurrent
// writers never lose each other's changes. Without a measured total there
// is nothing to add to: the next walk measures it.
func (s *DB) AddActorUsage(ctx context.Context, actorID string, bytes, files int64) error {
	_, err := s.exec(ctx, s.db, `UPDATE actor_usage SET bytes = bytes + ?, files = files + ?, updated_at = ? WHERE actor_id = ?`,
		bytes, files, micros(desk.Now()), actorID)
	return err
}
