// Package dispatch owns dispatches: one caller asking a target (an
// @signature, a session or a workspace) about a subject, with an
// immutable snapshot of who asked, where it went and who owns the reply
// (OpenAlice's dispatch). It records the snapshot before anything is
// sent, submits the prompt through the lifecycle's ask (idempotently, so
// a crash between the two repeats nothing), follows the target's turn to
// its end, and — when the caller owns the reply — queues the reply on the
// caller's surface as a dispatch_reply row in the same transaction that
// settles the dispatch, so of several nodes exactly one delivers it, once.
// It appends every dispatch and reply to the private projection
// DESK_HOME/state/agent-conversations.jsonl, which is never an authority:
// Rebuild writes the same lines from the store.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/conversation"
	"github.com/desk-runtime/desk/internal/tickloop"
)

// Store is what the dispatch service keeps and reads.
type Store interface {
	desk.DispatchStore
	GetQueueItem(ctx context.Context, id string) (*desk.QueueItem, error)
	GetExecution(ctx context.Context, id string) (*desk.Execution, error)
	ListMessages(ctx context.Context, surfaceID string, before int64, limit int) ([]*desk.Message, error)
}

// Asker resolves a target and queues a prompt there (the lifecycle
// service's Ask).
type Asker interface {
	Ask(ctx context.Context, in desk.AskInput) (*desk.AskResult, error)
}

// Options configure the service.
type Options struct {
	Asker    Asker
	Sessions desk.SessionService
	// Projection is the file dispatches and replies are appended to
	// ("": none).
	Projection string
	Logger     *slog.Logger
	// Interval is how often open dispatches are followed (default 1s);
	// Manual starts no loop (tests call Tick).
	Interval time.Duration
	Manual   bool
	// Leader, when set, follows dispatches only on the node that leads,
	// its writes fenced by the leader's term (nil: on every node).
	Leader desk.Leadership
}

// Bounds.
const (
	maxText     = 64 << 10
	maxSubject  = 200
	maxReply    = 16 << 10
	stuckSubmit = 30 * time.Second // a pending dispatch older than this is submitted again
)

// Service is the dispatch service.
type Service struct {
	store Store
	opts  Options
	log   *slog.Logger

	mu   sync.Mutex // serialises appends to the projection
	loop tickloop.Loop
}

// New makes the service; Open starts following open dispatches.
func New(st Store, o Options) *Service {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, opts: o, log: o.Logger}
}

// Open starts the loop that follows open dispatches.
func (s *Service) Open(ctx context.Context) error {
	if !s.opts.Manual {
		s.loop.Start(ctx, s.opts.Interval, tickloop.Led(s.opts.Leader, func(ctx context.Context) {
			if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("dispatch tick", desk.LogErr, err)
			}
		}))
	}
	return nil
}

// Close stops the loop and waits for it. It is idempotent.
func (s *Service) Close(ctx context.Context) error { return s.loop.Stop(ctx) }

