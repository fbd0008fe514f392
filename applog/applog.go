// Package applog owns desk's app log: the operator's structured record of
// what desk is doing, with levels, sources, unread counts per viewer,
// filters and a live tail. Every slog record of desk reaches it through
// Handler; the Service batches the entries into a desk.AppLogStore from one
// background goroutine, applies retention by count and age, tracks seen
// marks, and fans stored entries out to live subscribers.
//
// It must never store or deliver an unredacted secret: every entry passes
// the Redactor after it leaves the logging caller and before it reaches the
// store, a live subscriber or the next handler. And it must never make a
// logging caller wait for the database: Handle only appends to a bounded
// queue that sheds debug and info entries first, and says so in the log.
package applog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// Defaults for zero Options fields.
const (
	DefaultQueueSize         = 4096
	DefaultBatchSize         = 1024
	DefaultMaxEntries        = 100_000
	DefaultMaxAge            = 30 * 24 * time.Hour
	DefaultRetentionInterval = 10 * time.Minute
	DefaultSubscriberBuffer  = 256
)

// Source is the source of the entries the service writes about itself.
const Source = "applog"

// Options configure a Service. Zero values take the defaults above.
type Options struct {
	// Level is the lowest level stored (default slog.LevelInfo). Records
	// below it may still go to Next.
	Level slog.Leveler
	// Next, when set, also receives every record it is enabled for, with
	// the message and attributes redacted — typically a text handler on
	// stderr. The service reports its own failures there too.
	Next slog.Handler
	// Secrets are values to replace wherever they appear; see AddSecret.
	Secrets []string
	// QueueSize bounds the entries waiting for the store. When it is full,
	// the oldest debug or info entry makes room. Warn and error entries may
	// overflow it up to twice its size before they are dropped; every drop
	// is counted and recorded in a warn entry.
	QueueSize int
	// BatchSize bounds the entries written in one transaction.
	BatchSize int
	// MaxEntries keeps at most this many entries (negative: no bound).
	MaxEntries int
	// MaxAge deletes entries older than this (negative: no bound).
	MaxAge time.Duration
	// RetentionInterval is how often retention runs in the background. It
	// also runs on Open and after every MaxEntries/10 appended entries.
	RetentionInterval time.Duration
	// SubscriberBuffer bounds the entries waiting for one live subscriber.
	SubscriberBuffer int
	// Now is the clock (default desk.Now).
	Now func() time.Time
}

// Errors of live subscriptions. Both are *desk.Error values, so the HTTP
// layer maps them like any other.
var (
	// ErrLagged ends a subscription that did not keep up; the entries it
	// missed are in the store after its last delivered seq.
	ErrLagged = &desk.Error{Code: desk.EBUSY, Message: "live log subscriber fell behind; resume after the last seq received"}
	// ErrClosed ends subscriptions when the service closes.
	ErrClosed = &desk.Error{Code: desk.EUNAVAILABLE, Message: "app log is closed"}
)

// Service is the app log. New, then Open to start writing; Close flushes.
// Records logged before Open wait in the queue.
type Service struct {
	store desk.AppLogStore
	opts  Options
	red   *Redactor
	wake  chan struct{}

	mu        sync.Mutex
	low, high []queued // waiting entries: debug/info and warn/error
	arrivals  uint64
	dropLow   int
	dropHigh  int
	closed    bool
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	// writeMu serializes writes, so seqs are stored and published in order.
	writeMu     sync.Mutex
	sincePrune  int
	pruneEveryN int

	subMu      sync.Mutex
	subs       map[*Subscription]struct{}
	subsClosed bool
}

type queued struct {
	n uint64 // arrival order across both queues
	e *desk.LogEntry
}

