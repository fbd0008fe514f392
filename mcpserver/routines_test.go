package mcpserver_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/client"
)

// TestRoutineTools: over MCP with the SDK's own client an actor creates
// a routine on its script session, runs it by hand, sees the run
// succeed, pauses and deletes it; a bad schedule is a tool error naming
// the field; another actor neither lists nor runs it.
func TestRoutineTools(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	scr, _ := json.Marshal(map[string]any{"steps": []any{map[string]any{"text": "the digest"}}})
	ses, err := w.clientA.CreateSession(ctx, w.ws, client.SessionCreate{Title: "digests", Model: "script", Script: scr})
	if err != nil {
		t.Fatal(err)
	}
	csA := w.connect(t, w.tokA)
	if msg := callErr(t, csA, "routine_create", map[string]any{"workspace_id": w.ws, "name": "bad", "schedule": "*/5 * * *", "prompt": "p"}); !strings.Contains(msg, "schedule") {
		t.Fatalf("bad schedule: %q, want it to name schedule", msg)
	}
	var rt desk.Routine
	call(t, csA, "routine_create", map[string]any{"workspace_id": w.ws, "name": "digest", "schedule": "@daily",
		"prompt": "summarise", "session_id": ses.ID, "enabled": false}, &rt)
	if rt.ID == "" || rt.Enabled || rt.SessionID != ses.ID {
		t.Fatalf("routine_create = %+v", rt)
	}
	var list struct{ Routines []*desk.Routine }
	call(t, csA, "routines_list", map[string]any{"workspace_id": w.ws}, &list)
	if len(list.Routines) != 1 || list.Routines[0].ID != rt.ID {
		t.Fatalf("routines_list = %+v", list.Routines)
	}
	var run desk.RoutineRun
	call(t, csA, "routine_run", map[string]any{"workspace_id": w.ws, "routine_id": rt.ID}, &run)
	if run.Trigger != desk.RoutineTriggerManual || run.SessionID != ses.ID {
		t.Fatalf("routine_run = %+v", run)
	}
	var runs struct{ Runs []*desk.RoutineRun }
	eventually(t, "the run to settle", func() bool {
		call(t, csA, "routine_runs", map[string]any{"workspace_id": w.ws, "routine_id": rt.ID}, &runs)
		return len(runs.Runs) == 1 && runs.Runs[0].Status != desk.RoutineRunRunning
	})
	if runs.Runs[0].Status != desk.RoutineRunSucceeded {
		t.Fatalf("run settled as %+v", runs.Runs[0])
	}
	call(t, csA, "routine_update", map[string]any{"workspace_id": w.ws, "routine_id": rt.ID, "enabled": true, "prompt": "summarise again"}, &rt)
	if !rt.Enabled || rt.Prompt != "summarise again" {
		t.Fatalf("routine_update = %+v", rt)
	}

	// Bob sees none of it.
	csB := w.connect(t, w.tokB)
	call(t, csB, "routines_list", map[string]any{"workspace_id": w.ws}, &list)
	if len(list.Routines) != 0 {
		t.Fatalf("bob lists %+v", list.Routines)
	}
	if msg := callErr(t, csB, "routine_run", map[string]any{"workspace_id": w.ws, "routine_id": rt.ID}); strings.Contains(msg, "summarise") {
		t.Fatalf("bob's refused run leaks the prompt: %q", msg)
	}

	call(t, csA, "routine_delete", map[string]any{"workspace_id": w.ws, "routine_id": rt.ID}, nil)
	call(t, csA, "routines_list", map[string]any{"workspace_id": w.ws}, &list)
	if len(list.Routines) != 0 {
		t.Fatalf("after routine_delete: %+v", list.Routines)
	}
}