// Dispatch records an ask and sends it. The caller is the agent's turn
// when an agent asks from a tool (its origin is on the context), else the
// principal, whose caller reply goes to FromSession's orchestrator
// surface. Bad input changes nothing.
func (s *Service) Dispatch(ctx context.Context, in desk.DispatchInput) (*desk.Dispatch, *desk.AskResult, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if in.Reply == "" {
		in.Reply = desk.ReplyNone
	}
	switch {
	case strings.TrimSpace(in.Text) == "":
		return nil, nil, desk.Errorf(desk.EINVALID, "text is required")
	case len(in.Text) > maxText || !utf8.ValidString(in.Text):
		return nil, nil, desk.Errorf(desk.EINVALID, "text must be valid UTF-8 of at most %d bytes", maxText)
	case len(in.Subject) > maxSubject || !utf8.ValidString(in.Subject) || strings.ContainsAny(in.Subject, "\n\r"):
		return nil, nil, desk.Errorf(desk.EINVALID, "subject must be one line of valid UTF-8, at most %d bytes", maxSubject)
	case in.Reply != desk.ReplyCaller && in.Reply != desk.ReplyNone:
		return nil, nil, desk.Errorf(desk.EINVALID, "reply %q must be caller or none", in.Reply)
	}
	caller := desk.Origin{Actor: p.ActorID, Kind: desk.OriginUser}
	if p.Admin {
		caller.Actor = desk.AdminActor
	}
	replySurface := ""
	if oc, ok := desk.OriginFrom(ctx); ok && p.ActorKind == desk.ActorAgent && oc.ExecutionID != "" {
		// An agent's turn asks: the reply comes back to its surface.
		caller = oc
		caller.Kind = desk.OriginAgent
		replySurface = oc.SurfaceID
		if in.FromSession != "" && in.FromSession != oc.SessionID {
			return nil, nil, desk.Errorf(desk.EINVALID, "from_session: an agent asks from its own session")
		}
	} else if in.FromSession != "" {
		x, err := s.opts.Sessions.Get(ctx, in.FromSession)
		if err != nil {
			return nil, nil, desk.Errorf(desk.EINVALID, "from_session: %s", desk.ErrorMessage(err))
		}
		caller.WorkspaceID, caller.SessionID = x.WorkspaceID, x.ID
		replySurface = x.SurfaceID
	}
	if in.Reply == desk.ReplyCaller && replySurface == "" {
		return nil, nil, desk.Errorf(desk.EINVALID, "reply caller needs a session to reply to: from_session, or ask from an agent's turn")
	}
	if in.ID != "" {
		// A repeated call (a turn resumed after a restart) continues its
		// dispatch: submitting again queues nothing new (the key is the
		// dispatch's id).
		if d, err := s.store.GetDispatch(ctx, in.ID); err == nil {
			if d.Caller.SessionID != caller.SessionID {
				return nil, nil, desk.Errorf(desk.ECONFLICT, "dispatch %s belongs to another caller", in.ID)
			}
			if d.Status == desk.DispatchPending {
				ask, err := s.submit(ctx, d, in.Reconstruct, false)
				if got, gerr := s.store.GetDispatch(ctx, d.ID); gerr == nil {
					d = got
				}
				return d, ask, err
			}
			return d, &desk.AskResult{Status: desk.AskDispatched, SessionID: d.TargetSessionID, QueuedItemID: d.QueueItemID}, nil
		}
	}
	if in.Target.Kind == "session" && caller.SessionID != "" {
		self := in.Target.ID == caller.SessionID
		if x, err := s.opts.Sessions.Get(ctx, caller.SessionID); err == nil && in.Target.ID == x.Signature {
			self = true
		}
		if self {
			return nil, nil, desk.Errorf(desk.EINVALID, "target: a session cannot ask itself")
		}
	}
	id := in.ID
	if id == "" {
		id = desk.NewID(desk.PrefixDispatch)
	}
	d := &desk.Dispatch{ID: id, CreatedAt: desk.Now(), Caller: caller, Target: in.Target, Subject: in.Subject,
		Text: in.Text, Reply: in.Reply, ReplySurfaceID: replySurface, Status: desk.DispatchPending}
	if in.Target.Kind == "workspace" {
		d.TargetWorkspaceID = in.Target.ID
	}
	// The snapshot is recorded before anything is sent: a node that
	// stops right after finds it pending and sends it (with the same
	// idempotency key); a prompt refused now takes it away again, so a
	// refused ask leaves nothing.
	if err := s.store.CreateDispatch(ctx, d); err != nil {
		return nil, nil, err
	}
	ask, err := s.submit(ctx, d, in.Reconstruct, true)
	if err != nil || ask.Status != desk.AskDispatched {
		return nil, ask, err
	}
	if got, err := s.store.GetDispatch(ctx, d.ID); err == nil {
		d = got
	}
	return d, ask, nil
}