// New returns a service writing to store. It starts nothing.
func New(store desk.AppLogStore, opts Options) *Service {
	if opts.Level == nil {
		opts.Level = slog.LevelInfo
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.MaxEntries == 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.MaxAge == 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.RetentionInterval <= 0 {
		opts.RetentionInterval = DefaultRetentionInterval
	}
	if opts.SubscriberBuffer <= 0 {
		opts.SubscriberBuffer = DefaultSubscriberBuffer
	}
	if opts.Now == nil {
		opts.Now = desk.Now
	}
	s := &Service{
		store: store,
		opts:  opts,
		red:   NewRedactor(opts.Secrets...),
		wake:  make(chan struct{}, 1),
		subs:  map[*Subscription]struct{}{},
	}
	if opts.MaxEntries > 0 {
		s.pruneEveryN = max(opts.MaxEntries/10, 1)
	}
	return s
}

// Open applies retention once and starts the background writer.
func (s *Service) Open(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.cancel != nil {
		s.mu.Unlock()
		return errors.New("applog: already open")
	}
	s.mu.Unlock()
	if _, err := s.Prune(ctx); err != nil {
		return fmt.Errorf("app log retention: %w", err)
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.cancel = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go s.loop(lctx)
	s.signal()
	return nil
}

// Close stops the background writer, stores every queued entry, and ends
// the live subscriptions. Records logged after Close go only to Next. No
// goroutine of the service outlives it.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		// The writer stops on its own once its batch is stored; the
		// entries still queued go only to Next.
		s.endSubs()
		return fmt.Errorf("close app log: %w", ctx.Err())
	}
	err := s.flushAll(ctx)
	s.endSubs()
	return err
}

// endSubs ends the live subscriptions, once the log is closed.
func (s *Service) endSubs() {

	s.subMu.Lock()
	s.subsClosed = true
	for sub := range s.subs {
		s.endLocked(sub, ErrClosed)
	}
	s.subMu.Unlock()
}

// Flush stores every entry queued so far before it returns.
func (s *Service) Flush(ctx context.Context) error { return s.flushAll(ctx) }

func (s *Service) flushAll(ctx context.Context) error {
	for {
		more, err := s.writeBatch(ctx)
		if err != nil || !more {
			return err
		}
	}
}

// AddSecret makes the service replace v in every entry it has not yet
// stored and every entry after.
func (s *Service) AddSecret(v string) { s.red.AddSecret(v) }

// Redactor returns the service's redactor, for other writers of text that
// leaves desk (error messages, archives) to share its rules and secrets.
func (s *Service) Redactor() *Redactor { return s.red }

func (s *Service) now() time.Time { return s.opts.Now().UTC().Truncate(time.Microsecond) }

func (s *Service) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// enqueue adds e to the queue without ever waiting for the store.
func (s *Service) enqueue(e *desk.LogEntry) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	important := desk.UnreadLogLevel(e.Level)
	if len(s.low)+len(s.high) >= s.opts.QueueSize {
		switch {
		case len(s.low) > 0:
			// Shed the oldest debug/info entry to make room.
			s.low[0] = queued{}
			s.low = s.low[1:]
			s.dropLow++
		case !important:
			s.dropLow++
			s.mu.Unlock()
			return
		case len(s.high) >= 2*s.opts.QueueSize:
			s.dropHigh++
			s.mu.Unlock()
			return
		}
	}
	q := queued{n: s.arrivals, e: e}
	s.arrivals++
	if important {
		s.high = append(s.high, q)
	} else {
		s.low = append(s.low, q)
	}
	s.mu.Unlock()
	s.signal()
}

// take removes up to n entries from the queue in arrival order.
func (s *Service) take(n int) (batch []queued, dropLow, dropHigh int, more bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(batch) < n && len(s.low)+len(s.high) > 0 {
		if len(s.high) == 0 || (len(s.low) > 0 && s.low[0].n < s.high[0].n) {
			batch = append(batch, s.low[0])
			s.low[0] = queued{}
			s.low = s.low[1:]
		} else {
			batch = append(batch, s.high[0])
			s.high[0] = queued{}
			s.high = s.high[1:]
		}
	}
	dropLow, dropHigh = s.dropLow, s.dropHigh
	s.dropLow, s.dropHigh = 0, 0
	return batch, dropLow, dropHigh, len(s.low)+len(s.high) > 0
}

