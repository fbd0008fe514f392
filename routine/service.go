// Package routine owns routines: work a workspace starts on a schedule,
// without a person at the keyboard. It keeps their definitions and runs
// in its own store, fires due ticks (once across every node sharing the
// store: a tick is claimed by a conditional UPDATE of the durable next
// run time), submits each run through the execution service as an
// ordinary submit with origin kind routine, follows the run's turn to its
// end and writes routine_started / routine_progress / routine_finished to
// the archive. It never runs a turn itself and never touches the queue
// but through desk.Submitter.
package routine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/internal/tickloop"
)

// Store is what the routine service keeps and reads.
type Store interface {
	desk.RoutineStore
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetActor(ctx context.Context, id string) (*desk.Actor, error)
	GetQueueItem(ctx context.Context, id string) (*desk.QueueItem, error)
	GetExecution(ctx context.Context, id string) (*desk.Execution, error)
}

// Archive is where run records go (archive.Archive).
type Archive interface {
	Append(ctx context.Context, ws string, r archive.Record) error
}

// Options configure the service.
type Options struct {
	Submitter desk.Submitter
	// Sessions makes the new session of a run and checks a target
	// session's visibility.
	Sessions desk.SessionService
	Archive  Archive
	Logger   *slog.Logger
	// Now is the clock; tests inject one.
	Now func() time.Time
	// Interval is how often the scheduler looks for due ticks and
	// follows running runs (default 1s). Zero Interval with Manual set
	// starts no loop: the caller drives Tick.
	Interval time.Duration
	// Manual starts no scheduler loop (tests call Tick).
	Manual bool
	// Leader, when set, runs the scheduler only on the node that leads,
	// its writes fenced by the leader's term (nil: on every node).
	Leader desk.Leadership
}

// Channel is the archive channel of routine records and of the
// messages a run submits.
const Channel = "routine"

// stuckStart is how long a claimed run may go without a queue row before
// a scheduler decides its starter died between claim and submit.
const stuckStart = time.Minute

// Service implements desk.RoutineService and runs the scheduler.
type Service struct {
	store Store
	opts  Options
	log   *slog.Logger

	loop tickloop.Loop
}

var _ desk.RoutineService = (*Service)(nil)

// New returns a service; Open starts its scheduler.
func New(store Store, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{store: store, opts: o, log: o.Logger}
}

// Open starts the scheduler loop (none with Manual: the caller drives
// Tick).
func (s *Service) Open(ctx context.Context) error {
	if !s.opts.Manual {
		s.loop.Start(ctx, s.opts.Interval, tickloop.Led(s.opts.Leader, func(ctx context.Context) {
			if err := s.Tick(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("routine tick", desk.LogErr, err)
			}
		}))
	}
	return nil
}

// Close stops the scheduler and waits for it. A run whose turn is still
// going stays running in the store; the next scheduler (this node after a
// restart, or another) follows it to its end.
func (s *Service) Close(ctx context.Context) error { return s.loop.Stop(ctx) }

