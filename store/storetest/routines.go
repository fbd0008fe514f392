package storetest

import (
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testRoutines: a routine round-trips; of two claims of one tick exactly
// one wins; a run's conditional update applies once; due, running and
// listed runs are what they should be; deleting a routine removes its runs.
func testRoutines(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	now := desk.Now().Truncate(time.Second)
	r := &desk.Routine{ID: desk.NewID(desk.PrefixRoutine), WorkspaceID: w.ID, Name: "nightly", Schedule: "@every 2s",
		Prompt: "tick", Overlap: desk.RoutineOverlapSkip, Enabled: true, Actor: owner.ID, NextRunAt: now,
		CreatedAt: now, UpdatedAt: now}
	must(t, s.CreateRoutine(ctx, r))
	got, err := s.GetRoutine(ctx, r.ID)
	if err != nil || got.Name != "nightly" || got.Schedule != "@every 2s" || !got.NextRunAt.Equal(now) || !got.Enabled {
		t.Fatalf("GetRoutine: %+v %v", got, err)
	}
	if _, err := s.GetRoutine(ctx, "rtn_nothere"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("an unknown routine: %v", err)
	}
	if rs, err := s.ListRoutines(ctx, w.ID); err != nil || len(rs) != 1 || rs[0].ID != r.ID {
		t.Fatalf("ListRoutines: %+v %v", rs, err)
	}
	if due, err := s.DueRoutines(ctx, now.Add(time.Second)); err != nil || len(due) != 1 {
		t.Fatalf("DueRoutines: %+v %v", due, err)
	}
	if due, err := s.DueRoutines(ctx, now.Add(-time.Second)); err != nil || len(due) != 0 {
		t.Fatalf("DueRoutines before the tick: %+v %v", due, err)
	}

	// Two nodes claim one tick: one wins.
	next := now.Add(2 * time.Second)
	run := func() *desk.RoutineRun {
		return &desk.RoutineRun{ID: desk.NewID(desk.PrefixRoutineRun), RoutineID: r.ID, WorkspaceID: w.ID,
			Trigger: desk.RoutineTriggerSchedule, ScheduledFor: now, Status: desk.RoutineRunRunning, StartedAt: now}
	}
	a, b := run(), run()
	wonA, err := s.ClaimRoutineRun(ctx, r.ID, &now, next, a)
	must(t, err)
	wonB, err := s.ClaimRoutineRun(ctx, r.ID, &now, next, b)
	must(t, err)
	if !wonA || wonB {
		t.Fatalf("two claims of one tick: %v %v", wonA, wonB)
	}
	if _, err := s.GetRoutineRun(ctx, b.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("the losing claim's run exists: %v", err)
	}
	if got, _ := s.GetRoutine(ctx, r.ID); !got.NextRunAt.Equal(next) {
		t.Fatalf("next run after the claim: %v, want %v", got.NextRunAt, next)
	}
	if rs, err := s.RunningRoutineRuns(ctx); err != nil || len(rs) != 1 || rs[0].ID != a.ID {
		t.Fatalf("RunningRoutineRuns: %+v %v", rs, err)
	}

	// The run's conditional update applies once.
	fin := now.Add(time.Second)
	a.Status, a.FinishedAt = desk.RoutineRunSucceeded, &fin
	if ok, err := s.UpdateRoutineRun(ctx, a, desk.RoutineRunRunning, nil); err != nil || !ok {
		t.Fatalf("UpdateRoutineRun: %v %v", ok, err)
	}
	if ok, err := s.UpdateRoutineRun(ctx, a, desk.RoutineRunRunning, nil); err != nil || ok {
		t.Fatalf("a second update from running: %v %v", ok, err)
	}
	if got, err := s.GetRoutineRun(ctx, a.ID); err != nil || got.Status != desk.RoutineRunSucceeded || got.FinishedAt == nil {
		t.Fatalf("GetRoutineRun: %+v %v", got, err)
	}
	if rs, err := s.ListRoutineRuns(ctx, r.ID, desk.RoutineRunSucceeded, 10); err != nil || len(rs) != 1 {
		t.Fatalf("ListRoutineRuns: %+v %v", rs, err)
	}
	if rs, err := s.ListRoutineRuns(ctx, r.ID, desk.RoutineRunFailed, 10); err != nil || len(rs) != 0 {
		t.Fatalf("ListRoutineRuns of another status: %+v %v", rs, err)
	}

	// A manual run claims unconditionally; an edit and a pause stick.
	if won, err := s.ClaimRoutineRun(ctx, r.ID, nil, next, run()); err != nil || !won {
		t.Fatalf("a run by hand: %v %v", won, err)
	}
	r.Enabled, r.Prompt, r.NextRunAt, r.UpdatedAt = false, "tock", next, fin
	must(t, s.UpdateRoutine(ctx, r))
	if got, _ := s.GetRoutine(ctx, r.ID); got.Enabled || got.Prompt != "tock" {
		t.Fatalf("after UpdateRoutine: %+v", got)
	}
	if due, err := s.DueRoutines(ctx, next.Add(time.Hour)); err != nil || len(due) != 0 {
		t.Fatalf("a paused routine is due: %+v %v", due, err)
	}
	must(t, s.DeleteRoutine(ctx, r.ID))
	if _, err := s.GetRoutine(ctx, r.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a deleted routine: %v", err)
	}
	if _, err := s.GetRoutineRun(ctx, a.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a deleted routine's run: %v", err)
	}
}
