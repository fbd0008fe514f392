// Package execution owns desk's one execution model: every piece of work is
// a durable queue row on a surface, claimed atomically by one dispatcher,
// admitted past blocks and takeover rules, run by an Executor as exactly one
// execution at a time per surface, interrupted only by its exact id, and
// settled with its events published after the commit. It recovers what a
// dead desk process left behind: executions that may have started are shown
// interrupted (owner-restarted) and never re-run, except one whose turn
// waits on a person, which this process adopts and continues (Resumer);
// claims that never started go back to the front of their queue.
//
// It must never run two executions of one surface at once (the store's
// unique index is the last word), never re-send a turn whose model call may
// have started, and never report a stop the executor did not confirm.
package execution

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/internal/hostid"
	"github.com/desk-runtime/desk/layout"
)

// Archiver records what crossed desk's boundary.
type Archiver interface {
	Append(ctx context.Context, ws string, r archive.Record) error
}

// Options configure the service; zero values take the defaults noted.
type Options struct {
	Archive Archiver
	Logger  *slog.Logger
	// Door names the channel of submits that do not name one ("http").
	Door string
	// LeaseTTL is how long a claim's lease lasts between renewals (30s).
	LeaseTTL time.Duration
	// OwnerTTL is how long a desk process may miss heartbeats before its
	// executions are recovered by another (15s): the lease every running
	// execution is held under (DESK_OWNER_TTL).
	OwnerTTL time.Duration
	// HeartbeatTimeout is this process's own deadline: when it has not
	// renewed its owner row for this long (the database was unreachable,
	// or the process was frozen), it stops its executions itself and
	// claims nothing until a heartbeat succeeds again. It must be shorter
	// than OwnerTTL by at least two heartbeat intervals, so that this
	// process stops before any peer may take its executions over (two
	// thirds of OwnerTTL; DESK_HEARTBEAT_TIMEOUT).
	HeartbeatTimeout time.Duration
	// PollInterval paces heartbeats, recovery of dead owners, dispatch of
	// work other processes queued, and live streams (1s).
	PollInterval time.Duration
	// StopTimeout is how long an interrupt waits for the executor to
	// confirm it stopped (10s).
	StopTimeout time.Duration
	// Cooldown is how long a user interrupt holds back work that did not
	// come from a user (60s).
	Cooldown time.Duration
	// FaultThreshold failed executions in a row create an execution-fault
	// block (3).
	FaultThreshold int
	// TakeoverIdle is how long an attached surface must be idle before
	// work from other origins runs without approval (30s).
	TakeoverIdle time.Duration
	// AttachTTL is how long one composer heartbeat keeps a surface
	// attached (30s).
	AttachTTL time.Duration
	// EventRetention is how long events stay resumable (24h).
	EventRetention time.Duration
	// MaxExecutions caps the executions this process claims and runs at
	// once (0: no cap; desk serve sets DESK_MAX_EXECUTIONS, default
	// DefaultMaxExecutions). A turn waiting on a person holds its slot
	// while it waits. A queued row
	// beyond it stays queued for any process with room (this one when a
	// slot frees, at its next poll). Executions adopted from a dead
	// process are resumed whatever the count.
	MaxExecutions int
	Now           func() time.Time
}

// DefaultMaxExecutions is desk serve's cap when DESK_MAX_EXECUTIONS is
// unset.
const DefaultMaxExecutions = 32

func (o *Options) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.LeaseTTL, 30*time.Second)
	def(&o.OwnerTTL, 15*time.Second)
	def(&o.HeartbeatTimeout, o.OwnerTTL*2/3)
	def(&o.PollInterval, time.Second)
	def(&o.StopTimeout, 10*time.Second)
	def(&o.Cooldown, 60*time.Second)
	def(&o.TakeoverIdle, 30*time.Second)
	def(&o.AttachTTL, 30*time.Second)
	def(&o.EventRetention, 24*time.Hour)
	if o.FaultThreshold == 0 {
		o.FaultThreshold = 3
	}
	if o.Door == "" {
		o.Door = "http"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = desk.Now
	}
}

