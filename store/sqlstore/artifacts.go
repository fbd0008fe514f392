package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/desk-runtime/desk"
)

const artifactCols = `id, session_id, workspace_id, actor_id, name, rel_path, kind, media_type, size, sha256,
	immutable, revision, missing, origin, prev, pending, deleting, created_at, updated_at`

func scanArtifact(r interface{ Scan(...any) error }) (*desk.Artifact, error) {
	var a desk.Artifact
	var origin, prev string
	var c, u int64
	if err := r.Scan(&a.ID, &a.SessionID, &a.WorkspaceID, &a.ActorID, &a.Name, &a.RelPath, &a.Kind,
		&a.MediaType, &a.Size, &a.SHA256, &a.Immutable, &a.Revision, &a.Missing, &origin, &prev,
		&a.Pending, &a.Deleting, &c, &u); err != nil {
		return nil, err
	}
	o, err := decodeOrigin(origin)
	if err != nil {
		return nil, err
	}
	if prev != "" {
		a.Prev = new(desk.ArtifactRevision)
		if err := json.Unmarshal([]byte(prev), a.Prev); err != nil {
			return nil, fmt.Errorf("decode artifact revision: %w", err)
		}
	}
	a.Origin, a.CreatedAt, a.UpdatedAt = o, fromMicros(c), fromMicros(u)
	a.Path = artifactGuestPath(a.RelPath)
	return &a, nil
}

// artifactGuestPath is where an execution sees the artifact.
func artifactGuestPath(rel string) string { return "/artifacts/" + rel }

func encodePrev(p *desk.ArtifactRevision) string {
	if p == nil {
		return ""
	}
	return encodeJSON(p)
}

func artifactEvent(typ string, a *desk.Artifact) event {
	return event{typ: typ, workspace: a.WorkspaceID, session: a.SessionID, surface: a.Origin.SurfaceID, execute: a.Origin.ExecutionID, data: a}
}

func (s *DB) CreateArtifact(ctx context.Context, a *desk.Artifact) error {
	a.Path = artifactGuestPath(a.RelPath)
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO artifacts (`+artifactCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.SessionID, a.WorkspaceID, a.ActorID, a.Name, a.RelPath, a.Kind, a.MediaType, a.Size, a.SHA256,
			a.Immutable, a.Revision, a.Missing, encodeJSON(a.Origin), encodePrev(a.Prev), a.Pending, false,
			micros(a.CreatedAt), micros(a.UpdatedAt))
		if err != nil {
			return s.conflict(err, "an artifact already exists at "+artifactGuestPath(a.RelPath))
		}
		if _, err := s.exec(ctx, tx, `UPDATE sessions SET artifact_count = artifact_count + 1 WHERE id = ?`, a.SessionID); err != nil {
			return err
		}
		return s.emit(ctx, tx, a.UpdatedAt, artifactEvent("artifact.created", a))
	})
}

func (s *DB) GetArtifact(ctx context.Context, id string) (*desk.Artifact, error) {
	a, err := scanArtifact(s.queryRow(ctx, s.db,
		`SELECT `+artifactCols+` FROM artifacts WHERE id = ? AND deleting = ?`, id, false))
	if err != nil {
		return nil, notFound(err, "artifact", id)
	}
	return a, nil
}

func (s *DB) ArtifactByPath(ctx context.Context, sessionID, relPath string) (*desk.Artifact, error) {
	a, err := scanArtifact(s.queryRow(ctx, s.db,
		`SELECT `+artifactCols+` FROM artifacts WHERE session_id = ? AND rel_path = ? AND deleting = ?`,
		sessionID, relPath, false))
	if err != nil {
		return nil, notFound(err, "artifact", artifactGuestPath(relPath))
	}
	return a, nil
}

// ListArtifacts returns the session's artifacts oldest first.
func (s *DB) ListArtifacts(ctx context.Context, sessionID string) ([]*desk.Artifact, error) {
	rows, err := s.query(ctx, s.db,
		`SELECT `+artifactCols+` FROM artifacts WHERE session_id = ? AND deleting = ? ORDER BY created_at, id`,
		sessionID, false)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanArtifact)
}

func (s *DB) CountArtifacts(ctx context.Context, sessionID string) (int, error) {
	var n int
	err := s.queryRow(ctx, s.db, `SELECT artifact_count FROM sessions WHERE id = ?`, sessionID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func (s *DB) UpdateArtifact(ctx context.Context, a *desk.Artifact, expectRevision int64) error {
	var n int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE artifacts SET kind = ?, media_type = ?, size = ?, sha256 = ?,
			immutable = ?, revision = ?, missing = ?, origin = ?, prev = ?, pending = ?, updated_at = ?
			WHERE id = ? AND revision = ? AND deleting = ?`,
			a.Kind, a.MediaType, a.Size, a.SHA256, a.Immutable, a.Revision, a.Missing, encodeJSON(a.Origin),
			encodePrev(a.Prev), a.Pending, micros(a.UpdatedAt), a.ID, expectRevision, false)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		return s.emit(ctx, tx, a.UpdatedAt, artifactEvent("artifact.updated", a))
	})
	if err != nil {
		return err
	}
	if n == 0 {
		if _, err := s.GetArtifact(ctx, a.ID); err != nil {
			return err
		}
		return desk.Errorf(desk.ECONFLICT, "artifact %s changed concurrently (expected revision %d); retry", a.ID, expectRevision)
	}
	return nil
}

func (s *DB) SetArtifactPending(ctx context.Context, id, pending string) error {
	res, err := s.exec(ctx, s.db, `UPDATE artifacts SET pending = ? WHERE id = ?`, pending, id)
	if err != nil {
		return err
	}
	return affected(res, "artifact", id)
}

func (s *DB) ListPendingArtifacts(ctx context.Context) ([]*desk.Artifact, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+artifactCols+` FROM artifacts WHERE pending <> '' ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanArtifact)
}

func (s *DB) MarkArtifactDeleting(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `UPDATE artifacts SET deleting = ? WHERE id = ? AND deleting = ?`, true, id, false)
		if err != nil {
			return err
		}
		if err := affected(res, "artifact", id); err != nil {
			return err
		}
		_, err = s.exec(ctx, tx, `UPDATE sessions SET artifact_count = artifact_count - 1 WHERE id = (SELECT session_id FROM artifacts WHERE id = ?)`, id)
		return err
	})
}

func (s *DB) DeleteArtifact(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		a, err := scanArtifact(s.queryRow(ctx, tx, `SELECT `+artifactCols+` FROM artifacts WHERE id = ?`, id))
		if err != nil {
			return notFound(err, "artifact", id)
		}
		if _, err := s.exec(ctx, tx, `DELETE FROM artifacts WHERE id = ?`, id); err != nil {
			return err
		}
		return s.emit(ctx, tx, desk.Now(), artifactEvent("artifact.deleted", a))
	})
}

func (s *DB) ListDeletingArtifacts(ctx context.Context) ([]*desk.Artifact, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+artifactCols+` FROM artifacts WHERE deleting = ? ORDER BY id`, true)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanArtifact)
}
