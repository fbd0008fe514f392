package sqlstore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/store/sqlstore"
)

// TestGroupCommitCancelledCaller puts one caller whose context is cancelled
// while its statement runs into the same batch as eight callers whose
// contexts stay alive. The live callers' writes must all commit: the
// cancelled caller must not roll back the shared transaction (SQLite rolls
// an interrupted write's whole transaction back; pgx drops a connection
// whose query was cancelled).
func TestGroupCommitCancelledCaller(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "desk.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		// A write that takes a while: it inserts a long generated series.
		slow := `INSERT INTO probe (x) SELECT x FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x FROM c) AS g WHERE x = 1000000`
		cancelledCaller(t, s, slow)
	})
	t.Run("Postgres", func(t *testing.T) {
		s, err := postgres.Open(context.Background(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cancelledCaller(t, s, `INSERT INTO probe (x) SELECT 1 FROM pg_sleep(0.5)`)
	})
}

func cancelledCaller(t *testing.T, s *sqlstore.DB, slow string) {
	bg := context.Background()
	if _, err := s.SQL().ExecContext(bg, `CREATE TABLE probe (x BIGINT)`); err != nil {
		t.Fatal(err)
	}
	// Hold the committer in a batch of its own while the callers queue up,
	// so that all of them are taken together into the next batch.
	release := make(chan struct{})
	held := make(chan struct{})
	go s.Tx(bg, func(tx *sql.Tx) error { close(held); <-release; return nil })
	<-held

	const live = 8
	var wg sync.WaitGroup
	errs := make([]error, live)
	cctx, cancel := context.WithCancel(bg)
	defer cancel()
	started := make(chan struct{})
	var slowErr error
	wg.Go(func() {
		slowErr = s.Tx(cctx, func(tx *sql.Tx) error {
			close(started)
			return s.Exec(cctx, tx, slow)
		})
	})
	for i := range live {
		wg.Go(func() {
			errs[i] = s.Tx(bg, func(tx *sql.Tx) error {
				return s.Exec(bg, tx, `INSERT INTO probe (x) VALUES (?)`, 100+i)
			})
		})
	}
	time.Sleep(200 * time.Millisecond) // every caller is waiting to be taken
	close(release)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow caller never ran")
	}
	time.Sleep(50 * time.Millisecond)
	cancel() // while its statement runs
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("live caller %d failed with the cancelled caller's batch: %v", i, err)
		}
	}
	var n int
	if err := s.SQL().QueryRowContext(bg, `SELECT count(*) FROM probe WHERE x BETWEEN 100 AND 199`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != live {
		t.Fatalf("%d of %d live writes are stored", n, live)
	}
	// The cancelled caller hears its write's real outcome.
	if err := s.SQL().QueryRowContext(bg, `SELECT count(*) FROM probe WHERE x NOT BETWEEN 100 AND 199`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if (slowErr == nil) != (n == 1) {
		t.Fatalf("the cancelled caller was told %v, and %d of its rows are stored", slowErr, n)
	}
}