// Service runs the execution model.
type Service struct {
	store Store
	home  layout.Home
	opts  Options
	log   *slog.Logger
	hub   *hub
	owner *desk.Owner
	host  string

	with Run // given to Open

	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	dispatchOn atomic.Bool  // Open let dispatch begin (and Close has not stopped it)
	draining   atomic.Bool  // Drain began: claim and adopt nothing more
	slots      atomic.Int64 // claims in progress and claimed executions running (MaxExecutions)

	closeMu  sync.Mutex
	closing  bool
	closeErr error // StopOwner's answer, once the executions stopped
	stopped  bool
	// abandon is closed when a Close's context ended before the
	// executions settled: settle retries stop (recovery finishes them).
	abandon     chan struct{}
	abandonOnce sync.Once

	mu          sync.Mutex
	dispatchers map[string]*dispatcher // surfaces with a dispatcher in this process
	active      map[string]*running    // executions this process runs
	stops       map[string]*stopCall
	resumes     []resumption // adopted executions not yet running

	journal atomic.Pointer[journalState]

	// lastBeat is when this process last renewed its owner row (the
	// heartbeat_at it wrote, Unix nanoseconds); lapsed is set while that
	// is older than HeartbeatTimeout (watchdog.go).
	lastBeat atomic.Int64
	lapsed   atomic.Bool
}

// running is an execution this process is running.
type running struct {
	exe     *desk.Execution
	cancel  context.CancelFunc
	done    chan struct{}
	stop    atomic.Bool // an interrupt asked it to stop
	started atomic.Bool
	// lost says why this process no longer holds the execution (a fenced
	// write, a peer that took it over or ended it): it stops here at once
	// and is not settled here, since its new holder settles it.
	lost atomic.Pointer[string]
	// lapsed: the heartbeat watchdog stopped it (watchdog.go).
	lapsed atomic.Bool
	// fence is the context its writes outside the executor carry (events,
	// the running mark, the settle): never cancelled, always fenced.
	fence context.Context
}

type journalState struct{ err error }

// Run is what the service calls back into once it is open. Each of these
// is built on top of the service — the agent (the executor) queues answer
// rows through Submit, the workspace lifecycle queues ask prompts through
// it and names the service's owner in its leases — so they cannot be given
// to New. The service is built first, handed to them as their
// desk.Submitter, desk.Waker and owner id, and given them in turn when it
// opens: before Open nothing is dispatched, so nothing needs them.
type Run struct {
	// Executor runs the turns; nil refuses every submit (a desk that
	// only serves what is stored).
	Executor Executor
	// Available, when set, refuses work for sessions that cannot run it.
	Available Availability
	// Recover runs, in order, once this process is a registered owner and
	// dead owners' executions are recovered, and before anything is
	// dispatched: startup recovery that must finish before queued work runs
	// (the workspace lifecycle, then template upgrades and absorbs). Its
	// error fails Open.
	Recover []desk.Recoverer
	// Children, when set, are the processes the executor keeps between
	// turns (the runtime host's children); StopSession and StopWorkspace
	// stop them after the executions, so the session and lifecycle
	// services, built before the executor, reach them through this
	// service.
	Children desk.RuntimeChildren
}

// The hooks other services are given the execution service as.
var (
	_ desk.Submitter      = (*Service)(nil)
	_ desk.Waker          = (*Service)(nil)
	_ desk.SessionStopper = (*Service)(nil)
)

// New returns the service with its owner id chosen; Open registers the
// owner and starts it.
func New(store Store, home layout.Home, opts Options) *Service {
	opts.defaults()
	return &Service{
		store: store, home: home, opts: opts, log: opts.Logger, hub: newHub(),
		owner:       &desk.Owner{ID: desk.NewID("own"), PID: os.Getpid()},
		abandon:     make(chan struct{}),
		dispatchers: map[string]*dispatcher{}, active: map[string]*running{}, stops: map[string]*stopCall{},
	}
}

