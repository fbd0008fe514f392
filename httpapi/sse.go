package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// sseWriter writes server-sent events. Each event carries an id so a client
// that reconnects sends Last-Event-ID and resumes without a gap.
type sseWriter struct {
	mu sync.Mutex // events and keep-alive comments come from two goroutines
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold events back
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.flush()
	return s
}

func (s *sseWriter) flush() { _ = s.rc.Flush() }

// event writes one event with a type and a JSON body, and flushes. An id
// above zero is sent as the event's id; zero (a gap or error notice, which
// is not a place in the stream) sends none, so the client keeps the last
// real id: a browser's EventSource stores "id: 0" and would reconnect with
// Last-Event-ID: 0, which replays everything.
func (s *sseWriter) event(id int64, typ string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id > 0 {
		if _, err := fmt.Fprintf(s.w, "id: %d\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
		return err
	}
	s.flush()
	return nil
}

// comment writes a keep-alive comment so idle connections are not cut by
// proxies and dead clients are noticed.
func (s *sseWriter) comment(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Fprintf(s.w, ": %s\n\n", text); err != nil {
		return err
	}
	s.flush()
	return nil
}

// lastEventID reads where a reconnecting client left off: the Last-Event-ID
// header, or the last_event_id query parameter for clients (like curl or
// EventSource polyfills) that cannot set headers.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, desk.Errorf(desk.EINVALID, "Last-Event-ID %q must be a non-negative integer", v)
	}
	return n, nil
}

// keepAlive is how often an idle stream sends a comment.
const keepAlive = 15 * time.Second

// keepAlive sends a comment every keepAlive until ctx ends, and cancels the
// stream when a write fails (the client is gone).
func (s *sseWriter) keepAlive(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(keepAlive)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.comment("keep-alive"); err != nil {
				cancel()
				return
			}
		}
	}
}
