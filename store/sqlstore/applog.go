package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

const logCols = `seq, at, level, source, message, fields, workspace_id, session_id`

// logInsertChunk bounds the rows of one multi-row INSERT (8 parameters a
// row keeps it far below either database's parameter limit) and so the
// number of distinct statement texts the rebind cache can hold.
const logInsertChunk = 64

// logMaxSources bounds a filter's source list for the same reason.
const logMaxSources = 64

// logMaxViewer bounds a viewer name.
const logMaxViewer = 256

func scanLog(r interface{ Scan(...any) error }) (*desk.LogEntry, error) {
	var e desk.LogEntry
	var at int64
	var fields string
	if err := r.Scan(&e.Seq, &at, &e.Level, &e.Source, &e.Message, &fields, &e.WorkspaceID, &e.SessionID); err != nil {
		return nil, err
	}
	e.At = fromMicros(at)
	e.Fields = map[string]any{}
	if fields != "" {
		// UseNumber keeps integers such as sizes and nanoseconds exact.
		d := json.NewDecoder(strings.NewReader(fields))
		d.UseNumber()
		if err := d.Decode(&e.Fields); err != nil {
			return nil, fmt.Errorf("decode log fields of seq %d: %w", e.Seq, err)
		}
	}
	return &e, nil
}

