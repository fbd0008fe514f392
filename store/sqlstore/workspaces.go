package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/desk-runtime/desk"
)

const workspaceCols = `id, name, state, created_at, updated_at, host_paths, primary_root`

func scanWorkspace(r interface{ Scan(...any) error }) (*desk.Workspace, error) {
	var w desk.Workspace
	var c, u int64
	var hp string
	if err := r.Scan(&w.ID, &w.Name, &w.State, &c, &u, &hp, &w.PrimaryRoot); err != nil {
		return nil, err
	}
	w.CreatedAt, w.UpdatedAt = fromMicros(c), fromMicros(u)
	if hp != "" && hp != "[]" {
		if err := json.Unmarshal([]byte(hp), &w.HostPaths); err != nil {
			return nil, fmt.Errorf("decode host paths of workspace %s: %w", w.ID, err)
		}
	}
	return &w, nil
}

// encodeHostPaths stores host paths as a JSON array; none is "[]".
func encodeHostPaths(hp []desk.HostPath) string {
	if len(hp) == 0 {
		return "[]"
	}
	return encodeJSON(hp)
}

// CreateWorkspace inserts the workspace and its owner actor together, so a
// workspace is never visible without the actor that admin requests act as.
//
// The name check is a SELECT in the inserting transaction rather than a
// unique index: duplicates are allowed on request, and databases from
// before the check may already hold some. It is race-free because write
// transactions are serialized: SQLite takes its write lock at BEGIN, and
// on Postgres every transaction of the group committer first locks the
// event counter row (runBatch), as nameLock does for a plain one.
func (s *DB) CreateWorkspace(ctx context.Context, w *desk.Workspace, owner *desk.Actor, allowDuplicateName bool) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if !allowDuplicateName {
			if err := s.checkWorkspaceName(ctx, tx, w.Name); err != nil {
				return err
			}
		}
		_, err := s.exec(ctx, tx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			w.ID, w.Name, w.State, micros(w.CreatedAt), micros(w.UpdatedAt), encodeHostPaths(w.HostPaths), w.PrimaryRoot)
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

// checkWorkspaceName fails with ECONFLICT when a workspace that is not
// purged is called name (desk.WorkspaceCreate says why purged ones free it).
func (s *DB) checkWorkspaceName(ctx context.Context, tx *sql.Tx, name string) error {
	if err := s.nameLock(ctx, tx); err != nil {
		return err
	}
	var id string
	err := s.queryRow(ctx, tx, `SELECT id FROM workspaces WHERE name = ? AND state <> ? ORDER BY created_at, id LIMIT 1`,
		name, desk.WorkspacePurged).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	}
	return desk.Errorf(desk.ECONFLICT, "a workspace named %q already exists (%s); choose another name, or set allow_duplicate_name (desk workspace create --allow-duplicate-name) to create a second one", name, id)
}

// nameLock serializes name checks on a database whose transactions do not
// serialize themselves: without the group committer, Postgres runs them
// side by side, and two could each find the name free.
func (s *DB) nameLock(ctx context.Context, tx *sql.Tx) error {
	if s.d.GroupCommit || s.d.ForUpdate == "" {
		return nil
	}
	var last int64
	return s.queryRow(ctx, tx, `SELECT last_seq FROM event_counter WHERE id = 1`+s.d.ForUpdate).Scan(&last)
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

// UpdateWorkspacePaths replaces the workspace's host paths and primary root.
func (s *DB) UpdateWorkspacePaths(ctx context.Context, id string, hostPaths []desk.HostPath, primaryRoot string) (*desk.Workspace, error) {
	res, err := s.exec(ctx, s.db, `UPDATE workspaces SET host_paths = ?, primary_root = ?, updated_at = ? WHERE id = ?`,
		encodeHostPaths(hostPaths), primaryRoot, micros(desk.Now()), id)
	if err != nil {
		return nil, err
	}
	if err := affected(res, "workspace", id); err != nil {
		return nil, err
	}
	return s.GetWorkspace(ctx, id)
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
