package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// LogPage is one page of the app log.
type LogPage = desk.LogList

// Logs reads one page of the app log; q takes the filters of GET /v1/logs
// (level, min_level, source, q, after_seq, before_seq, session, workspace,
// limit).
func (c *Client) Logs(ctx context.Context, q url.Values) (*LogPage, error) {
	var p LogPage
	if err := c.doJSON(ctx, "GET", withQuery("/v1/logs", q), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// LogsUnread returns the caller's unread warn and error counts.
func (c *Client) LogsUnread(ctx context.Context) (*desk.LogUnread, error) {
	var u desk.LogUnread
	if err := c.doJSON(ctx, "GET", "/v1/logs/unread", nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// LogsSeen moves the caller's seen mark forward to seq.
func (c *Client) LogsSeen(ctx context.Context, seq int64) (*desk.LogUnread, error) {
	var u desk.LogUnread
	if err := c.doJSON(ctx, "POST", "/v1/logs/seen", map[string]int64{"seq": seq}, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Event is one server-sent event.
type Event struct {
	ID   int64
	Type string
	Data json.RawMessage
}

// Stream follows a server-sent event stream at path, calling fn for each
// event. When the connection drops it reconnects with Last-Event-ID, so fn
// sees every event once, until ctx ends or fn returns an error. lastID is
// the id to resume after, or -1 to start from now.
func (c *Client) Stream(ctx context.Context, path string, lastID int64, fn func(Event) error) error {
	backoff := 250 * time.Millisecond
	for {
		h := http.Header{}
		if lastID >= 0 {
			h.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
		}
		resp, err := c.send(ctx, request{method: "GET", path: path, header: h})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// Refusals (bad token, bad filter) are final; an unreachable
			// server is retried, as a restarting server is normal.
			if !desk.IsCode(err, desk.EUNAVAILABLE) {
				return err
			}
		} else {
			backoff = 250 * time.Millisecond
			err = readEvents(resp.Body, func(e Event) error {
				if e.ID > 0 {
					lastID = e.ID
				}
				return fn(e)
			})
			resp.Body.Close()
			var stop *streamStop
			if errors.As(err, &stop) {
				return stop.err
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}

// streamStop carries an error from the caller's callback out of the
// reconnect loop.
type streamStop struct{ err error }

func (s *streamStop) Error() string { return s.err.Error() }

func readEvents(r io.Reader, fn func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var e Event
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				e.Data = json.RawMessage(strings.Join(data, "\n"))
				if err := fn(e); err != nil {
					return &streamStop{err}
				}
			}
			e, data = Event{}, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			e.ID, _ = strconv.ParseInt(strings.TrimSpace(line[3:]), 10, 64)
		case strings.HasPrefix(line, "event:"):
			e.Type = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.EOF
}

// TailLogs follows the app log from after seq (0: from now), calling fn for
// every entry matching q, reconnecting as needed.
func (c *Client) TailLogs(ctx context.Context, q url.Values, after int64, fn func(*desk.LogEntry) error) error {
	return c.Stream(ctx, withQuery("/v1/logs/stream", q), after, func(e Event) error {
		if e.Type != "log" {
			if e.Type == "error" {
				var b struct{ Code, Message string }
				_ = json.Unmarshal(e.Data, &b)
				return desk.Errorf(b.Code, "%s", b.Message)
			}
			return nil
		}
		var le desk.LogEntry
		if err := json.Unmarshal(e.Data, &le); err != nil {
			return err
		}
		return fn(&le)
	})
}

// ArchiveFile describes one archive file.
type ArchiveFile = desk.ArchiveFile

// ArchiveDays lists the days with archive files and the files (of one day
// when day is set).
func (c *Client) ArchiveDays(ctx context.Context, ws, day string) ([]string, []ArchiveFile, error) {
	var out desk.ArchiveDays
	q := url.Values{}
	if day != "" {
		q.Set("day", day)
	}
	if err := c.doJSON(ctx, "GET", withQuery("/v1/workspaces/"+esc(ws)+"/archive/days", q), nil, &out); err != nil {
		return nil, nil, err
	}
	return out.Days, out.Files, nil
}

// ArchiveFilter selects archive records; zero values do not filter.
type ArchiveFilter struct {
	Channel, Conversation string
	From, To              time.Time
}

// ReadArchive streams matching records as NDJSON, exactly as stored. The
// caller closes the reader.
func (c *Client) ReadArchive(ctx context.Context, ws string, f ArchiveFilter) (io.ReadCloser, error) {
	q := url.Values{}
	if f.Channel != "" {
		q.Set("channel", f.Channel)
	}
	if f.Conversation != "" {
		q.Set("conversation", f.Conversation)
	}
	if !f.From.IsZero() {
		q.Set("from", f.From.Format(time.RFC3339Nano))
	}
	if !f.To.IsZero() {
		q.Set("to", f.To.Format(time.RFC3339Nano))
	}
	resp, err := c.send(ctx, request{method: "GET", path: withQuery("/v1/workspaces/"+esc(ws)+"/archive", q)})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