// submit sends d's prompt to its target through the lifecycle's ask (which
// resolves the target, reconstructs it when asked, and removes a session
// it made for a refused prompt), with d's id as the idempotency key, and
// records where it went. A prompt refused or a target unavailable removes
// the pending dispatch when fresh (the caller hears why, nothing stays);
// on a retry after a restart it fails the dispatch instead, so a caller
// owning the reply hears of it.
func (s *Service) submit(ctx context.Context, d *desk.Dispatch, reconstruct, fresh bool) (*desk.AskResult, error) {
	ask, err := s.opts.Asker.Ask(ctx, desk.AskInput{Target: d.Target, Prompt: promptText(d), Reconstruct: reconstruct,
		IdempotencyKey: "dispatch:" + d.ID})
	why := ""
	switch {
	case err != nil:
		why = "the prompt was refused: " + desk.ErrorMessage(err)
	case ask.Status != desk.AskDispatched:
		why = "the target is unavailable: " + ask.Reason
	}
	if why != "" {
		bg := context.WithoutCancel(ctx)
		if fresh {
			if derr := s.store.DeletePendingDispatch(bg, d.ID); derr != nil {
				s.log.Error("remove a refused dispatch", "dispatch", d.ID, desk.LogErr, derr)
			}
		} else {
			s.settle(bg, d, desk.DispatchFailed, "", "", why)
		}
		return ask, err
	}
	ws := d.TargetWorkspaceID
	if x, gerr := s.opts.Sessions.Get(ctx, ask.SessionID); gerr == nil {
		ws = x.WorkspaceID
	}
	ok, err := s.store.MarkDispatched(ctx, d.ID, ask.SessionID, ws, ask.QueuedItemID)
	if err != nil {
		return ask, err
	}
	if ok {
		next := *d
		next.Status, next.TargetSessionID, next.TargetWorkspaceID, next.QueueItemID = desk.DispatchDispatched, ask.SessionID, ws, ask.QueuedItemID
		s.project(dispatchLine(&next))
	}
	return ask, nil
}

// promptText is what the target receives: for an agent's ask, or one with
// a subject or a reply owed, the dispatch envelope (its id, subject, who
// asks, who gets the reply) around the text; a person's plain ask is the
// text alone, as it always was.
func promptText(d *desk.Dispatch) string {
	if d.Caller.Kind != desk.OriginAgent && d.Subject == "" && d.Reply == desk.ReplyNone {
		return d.Text
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<dispatch id=%q", d.ID)
	if d.Subject != "" {
		fmt.Fprintf(&b, " subject=%q", d.Subject)
	}
	if d.Caller.SessionID != "" {
		fmt.Fprintf(&b, " from_session=%q", d.Caller.SessionID)
	}
	fmt.Fprintf(&b, " reply=%q>\n%s\n</dispatch>", d.Reply, d.Text)
	return b.String()
}

// Tick follows every open dispatch once.
func (s *Service) Tick(ctx context.Context) error {
	open, err := s.store.OpenDispatches(ctx, 200)
	if err != nil {
		return err
	}
	var errs []error
	for _, d := range open {
		if err := s.follow(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("dispatch %s: %w", d.ID, err))
		}
	}
	return errors.Join(errs...)
}

// follow moves one open dispatch on: a pending one that stalled (its node
// stopped between recording and submitting) is submitted again, a
// dispatched one settles once its target's turn has.
func (s *Service) follow(ctx context.Context, d *desk.Dispatch) error {
	if d.Status == desk.DispatchPending {
		if time.Since(d.CreatedAt) < stuckSubmit {
			return nil
		}
		// The submit runs with the service's own authority, on the
		// snapshot's target.
		_, err := s.submit(desk.WithPrincipal(ctx, desk.Principal{Admin: true}), d, false, false)
		return err
	}
	q, err := s.store.GetQueueItem(ctx, d.QueueItemID)
	if desk.IsCode(err, desk.ENOTFOUND) {
		s.settle(ctx, d, desk.DispatchFailed, "", "", "the target's queue row is gone")
		return nil
	}
	if err != nil {
		return err
	}
	if q.ExecutionID == "" {
		switch q.Status {
		case desk.QueueStatusCancelled:
			s.settle(ctx, d, desk.DispatchFailed, "", "", "the prompt was cancelled before it ran")
		case desk.QueueStatusFailed:
			s.settle(ctx, d, desk.DispatchFailed, "", "", q.Error)
		}
		return nil
	}
	x, err := s.store.GetExecution(ctx, q.ExecutionID)
	if err != nil {
		return err
	}
	if !x.Terminal() {
		return nil
	}
	if x.Phase != desk.PhaseEnded {
		reason := x.Reason
		if reason == "" {
			reason = "the turn was " + x.Phase
		}
		s.settle(ctx, d, desk.DispatchFailed, x.ID, "", reason)
		return nil
	}
	text, err := s.replyText(ctx, x)
	if err != nil {
		return err
	}
	status := desk.DispatchReplied
	if d.Reply == desk.ReplyNone {
		status = desk.DispatchSettled
	}
	s.settle(ctx, d, status, x.ID, text, "")
	return nil
}

