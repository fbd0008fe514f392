package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/routine"
)

// TestRoutineRunsThroughTheExecutionModel: a routine run by hand on a
// script session is an ordinary turn with origin kind
// routine; following it writes routine_started, routine_progress and
// routine_finished (succeeded) to the archive. A bad cron expression is
// refused naming the field, and nothing is created.
func TestRoutineRunsThroughTheExecutionModel(t *testing.T) {
	t.Parallel()
	// The scheduler is driven by hand (Tick), so nothing fires on its own.
	w := newWorldOn(t, app.Config{Routine: routine.Options{Manual: true}})
	base := "/v1/workspaces/" + w.ws.ID + "/routines"

	r := w.Admin("POST", base, map[string]any{"name": "bad", "schedule": "*/5 * * *", "prompt": "p"})
	if r.Status != 400 || !strings.Contains(string(r.Body), "schedule") {
		t.Fatalf("bad cron = %d %s, want 400 naming schedule", r.Status, r.Body)
	}
	var list desk.RoutineList
	w.Must(200, "GET", base, nil, &list)
	if len(list.Routines) != 0 {
		t.Fatalf("a refused create left %d routines", len(list.Routines))
	}

	var target desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": "digests", "model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "the digest"}}}}, &target)
	var rt desk.Routine
	w.Must(201, "POST", base, map[string]any{"name": "digest", "schedule": "@every 2s", "prompt": "summarise the day",
		"session_id": target.ID}, &rt)
	if !rt.Enabled || rt.Overlap != desk.RoutineOverlapSkip || rt.NextRunAt.IsZero() {
		t.Fatalf("created %+v: want enabled, overlap skip, a next run", rt)
	}
	var run desk.RoutineRun
	w.Must(201, "POST", base+"/"+rt.ID+"/run", nil, &run)
	if run.Status != desk.RoutineRunRunning || run.SessionID == "" || run.QueueItemID == "" {
		t.Fatalf("run now = %+v, want a running run with its session and queue row", run)
	}
	waitFor(t, "the run to finish", func() bool {
		if err := w.App.Routines.Tick(context.Background()); err != nil {
			t.Fatal(err)
		}
		var runs desk.RoutineRunList
		w.Must(200, "GET", base+"/"+rt.ID+"/runs", nil, &runs)
		run = *runs.Runs[0]
		return run.Status != desk.RoutineRunRunning
	})
	if run.Status != desk.RoutineRunSucceeded || run.ExecutionID == "" {
		t.Fatalf("run settled as %+v, want succeeded with its execution", run)
	}
	var x desk.Execution
	w.Must(200, "GET", "/v1/executions/"+run.ExecutionID, nil, &x)
	if x.Origin.Kind != desk.OriginRoutine || x.SessionID != run.SessionID {
		t.Fatalf("execution origin %+v on %s, want kind routine on %s", x.Origin, x.SessionID, run.SessionID)
	}

	// The archive has the run's three records, in order.
	body := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/archive", nil, nil).Body
	var got []string
	for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		if st, _ := rec["system_type"].(string); strings.HasPrefix(st, "routine_") {
			if rec["routine_id"] != rt.ID {
				t.Fatalf("record %s names routine %v", line, rec["routine_id"])
			}
			if st == "routine_finished" && rec["status"] != "succeeded" {
				t.Fatalf("routine_finished %s, want status succeeded", line)
			}
			got = append(got, st)
		}
	}
	if strings.Join(got, ",") != "routine_started,routine_progress,routine_finished" {
		t.Fatalf("routine records %v, want started, progress, finished", got)
	}

	// Pause, then a tick long after: nothing fires.
	w.Must(200, "PATCH", base+"/"+rt.ID, map[string]any{"enabled": false}, &rt)
	if rt.Enabled {
		t.Fatal("pause left the routine enabled")
	}
	w.Must(204, "DELETE", base+"/"+rt.ID, nil, nil)
	w.Must(404, "GET", base+"/"+rt.ID, nil, nil)
}
