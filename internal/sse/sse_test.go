package sse

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestWriterBytes pins the wire format both doors relied on before they
// shared this writer: the API's JSON events (an id only above zero) and
// the web UI's multi-line HTML events and comments.
func TestWriterBytes(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	w := New(rec)
	if !rec.Flushed {
		t.Error("the headers were not flushed before the first event")
	}
	steps := []func() error{
		func() error { return w.JSON(7, "execution.started", map[string]any{"seq": 7, "text": "a\nb</x>"}) },
		func() error { return w.JSON(0, "gap", desk.EventGap{Requested: 3, Oldest: 9}) },
		func() error { return w.Event("12-4", "patch", "<div>\n<p>hi</p>\n</div>") },
		func() error { return w.Event("", "entry", "") },
		func() error { return w.Comment("keep-alive") },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := "id: 7\nevent: execution.started\ndata: {\"seq\":7,\"text\":\"a\\nb\\u003c/x\\u003e\"}\n\n" +
		"event: gap\ndata: {\"requested\":3,\"oldest\":9}\n\n" +
		"id: 12-4\nevent: patch\ndata: <div>\ndata: <p>hi</p>\ndata: </div>\n\n" +
		"event: entry\ndata: \n\n" +
		": keep-alive\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream =\n%q\nwant\n%q", got, want)
	}
	h := rec.Result().Header
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
		if h.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, h.Get(k), v)
		}
	}
	if rec.Code != http.StatusOK {
		t.Errorf("status = %d, want 200", rec.Code)
	}
}

// TestLastEventID: the header wins over the query parameter, and a value
// that is not a non-negative integer is EINVALID.
func TestLastEventID(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header, query string
		want          int64
		bad           bool
	}{
		{"", "", 0, false},
		{"42", "7", 42, false},
		{"", "7", 7, false},
		{"-1", "", 0, true},
		{"x", "", 0, true},
	} {
		r := httptest.NewRequestWithContext(context.Background(), "GET", "/v1/events?last_event_id="+c.query, nil)
		if c.header != "" {
			r.Header.Set("Last-Event-ID", c.header)
		}
		n, err := LastEventID(r)
		if c.bad {
			if !desk.IsCode(err, desk.EINVALID) {
				t.Errorf("header %q query %q: err = %v, want EINVALID", c.header, c.query, err)
			}
			continue
		}
		if err != nil || n != c.want {
			t.Errorf("header %q query %q = %d, %v; want %d", c.header, c.query, n, err, c.want)
		}
	}
}