// Open registers this process as an owner, recovers what dead owners left
// behind, sweeps orphaned scratch, runs run.Recover, and starts the
// background loop and dispatch. Call it once, before serving requests. When
// it fails, nothing of the service is left running and the owner is marked
// stopped.
func (s *Service) Open(ctx context.Context, run Run) (err error) {
	if s.ctx != nil {
		return fmt.Errorf("execution: already open")
	}
	if err := s.opts.checkLease(); err != nil {
		return err
	}
	s.with = run
	s.ctx, s.cancel = context.WithCancel(context.Background())
	host := hostid.Identity()
	now := s.opts.Now()
	s.host = host
	s.owner.Host, s.owner.StartedAt, s.owner.HeartbeatAt = host, now, now
	if err := s.store.RegisterOwner(ctx, s.owner); err != nil {
		s.cancel()
		return fmt.Errorf("register owner: %w", err)
	}
	s.lastBeat.Store(now.UnixNano())
	defer func() {
		if err != nil {
			s.cancel()
			s.wg.Wait()
			_ = s.store.StopOwner(context.WithoutCancel(ctx), s.owner.ID, s.opts.Now())
		}
	}()
	if err := s.recover(ctx); err != nil {
		return fmt.Errorf("recover executions: %w", err)
	}
	if err := s.sweepScratch(ctx); err != nil {
		return fmt.Errorf("sweep scratch: %w", err)
	}
	for _, r := range run.Recover {
		if err := r.Recover(ctx); err != nil {
			return fmt.Errorf("startup recovery: %w", err)
		}
	}
	s.wg.Add(3)
	go s.loop()
	go s.heartbeat()
	go s.watchdog()
	// Work that was queued while no desk ran, or that recovery held back,
	// may dispatch from now on: first the turns that waited on a person
	// when the last process died, then the queues.
	s.dispatchOn.Store(true)
	s.startResumed()
	s.dispatchQueued(ctx)
	return nil
}

// Close stops new dispatch, interrupts this process's executions (they are
// settled as interrupted, reason owner-stopping), waits for them and for
// every goroutine of the service until ctx ends, and marks the owner
// stopped. It is idempotent: a call after a successful one returns nil; a
// call after one that ctx cut short waits again.
func (s *Service) Close(ctx context.Context) error {
	if s.cancel == nil {
		return nil // never opened
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.stopped {
		return s.closeErr
	}
	if !s.closing {
		s.closing = true
		s.dispatchOn.Store(false)
		s.mu.Lock()
		for _, r := range s.active {
			r.stop.Store(true)
		}
		s.cancel() // under mu: wakeWith adds to wg only under mu, before this
		s.mu.Unlock()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.abandonOnce.Do(func() { close(s.abandon) })
		return fmt.Errorf("executions did not stop: %w", ctx.Err())
	}
	s.stopped = true
	s.closeErr = s.store.StopOwner(context.WithoutCancel(ctx), s.owner.ID, s.opts.Now())
	return s.closeErr
}

// Drain is the first half of a graceful stop (SIGTERM): this process
// claims no more queued work and adopts no dead process's executions, so
// queued rows wait in the store for any other process; the executions it
// runs go on to their end. Drain returns once none runs, or when ctx
// ends, with how many still run; Close then interrupts those.
func (s *Service) Drain(ctx context.Context) (running int, err error) {
	s.draining.Store(true)
	// Polled: a turn's end is rare next to this pace, and the wait is
	// once per process lifetime.
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		s.mu.Lock()
		n := len(s.active) + len(s.resumes)
		s.mu.Unlock()
		if n == 0 {
			return 0, nil
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-t.C:
		}
	}
}

// OwnerID is this process's owner id.
func (s *Service) OwnerID() string { return s.owner.ID }

// Wake looks for queued work now instead of at the next poll: when a
// workspace's lease is given back (after a restore, an upgrade, an
// absorb), its queued rows become admissible again.
func (s *Service) Wake() {
	// Before Open lets dispatch begin (a lease given back by startup
	// recovery), Open's own look at the queue comes later and covers it.
	if s.dispatchOn.Load() && s.ctx.Err() == nil {
		s.dispatchQueued(s.ctx)
	}
}

// Running reports whether an execution is still active anywhere; the
// garbage collector keeps such an execution's scratch.
func (s *Service) Running(ctx context.Context, executionID string) (bool, error) {
	x, err := s.store.GetExecution(ctx, executionID)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return desk.PhaseActive(x.Phase), nil
}

// journalFailed reports a failure to write the execution journal; until a
// write succeeds again, new work is refused rather than run unrecorded.
func (s *Service) journalFailed() error {
	if j := s.journal.Load(); j != nil && j.err != nil {
		return desk.Errorf(desk.EUNAVAILABLE, "the execution journal cannot be written (%v); new work is refused until it recovers", j.err)
	}
	return nil
}

func (s *Service) journalResult(err error) {
	if err != nil {
		if j := s.journal.Load(); j == nil || j.err == nil {
			s.log.Error("execution journal write failed; refusing new admissions", desk.LogErr, err)
		}
		s.journal.Store(&journalState{err: err})
		return
	}
	if j := s.journal.Load(); j != nil && j.err != nil {
		s.log.Info("execution journal writes succeed again; admitting work")
		s.journal.Store(nil)
	}
}

