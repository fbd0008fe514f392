package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/internal/testwait"
)

func TestCLILogs(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.app.Logger.Warn("disk nearly full", "component", "gc", "free_bytes", 1024)
	c.app.Logger.Info("routine tick", "component", "gc")
	c.app.Logs.Flush(context.Background())

	out := c.ok("logs", "--level", "warn", "--source", "gc")
	if !strings.Contains(out, "WARN") || !strings.Contains(out, "disk nearly full") || strings.Contains(out, "routine tick") {
		t.Fatalf("logs --level warn:\n%s", out)
	}
	if !strings.Contains(out, "free_bytes=1024") {
		t.Fatalf("fields not printed:\n%s", out)
	}
	var entry desk.LogEntry
	line := strings.SplitN(c.ok("--json", "logs", "--source", "gc", "-q", "nearly"), "\n", 2)[0]
	if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Message != "disk nearly full" {
		t.Fatalf("logs --json: %q (%v)", line, err)
	}
	var u desk.LogUnread
	c.json(&u, "logs", "unread")
	if u.Counts["warn"] < 1 {
		t.Fatalf("unread = %+v", u)
	}
	c.json(&u, "logs", "seen")
	if u.Counts["warn"] != 0 || u.Seen != u.LastSeq {
		t.Fatalf("after seen = %+v", u)
	}
	c.fail(exitUsage, "logs", "seen", "minus-one")
	c.fail(exitInvalid, "logs", "--level", "loud")

	// -f follows: a new entry arrives while the command runs.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	root := newRoot()
	var buf safeBuffer
	root.SetOut(&buf)
	root.SetArgs([]string{"--server", c.url, "--token", c.token, "logs", "-f", "--source", "live"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	// Nothing says when the command has subscribed: log an entry on each
	// check until one is printed.
	if !testwait.Poll(10*time.Second, func() bool {
		if strings.Contains(buf.String(), "followed entry") {
			return true
		}
		c.app.Logger.Error("followed entry", "component", "live")
		return false
	}) {
		t.Fatalf("logs -f never printed the new entry: %q", buf.String())
	}
	cancel()
	<-done
}

func TestCLIArchive(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "acme")
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, text := range []string{"first", "second"} {
		rec := &archive.MessageInbound{Envelope: archive.Envelope{At: at.Add(time.Duration(i) * time.Minute), Channel: "cli", ConversationID: "c1"}, Text: text}
		if err := c.app.Archive.Append(context.Background(), ws.ID, rec); err != nil {
			t.Fatal(err)
		}
	}
	if out := c.ok("archive", "ls", ws.ID); !strings.Contains(out, "2026-05-01") || !strings.Contains(out, "c1") {
		t.Fatalf("archive ls:\n%s", out)
	}
	out := c.ok("archive", "cat", ws.ID, "--conversation", "c1")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"first"`) || !strings.Contains(lines[1], `"second"`) {
		t.Fatalf("archive cat:\n%s", out)
	}
	if out := c.ok("archive", "tail", ws.ID, "--from", "2026-05-01T12:01:00Z"); strings.Contains(out, `"first"`) || !strings.Contains(out, `"second"`) {
		t.Fatalf("archive tail --from:\n%s", out)
	}
	c.fail(exitUsage, "archive", "cat", ws.ID, "--from", "soon")
}

// safeBuffer is a bytes.Buffer safe for one writer and one reader.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