// replyText is the target turn's answer: its last assistant text, bounded.
func (s *Service) replyText(ctx context.Context, x *desk.Execution) (string, error) {
	msgs, err := conversation.ExecutionMessages(ctx, s.store, x)
	if err != nil {
		return "", err
	}
	for _, m := range slices.Backward(msgs) {
		if m.Role == "assistant" && strings.TrimSpace(m.Text) != "" {
			t := m.Text
			if len(t) > maxReply {
				t = strings.ToValidUTF8(t[:maxReply], "") + "\n[… the reply goes on: read the target session for the rest]"
			}
			return t, nil
		}
	}
	return "", nil
}

// settle ends d. With reply caller, the caller's surface gets a
// dispatch_reply row in the same transaction (for a failure too, saying
// what failed). Only the node whose update wins writes the projection.
func (s *Service) settle(ctx context.Context, d *desk.Dispatch, status, exe, text, reason string) {
	at := desk.Now()
	next := *d
	next.Status, next.ExecutionID, next.ReplyText, next.Error, next.SettledAt = status, exe, text, reason, &at
	var row *desk.QueueItem
	if d.Reply == desk.ReplyCaller && d.ReplySurfaceID != "" {
		row = &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: d.ReplySurfaceID, SessionID: d.Caller.SessionID,
			WorkspaceID: d.Caller.WorkspaceID, Kind: desk.QueueDispatchReply, Priority: desk.PriorityNormal,
			Text: replyRow(&next), Channel: "dispatch", ConversationID: d.Caller.SessionID,
			IdempotencyKey: "dispatch-reply:" + d.ID, CreatedAt: at,
			Origin: desk.Origin{WorkspaceID: d.TargetWorkspaceID, SessionID: d.TargetSessionID, ExecutionID: exe, Kind: desk.OriginAgent}}
		next.ReplyItemID = row.ID
	}
	won, err := s.store.SettleDispatch(ctx, &next, row)
	if err != nil {
		s.log.Error("settle a dispatch", "dispatch", d.ID, desk.LogErr, err)
		return
	}
	if won {
		s.project(replyLine(&next))
	}
}

// replyRow is the text of the caller's dispatch_reply row.
func replyRow(d *desk.Dispatch) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<dispatch_reply dispatch=%q", d.ID)
	if d.Subject != "" {
		fmt.Fprintf(&b, " subject=%q", d.Subject)
	}
	fmt.Fprintf(&b, " from_session=%q status=%q>\n", d.TargetSessionID, d.Status)
	switch {
	case d.Status == desk.DispatchFailed:
		fmt.Fprintf(&b, "The target did not answer: %s\n", d.Error)
	case d.ReplyText == "":
		b.WriteString("The target's turn ended without a reply text.\n")
	default:
		b.WriteString(d.ReplyText)
		b.WriteString("\n")
	}
	b.WriteString("</dispatch_reply>")
	return b.String()
}

// Get returns a dispatch its caller or its target's viewer may see.
func (s *Service) Get(ctx context.Context, id string) (*desk.Dispatch, error) {
	d, err := s.store.GetDispatch(ctx, id)
	if err != nil {
		return nil, err
	}
	if !s.visible(ctx, d) {
		return nil, desk.Errorf(desk.ENOTFOUND, "dispatch %s not found", id)
	}
	return d, nil
}