// session returns the session if the caller may see it.
func (s *Service) session(ctx context.Context, id string) (*desk.Session, error) {
	return desk.VisibleSession(ctx, s.store, id)
}

// userSide refuses a caller that is not the user side of the session: only
// the admin token or the session's own human actor may release an admission
// block or approve a row held for takeover (OpenAlice: "HTTP interrupt and
// release routes are always user-attributed"). An agent's token, and any
// call made on behalf of a running execution, is refused even for its own
// session, so an agent cannot lift the holds that exist to stop it.
func userSide(ctx context.Context, x *desk.Session, what string) error {
	p, _ := desk.PrincipalFrom(ctx)
	if o, ok := desk.OriginFrom(ctx); ok && (o.Kind == desk.OriginAgent || o.ExecutionID != "") {
		return desk.Errorf(desk.EFORBIDDEN, "an agent cannot %s; only the user side can (the admin token or the session's own human actor)", what)
	}
	switch {
	case p.Admin:
		return nil
	case p.ActorKind == desk.ActorAgent:
		return desk.Errorf(desk.EFORBIDDEN, "an agent actor's token cannot %s; only the user side can (the admin token or the session's own human actor)", what)
	case p.ActorKind == desk.ActorHuman && p.WorkspaceID == x.WorkspaceID && p.ActorID == x.Actor:
		return nil
	}
	return desk.Errorf(desk.EFORBIDDEN, "only the admin token or the session's own human actor may %s", what)
}

// origin stamps provenance from the caller. An agent actor's token makes
// agent work; everything else that comes through the API is user work.
func origin(ctx context.Context, x *desk.Session, surface string) desk.Origin {
	p, _ := desk.PrincipalFrom(ctx)
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: surface, Actor: p.ActorID, Kind: desk.OriginUser}
	if p.Admin {
		o.Actor = desk.AdminActor
	}
	if p.ActorKind == desk.ActorAgent {
		o.Kind = desk.OriginAgent
		// A row a running turn of this session makes (a thread tool's
		// report request) names that turn and the surface it came from,
		// as the rows the agent commits itself do; the context's origin
		// is the agent's own stamp (agent.go), never a client's.
		if oc, ok := desk.OriginFrom(ctx); ok && oc.SessionID == x.ID && oc.ExecutionID != "" {
			o.ExecutionID, o.SurfaceID = oc.ExecutionID, oc.SurfaceID
		}
	}
	// The routine scheduler stamps its context (routine package): a run
	// is the routine's work, acting as its actor. Only server code sets a
	// context's origin, so no request can claim this kind.
	if oc, ok := desk.OriginFrom(ctx); ok && oc.Kind == desk.OriginRoutine && oc.ExecutionID == "" {
		o.Kind = desk.OriginRoutine
	}
	return o
}

func actorOf(ctx context.Context) string {
	p, _ := desk.PrincipalFrom(ctx)
	if p.Admin {
		return desk.AdminActor
	}
	return p.ActorID
}

var kinds = map[string]int{
	desk.QueueUserMessage:    desk.PriorityNormal,
	desk.QueueInputAnswer:    desk.PriorityAnswer,
	desk.QueueThreadFollowup: desk.PriorityNormal,
	desk.QueueThreadReport:   desk.PriorityNormal,
	desk.QueueReportRequest:  desk.PriorityNormal,
	desk.QueueInitialHandler: desk.PriorityNormal,
}

// maxText bounds one message.
const maxText = 1 << 20

