package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/desk-runtime/desk"
)

var _ desk.TransferStore = (*DB)(nil)

// transferTable says how one table takes part in export and import.
type transferTable struct {
	Name string
	// Where selects exactly the workspace's rows; every ? in it is bound to
	// the workspace id. Import uses the same filter to check that every
	// inserted row belongs to the imported workspace.
	Where string
	// OrderBy is the primary key, so exports are in a stable order.
	OrderBy string
	// Export is false for rows the importer creates itself (tokens) and
	// never takes from an archive.
	Export bool
	// Resequence gives each imported row a fresh event seq.
	Resequence bool
}

// transferTables is the one list of tables that make up a workspace, in
// foreign-key order (a table comes after every table it refers to). Adding
// a table here is all it takes to export and import it.
//
// Rows being deleted are left out: they are already invisible, and an
// importer would only have to finish deleting them. Token hashes are never
// exported (a copy of an export must not hand out working credentials); the
// app log and the usage totals are operational state, not workspace data.
var transferTables = []transferTable{
	{Name: "workspaces", Where: "id = ?", OrderBy: "id", Export: true},
	{Name: "actors", Where: "workspace_id = ?", OrderBy: "id", Export: true},
	{Name: "sessions", Where: "workspace_id = ? AND NOT deleting", OrderBy: "id", Export: true},
	{Name: "artifacts", Where: "workspace_id = ? AND NOT deleting AND session_id IN (SELECT id FROM sessions WHERE workspace_id = ? AND NOT deleting)", OrderBy: "id", Export: true},
	{Name: "selection_groups", Where: "workspace_id = ?", OrderBy: "id", Export: true},
	{Name: "items", Where: "workspace_id = ?", OrderBy: "id", Export: true},
	{Name: "group_items", Where: "group_id IN (SELECT id FROM selection_groups WHERE workspace_id = ?)", OrderBy: "group_id, item_id", Export: true},
	{Name: "session_bindings", Where: "session_id IN (SELECT id FROM sessions WHERE workspace_id = ? AND NOT deleting)", OrderBy: "session_id, group_id", Export: true},
	{Name: "actor_tokens", Where: "actor_id IN (SELECT id FROM actors WHERE workspace_id = ?)", OrderBy: "hash", Export: false},
	// The execution model and the agent's records travel with the
	// workspace: a queue, its history and the transcripts are workspace
	// data. An execution that was active when exported names an owner the
	// importing desk does not have, so its recovery sweep settles it as
	// interrupted, as it would after a crash. Item leases are not
	// exported: they belong to executions running in this process.
	{Name: "surfaces", Where: "workspace_id = ? AND LIVE", OrderBy: "id", Export: true},
	// Handler threads, their groups and their episodes: a thread names its
	// surface and group, an episode its thread.
	{Name: "thread_groups", Where: "workspace_id = ? AND LIVE", OrderBy: "id", Export: true},
	{Name: "threads", Where: "workspace_id = ? AND LIVE", OrderBy: "id", Export: true},
	{Name: "episodes", Where: "workspace_id = ? AND LIVE", OrderBy: "id", Export: true},
	{Name: "queue_items", Where: "workspace_id = ? AND LIVE", OrderBy: "id", Export: true},
	{Name: "executions", Where: "workspace_id = ? AND LIVE", OrderBy: "id", Export: true},
	{Name: "blocks", Where: "LIVE", OrderBy: "id", Export: true},
	{Name: "messages", Where: "LIVE", OrderBy: "surface_id, seq", Export: true},
	{Name: "commands", Where: "LIVE", OrderBy: "id", Export: true},
	{Name: "approvals", Where: "LIVE", OrderBy: "id", Export: true},
	{Name: "input_requests", Where: "LIVE", OrderBy: "id", Export: true},
	{Name: "plans", Where: "LIVE", OrderBy: "id", Export: true},
	{Name: "loaded_extensions", Where: "LIVE", OrderBy: "surface_id, name", Export: true},
	// Model usage is accounting that goes with the workspace, so a budget
	// means the same after a move; it is kept for deleted sessions too.
	{Name: "model_usage", Where: "workspace_id = ?", OrderBy: "id", Export: true},
	// The ledger too, in order. Seqs are global to a desk, so an import
	// gives every event a fresh seq from the importing desk's counter,
	// keeping the exported order.
	{Name: "events", Where: "workspace_id = ?", OrderBy: "seq", Export: true, Resequence: true},
}

