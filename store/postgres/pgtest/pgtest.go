// Package pgtest gives tests a private Postgres schema on the server named by
// DESK_TEST_POSTGRES, and skips them with a message when it is unset, so the
// Postgres half of every suite runs in CI and never silently passes.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvVar names the DSN of the test server.
const EnvVar = "DESK_TEST_POSTGRES"

// DSN returns a DSN whose search_path is a new, empty schema that is dropped
// when the test ends. It skips t when DESK_TEST_POSTGRES is unset.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvVar)
	if base == "" {
		t.Skipf("%s is not set: skipping the Postgres run (set it to a DSN such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", EnvVar)
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "desk_test_" + hex.EncodeToString(r[:])

	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", EnvVar, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema on %s: %v", EnvVar, err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", base)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
	})
	return WithSearchPath(base, schema)
}

// WithSearchPath adds search_path to a URL or key=value DSN; pgx passes
// unknown parameters to the server as run-time settings.
func WithSearchPath(dsn, schema string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " search_path=" + schema
}
