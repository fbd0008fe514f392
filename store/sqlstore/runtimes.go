package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/desk-runtime/desk"
)

const runtimeCols = `name, protocol, argv, env, created_at`

func scanRuntime(r interface{ Scan(...any) error }) (*desk.Runtime, error) {
	var x desk.Runtime
	var argv, env string
	var c int64
	if err := r.Scan(&x.Name, &x.Protocol, &argv, &env, &c); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(argv), &x.Argv); err != nil {
		return nil, fmt.Errorf("decode argv of runtime %s: %w", x.Name, err)
	}
	if err := json.Unmarshal([]byte(env), &x.Env); err != nil {
		return nil, fmt.Errorf("decode env of runtime %s: %w", x.Name, err)
	}
	if x.Env == nil {
		x.Env = []string{}
	}
	x.CreatedAt = fromMicros(c)
	return &x, nil
}

func (s *DB) CreateRuntime(ctx context.Context, r *desk.Runtime) error {
	env := r.Env
	if env == nil {
		env = []string{}
	}
	_, err := s.exec(ctx, s.db, `INSERT INTO runtimes (`+runtimeCols+`) VALUES (?, ?, ?, ?, ?)`,
		r.Name, r.Protocol, encodeJSON(r.Argv), encodeJSON(env), micros(r.CreatedAt))
	return s.conflict(err, "runtime "+r.Name+" is already registered")
}

func (s *DB) GetRuntime(ctx context.Context, name string) (*desk.Runtime, error) {
	x, err := scanRuntime(s.queryRow(ctx, s.db, `SELECT `+runtimeCols+` FROM runtimes WHERE name = ?`, name))
	if err != nil {
		return nil, notFound(err, "runtime", name)
	}
	return x, nil
}

// ListRuntimes returns the registered runtimes by name.
func (s *DB) ListRuntimes(ctx context.Context) ([]*desk.Runtime, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+runtimeCols+` FROM runtimes ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanRuntime)
}

// DeleteRuntime removes the registration. Sessions that name it keep the
// name; their next turn fails saying the runtime is not registered.
func (s *DB) DeleteRuntime(ctx context.Context, name string) error {
	res, err := s.exec(ctx, s.db, `DELETE FROM runtimes WHERE name = ?`, name)
	if err != nil {
		return err
	}
	return affected(res, "runtime", name)
}

func (s *DB) SetSessionNativeID(ctx context.Context, sessionID, nativeID string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var cur string
		err := s.queryRow(ctx, tx, `SELECT native_id FROM sessions WHERE id = ? AND deleting = ?`, sessionID, false).Scan(&cur)
		if err != nil {
			return notFound(err, "session", sessionID)
		}
		if cur == nativeID {
			return nil
		}
		if cur != "" {
			return desk.Errorf(desk.ECONFLICT, "session %s already continues native conversation %s, not %s", sessionID, cur, nativeID)
		}
		if _, err := s.exec(ctx, tx, `UPDATE sessions SET native_id = ? WHERE id = ?`, nativeID, sessionID); err != nil {
			return err
		}
		return s.emitIn(ctx, tx, sessionID, event{typ: "session.updated", session: sessionID, data: map[string]any{"native_id": nativeID}})
	})
}
