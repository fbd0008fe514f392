package postgres_test

import (
	"context"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) desk.Store {
		s, err := postgres.Open(context.Background(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestConcurrentMigrate opens the same empty schema from several goroutines
// at once, as two desk processes starting together would; the advisory lock
// must let exactly one migrate and the rest find the schema ready.
func TestConcurrentMigrate(t *testing.T) {
	dsn := pgtest.DSN(t)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			s, err := postgres.Open(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
