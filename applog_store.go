package desk

import (
	"context"
	"time"
)

// App log levels. Only warn and error ever count as unread.
const (
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
)

// LogLevels lists the app log levels from least to most severe.
var LogLevels = []string{LogDebug, LogInfo, LogWarn, LogError}

// LogLevelRank returns the position of level in LogLevels (debug 0 …
// error 3), or -1 for an unknown level.
func LogLevelRank(level string) int {
	for i, l := range LogLevels {
		if l == level {
			return i
		}
	}
	return -1
}

// UnreadLogLevel reports whether entries of the level count as unread until
// a viewer's seen mark passes them. Info and debug never do.
func UnreadLogLevel(level string) bool { return level == LogWarn || level == LogError }

// Paging limits of ListLogs. A filter without a limit gets
// LogDefaultLimit entries; no call returns more than LogMaxLimit.
const (
	LogDefaultLimit = 200
	LogMaxLimit     = 1000
)

// LogEntry is one app log entry: a structured, redacted operational event.
// Seq is assigned by the store, strictly increasing and never reused, not
// even after the entries before it were pruned or the process restarted.
// Entries handed out by the applog service are shared and must not be
// modified.
type LogEntry struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Level   string    `json:"level"`
	Source  string    `json:"source"`
	Message string    `json:"message"`
	// Fields is a JSON object: the record's attributes, groups flattened to
	// dotted keys, with secrets already replaced.
	Fields      map[string]any `json:"fields"`
	WorkspaceID string         `json:"workspace_id,omitempty"`
	SessionID   string         `json:"session_id,omitempty"`
}

// LogFilter selects app log entries. Every set field narrows the result.
type LogFilter struct {
	// Levels and Sources match any of the listed values; empty means all.
	Levels  []string
	Sources []string
	// Text is a case-insensitive substring of the message or of the fields'
	// JSON text (keys and values).
	Text string
	// AfterSeq and BeforeSeq are exclusive bounds; 0 means unbounded.
	AfterSeq  int64
	BeforeSeq int64
	// WorkspaceID and SessionID match the entry's columns exactly.
	WorkspaceID string
	SessionID   string
	// Limit bounds the page: <= 0 means LogDefaultLimit, and it is capped
	// at LogMaxLimit.
	Limit int
	// Newest picks the newest matching entries instead of the oldest ones.
	// Either way the page is returned oldest first.
	Newest bool
}

// LogUnread is a viewer's read state of the app log.
type LogUnread struct {
	Viewer string `json:"viewer"`
	// Seen is the viewer's seen mark: every entry with seq <= Seen is read.
	Seen int64 `json:"seen"`
	// LastSeq is the highest seq ever assigned (0 before the first entry).
	LastSeq int64 `json:"last_seq"`
	// Counts holds the unread entries per level: always exactly the keys
	// "warn" and "error".
	Counts map[string]int `json:"counts"`
}

// AppLogStore is the durable part of the app log. The applog service
// redacts entries before it calls AppendLogs; the store keeps what it is
// given.
type AppLogStore interface {
	// AppendLogs stores the entries in one transaction, in order, assigning
	// each its Seq (set on the entries only when the call succeeds). Seqs of
	// one call are increasing, and a call that commits after another gets
	// larger seqs, even when the two come from different processes.
	AppendLogs(ctx context.Context, entries []*LogEntry) error
	// ListLogs returns one page of matching entries, oldest first.
	ListLogs(ctx context.Context, f LogFilter) ([]*LogEntry, error)
	// LastLogSeq returns the highest seq ever assigned, pruned or not.
	LastLogSeq(ctx context.Context) (int64, error)
	// PruneLogs deletes entries older than before (unless before is zero)
	// and all but the newest keep entries (unless keep <= 0), reporting how
	// many it deleted. It never lowers LastLogSeq.
	PruneLogs(ctx context.Context, keep int, before time.Time) (int, error)
	// SetLogSeen moves the viewer's seen mark forward to seq, clamped to
	// LastLogSeq; it never moves the mark backwards. It returns the mark.
	SetLogSeen(ctx context.Context, viewer string, seq int64) (int64, error)
	// LogUnread returns the viewer's seen mark and the warn and error
	// entries after it.
	LogUnread(ctx context.Context, viewer string) (*LogUnread, error)
}