// List lists the dispatches f selects that the caller may see.
func (s *Service) List(ctx context.Context, f desk.DispatchFilter) ([]*desk.Dispatch, error) {
	if f.SessionID != "" {
		if _, err := s.opts.Sessions.Get(ctx, f.SessionID); err != nil {
			return nil, err
		}
	}
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 500
	}
	all, err := s.store.ListDispatches(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]*desk.Dispatch, 0, len(all))
	for _, d := range all {
		if s.visible(ctx, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// visible: the admin sees every dispatch; anyone else one whose caller
// or target session they can see.
func (s *Service) visible(ctx context.Context, d *desk.Dispatch) bool {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return false
	}
	if p.Admin {
		return true
	}
	for _, ses := range []string{d.Caller.SessionID, d.TargetSessionID} {
		if ses == "" {
			continue
		}
		if _, err := s.opts.Sessions.Get(ctx, ses); err == nil {
			return true
		}
	}
	return false
}

// line is one line of the projection.
type line struct {
	Type      string              `json:"type"` // dispatch or dispatch_reply
	At        time.Time           `json:"at"`
	Dispatch  string              `json:"dispatch_id"`
	Caller    *desk.Origin        `json:"caller,omitempty"`
	Target    *desk.ResolveTarget `json:"target,omitempty"`
	Session   string              `json:"target_session_id,omitempty"`
	Subject   string              `json:"subject,omitempty"`
	Text      string              `json:"text,omitempty"`
	Reply     string              `json:"reply,omitempty"`
	Status    string              `json:"status,omitempty"`
	Execution string              `json:"execution_id,omitempty"`
	ReplyItem string              `json:"reply_item_id,omitempty"`
	Error     string              `json:"error,omitempty"`
}

func dispatchLine(d *desk.Dispatch) line {
	c, t := d.Caller, d.Target
	return line{Type: "dispatch", At: d.CreatedAt, Dispatch: d.ID, Caller: &c, Target: &t, Session: d.TargetSessionID,
		Subject: d.Subject, Text: d.Text, Reply: d.Reply}
}

func replyLine(d *desk.Dispatch) line {
	return line{Type: "dispatch_reply", At: *d.SettledAt, Dispatch: d.ID, Session: d.TargetSessionID, Status: d.Status,
		Execution: d.ExecutionID, ReplyItem: d.ReplyItemID, Text: d.ReplyText, Error: d.Error}
}

// project appends one line to the projection; a failure is logged, never
// returned: the store is the authority and Rebuild restores the file.
func (s *Service) project(l line) {
	if s.opts.Projection == "" {
		return
	}
	b, err := json.Marshal(l)
	if err != nil {
		s.log.Error("encode a projection line", desk.LogErr, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(s.opts.Projection), 0o700); err != nil {
		s.log.Error("the agent conversations projection", desk.LogErr, err)
		return
	}
	f, err := os.OpenFile(s.opts.Projection, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		s.log.Error("the agent conversations projection", desk.LogErr, err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		s.log.Error("the agent conversations projection", desk.LogErr, err)
	}
}

// Rebuild writes the projection again from the store: every dispatch and
// every reply, in the order they happened.
func (s *Service) Rebuild(ctx context.Context) error {
	if s.opts.Projection == "" {
		return nil
	}
	ds, err := s.store.ListDispatches(ctx, desk.DispatchFilter{Limit: 1 << 30})
	if err != nil {
		return err
	}
	var ls []line
	for _, d := range ds {
		ls = append(ls, dispatchLine(d))
		if d.SettledAt != nil {
			ls = append(ls, replyLine(d))
		}
	}
	slices.SortStableFunc(ls, func(a, b line) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.Dispatch, b.Dispatch)
	})
	var buf []byte
	for _, l := range ls {
		b, err := json.Marshal(l)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tmp := s.opts.Projection + ".tmp"
	if err := os.MkdirAll(filepath.Dir(s.opts.Projection), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, buf, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.opts.Projection)
}
