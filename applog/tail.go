package applog

import (
	"context"
	"errors"
	"strings"

	"github.com/desk-runtime/desk"
)

// Subscription is a live tail of the app log: entries matching its filter,
// in seq order, as soon as they are stored (and redacted). Only entries
// this process stores are delivered; another desk process sharing the
// database shows up in List and in Tail's catch-up, not live.
type Subscription struct {
	// C delivers the entries. It is closed when the subscription ends;
	// Err then says why.
	C <-chan *desk.LogEntry

	c    chan *desk.LogEntry
	s    *Service
	m    matcher
	err  error // guarded by s.subMu
	stop func() bool
}

// Subscribe starts a live tail of entries stored from now on that match f
// (f.Limit and f.Newest are ignored). It ends when ctx is done, on Close,
// when the service closes (ErrClosed), or when the subscriber lets
// Options.SubscriberBuffer entries pile up (ErrLagged): a slow reader is
// cut off, never waited for. Tail resumes such a reader without a gap.
func (s *Service) Subscribe(ctx context.Context, f desk.LogFilter) (*Subscription, error) {
	if err := checkFilter(f); err != nil {
		return nil, err
	}
	c := make(chan *desk.LogEntry, s.opts.SubscriberBuffer)
	sub := &Subscription{C: c, c: c, s: s, m: newMatcher(f)}
	s.subMu.Lock()
	if s.subsClosed {
		s.subMu.Unlock()
		return nil, ErrClosed
	}
	s.subs[sub] = struct{}{}
	s.subMu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.end(sub, nil) })
	s.subMu.Lock()
	if _, live := s.subs[sub]; live {
		sub.stop = stop
	} else {
		stop()
	}
	s.subMu.Unlock()
	return sub, nil
}

// Err reports why C was closed: nil for a cancelled context or Close,
// ErrLagged or ErrClosed otherwise.
func (sub *Subscription) Err() error {
	sub.s.subMu.Lock()
	defer sub.s.subMu.Unlock()
	return sub.err
}

// Close ends the subscription.
func (sub *Subscription) Close() { sub.s.end(sub, nil) }

func (s *Service) end(sub *Subscription, err error) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	s.endLocked(sub, err)
}

func (s *Service) endLocked(sub *Subscription, err error) {
	if _, live := s.subs[sub]; !live {
		return
	}
	delete(s.subs, sub)
	sub.err = err
	close(sub.c)
	if sub.stop != nil {
		sub.stop()
	}
}

// publish hands stored entries to the subscribers without ever blocking:
// a subscriber whose buffer is full is ended with ErrLagged.
func (s *Service) publish(entries []*desk.LogEntry) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	if len(s.subs) == 0 {
		return
	}
	for _, e := range entries {
		if e.Fields == nil {
			e.Fields = map[string]any{}
		}
		var text *string
		for sub := range s.subs {
			if !sub.m.match(e, &text) {
				continue
			}
			select {
			case sub.c <- e:
			default:
				s.endLocked(sub, ErrLagged)
			}
		}
	}
}

// Tail calls fn with every entry matching f in seq order: first the stored
// entries after f.AfterSeq (when it is set; otherwise only entries stored
// from now on), then live ones. When fn is too slow for the live stream,
// Tail catches up from the store and goes on, so fn sees no gap and no
// duplicate (entries pruned meanwhile excepted). It returns when ctx is
// done, fn fails, or the service closes.
func (s *Service) Tail(ctx context.Context, f desk.LogFilter, fn func(*desk.LogEntry) error) error {
	if err := checkFilter(f); err != nil {
		return err
	}
	last, replay := f.AfterSeq, f.AfterSeq > 0
	for {
		sub, err := s.Subscribe(ctx, f)
		if err != nil {
			return err
		}
		// Subscribed first, read the store second: an entry is then either
		// in the store read or delivered live, and seq dedupes the overlap.
		if replay {
			last, err = s.replay(ctx, f, last, fn)
		} else {
			last, err = s.store.LastLogSeq(ctx)
			replay = true
		}
		if err != nil {
			sub.Close()
			return err
		}
		for e := range sub.C {
			if e.Seq <= last {
				continue
			}
			if err := fn(e); err != nil {
				sub.Close()
				return err
			}
			last = e.Seq
		}
		err = sub.Err()
		switch {
		case errors.Is(err, ErrLagged):
			continue
		case err != nil:
			return err
		default:
			return ctx.Err()
		}
	}
}

func (s *Service) replay(ctx context.Context, f desk.LogFilter, last int64, fn func(*desk.LogEntry) error) (int64, error) {
	f.Newest, f.Limit = false, desk.LogMaxLimit
	for {
		f.AfterSeq = last
		page, err := s.store.ListLogs(ctx, f)
		if err != nil {
			return last, err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return last, err
			}
			last = e.Seq
		}
		if len(page) < f.Limit {
			return last, nil
		}
	}
}

// matcher is a LogFilter prepared for matching entries in memory with the
// store's semantics.
type matcher struct {
	levels, sources []string
	text            string
	after, before   int64
	ws, ses         string
}

func newMatcher(f desk.LogFilter) matcher {
	return matcher{
		levels: f.Levels, sources: f.Sources, text: strings.ToLower(f.Text),
		after: f.AfterSeq, before: f.BeforeSeq, ws: f.WorkspaceID, ses: f.SessionID,
	}
}

// match reports whether e passes; *text caches the lower-cased fields JSON
// of e across subscribers.
func (m *matcher) match(e *desk.LogEntry, text **string) bool {
	if len(m.levels) > 0 && !contains(m.levels, e.Level) ||
		len(m.sources) > 0 && !contains(m.sources, e.Source) ||
		m.after > 0 && e.Seq <= m.after ||
		m.before > 0 && e.Seq >= m.before ||
		m.ws != "" && e.WorkspaceID != m.ws ||
		m.ses != "" && e.SessionID != m.ses {
		return false
	}
	if m.text == "" || strings.Contains(strings.ToLower(e.Message), m.text) {
		return true
	}
	if *text == nil {
		t := strings.ToLower(fieldsText(e.Fields))
		*text = &t
	}
	return strings.Contains(**text, m.text)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
