// Package uistate owns the state people's clients keep beside the domain:
// composer drafts per surface, which sessions someone has open (a hold a
// client renews while it shows the session), and the unread flag — set when
// a turn of a session finishes while nobody holds it open, cleared when
// someone opens it. The web UI and the HTTP API both use it, so a draft
// typed in one browser is there in another, and a CLI sees the same unread
// dots the sidebar shows.
//
// It must never decide who may see a session (the session service does,
// from the caller in the context) and never change a session's recency:
// reading is not activity.
package uistate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/execution"
)

// Tailer follows the live event log.
type Tailer interface {
	Tail(ctx context.Context, f desk.EventFilter, gap func(execution.Gap) error, fn func(*desk.Event) error) error
}

// Options tune the service; zero values take the defaults noted.
type Options struct {
	// HoldTTL is how long one open (a heartbeat) holds a session open (30s).
	HoldTTL time.Duration
	// Retry paces restarts of the event watcher after a store failure (1s).
	Retry  time.Duration
	Logger *slog.Logger
	Now    func() time.Time
}

// Service keeps drafts and holds, and marks sessions unread.
type Service struct {
	store    desk.UIStore
	sessions desk.SessionService
	tail     Tailer
	opts     Options
	log      *slog.Logger

	mu     sync.Mutex
	closed bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns the service; Open starts its watcher.
func New(store desk.UIStore, sessions desk.SessionService, tail Tailer, opts Options) *Service {
	if opts.HoldTTL == 0 {
		opts.HoldTTL = 30 * time.Second
	}
	if opts.Retry == 0 {
		opts.Retry = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = desk.Now
	}
	return &Service{store: store, sessions: sessions, tail: tail, opts: opts, log: opts.Logger}
}

// HoldTTL is how long one Open holds a session open.
func (s *Service) HoldTTL() time.Duration { return s.opts.HoldTTL }

// Open starts the watcher that marks sessions unread when their turns
// finish. It follows events from now on: a turn that finished while desk
// was down left nobody watching, and its session keeps its flag as it was.
func (s *Service) Open(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil || s.closed {
		return errors.New("uistate: already opened")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// The watcher reads every workspace's events.
	ctx = desk.WithPrincipal(ctx, desk.Principal{Admin: true})
	s.wg.Go(func() { s.watch(ctx) })
	return nil
}

// Close stops the watcher and waits for it until ctx ends. It is
// idempotent.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("uistate watcher did not stop: %w", ctx.Err())
	}
}

func (s *Service) watch(ctx context.Context) {
	after := int64(-1)
	for ctx.Err() == nil {
		err := s.tail.Tail(ctx, desk.EventFilter{AfterSeq: after}, func(execution.Gap) error { return nil }, func(e *desk.Event) error {
			after = e.Seq
			if !finished(e.Type) || e.SessionID == "" {
				return nil
			}
			_, err := s.store.MarkUnreadIfClosed(ctx, e.SessionID, s.opts.Now())
			if desk.IsCode(err, desk.ENOTFOUND) {
				return nil // deleted meanwhile
			}
			return err
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		s.log.Error("unread watcher", desk.LogErr, err)
		select {
		case <-ctx.Done():
		case <-time.After(s.opts.Retry):
		}
	}
}

// finished reports whether an event type settles a turn.
func finished(typ string) bool {
	switch typ {
	case "execution." + desk.PhaseEnded, "execution." + desk.PhaseFailed, "execution." + desk.PhaseInterrupted:
		return true
	}
	return false
}

// surfaceOf returns the visible session and the surface named (default:
// its orchestrator surface).
func (s *Service) surfaceOf(ctx context.Context, sessionID, surfaceID string) (*desk.Session, string, error) {
	x, err := s.sessions.Get(ctx, sessionID)
	if err != nil {
		return nil, "", err
	}
	if surfaceID == "" {
		surfaceID = x.SurfaceID
	}
	return x, surfaceID, nil
}

// Draft returns a surface's draft (empty when there is none).
func (s *Service) Draft(ctx context.Context, sessionID, surfaceID string) (*desk.Draft, error) {
	x, srf, err := s.surfaceOf(ctx, sessionID, surfaceID)
	if err != nil {
		return nil, err
	}
	return s.store.GetDraft(ctx, x.ID, srf)
}

// SaveDraft replaces a surface's draft; an empty text clears it.
func (s *Service) SaveDraft(ctx context.Context, sessionID, surfaceID, text string) (*desk.Draft, error) {
	if !utf8.ValidString(text) {
		return nil, desk.Errorf(desk.EINVALID, "a draft must be valid UTF-8")
	}
	if len(text) > desk.MaxDraftBytes {
		return nil, desk.Errorf(desk.ETOOLARGE, "the draft is %d bytes; a draft holds at most %d", len(text), desk.MaxDraftBytes)
	}
	x, srf, err := s.surfaceOf(ctx, sessionID, surfaceID)
	if err != nil {
		return nil, err
	}
	d := &desk.Draft{SessionID: x.ID, SurfaceID: srf, Text: text}
	if err := s.store.SaveDraft(ctx, d); err != nil {
		return nil, err
	}
	return d, nil
}

// maxViewer bounds a client's viewer name.
const maxViewer = 128

// viewerKey scopes a client's viewer name to its caller, so one caller can
// neither renew nor end another's hold.
func viewerKey(ctx context.Context, viewer string) (string, error) {
	viewer = strings.TrimSpace(viewer)
	if viewer == "" {
		viewer = "default"
	}
	if len(viewer) > maxViewer || !utf8.ValidString(viewer) {
		return "", desk.Errorf(desk.EINVALID, "viewer must be valid UTF-8 of at most %d bytes", maxViewer)
	}
	p, _ := desk.PrincipalFrom(ctx)
	who := p.ActorID
	if p.Admin {
		who = desk.AdminActor
	}
	return who + "/" + viewer, nil
}

// OpenSession holds the session open for viewer for HoldTTL and clears
// its unread flag; clients call it again before the hold runs out while
// they still show the session.
func (s *Service) OpenSession(ctx context.Context, sessionID, viewer string) (*desk.Session, error) {
	key, err := viewerKey(ctx, viewer)
	if err != nil {
		return nil, err
	}
	x, err := s.sessions.Get(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if err := s.store.OpenSession(ctx, x.ID, key, s.opts.Now().Add(s.opts.HoldTTL)); err != nil {
		return nil, err
	}
	return s.sessions.Get(ctx, x.ID)
}

// Leave ends viewer's hold on the session at once.
func (s *Service) Leave(ctx context.Context, sessionID, viewer string) error {
	key, err := viewerKey(ctx, viewer)
	if err != nil {
		return err
	}
	x, err := s.sessions.Get(ctx, sessionID)
	if err != nil {
		return err
	}
	return s.store.CloseSession(ctx, x.ID, key)
}

var _ desk.UIService = (*Service)(nil)