// Submit commits a queue row for the message before anything runs, then
// wakes the surface's dispatcher.
func (s *Service) Submit(ctx context.Context, sessionID string, in desk.SubmitInput) (*desk.SubmitResult, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Text) == "" {
		return nil, desk.Errorf(desk.EINVALID, "text is required")
	}
	if len(in.Text) > maxText || !utf8.ValidString(in.Text) {
		return nil, desk.Errorf(desk.EINVALID, "text must be valid UTF-8 of at most %d bytes", maxText)
	}
	switch in.Multitask {
	case "":
		in.Multitask = desk.MultitaskEnqueue
	case desk.MultitaskEnqueue, desk.MultitaskReject, desk.MultitaskInterrupt:
	default:
		return nil, desk.Errorf(desk.EINVALID, "multitask %q must be enqueue, reject or interrupt", in.Multitask)
	}
	if in.Kind == "" {
		in.Kind = desk.QueueUserMessage
	}
	prio, ok := kinds[in.Kind]
	if !ok {
		return nil, desk.Errorf(desk.EINVALID, "kind %q is not a queue item kind", in.Kind)
	}
	if len(in.IdempotencyKey) > 200 {
		return nil, desk.Errorf(desk.EINVALID, "idempotency_key must be at most 200 bytes")
	}
	if w, err := s.store.GetWorkspace(ctx, x.WorkspaceID); err != nil {
		return nil, err
	} else if w.State != desk.WorkspaceActive {
		return nil, desk.Errorf(desk.ECONFLICT, "workspace %s of session %s is %s; it takes no work until it is restored", w.ID, x.ID, w.State)
	}
	if x.Lifecycle == desk.SessionRetired {
		return nil, desk.Errorf(desk.ECONFLICT, "session %s is retired; recall it before sending work", x.ID)
	}
	if err := s.journalFailed(); err != nil {
		return nil, err
	}
	if s.with.Executor == nil {
		return nil, desk.Errorf(desk.ECONFLICT, "this desk has no executor to run work")
	}
	if s.with.Available != nil {
		if err := s.with.Available(ctx, x); err != nil {
			return nil, err
		}
	}
	surface := in.Surface
	if in.EditOf != "" {
		// Edit and resend: only a committed user message of this session,
		// and the revision goes to that message's surface.
		m, err := s.store.GetMessage(ctx, in.EditOf)
		if err != nil {
			return nil, err
		}
		if m.SessionID != x.ID {
			return nil, desk.Errorf(desk.ENOTFOUND, "message %s not found in session %s", in.EditOf, x.ID)
		}
		if m.Role != desk.RoleUser {
			return nil, desk.Errorf(desk.EINVALID, "message %s is an %s message; only user messages can be edited", in.EditOf, m.Role)
		}
		if in.Kind != desk.QueueUserMessage {
			return nil, desk.Errorf(desk.EINVALID, "an edit is a user message, not a %s row", in.Kind)
		}
		if surface != "" && surface != m.SurfaceID {
			return nil, desk.Errorf(desk.EINVALID, "message %s is on surface %s, not %s", in.EditOf, m.SurfaceID, surface)
		}
		surface = m.SurfaceID
	}
	if surface == "" {
		surface = x.SurfaceID
	}
	if in.Channel == "" {
		in.Channel = s.opts.Door
	}
	if in.ConversationID == "" {
		in.ConversationID = x.ID
	}
	if in.Multitask == desk.MultitaskInterrupt {
		prio = desk.PrioritySteered
	}
	o := origin(ctx, x, surface)
	_, before, err := s.store.EventBounds(ctx)
	if err != nil {
		return nil, err
	}
	it := &desk.QueueItem{
		ID: desk.NewID(desk.PrefixQueue), SurfaceID: surface, SessionID: x.ID, WorkspaceID: x.WorkspaceID,
		Kind: in.Kind, Priority: prio, Origin: o, Text: in.Text, IdempotencyKey: in.IdempotencyKey,
		Channel: in.Channel, ConversationID: in.ConversationID, CreatedAt: s.opts.Now(), EditOf: in.EditOf,
	}
	row, created, err := s.store.Enqueue(ctx, it, desk.EnqueueOptions{
		RejectIfBusy: in.Multitask == desk.MultitaskReject,
		UserWork:     o.Kind == desk.OriginUser,
	})
	if err != nil {
		return nil, err
	}
	res := &desk.SubmitResult{Item: row, Created: created, ExecutionID: row.ExecutionID, EventsAfter: before}
	if !created {
		return res, nil
	}
	s.hub.notify()
	if o.ExecutionID == "" {
		// A row a turn made for another surface of its session is the
		// agent talking to itself, not a message that came in.
		s.archiveInbound(ctx, row)
	}
	if in.Multitask == desk.MultitaskInterrupt {
		if cur, err := s.store.ActiveExecution(ctx, surface); err == nil && cur != nil {
			if _, err := s.stop(ctx, cur, desk.Interruption{By: o.Actor, At: s.opts.Now(), Reason: "interrupted by a new message (multitask interrupt)"}, true); err != nil {
				return nil, err
			}
		}
	}
	claimed, d, ticket := s.wakeFor(surface)
	switch {
	case claimed != nil && claimed.ID == row.ID:
		res.Item, res.ExecutionID = claimed, claimed.ExecutionID
	case d != nil:
		// Another dispatcher of this process (the poll loop's, a Waker's,
		// the one finishing the previous turn) may have taken the row
		// after it committed: the answer is what that dispatcher decided,
		// not a guess made while it was deciding.
		if q := s.settledClaim(ctx, d, ticket, row.ID); q != nil {
			res.Item, res.ExecutionID = q, q.ExecutionID
		}
	case claimed == nil:
		// No dispatcher is awake and this submit's claim found nothing:
		// one that woke just after the commit may have claimed the row,
		// run a quick turn and exited already. The row says so.
		if q, err := s.store.GetQueueItem(context.WithoutCancel(ctx), row.ID); err == nil && q.ExecutionID != "" {
			res.Item, res.ExecutionID = q, q.ExecutionID
		}
	}
	return res, nil
}