// Tick fires every due routine whose tick this node wins and follows the
// running runs. A missed tick (the desk was down) fires once: the next
// run is computed from now, not from the missed time.
func (s *Service) Tick(ctx context.Context) error {
	// Runs are followed first, so a tick right after a turn ended sees
	// it ended (overlap skip does not skip behind a finished run).
	var errs []error
	running, err := s.store.RunningRoutineRuns(ctx)
	if err != nil {
		return err
	}
	for _, run := range running {
		if err := s.follow(ctx, run); err != nil {
			errs = append(errs, fmt.Errorf("routine run %s: %w", run.ID, err))
		}
	}
	now := s.opts.Now()
	due, err := s.store.DueRoutines(ctx, now)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, r := range due {
		if err := s.fire(ctx, r, now); err != nil {
			errs = append(errs, fmt.Errorf("routine %s: %w", r.ID, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) fire(ctx context.Context, r *desk.Routine, now time.Time) error {
	sched, err := parseSchedule(r.Schedule, r.TimeZone)
	if err != nil {
		// A schedule that parsed when it was saved cannot fail now unless
		// the zone database changed; park the routine instead of
		// retrying every tick.
		r.Enabled, r.UpdatedAt = false, now
		return errors.Join(err, s.store.UpdateRoutine(ctx, r))
	}
	expect := r.NextRunAt
	run, err := s.newRun(ctx, r, desk.RoutineTriggerSchedule, expect)
	if err != nil {
		return err
	}
	ok, err := s.store.ClaimRoutineRun(ctx, r.ID, &expect, sched.Next(now), run)
	if err != nil || !ok {
		return err
	}
	if run.Status == desk.RoutineRunSkipped {
		s.log.Info("routine tick skipped: the previous run is still going", "routine_id", r.ID)
		return nil
	}
	return s.start(ctx, r, run)
}

// newRun builds the run row a claim inserts; with overlap skip and a run
// still going it is born skipped.
func (s *Service) newRun(ctx context.Context, r *desk.Routine, trigger string, scheduled time.Time) (*desk.RoutineRun, error) {
	run := &desk.RoutineRun{ID: desk.NewID(desk.PrefixRoutineRun), RoutineID: r.ID, WorkspaceID: r.WorkspaceID,
		Trigger: trigger, ScheduledFor: scheduled, Status: desk.RoutineRunRunning, StartedAt: s.opts.Now()}
	if r.Overlap == desk.RoutineOverlapSkip {
		going, err := s.store.ListRoutineRuns(ctx, r.ID, desk.RoutineRunRunning, 1)
		if err != nil {
			return nil, err
		}
		if len(going) > 0 {
			now := s.opts.Now()
			run.Status, run.FinishedAt, run.Error = desk.RoutineRunSkipped, &now, "the previous run "+going[0].ID+" is still going"
		}
	}
	return run, nil
}

// runContext is the context a run acts in: the routine's actor, stamped
// with origin kind routine (execution.origin reads it).
func (s *Service) runContext(ctx context.Context, r *desk.Routine) (context.Context, error) {
	p := desk.Principal{Admin: true}
	if r.Actor != desk.AdminActor {
		a, err := s.store.GetActor(ctx, r.Actor)
		if err != nil {
			return nil, fmt.Errorf("the routine's actor: %w", err)
		}
		p = desk.Principal{WorkspaceID: a.WorkspaceID, ActorID: a.ID, ActorKind: a.Kind}
	}
	ctx = desk.WithPrincipal(ctx, p)
	return desk.WithOrigin(ctx, desk.Origin{WorkspaceID: r.WorkspaceID, Actor: r.Actor, Kind: desk.OriginRoutine}), nil
}

// start submits a claimed run. A run that cannot start is finished failed
// with the reason, so it never stays running.
func (s *Service) start(ctx context.Context, r *desk.Routine, run *desk.RoutineRun) error {
	progressed, err := s.submit(ctx, r, run)
	s.record(ctx, r, run, &archive.RoutineStarted{RoutineID: r.ID, Name: r.Name})
	if err != nil {
		s.finish(ctx, r, run, desk.RoutineRunFailed, err.Error())
		return nil
	}
	if progressed {
		s.record(ctx, r, run, &archive.RoutineProgress{RoutineID: r.ID, Name: r.Name, Progress: "turn " + run.ExecutionID + " started"})
	}
	return nil
}

func (s *Service) submit(ctx context.Context, r *desk.Routine, run *desk.RoutineRun) (progressed bool, err error) {
	rctx, err := s.runContext(ctx, r)
	if err != nil {
		return false, err
	}
	sid := r.SessionID
	if sid == "" {
		x, err := s.opts.Sessions.Create(rctx, desk.SessionCreate{WorkspaceID: r.WorkspaceID, Title: title(r, run.ScheduledFor),
			Model: r.Model, Runtime: r.Runtime})
		if err != nil {
			return false, fmt.Errorf("create the run's session: %w", err)
		}
		sid = x.ID
	}
	run.SessionID = sid
	// The run id is the idempotency key, so a retried submit of one run
	// queues one row.
	res, err := s.opts.Submitter.Submit(rctx, sid, desk.SubmitInput{Text: r.Prompt, IdempotencyKey: run.ID, Channel: Channel})
	if err != nil {
		return false, fmt.Errorf("submit: %w", err)
	}
	run.QueueItemID, run.ExecutionID = res.Item.ID, res.ExecutionID
	ok, err := s.store.UpdateRoutineRun(ctx, run, desk.RoutineRunRunning, &none)
	if err != nil {
		return false, err
	}
	// A follower that saw the turn start first wrote its progress.
	return ok && run.ExecutionID != "", nil
}

var none = ""

// follow moves a running run on: notes when its turn started and
// finishes it when the turn settled. Every write is conditional, so of
// several nodes following one run exactly one writes each record.
func (s *Service) follow(ctx context.Context, run *desk.RoutineRun) error {
	r, err := s.store.GetRoutine(ctx, run.RoutineID)
	if desk.ErrorCode(err) == desk.ENOTFOUND {
		return nil
	}
	if err != nil {
		return err
	}
	if run.QueueItemID == "" {
		if s.opts.Now().Sub(run.StartedAt) > stuckStart {
			s.finish(ctx, r, run, desk.RoutineRunFailed, "the run was claimed but never submitted (its node stopped)")
		}
		return nil
	}
	q, err := s.store.GetQueueItem(ctx, run.QueueItemID)
	if desk.ErrorCode(err) == desk.ENOTFOUND {
		s.finish(ctx, r, run, desk.RoutineRunCancelled, "the run's queue row is gone")
		return nil
	}
	if err != nil {
		return err
	}
	if q.ExecutionID == "" {
		switch q.Status {
		case desk.QueueStatusCancelled:
			s.finish(ctx, r, run, desk.RoutineRunCancelled, "the run's message was cancelled before it ran")
		case desk.QueueStatusFailed:
			s.finish(ctx, r, run, desk.RoutineRunFailed, q.Error)
		}
		return nil
	}
	if run.ExecutionID == "" {
		next := *run
		next.ExecutionID = q.ExecutionID
		ok, err := s.store.UpdateRoutineRun(ctx, &next, desk.RoutineRunRunning, &none)
		if err != nil {
			return err
		}
		if ok {
			s.record(ctx, r, &next, &archive.RoutineProgress{RoutineID: r.ID, Name: r.Name, Progress: "turn " + q.ExecutionID + " started"})
		}
		run = &next
	}
	x, err := s.store.GetExecution(ctx, run.ExecutionID)
	if err != nil {
		return err
	}
	switch x.Phase {
	case desk.PhaseEnded:
		s.finish(ctx, r, run, desk.RoutineRunSucceeded, "")
	case desk.PhaseFailed:
		s.finish(ctx, r, run, desk.RoutineRunFailed, x.Reason)
	case desk.PhaseInterrupted:
		s.finish(ctx, r, run, desk.RoutineRunCancelled, "the turn was interrupted")
	}
	return nil
}

// finish settles a running run once; the node whose update wins writes
// routine_finished.
func (s *Service) finish(ctx context.Context, r *desk.Routine, run *desk.RoutineRun, status, reason string) {
	now := s.opts.Now()
	next := *run
	next.Status, next.Error, next.FinishedAt = status, reason, &now
	ok, err := s.store.UpdateRoutineRun(ctx, &next, desk.RoutineRunRunning, nil)
	if err != nil {
		s.log.Error("finish routine run", "routine_run_id", run.ID, desk.LogErr, err)
		return
	}
	*run = next
	if !ok {
		return
	}
	s.record(ctx, r, run, &archive.RoutineFinished{RoutineID: r.ID, Name: r.Name, Status: status})
}

// record appends one routine record to the workspace's archive, in the
// conversation of the run's session (or of the routine, when the run
// never got one).
func (s *Service) record(ctx context.Context, r *desk.Routine, run *desk.RoutineRun, rec archive.Record) {
	if s.opts.Archive == nil {
		return
	}
	conv := run.SessionID
	if conv == "" {
		conv = r.ID
	}
	o := desk.Origin{WorkspaceID: r.WorkspaceID, SessionID: run.SessionID, ExecutionID: run.ExecutionID, Actor: r.Actor, Kind: desk.OriginRoutine}
	h := rec.Header()
	h.At, h.Channel, h.ConversationID, h.Origin, h.TurnID = s.opts.Now(), Channel, conv, &o, run.ExecutionID
	if err := s.opts.Archive.Append(context.WithoutCancel(ctx), r.WorkspaceID, rec); err != nil {
		s.log.Error("archive routine record", "routine_id", r.ID, "system_type", rec.SystemType(), desk.LogErr, err)
	}
}

// title renders a new run session's title: {name}, {date} and {time}
// (the tick, in the routine's zone) are replaced.
func title(r *desk.Routine, at time.Time) string {
	t := r.TitleTemplate
	if t == "" {
		t = "{name} {date} {time}"
	}
	if loc, err := loadZone(r.TimeZone); err == nil {
		at = at.In(loc)
	}
	return strings.NewReplacer("{name}", r.Name, "{date}", at.Format("2006-01-02"), "{time}", at.Format("15:04")).Replace(t)
}

func loadZone(tz string) (*time.Location, error) {
	if tz == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(tz)
}

// parseSchedule reads a cron expression (five fields, or a descriptor
// such as @hourly or @every 30s) in the given zone.
func parseSchedule(spec, tz string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, desk.Errorf(desk.EINVALID, "schedule is required")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, desk.Errorf(desk.EINVALID, "schedule %q: give the zone in time_zone, not in the expression", spec)
	}
	loc, err := loadZone(tz)
	if err != nil {
		return nil, desk.Errorf(desk.EINVALID, "time_zone %q is not a known IANA zone", tz)
	}
	sched, err := cron.ParseStandard("CRON_TZ=" + loc.String() + " " + spec)
	if err != nil {
		return nil, desk.Errorf(desk.EINVALID, "schedule %q does not parse: %v", spec, err)
	}
	if rest, ok := strings.CutPrefix(spec, "@every "); ok {
		// cron rounds an interval under a second up to one; refuse it
		// instead of running at another rate than asked.
		if d, err := time.ParseDuration(strings.TrimSpace(rest)); err != nil || d < time.Second {
			return nil, desk.Errorf(desk.EINVALID, "schedule %q: @every needs a duration of at least 1s", spec)
		}
	}
	return sched, nil
}

// Validation of names and prompts.
const (
	maxName   = 200
	maxPrompt = 1 << 20
)

func checkText(field, v string, max int, required bool) error {
	if required && strings.TrimSpace(v) == "" {
		return desk.Errorf(desk.EINVALID, "%s is required", field)
	}
	if len(v) > max || !utf8.ValidString(v) {
		return desk.Errorf(desk.EINVALID, "%s must be valid UTF-8 of at most %d bytes", field, max)
	}
	return nil
}