// requeue puts a batch that could not be stored back in front of the queue.
func (s *Service) requeue(batch []queued, dropLow, dropHigh int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var low, high []queued
	for _, q := range batch {
		if desk.UnreadLogLevel(q.e.Level) {
			high = append(high, q)
		} else {
			low = append(low, q)
		}
	}
	s.low = append(low, s.low...)
	s.high = append(high, s.high...)
	s.dropLow += dropLow
	s.dropHigh += dropHigh
}

// writeBatch redacts and stores one batch and publishes it, reporting
// whether more entries are waiting.
func (s *Service) writeBatch(ctx context.Context) (bool, error) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	batch, dropLow, dropHigh, more := s.take(s.opts.BatchSize)
	if len(batch) == 0 && dropLow+dropHigh == 0 {
		return more, nil
	}
	entries := make([]*desk.LogEntry, 0, len(batch)+1)
	for _, q := range batch {
		s.redact(q.e)
		entries = append(entries, q.e)
	}
	if dropLow+dropHigh > 0 {
		entries = append(entries, &desk.LogEntry{
			At: s.now(), Level: desk.LogWarn, Source: Source,
			Message: fmt.Sprintf("app log queue was full: dropped %d entries", dropLow+dropHigh),
			Fields:  map[string]any{"dropped_debug_info": dropLow, "dropped_warn_error": dropHigh},
		})
	}
	if err := s.store.AppendLogs(ctx, entries); err != nil {
		s.requeue(batch, dropLow, dropHigh)
		return true, fmt.Errorf("store app log entries: %w", err)
	}
	s.publish(entries)
	if s.pruneEveryN > 0 {
		s.sincePrune += len(entries)
		if s.sincePrune >= s.pruneEveryN {
			s.sincePrune = 0
			if _, err := s.Prune(ctx); err != nil {
				s.report("app log retention failed", err)
			}
		}
	}
	return more, nil
}

// redact replaces secrets in every text of e and bounds its size. It is
// idempotent, so an entry retried after a failed write is unchanged.
func (s *Service) redact(e *desk.LogEntry) {
	e.Message = truncate(s.red.String(e.Message), maxMessageBytes)
	e.Source = truncate(s.red.String(e.Source), 256)
	e.WorkspaceID = truncate(s.red.String(e.WorkspaceID), 256)
	e.SessionID = truncate(s.red.String(e.SessionID), 256)
	e.Fields = s.red.Fields(e.Fields)
}

// loop is the background writer: it stores entries as they come (what
// arrives during a write is the next batch), retries failed writes with
// backoff, and runs retention on a timer.
func (s *Service) loop(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.RetentionInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := s.Prune(ctx); err != nil && ctx.Err() == nil {
				s.report("app log retention failed", err)
			}
			continue
		case <-s.wake:
		}
		backoff := 50 * time.Millisecond
		for {
			more, err := s.writeBatch(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.report("app log write failed; retrying", err)
				t := time.NewTimer(backoff)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
				backoff = min(2*backoff, 10*time.Second)
				continue
			}
			if !more {
				break
			}
		}
	}
}

// report tells Next about the service's own failures; they cannot go
// through the store that is failing.
func (s *Service) report(msg string, err error) {
	if s.opts.Next == nil || !s.opts.Next.Enabled(context.Background(), slog.LevelError) {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelError, msg, 0)
	r.AddAttrs(slog.String(KeyComponent, Source), slog.String(desk.LogErr, s.red.String(err.Error())))
	_ = s.opts.Next.Handle(context.Background(), r)
}

// Prune applies retention now and reports how many entries it deleted.
func (s *Service) Prune(ctx context.Context) (int, error) {
	keep := max(s.opts.MaxEntries, 0)
	var before time.Time
	if s.opts.MaxAge > 0 {
		before = s.now().Add(-s.opts.MaxAge)
	}
	if keep == 0 && before.IsZero() {
		return 0, nil
	}
	return s.store.PruneLogs(ctx, keep, before)
}

// List returns one page of stored entries, oldest first. See
// desk.LogFilter for paging, and ParseQuery for the HTTP form.
func (s *Service) List(ctx context.Context, f desk.LogFilter) ([]*desk.LogEntry, error) {
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	return s.store.ListLogs(ctx, f)
}