func init() {
	// LIVE: rows of sessions that exist and are not being deleted.
	for i := range transferTables {
		transferTables[i].Where = strings.ReplaceAll(transferTables[i].Where, "LIVE", "session_id IN (SELECT id FROM sessions WHERE workspace_id = ? AND NOT deleting)")
	}
}

func transferSpec(table string) (transferTable, bool) {
	for _, t := range transferTables {
		if t.Name == table {
			return t, true
		}
	}
	return transferTable{}, false
}

// wsArgs binds the workspace id to every placeholder of a filter.
func wsArgs(where, ws string) []any {
	args := make([]any, strings.Count(where, "?"))
	for i := range args {
		args[i] = ws
	}
	return args
}

// TransferTables lists the exported tables in dependency order.
func (s *DB) TransferTables() []string {
	var out []string
	for _, t := range transferTables {
		if t.Export {
			out = append(out, t.Name)
		}
	}
	return out
}

// Column kinds. The schema uses TEXT, BIGINT and BOOLEAN only; the drivers
// name them differently (SQLite reports the declared type, Postgres its own
// names), so both spellings map to one kind.
const (
	colText = iota
	colInt
	colBool
)

func columnKind(table, col, dbType string) (int, error) {
	switch strings.ToUpper(dbType) {
	case "TEXT", "VARCHAR", "CHAR", "BPCHAR", "NAME":
		return colText, nil
	case "BIGINT", "INT8", "INTEGER", "INT", "INT4", "SMALLINT", "INT2":
		return colInt, nil
	case "BOOLEAN", "BOOL":
		return colBool, nil
	}
	return 0, fmt.Errorf("transfer: column %s.%s has type %q, which is not portable (TEXT, BIGINT, BOOLEAN)", table, col, dbType)
}

type column struct {
	name string
	kind int
}

func columnsOf(table string, rows *sql.Rows) ([]column, error) {
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	cols := make([]column, len(cts))
	for i, ct := range cts {
		k, err := columnKind(table, ct.Name(), ct.DatabaseTypeName())
		if err != nil {
			return nil, err
		}
		cols[i] = column{name: strings.ToLower(ct.Name()), kind: k}
	}
	return cols, nil
}