// submitClaimWait bounds how long a submit waits for a concurrent
// dispatcher's claim. A claim is one short transaction; the bound only
// matters when the database stalls, and then the row is reported queued.
const submitClaimWait = 10 * time.Second

// settledClaim waits until surface dispatcher d has decided about queue
// row id, which committed before d's claim number ticket+1 began, and
// returns the row as it is then. d has decided once a claim it began after
// the row committed has returned, or it is running a turn with no claim in
// flight (the row waits behind that turn), or it has exited. The wait is
// bounded by submitClaimWait and ctx; nil means the row could not be read.
func (s *Service) settledClaim(ctx context.Context, d *dispatcher, ticket uint64, id string) *desk.QueueItem {
	timer := time.NewTimer(submitClaimWait)
	defer timer.Stop()
wait:
	for {
		s.mu.Lock()
		decided := s.dispatchers[d.surface] != d || d.ended > ticket || (d.ended == d.begun && d.exe != "")
		changed := d.changed
		s.mu.Unlock()
		if decided {
			break
		}
		select {
		case <-changed:
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	q, err := s.store.GetQueueItem(context.WithoutCancel(ctx), id)
	if err != nil {
		return nil
	}
	return q
}

func (s *Service) archiveInbound(ctx context.Context, q *desk.QueueItem) {
	if s.opts.Archive == nil {
		return
	}
	o := q.Origin
	rec := &archive.MessageInbound{
		Envelope:  archive.Envelope{At: q.CreatedAt, Channel: q.Channel, ConversationID: q.ConversationID, Origin: &o},
		MessageID: q.ID, SenderID: q.Origin.Actor, ChatType: q.Kind, Text: q.Text,
	}
	if err := s.opts.Archive.Append(ctx, q.WorkspaceID, rec); err != nil {
		s.log.Error("archive inbound message", desk.LogErr, err, desk.LogQueueItemID, q.ID, desk.LogSessionID, q.SessionID)
	}
}

// Queue lists the session's queue rows; all includes finished ones.
func (s *Service) Queue(ctx context.Context, sessionID string, all bool) ([]*desk.QueueItem, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListQueue(ctx, x.ID, !all)
}

// QueueOp steers, cancels, moves or approves a row that is still queued.
func (s *Service) QueueOp(ctx context.Context, sessionID, itemID string, op desk.QueueOp) (*desk.QueueItem, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	q, err := s.store.GetQueueItem(ctx, itemID)
	if err != nil || q.SessionID != x.ID {
		return nil, desk.Errorf(desk.ENOTFOUND, "queue item %s not found in session %s", itemID, x.ID)
	}
	if op == desk.QueueApprove {
		if err := userSide(ctx, x, "approve a row held for takeover"); err != nil {
			return nil, err
		}
	}
	out, err := s.store.UpdateQueued(ctx, itemID, op)
	if err != nil {
		return nil, err
	}
	s.hub.notify()
	if op == desk.QueueApprove || op == desk.QueueSteer || op == desk.QueueFront {
		s.wake(out.SurfaceID)
	}
	return out, nil
}

// Resume releases a surface's hold (left by a block release) and
// dispatches its queue.
func (s *Service) Resume(ctx context.Context, sessionID, surfaceID string) (*desk.Surface, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if surfaceID == "" {
		surfaceID = x.SurfaceID
	}
	srf, err := s.surface(ctx, x, surfaceID)
	if err != nil {
		return nil, err
	}
	if srf, err = s.store.ResumeSurface(ctx, srf.ID); err != nil {
		return nil, err
	}
	s.wake(srf.ID)
	return srf, nil
}

func (s *Service) surface(ctx context.Context, x *desk.Session, id string) (*desk.Surface, error) {
	srf, err := s.store.GetSurface(ctx, id)
	if err != nil || srf.SessionID != x.ID {
		return nil, desk.Errorf(desk.ENOTFOUND, "surface %s not found in session %s", id, x.ID)
	}
	return srf, nil
}

// Surfaces lists the session's surfaces.
func (s *Service) Surfaces(ctx context.Context, sessionID string) ([]*desk.Surface, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListSurfaces(ctx, x.ID)
}

// Attach records a composer heartbeat on a surface: while attached, work
// from other origins waits until the surface is idle or the row approved.
func (s *Service) Attach(ctx context.Context, sessionID, surfaceID string) (*desk.Surface, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	srf, err := s.surface(ctx, x, surfaceID)
	if err != nil {
		return nil, err
	}
	return s.store.AttachSurface(ctx, srf.ID, s.opts.Now().Add(s.opts.AttachTTL))
}

// Executions lists the session's executions, newest first.
func (s *Service) Executions(ctx context.Context, sessionID string) ([]*desk.Execution, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListExecutions(ctx, x.ID, 100)
}

// Execution returns one execution with its events.
func (s *Service) Execution(ctx context.Context, id string) (*desk.Execution, error) {
	x, err := s.store.GetExecution(ctx, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.session(ctx, x.SessionID); err != nil {
		return nil, desk.Errorf(desk.ENOTFOUND, "execution %s not found", id)
	}
	es, err := s.store.ListEvents(ctx, desk.EventFilter{ExecutionID: id, Limit: 10000})
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		x.Events = append(x.Events, desk.ExecutionEvent{Seq: e.Seq, At: e.At, Type: e.Type, Data: e.Data})
	}
	u, err := s.store.SumUsage(ctx, desk.UsageFilter{ExecutionID: id})
	if err != nil {
		return nil, err
	}
	x.Usage = &u.Total
	return x, nil
}

// Blocks lists the session's admission blocks, newest first.
func (s *Service) Blocks(ctx context.Context, sessionID string) ([]*desk.Block, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListBlocks(ctx, x.ID, s.opts.Now())
}

// ReleaseBlock clears a block. It starts nothing: queued rows resume at the
// next submit or an explicit resume.
func (s *Service) ReleaseBlock(ctx context.Context, sessionID, blockID string) (*desk.Block, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	b, err := s.store.GetBlock(ctx, blockID, s.opts.Now())
	if err != nil || b.SessionID != x.ID {
		return nil, desk.Errorf(desk.ENOTFOUND, "block %s not found in session %s", blockID, x.ID)
	}
	if err := userSide(ctx, x, "release an admission block"); err != nil {
		return nil, err
	}
	if b.Kind == desk.BlockBudget && b.Active {
		// Released by hand it would only block again at the next claim.
		return nil, desk.Errorf(desk.ECONFLICT, "block %s is a budget block: it is released by raising or clearing the workspace's token budget (desk workspace budget %s TOKENS, or PATCH /v1/workspaces/%s/agent)", b.ID, x.WorkspaceID, x.WorkspaceID)
	}
	out, err := s.store.ReleaseBlock(ctx, blockID, actorOf(ctx), s.opts.Now())
	if err == nil {
		s.hub.notify()
	}
	return out, err
}

// SetLifecycle retires or recalls a session; identity and history stay.
func (s *Service) SetLifecycle(ctx context.Context, sessionID, lifecycle string) (*desk.Session, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if lifecycle == desk.SessionRetired {
		srfs, err := s.store.ListSurfaces(ctx, x.ID)
		if err != nil {
			return nil, err
		}
		for _, srf := range srfs {
			if cur, err := s.store.ActiveExecution(ctx, srf.ID); err != nil {
				return nil, err
			} else if cur != nil {
				return nil, desk.Errorf(desk.ECONFLICT, "session %s has a running execution (%s); interrupt it before retiring", x.ID, cur.ID)
			}
		}
	}
	return s.store.UpdateSession(ctx, x.ID, desk.SessionUpdate{Lifecycle: &lifecycle})
}
