package sqlstore

import (
	"context"
	"database/sql"

	"github.com/desk-runtime/desk"
)

const groupSelect = `SELECT g.id, g.workspace_id, g.name, g.origin, g.created_at, g.updated_at,
	(SELECT COUNT(*) FROM group_items gi WHERE gi.group_id = g.id) FROM selection_groups g`

func scanGroup(r interface{ Scan(...any) error }) (*desk.Group, error) {
	var g desk.Group
	var origin string
	var c, u int64
	if err := r.Scan(&g.ID, &g.WorkspaceID, &g.Name, &origin, &c, &u, &g.ItemCount); err != nil {
		return nil, err
	}
	o, err := decodeOrigin(origin)
	if err != nil {
		return nil, err
	}
	g.Origin, g.CreatedAt, g.UpdatedAt = o, fromMicros(c), fromMicros(u)
	return &g, nil
}

func (s *DB) CreateGroup(ctx context.Context, g *desk.Group) error {
	_, err := s.exec(ctx, s.db, `INSERT INTO selection_groups (id, workspace_id, name, origin, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)`, g.ID, g.WorkspaceID, g.Name, encodeJSON(g.Origin), micros(g.CreatedAt), micros(g.UpdatedAt))
	return s.conflict(err, "group "+g.ID+" already exists")
}

func (s *DB) GetGroup(ctx context.Context, id string) (*desk.Group, error) {
	g, err := scanGroup(s.queryRow(ctx, s.db, groupSelect+` WHERE g.id = ?`, id))
	if err != nil {
		return nil, notFound(err, "group", id)
	}
	return g, nil
}

func (s *DB) ListGroups(ctx context.Context, workspaceID string) ([]*desk.Group, error) {
	rows, err := s.query(ctx, s.db, groupSelect+` WHERE g.workspace_id = ? ORDER BY g.id`, workspaceID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanGroup)
}

// DeleteGroup removes the group, its memberships and the bindings that name
// it. Its items stay until collection finds them unreachable.
func (s *DB) DeleteGroup(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `DELETE FROM group_items WHERE group_id = ?`, id); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `DELETE FROM session_bindings WHERE group_id = ?`, id); err != nil {
			return err
		}
		res, err := s.exec(ctx, tx, `DELETE FROM selection_groups WHERE id = ?`, id)
		if err != nil {
			return err
		}
		return affected(res, "group", id)
	})
}

const itemCols = `id, workspace_id, kind, name, url, title, media_type, size, sha256, origin, created_at`

func scanItem(r interface{ Scan(...any) error }) (*desk.Item, error) {
	var it desk.Item
	var origin string
	var c int64
	if err := r.Scan(&it.ID, &it.WorkspaceID, &it.Kind, &it.Name, &it.URL, &it.Title, &it.MediaType,
		&it.Size, &it.SHA256, &origin, &c); err != nil {
		return nil, err
	}
	o, err := decodeOrigin(origin)
	if err != nil {
		return nil, err
	}
	it.Origin, it.CreatedAt = o, fromMicros(c)
	return &it, nil
}

func (s *DB) AddItem(ctx context.Context, groupID string, it *desk.Item) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var pos int64
		if err := s.queryRow(ctx, tx, `SELECT COALESCE(MAX(position), 0) FROM group_items WHERE group_id = ?`,
			groupID).Scan(&pos); err != nil {
			return err
		}
		res, err := s.exec(ctx, tx, `UPDATE selection_groups SET updated_at = ? WHERE id = ?`, micros(it.CreatedAt), groupID)
		if err != nil {
			return err
		}
		if err := affected(res, "group", groupID); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `INSERT INTO items (`+itemCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			it.ID, it.WorkspaceID, it.Kind, it.Name, it.URL, it.Title, it.MediaType, it.Size, it.SHA256,
			encodeJSON(it.Origin), micros(it.CreatedAt)); err != nil {
			return s.conflict(err, "item "+it.ID+" already exists")
		}
		_, err = s.exec(ctx, tx, `INSERT INTO group_items (group_id, item_id, position) VALUES (?, ?, ?)`,
			groupID, it.ID, pos+1)
		return err
	})
}

func (s *DB) GetItem(ctx context.Context, id string) (*desk.Item, error) {
	it, err := scanItem(s.queryRow(ctx, s.db, `SELECT `+itemCols+` FROM items WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "item", id)
	}
	return it, nil
}

// ListGroupItems returns the group's items in the order they were added.
func (s *DB) ListGroupItems(ctx context.Context, groupID string) ([]*desk.Item, error) {
	rows, err := s.query(ctx, s.db, `SELECT i.id, i.workspace_id, i.kind, i.name, i.url, i.title, i.media_type,
		i.size, i.sha256, i.origin, i.created_at
		FROM group_items gi JOIN items i ON i.id = gi.item_id WHERE gi.group_id = ? ORDER BY gi.position`, groupID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanItem)
}

func (s *DB) RemoveGroupItem(ctx context.Context, groupID, itemID string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		res, err := s.exec(ctx, tx, `DELETE FROM group_items WHERE group_id = ? AND item_id = ?`, groupID, itemID)
		if err != nil {
			return err
		}
		if err := affected(res, "item", itemID); err != nil {
			return err
		}
		_, err = s.exec(ctx, tx, `UPDATE selection_groups SET updated_at = ? WHERE id = ?`, micros(desk.Now()), groupID)
		return err
	})
}

// unreachable is the reachability rule of PawWork §4: an item lives while a
// group references it or an active execution leases it. A lease of an
// execution that is over (even one a crash left behind) holds nothing.
const unreachable = `NOT EXISTS (SELECT 1 FROM group_items gi WHERE gi.item_id = items.id)
	AND NOT EXISTS (SELECT 1 FROM item_leases l JOIN executions e ON e.id = l.execution_id
		WHERE l.item_id = items.id AND e.phase IN ('starting', 'running', 'stopping'))`

func (s *DB) ListUnreachableItems(ctx context.Context, workspaceID string) ([]*desk.Item, error) {
	q := `SELECT ` + itemCols + ` FROM items WHERE ` + unreachable
	var args []any
	if workspaceID != "" {
		q += ` AND workspace_id = ?`
		args = append(args, workspaceID)
	}
	rows, err := s.query(ctx, s.db, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanItem)
}

func (s *DB) DeleteItemIfUnreachable(ctx context.Context, id string) (bool, error) {
	res, err := s.exec(ctx, s.db, `DELETE FROM items WHERE id = ? AND `+unreachable, id)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (s *DB) SetBindings(ctx context.Context, sessionID string, groupIDs []string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `DELETE FROM session_bindings WHERE session_id = ?`, sessionID); err != nil {
			return err
		}
		for i, g := range groupIDs {
			if _, err := s.exec(ctx, tx, `INSERT INTO session_bindings (session_id, group_id, position) VALUES (?, ?, ?)`,
				sessionID, g, i); err != nil {
				return s.conflict(err, "group "+g+" is listed twice")
			}
		}
		return nil
	})
}

func (s *DB) ListBindings(ctx context.Context, sessionID string) ([]*desk.Group, error) {
	rows, err := s.query(ctx, s.db, `SELECT g.id, g.workspace_id, g.name, g.origin, g.created_at, g.updated_at,
		(SELECT COUNT(*) FROM group_items gi WHERE gi.group_id = g.id)
		FROM session_bindings b JOIN selection_groups g ON g.id = b.group_id
		WHERE b.session_id = ? ORDER BY b.position`, sessionID)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanGroup)
}