// LastSeq returns the highest seq ever stored.
func (s *Service) LastSeq(ctx context.Context) (int64, error) { return s.store.LastLogSeq(ctx) }

// MarkSeen moves the viewer's seen mark forward to seq (never backwards,
// never past the last stored seq) and returns the mark.
func (s *Service) MarkSeen(ctx context.Context, viewer string, seq int64) (int64, error) {
	return s.store.SetLogSeen(ctx, viewer, seq)
}

// Unread returns the viewer's seen mark and its unread warn and error
// counts; info and debug entries are never unread.
func (s *Service) Unread(ctx context.Context, viewer string) (*desk.LogUnread, error) {
	return s.store.LogUnread(ctx, viewer)
}

func checkFilter(f desk.LogFilter) error {
	for _, l := range f.Levels {
		if desk.LogLevelRank(l) < 0 {
			return desk.Errorf(desk.EINVALID, "unknown log level %q (want one of %s)", l, strings.Join(desk.LogLevels, ", "))
		}
	}
	if f.AfterSeq < 0 || f.BeforeSeq < 0 {
		return desk.Errorf(desk.EINVALID, "after_seq and before_seq must not be negative")
	}
	return nil
}

// ParseQuery reads a filter from the query of GET /v1/logs or the live
// tail:
//
//	level=warn,error   (repeatable; any of)
//	min_level=warn     (that level and above; combined with level, both apply)
//	source=gc,session  (repeatable; any of)
//	q=text             (case-insensitive, message and fields)
//	after_seq=N  before_seq=N  (exclusive)
//	session=ses_…  workspace=ws_…  (also session_id, workspace_id)
//	limit=N            (default 200, at most 1000)
//
// Without after_seq the page is the newest matching entries; with it, the
// oldest entries after after_seq, for reading forward. Either way the page
// is oldest first.
func ParseQuery(v url.Values) (desk.LogFilter, error) {
	var f desk.LogFilter
	f.Levels = splitList(v["level"])
	if m := v.Get("min_level"); m != "" {
		rank := desk.LogLevelRank(m)
		if rank < 0 {
			return f, desk.Errorf(desk.EINVALID, "unknown min_level %q (want one of %s)", m, strings.Join(desk.LogLevels, ", "))
		}
		var levels []string
		for _, l := range desk.LogLevels[rank:] {
			if len(f.Levels) == 0 || slices.Contains(f.Levels, l) {
				levels = append(levels, l)
			}
		}
		if len(levels) == 0 {
			return f, desk.Errorf(desk.EINVALID, "level and min_level exclude every level")
		}
		f.Levels = levels
	}
	f.Sources = splitList(v["source"])
	f.Text = v.Get("q")
	f.SessionID = first(v.Get("session"), v.Get("session_id"))
	f.WorkspaceID = first(v.Get("workspace"), v.Get("workspace_id"))
	var err error
	if f.AfterSeq, err = seqParam(v, "after_seq"); err != nil {
		return f, err
	}
	if f.BeforeSeq, err = seqParam(v, "before_seq"); err != nil {
		return f, err
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return f, desk.Errorf(desk.EINVALID, "limit must be a positive integer")
		}
		f.Limit = min(n, desk.LogMaxLimit)
	}
	f.Newest = f.AfterSeq == 0
	return f, checkFilter(f)
}

func splitList(vs []string) []string {
	var out []string
	for _, v := range vs {
		for p := range strings.SplitSeq(v, ",") {
			if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func seqParam(v url.Values, name string) (int64, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, desk.Errorf(desk.EINVALID, "%s must be a non-negative integer", name)
	}
	return n, nil
}

// fieldsText is the fields' JSON as the store keeps it, for the same free
// text matching in live subscriptions.
func fieldsText(fields map[string]any) string {
	if len(fields) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

var _ desk.AppLogService = (*Service)(nil)

// ParseQuery is the package's ParseQuery, for the doors that reach the
// log through desk.AppLogService.
func (s *Service) ParseQuery(v url.Values) (desk.LogFilter, error) { return ParseQuery(v) }