// ExportRows streams the workspace's rows of one table. Values come out as
// string, int64, bool or nil whatever the store, so an export from SQLite
// and one from Postgres encode the same rows the same way.
func (s *DB) ExportRows(ctx context.Context, ws, table string, fn func(desk.Row) error) error {
	t, ok := transferSpec(table)
	if !ok || !t.Export {
		return fmt.Errorf("transfer: %s is not an exported table", table)
	}
	rows, err := s.query(ctx, s.db, `SELECT * FROM `+t.Name+` WHERE `+t.Where+` ORDER BY `+t.OrderBy, wsArgs(t.Where, ws)...)
	if err != nil {
		return fmt.Errorf("export %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := columnsOf(table, rows)
	if err != nil {
		return err
	}
	dest := make([]any, len(cols))
	for i, c := range cols {
		switch c.kind {
		case colText:
			dest[i] = new(sql.NullString)
		case colInt:
			dest[i] = new(sql.NullInt64)
		case colBool:
			dest[i] = new(sql.NullBool)
		}
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("export %s: %w", table, err)
		}
		row := make(desk.Row, len(cols))
		for i, c := range cols {
			var v any
			switch d := dest[i].(type) {
			case *sql.NullString:
				if d.Valid {
					v = d.String
				}
			case *sql.NullInt64:
				if d.Valid {
					v = d.Int64
				}
			case *sql.NullBool:
				if d.Valid {
					v = d.Bool
				}
			}
			row[c.name] = v
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ImportRows inserts rows in one transaction. Column names are checked
// against the table's own columns (so a row can name nothing else), values
// against the columns' kinds, and at the end every table's rows are counted
// through its workspace filter: a row that belongs to another workspace, or
// one marked as being deleted, makes the counts differ and the whole import
// is rolled back.
func (s *DB) ImportRows(ctx context.Context, ws string, next func() (string, desk.Row, error)) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		kinds := map[string]map[string]int{}
		inserted := map[string]int64{}
		stmts := map[string]*sql.Stmt{}
		defer func() {
			for _, st := range stmts {
				st.Close()
			}
		}()
		for n := 1; ; n++ {
			table, row, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			t, ok := transferSpec(table)
			if !ok {
				return desk.Errorf(desk.EINVALID, "the archive has rows of table %q, which desk does not import", table)
			}
			cols, ok := kinds[table]
			if !ok {
				if cols, err = s.tableColumns(ctx, tx, t.Name); err != nil {
					return err
				}
				kinds[table] = cols
			}
			if t.Resequence {
				seq, err := s.nextSeqs(ctx, tx, 1)
				if err != nil {
					return fmt.Errorf("import %s: %w", table, err)
				}
				row["seq"] = json.Number(strconv.FormatInt(seq, 10))
			}
			names := make([]string, 0, len(row))
			for k := range row {
				if _, ok := cols[k]; !ok {
					return desk.Errorf(desk.EINVALID, "row %d of table %s has column %q, which the table does not have", n, table, k)
				}
				names = append(names, k)
			}
			slices.Sort(names)
			args := make([]any, len(names))
			for i, k := range names {
				if args[i], err = importValue(cols[k], row[k]); err != nil {
					return desk.Errorf(desk.EINVALID, "row %d of table %s, column %s: %v", n, table, k, err)
				}
			}
			key := table + "(" + strings.Join(names, ",") + ")"
			st := stmts[key]
			if st == nil {
				ph := strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ")
				if st, err = tx.PrepareContext(ctx, s.q(`INSERT INTO `+t.Name+` (`+strings.Join(names, ", ")+`) VALUES (`+ph+`)`)); err != nil {
					return fmt.Errorf("import %s: %w", table, err)
				}
				stmts[key] = st
			}
			if _, err := st.ExecContext(ctx, args...); err != nil {
				if s.d.IsUniqueViolation != nil && s.d.IsUniqueViolation(err) {
					return desk.Errorf(desk.ECONFLICT, "row %d of table %s already exists in this desk (%s)", n, table, rowKey(row))
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// NOT NULL and foreign-key failures are the archive's
				// fault: it refers to rows it does not carry.
				return desk.Errorf(desk.EINVALID, "row %d of table %s (%s) was refused by the database: %v", n, table, rowKey(row), err)
			}
			inserted[table]++
		}
		for _, t := range transferTables {
			var have int64
			if err := s.queryRow(ctx, tx, `SELECT COUNT(*) FROM `+t.Name+` WHERE `+t.Where, wsArgs(t.Where, ws)...).Scan(&have); err != nil {
				return fmt.Errorf("import %s: %w", t.Name, err)
			}
			if have != inserted[t.Name] {
				return desk.Errorf(desk.EINVALID, "the archive's %s rows do not all belong to workspace %s (or some are marked as being deleted)", t.Name, ws)
			}
		}
		return nil
	})
}

// tableColumns reads a table's column kinds from the database itself.
func (s *DB) tableColumns(ctx context.Context, tx *sql.Tx, table string) (map[string]int, error) {
	rows, err := tx.QueryContext(s.inTx(ctx, tx), `SELECT * FROM `+table+` WHERE 1 = 0`)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", table, err)
	}
	defer rows.Close()
	cols, err := columnsOf(table, rows)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int, len(cols))
	for _, c := range cols {
		m[c.name] = c.kind
	}
	return m, rows.Err()
}

// importValue converts a decoded JSON value to the column's kind. Numbers
// arrive as json.Number (the transfer service decodes with UseNumber) so
// large integers are not rounded through float64.
func importValue(kind int, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch kind {
	case colText:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, fmt.Errorf("want a string, got %T", v)
	case colInt:
		switch n := v.(type) {
		case json.Number:
			i, err := strconv.ParseInt(string(n), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("want an integer, got %s", n)
			}
			return i, nil
		case int64:
			return n, nil
		case int:
			return int64(n), nil
		case float64:
			if n != math.Trunc(n) || math.Abs(n) > 1<<53 {
				return nil, fmt.Errorf("want an integer, got %v", n)
			}
			return int64(n), nil
		}
		return nil, fmt.Errorf("want an integer, got %T", v)
	case colBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, fmt.Errorf("want true or false, got %T", v)
	}
	return nil, fmt.Errorf("unknown column kind")
}

// rowKey names a row in messages by its id-like columns.
func rowKey(row desk.Row) string {
	var parts []string
	for _, k := range []string{"id", "hash", "group_id", "item_id", "session_id"} {
		if v, ok := row[k].(string); ok && v != "" && k != "hash" {
			parts = append(parts, k+"="+v)
		}
	}
	if len(parts) == 0 {
		return "no id"
	}
	return strings.Join(parts, " ")
}
