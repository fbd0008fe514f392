package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/desk-runtime/desk"
)

const profileCols = `workspace_id, name, spec, created_at, updated_at`

func scanProfile(r interface{ Scan(...any) error }) (*desk.Profile, error) {
	var p desk.Profile
	var spec string
	var c, u int64
	if err := r.Scan(&p.WorkspaceID, &p.Name, &spec, &c, &u); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(spec), &p.ProfileSpec); err != nil {
		return nil, fmt.Errorf("decode profile %s: %w", p.Name, err)
	}
	p.CreatedAt, p.UpdatedAt = fromMicros(c), fromMicros(u)
	return &p, nil
}

// ListProfiles returns a workspace's profiles by name.
func (s *DB) ListProfiles(ctx context.Context, workspaceID string) ([]*desk.Profile, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+profileCols+` FROM profiles WHERE workspace_id = ? ORDER BY name`, workspaceID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanProfile)
}

func (s *DB) GetProfile(ctx context.Context, workspaceID, name string) (*desk.Profile, error) {
	p, err := scanProfile(s.queryRow(ctx, s.db, `SELECT `+profileCols+` FROM profiles WHERE workspace_id = ? AND name = ?`, workspaceID, name))
	if err != nil {
		return nil, notFound(err, "profile", name)
	}
	return p, nil
}

func (s *DB) CreateProfile(ctx context.Context, p *desk.Profile) error {
	_, err := s.exec(ctx, s.db, `INSERT INTO profiles (`+profileCols+`) VALUES (?, ?, ?, ?, ?)`,
		p.WorkspaceID, p.Name, encodeJSON(p.ProfileSpec), micros(p.CreatedAt), micros(p.UpdatedAt))
	return s.conflict(err, "profile "+p.Name+" already exists")
}

func (s *DB) UpdateProfile(ctx context.Context, p *desk.Profile) error {
	res, err := s.exec(ctx, s.db, `UPDATE profiles SET spec = ?, updated_at = ? WHERE workspace_id = ? AND name = ?`,
		encodeJSON(p.ProfileSpec), micros(p.UpdatedAt), p.WorkspaceID, p.Name)
	if err != nil {
		return err
	}
	return affected(res, "profile", p.Name)
}

func (s *DB) DeleteProfile(ctx context.Context, workspaceID, name string) error {
	res, err := s.exec(ctx, s.db, `DELETE FROM profiles WHERE workspace_id = ? AND name = ?`, workspaceID, name)
	if err != nil {
		return err
	}
	return affected(res, "profile", name)
}
