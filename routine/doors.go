package routine

import (
	"context"

	"github.com/desk-runtime/desk"
)

// caller returns the principal and checks it may see the workspace.
func (s *Service) caller(ctx context.Context, ws string) (desk.Principal, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return p, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if !p.CanSeeWorkspace(ws) {
		return p, desk.Errorf(desk.ENOTFOUND, "workspace %s not found", ws)
	}
	if _, err := s.store.GetWorkspace(ctx, ws); err != nil {
		return p, err
	}
	return p, nil
}

func actorOf(p desk.Principal) string {
	if p.Admin {
		return desk.AdminActor
	}
	return p.ActorID
}

// Create validates everything before it writes anything: a routine that
// is refused leaves no row.
func (s *Service) Create(ctx context.Context, ws string, in desk.RoutineCreate) (*desk.Routine, error) {
	p, err := s.caller(ctx, ws)
	if err != nil {
		return nil, err
	}
	if err := checkText("name", in.Name, maxName, true); err != nil {
		return nil, err
	}
	if err := checkText("prompt", in.Prompt, maxPrompt, true); err != nil {
		return nil, err
	}
	if err := checkText("title_template", in.TitleTemplate, maxName, false); err != nil {
		return nil, err
	}
	sched, err := parseSchedule(in.Schedule, in.TimeZone)
	if err != nil {
		return nil, err
	}
	switch in.Overlap {
	case "":
		in.Overlap = desk.RoutineOverlapSkip
	case desk.RoutineOverlapSkip, desk.RoutineOverlapQueue:
	default:
		return nil, desk.Errorf(desk.EINVALID, "overlap %q must be skip or queue", in.Overlap)
	}
	if in.SessionID != "" {
		if in.Model != "" || in.Runtime != "" || in.TitleTemplate != "" {
			return nil, desk.Errorf(desk.EINVALID, "model, runtime and title_template apply to a new session per run; leave them out with session_id")
		}
		x, err := s.opts.Sessions.Get(ctx, in.SessionID)
		if err != nil || x.WorkspaceID != ws {
			return nil, desk.Errorf(desk.EINVALID, "session_id %s is not a session of workspace %s", in.SessionID, ws)
		}
	}
	now := s.opts.Now()
	r := &desk.Routine{ID: desk.NewID(desk.PrefixRoutine), WorkspaceID: ws, Name: in.Name, Schedule: in.Schedule,
		TimeZone: in.TimeZone, SessionID: in.SessionID, TitleTemplate: in.TitleTemplate, Model: in.Model, Runtime: in.Runtime,
		Prompt: in.Prompt, Overlap: in.Overlap, Enabled: in.Enabled == nil || *in.Enabled, Actor: actorOf(p),
		NextRunAt: sched.Next(now), CreatedAt: now, UpdatedAt: now}
	if err := s.store.CreateRoutine(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Get returns a routine the caller may see: the admin sees every one, an
// actor those it made.
func (s *Service) Get(ctx context.Context, ws, id string) (*desk.Routine, error) {
	p, err := s.caller(ctx, ws)
	if err != nil {
		return nil, err
	}
	r, err := s.store.GetRoutine(ctx, id)
	if err != nil {
		return nil, err
	}
	if r.WorkspaceID != ws || (!p.Admin && r.Actor != p.ActorID) {
		return nil, desk.Errorf(desk.ENOTFOUND, "routine %s not found", id)
	}
	return r, nil
}

func (s *Service) List(ctx context.Context, ws string) ([]*desk.Routine, error) {
	p, err := s.caller(ctx, ws)
	if err != nil {
		return nil, err
	}
	all, err := s.store.ListRoutines(ctx, ws)
	if err != nil {
		return nil, err
	}
	out := make([]*desk.Routine, 0, len(all))
	for _, r := range all {
		if p.Admin || r.Actor == p.ActorID {
			out = append(out, r)
		}
	}
	return out, nil
}

// Update changes the named fields. A new schedule, zone or re-enabling
// recomputes the next run from now.
func (s *Service) Update(ctx context.Context, ws, id string, u desk.RoutineUpdate) (*desk.Routine, error) {
	r, err := s.Get(ctx, ws, id)
	if err != nil {
		return nil, err
	}
	reschedule := false
	if u.Name != nil {
		if err := checkText("name", *u.Name, maxName, true); err != nil {
			return nil, err
		}
		r.Name = *u.Name
	}
	if u.Prompt != nil {
		if err := checkText("prompt", *u.Prompt, maxPrompt, true); err != nil {
			return nil, err
		}
		r.Prompt = *u.Prompt
	}
	if u.TitleTemplate != nil {
		if err := checkText("title_template", *u.TitleTemplate, maxName, false); err != nil {
			return nil, err
		}
		if r.SessionID != "" && *u.TitleTemplate != "" {
			return nil, desk.Errorf(desk.EINVALID, "title_template applies to a new session per run; this routine targets session %s", r.SessionID)
		}
		r.TitleTemplate = *u.TitleTemplate
	}
	if u.Schedule != nil {
		r.Schedule, reschedule = *u.Schedule, true
	}
	if u.TimeZone != nil {
		r.TimeZone, reschedule = *u.TimeZone, true
	}
	if u.Overlap != nil {
		if *u.Overlap != desk.RoutineOverlapSkip && *u.Overlap != desk.RoutineOverlapQueue {
			return nil, desk.Errorf(desk.EINVALID, "overlap %q must be skip or queue", *u.Overlap)
		}
		r.Overlap = *u.Overlap
	}
	if u.Enabled != nil {
		if *u.Enabled && !r.Enabled {
			reschedule = true
		}
		r.Enabled = *u.Enabled
	}
	sched, err := parseSchedule(r.Schedule, r.TimeZone)
	if err != nil {
		return nil, err
	}
	now := s.opts.Now()
	if reschedule {
		// Re-enabling does not fire the ticks missed while paused.
		r.NextRunAt = sched.Next(now)
	}
	r.UpdatedAt = now
	if err := s.store.UpdateRoutine(ctx, r); err != nil {
		return nil, err
	}
	return r, nil
}

func (s *Service) Delete(ctx context.Context, ws, id string) error {
	if _, err := s.Get(ctx, ws, id); err != nil {
		return err
	}
	return s.store.DeleteRoutine(ctx, id)
}

// RunNow fires the routine at once. The schedule is not moved; the
// overlap policy holds (with skip and a run going, the run is skipped).
func (s *Service) RunNow(ctx context.Context, ws, id string) (*desk.RoutineRun, error) {
	r, err := s.Get(ctx, ws, id)
	if err != nil {
		return nil, err
	}
	run, err := s.newRun(ctx, r, desk.RoutineTriggerManual, s.opts.Now())
	if err != nil {
		return nil, err
	}
	ok, err := s.store.ClaimRoutineRun(ctx, r.ID, nil, r.NextRunAt, run)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, desk.Errorf(desk.ENOTFOUND, "routine %s not found", id)
	}
	if run.Status == desk.RoutineRunRunning {
		if err := s.start(context.WithoutCancel(ctx), r, run); err != nil {
			return nil, err
		}
	}
	return run, nil
}

func (s *Service) Runs(ctx context.Context, ws, id string, limit int) ([]*desk.RoutineRun, error) {
	if _, err := s.Get(ctx, ws, id); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	return s.store.ListRoutineRuns(ctx, id, "", limit)
}
