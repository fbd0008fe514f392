package httpdoor

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rs = append(r.rs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func attr(rec slog.Record, key string) slog.Value {
	var v slog.Value
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// TestAuthFailuresWindow: the first failure of an address is logged at
// once, the rest of its window only counted, and the next entry carries the
// count; another address has its own window.
func TestAuthFailuresWindow(t *testing.T) {
	h := &records{}
	now := time.Unix(1000, 0)
	a := NewAuthFailures(slog.New(h), time.Minute, func() time.Time { return now })
	req := func(addr string) {
		r := httptest.NewRequest("GET", "/v1/workspaces", nil)
		r.RemoteAddr = addr
		a.Note(r, "api", errors.New("unknown token"))
	}
	for range 10 {
		req("10.0.0.1:5000")
	}
	req("10.0.0.2:6000")
	if len(h.rs) != 2 {
		t.Fatalf("%d entries for 10 + 1 failures in one window, want 2", len(h.rs))
	}
	now = now.Add(61 * time.Second)
	req("10.0.0.1:5001")
	if len(h.rs) != 3 {
		t.Fatalf("no entry after the window: %d", len(h.rs))
	}
	if got := attr(h.rs[2], "count").Int64(); got != 10 {
		t.Fatalf("count after the window = %d, want 10 (9 counted + this one)", got)
	}
	if got := attr(h.rs[0], "remote").String(); got != "10.0.0.1" {
		t.Fatalf("remote = %q", got)
	}
}
