package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// nextSeqs reserves n event seqs in the transaction. The counter row is
// locked until commit, so seqs are assigned in commit order.
func (s *DB) nextSeqs(ctx context.Context, tx *sql.Tx, n int) (int64, error) {
	var last int64
	err := s.queryRow(ctx, tx, `UPDATE event_counter SET last_seq = last_seq + ? WHERE id = 1 RETURNING last_seq`, n).Scan(&last)
	return last - int64(n) + 1, err
}

// event is an event to write in a transaction.
type event struct {
	typ                                  string
	workspace, session, surface, execute string
	data                                 any
}

// emit writes events in the transaction; they become visible, and are
// delivered, only when it commits. The owning actor is looked up from the
// session so streams can be filtered per actor token.
func (s *DB) emit(ctx context.Context, tx *sql.Tx, at time.Time, es ...event) error {
	if len(es) == 0 {
		return nil
	}
	// The counter row is locked from here to the commit, so this comes
	// last in every transaction and writes all its events in one
	// statement: the lock is held as briefly as possible.
	first, err := s.nextSeqs(ctx, tx, len(es))
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO events (seq, at, type, workspace_id, session_id, surface_id, execution_id, actor_id, data) VALUES `)
	args := make([]any, 0, 10*len(es))
	for i, e := range es {
		data, err := json.Marshal(e.data)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`(?, ?, ?, ?, ?, ?, ?, COALESCE((SELECT actor_id FROM sessions WHERE id = ?), ''), ?)`)
		args = append(args, first+int64(i), micros(at), e.typ, e.workspace, e.session, e.surface, e.execute, e.session, string(data))
	}
	_, err = s.exec(ctx, tx, b.String(), args...)
	return err
}

func (s *DB) AppendEvents(ctx context.Context, es []*desk.Event) error {
	if len(es) == 0 {
		return nil
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		first, err := s.nextSeqs(ctx, tx, len(es))
		if err != nil {
			return err
		}
		for i, e := range es {
			e.Seq = first + int64(i)
			if e.At.IsZero() {
				e.At = desk.Now()
			}
			data := string(e.Data)
			if data == "" {
				data = "null"
			}
			if _, err := s.exec(ctx, tx, `INSERT INTO events (seq, at, type, workspace_id, session_id, surface_id, execution_id, actor_id, data)
				VALUES (?, ?, ?, ?, ?, ?, ?, COALESCE((SELECT actor_id FROM sessions WHERE id = ?), ''), ?)`,
				e.Seq, micros(e.At), e.Type, e.WorkspaceID, e.SessionID, e.SurfaceID, e.ExecutionID, e.SessionID, data); err != nil {
				return err
			}
		}
		return nil
	})
}

// ListEvents returns events after f.AfterSeq in seq order.
func (s *DB) ListEvents(ctx context.Context, f desk.EventFilter) ([]*desk.Event, error) {
	where := []string{"seq > ?"}
	args := []any{f.AfterSeq}
	for col, v := range map[string]string{"workspace_id": f.WorkspaceID, "session_id": f.SessionID, "actor_id": f.ActorID, "execution_id": f.ExecutionID} {
		if v != "" {
			where, args = append(where, col+" = ?"), append(args, v)
		}
	}
	limit := f.Limit
	if limit <= 0 || limit > 10000 {
		limit = 1000
	}
	rows, err := s.query(ctx, s.db, `SELECT seq, at, type, workspace_id, session_id, surface_id, execution_id, actor_id, data
		FROM events WHERE `+strings.Join(where, " AND ")+` ORDER BY seq LIMIT `+strconv.Itoa(limit), args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r interface{ Scan(...any) error }) (*desk.Event, error) {
		var e desk.Event
		var at int64
		var data string
		if err := r.Scan(&e.Seq, &at, &e.Type, &e.WorkspaceID, &e.SessionID, &e.SurfaceID, &e.ExecutionID, &e.ActorID, &data); err != nil {
			return nil, err
		}
		e.At, e.Data = fromMicros(at), json.RawMessage(data)
		return &e, nil
	})
}

func (s *DB) EventBounds(ctx context.Context) (int64, int64, error) {
	var min sql.NullInt64
	var max int64
	if err := s.queryRow(ctx, s.db, `SELECT MIN(seq) FROM events`).Scan(&min); err != nil {
		return 0, 0, err
	}
	if err := s.queryRow(ctx, s.db, `SELECT last_seq FROM event_counter WHERE id = 1`).Scan(&max); err != nil {
		return 0, 0, err
	}
	if !min.Valid {
		return max + 1, max, nil
	}
	return min.Int64, max, nil
}

func (s *DB) PruneEvents(ctx context.Context, before time.Time) (int, error) {
	res, err := s.exec(ctx, s.db, `DELETE FROM events WHERE at < ?`, micros(before))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}