// encodeLogFields writes fields as a JSON object without HTML escaping, so
// the stored text is what free-text search sees.
func encodeLogFields(fields map[string]any) (string, error) {
	if len(fields) == 0 {
		return "{}", nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return "", desk.Errorf(desk.EINVALID, "log fields are not a JSON object: %v", err)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// AppendLogs reserves len(entries) seqs by bumping the counter row and
// inserts the entries in the same transaction. The UPDATE holds the row
// lock until commit, so appenders (on Postgres also those of other
// processes) are serialized and commit in seq order: a reader that has seen
// seq n never later finds a new entry below n.
func (s *DB) AppendLogs(ctx context.Context, entries []*desk.LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	fields := make([]string, len(entries))
	for i, e := range entries {
		if desk.LogLevelRank(e.Level) < 0 {
			return desk.Errorf(desk.EINVALID, "unknown log level %q", e.Level)
		}
		f, err := encodeLogFields(e.Fields)
		if err != nil {
			return err
		}
		fields[i] = f
	}
	n := int64(len(entries))
	var last int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if err := s.queryRow(ctx, tx, `UPDATE app_log_counter SET last_seq = last_seq + ? WHERE id = 1 RETURNING last_seq`,
			n).Scan(&last); err != nil {
			return fmt.Errorf("reserve log seqs: %w", err)
		}
		first := last - n + 1
		for lo := 0; lo < len(entries); lo += logInsertChunk {
			hi := min(lo+logInsertChunk, len(entries))
			var q strings.Builder
			q.WriteString(`INSERT INTO app_logs (` + logCols + `) VALUES `)
			args := make([]any, 0, (hi-lo)*8)
			for i := lo; i < hi; i++ {
				if i > lo {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
				e := entries[i]
				args = append(args, first+int64(i), micros(e.At), e.Level, e.Source, e.Message, fields[i],
					e.WorkspaceID, e.SessionID)
			}
			if _, err := s.exec(ctx, tx, q.String(), args...); err != nil {
				return fmt.Errorf("insert log entries: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, e := range entries {
		e.Seq = last - n + 1 + int64(i)
	}
	return nil
}

// escapeLike quotes LIKE's wildcards (and the escape character itself) so
// free text matches literally.
func escapeLike(s string) string { return likeEscaper.Replace(s) }

var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// ListLogs builds the query from the set filter fields. Lists of levels and
// sources are de-duplicated and bounded so the statement texts stay few.
func (s *DB) ListLogs(ctx context.Context, f desk.LogFilter) ([]*desk.LogEntry, error) {
	var where []string
	var args []any
	if levels := dedupe(f.Levels); len(levels) > 0 {
		for _, l := range levels {
			if desk.LogLevelRank(l) < 0 {
				return nil, desk.Errorf(desk.EINVALID, "unknown log level %q", l)
			}
			args = append(args, l)
		}
		where = append(where, "level IN ("+placeholders(len(levels))+")")
	}
	if sources := dedupe(f.Sources); len(sources) > 0 {
		if len(sources) > logMaxSources {
			return nil, desk.Errorf(desk.EINVALID, "at most %d sources in one filter", logMaxSources)
		}
		for _, src := range sources {
			args = append(args, src)
		}
		where = append(where, "source IN ("+placeholders(len(sources))+")")
	}
	if f.Text != "" {
		// LOWER folds ASCII only on SQLite; desk's own keys and messages are
		// ASCII, and Postgres folds everything.
		p := "%" + escapeLike(strings.ToLower(f.Text)) + "%"
		where = append(where, `(LOWER(message) LIKE ? ESCAPE '\' OR LOWER(fields) LIKE ? ESCAPE '\')`)
		args = append(args, p, p)
	}
	if f.AfterSeq > 0 {
		where, args = append(where, "seq > ?"), append(args, f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		where, args = append(where, "seq < ?"), append(args, f.BeforeSeq)
	}
	if f.WorkspaceID != "" {
		where, args = append(where, "workspace_id = ?"), append(args, f.WorkspaceID)
	}
	if f.SessionID != "" {
		where, args = append(where, "session_id = ?"), append(args, f.SessionID)
	}
	q := `SELECT ` + logCols + ` FROM app_logs`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	if f.Newest {
		q += ` ORDER BY seq DESC`
	} else {
		q += ` ORDER BY seq`
	}
	q += ` LIMIT ?`
	args = append(args, logLimit(f.Limit))
	rows, err := s.query(ctx, s.db, q, args...)
	if err != nil {
		return nil, err
	}
	out, err := collect(rows, scanLog)
	if err != nil {
		return nil, err
	}
	if f.Newest {
		slices.Reverse(out)
	}
	return out, nil
}

func logLimit(n int) int {
	if n <= 0 {
		return desk.LogDefaultLimit
	}
	return min(n, desk.LogMaxLimit)
}

func dedupe(xs []string) []string {
	var out []string
	for _, x := range xs {
		if x != "" && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func (s *DB) LastLogSeq(ctx context.Context) (int64, error) {
	return s.lastLogSeq(ctx, s.db)
}

func (s *DB) lastLogSeq(ctx context.Context, x querier) (int64, error) {
	var last int64
	if err := s.queryRow(ctx, x, `SELECT last_seq FROM app_log_counter WHERE id = 1`).Scan(&last); err != nil {
		return 0, fmt.Errorf("read log seq: %w", err)
	}
	return last, nil
}

// PruneLogs deletes by age, then by count, in one transaction. The counter
// row is left alone: it is what keeps pruned seqs from coming back.
func (s *DB) PruneLogs(ctx context.Context, keep int, before time.Time) (int, error) {
	var total int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		total = 0
		if !before.IsZero() {
			res, err := s.exec(ctx, tx, `DELETE FROM app_logs WHERE at < ?`, micros(before))
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		if keep > 0 {
			// The (keep+1)-th newest seq and everything below it go; with
			// keep or fewer rows the subquery is NULL and nothing matches.
			res, err := s.exec(ctx, tx, `DELETE FROM app_logs WHERE seq <=
				(SELECT seq FROM app_logs ORDER BY seq DESC LIMIT 1 OFFSET ?)`, keep)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return int(total), err
}

func checkViewer(viewer string) error {
	if viewer == "" {
		return desk.Errorf(desk.EINVALID, "a log viewer name is required")
	}
	if len(viewer) > logMaxViewer {
		return desk.Errorf(desk.EINVALID, "log viewer name longer than %d bytes", logMaxViewer)
	}
	return nil
}

// SetLogSeen clamps seq to the counter so a mark set "past the end" cannot
// hide errors that have not happened yet, and upserts with a CASE (portable
// where MAX/GREATEST are not) so the mark only ever moves forward, also
// against a concurrent writer.
func (s *DB) SetLogSeen(ctx context.Context, viewer string, seq int64) (int64, error) {
	if err := checkViewer(viewer); err != nil {
		return 0, err
	}
	if seq < 0 {
		return 0, desk.Errorf(desk.EINVALID, "seen seq must not be negative")
	}
	var mark int64
	err := s.tx(ctx, func(tx *sql.Tx) error {
		last, err := s.lastLogSeq(ctx, tx)
		if err != nil {
			return err
		}
		clamped := min(seq, last)
		if _, err := s.exec(ctx, tx, `INSERT INTO app_log_seen (viewer, seq, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (viewer) DO UPDATE SET
				seq = CASE WHEN excluded.seq > app_log_seen.seq THEN excluded.seq ELSE app_log_seen.seq END,
				updated_at = excluded.updated_at`,
			viewer, clamped, micros(desk.Now())); err != nil {
			return fmt.Errorf("set log seen: %w", err)
		}
		return s.queryRow(ctx, tx, `SELECT seq FROM app_log_seen WHERE viewer = ?`, viewer).Scan(&mark)
	})
	return mark, err
}

func (s *DB) LogUnread(ctx context.Context, viewer string) (*desk.LogUnread, error) {
	if err := checkViewer(viewer); err != nil {
		return nil, err
	}
	u := &desk.LogUnread{Viewer: viewer, Counts: map[string]int{desk.LogWarn: 0, desk.LogError: 0}}
	err := s.queryRow(ctx, s.db, `SELECT seq FROM app_log_seen WHERE viewer = ?`, viewer).Scan(&u.Seen)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if u.LastSeq, err = s.LastLogSeq(ctx); err != nil {
		return nil, err
	}
	rows, err := s.query(ctx, s.db, `SELECT level, COUNT(*) FROM app_logs WHERE level IN (?, ?) AND seq > ? GROUP BY level`,
		desk.LogWarn, desk.LogError, u.Seen)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var level string
		var n int
		if err := rows.Scan(&level, &n); err != nil {
			return nil, err
		}
		u.Counts[level] = n
	}
	return u, rows.Err()
}
