package sqlstore

import (
	"context"
	"database/sql"

	"github.com/desk-runtime/desk"
)

const workspaceCols = `id, name, state, created_at, updated_at`

func scanWorkspace(r interface{ Scan(...any) error }) (*desk.Workspace, error) {
	var w desk.Workspace
	var c, u int64
	if err := r.Scan(&w.ID, &w.Name, &w.State, &c, &u); err != nil {
		return nil, err
	}
	w.CreatedAt, w.UpdatedAt = fromMicros(c), fromMicros(u)
	return &w, nil
}

// CreateWorkspace inserts the workspace and its owner actor together, so a
// workspace is never visible without the actor that admin requests act as.
func (s *DB) CreateWorkspace(ctx context.Context, w *desk.Workspace, owner *desk.Actor) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES (?, ?, ?, ?, ?)`,
			w.ID, w.Name, w.State, micros(w.CreatedAt), micros(w.UpdatedAt))
		if err != nil {
			return s.conflict(err, "workspace id "+w.ID+" is permanently reserved")
		}
		if owner != nil {
			if err := s.insertActor(ctx, tx, owner); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *DB) GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error) {
	w, err := scanWorkspace(s.queryRow(ctx, s.db, `SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "workspace", id)
	}
	return w, nil
}

func (s *DB) ListWorkspaces(ctx context.Context) ([]*desk.Workspace, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+workspaceCols+` FROM workspaces ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanWorkspace)
}

const actorCols = `id, workspace_id, name, kind, created_at`

func scanActor(r interface{ Scan(...any) error }) (*desk.Actor, error) {
	var a desk.Actor
	var c int64
	if err := r.Scan(&a.ID, &a.WorkspaceID, &a.Name, &a.Kind, &c); err != nil {
		return nil, err
	}
	a.CreatedAt = fromMicros(c)
	return &a, nil
}

func (s *DB) insertActor(ctx context.Context, x querier, a *desk.Actor) error {
	_, err := s.exec(ctx, x, `INSERT INTO actors (`+actorCols+`) VALUES (?, ?, ?, ?, ?)`,
		a.ID, a.WorkspaceID, a.Name, a.Kind, micros(a.CreatedAt))
	return s.conflict(err, "an actor named "+a.Name+" already exists in this workspace")
}

func (s *DB) CreateActor(ctx context.Context, a *desk.Actor, tokenHash string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.insertActor(ctx, tx, a); err != nil {
			return err
		}
		if tokenHash == "" {
			return nil
		}
		_, err := s.exec(ctx, tx, `INSERT INTO actor_tokens (hash, actor_id, created_at) VALUES (?, ?, ?)`,
			tokenHash, a.ID, micros(a.CreatedAt))
		return err
	})
}

func (s *DB) GetActor(ctx context.Context, id string) (*desk.Actor, error) {
	a, err := scanActor(s.queryRow(ctx, s.db, `SELECT `+actorCols+` FROM actors WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "actor", id)
	}
	return a, nil
}

func (s *DB) ActorByName(ctx context.Context, workspaceID, name string) (*desk.Actor, error) {
	a, err := scanActor(s.queryRow(ctx, s.db,
		`SELECT `+actorCols+` FROM actors WHERE workspace_id = ? AND name = ?`, workspaceID, name))
	if err != nil {
		return nil, notFound(err, "actor", name)
	}
	return a, nil
}

func (s *DB) ListActors(ctx context.Context, workspaceID string) ([]*desk.Actor, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+actorCols+` FROM actors WHERE workspace_id = ? ORDER BY id`, workspaceID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanActor)
}

func (s *DB) ActorByTokenHash(ctx context.Context, tokenHash string) (*desk.Actor, error) {
	a, err := scanActor(s.queryRow(ctx, s.db,
		`SELECT a.id, a.workspace_id, a.name, a.kind, a.created_at
		   FROM actor_tokens t JOIN actors a ON a.id = t.actor_id WHERE t.hash = ?`, tokenHash))
	if err != nil {
		return nil, notFound(err, "token", "")
	}
	return a, nil
}

// collect scans every row with scan and closes rows.
func collect[T any](rows *sql.Rows, scan func(interface{ Scan(...any) error }) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
