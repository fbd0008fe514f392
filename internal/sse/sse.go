// Package sse is desk's one server-sent events writer, used by the API's
// event and log streams and the web UI's page and log streams, and the
// registry (Streams) that owns every open stream so a shutdown can end
// them.
package sse

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// Writer writes server-sent events. A mutex keeps the keep-alive
// goroutine and the event handler from interleaving their writes.
type Writer struct {
	mu sync.Mutex
	w  http.ResponseWriter
	rc *http.ResponseController
}

// New starts an event stream on w: it sends the stream's headers and a
// 200 and flushes them, so the client knows the stream is open before the
// first event.
func New(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold events back
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: w, rc: http.NewResponseController(w)}
	s.flush()
	return s
}

func (s *Writer) flush() { _ = s.rc.Flush() }

// Event writes one event and flushes. A non-empty id is sent as the
// event's id; data may span lines (each becomes a data line). The caller
// keeps carriage returns out of data: one would end an SSE line early.
func (s *Writer) Event(id, event, data string) error {
	var b strings.Builder
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	b.WriteString("event: " + event + "\n")
	for line := range strings.SplitSeq(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return s.write(b.String())
}

// JSON writes one event with a JSON body. An id above zero is sent as the
// event's id; zero (a gap or error notice, which is not a place in the
// stream) sends none, so the client keeps the last real id: a browser's
// EventSource stores "id: 0" and would reconnect with Last-Event-ID: 0,
// which replays everything.
func (s *Writer) JSON(id int64, event string, v any) error {
	b, err := json.Marshal(v) // one line: JSON escapes newlines in strings
	if err != nil {
		return err
	}
	sid := ""
	if id > 0 {
		sid = strconv.FormatInt(id, 10)
	}
	return s.Event(sid, event, string(b))
}

// Comment writes a comment line, which clients ignore: a keep-alive, so
// idle connections are not cut by proxies and dead clients are noticed.
func (s *Writer) Comment(text string) error {
	return s.write(": " + text + "\n\n")
}

func (s *Writer) write(text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write([]byte(text)); err != nil {
		return err
	}
	s.flush()
	return nil
}

// KeepAliveEvery is how often an idle stream sends a comment.
const KeepAliveEvery = 15 * time.Second

// KeepAlive sends the comment "keep-alive" every KeepAliveEvery until ctx
// ends, and cancels the stream when a write fails (the client is gone).
func (s *Writer) KeepAlive(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(KeepAliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Comment("keep-alive"); err != nil {
				cancel()
				return
			}
		}
	}
}

// LastEventID reads where a reconnecting client left off: the
// Last-Event-ID header, or the last_event_id query parameter for clients
// (like curl or EventSource polyfills) that cannot set headers.
func LastEventID(r *http.Request) (int64, error) {
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
