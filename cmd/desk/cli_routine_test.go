package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
)

// TestCLIRoutine drives every routine verb against a real server: a bad
// schedule is refused naming the field and creates nothing; a routine
// runs by hand on a script session and its run settles as succeeded;
// pause and resume flip its state; rm deletes it.
func TestCLIRoutine(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "auto")
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"text":"the digest"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var ses desk.Session
	c.json(&ses, "session", "create", ws.ID, "--title", "digests", "--model", "script", "--script", script)

	c.fail(exitUsage, "routine", "create", ws.ID, "digest", "--prompt", "p") // --schedule is required
	c.fail(exitUsage, "routine", "create", ws.ID, "digest", "--schedule", "@hourly")
	r := c.fail(exitInvalid, "routine", "create", ws.ID, "digest", "--schedule", "*/5 * * *", "--prompt", "p")
	if !strings.Contains(r.e.Error(), "schedule") {
		t.Fatalf("bad cron error %v, want it to name schedule", r.e)
	}
	var none []*desk.Routine
	c.json(&none, "routine", "ls", ws.ID)
	if len(none) != 0 {
		t.Fatalf("refused creates left %d routines", len(none))
	}

	// Paused, so the schedule never fires on its own: only the run by hand.
	var rt desk.Routine
	c.json(&rt, "routine", "create", ws.ID, "digest", "--schedule", "0 9 * * 1-5", "--tz", "Europe/Paris",
		"--prompt", "summarise the day", "--session", ses.ID, "--paused")
	if rt.Enabled || rt.SessionID != ses.ID || rt.TimeZone != "Europe/Paris" {
		t.Fatalf("created %+v: want paused on %s in Europe/Paris", rt, ses.ID)
	}
	if out := c.ok("routine", "ls", ws.ID); !strings.Contains(out, rt.ID) || !strings.Contains(out, "paused") || !strings.Contains(out, "0 9 * * 1-5 (Europe/Paris)") {
		t.Fatalf("routine ls = %q", out)
	}
	if out := c.ok("routine", "show", ws.ID, rt.ID); !strings.Contains(out, "summarise the day") || !strings.Contains(out, ses.ID) {
		t.Fatalf("routine show = %q", out)
	}

	var run desk.RoutineRun
	c.json(&run, "routine", "run", ws.ID, rt.ID)
	if run.Status != desk.RoutineRunRunning || run.SessionID != ses.ID || run.Trigger != desk.RoutineTriggerManual {
		t.Fatalf("routine run = %+v, want a manual run on %s", run, ses.ID)
	}
	var runs []*desk.RoutineRun
	testwait.Until(t, 30*time.Second, func() bool {
		c.json(&runs, "routine", "runs", ws.ID, rt.ID)
		return len(runs) == 1 && runs[0].Status != desk.RoutineRunRunning
	}, "the run to settle")
	if runs[0].ID != run.ID || runs[0].Status != desk.RoutineRunSucceeded || runs[0].ExecutionID == "" {
		t.Fatalf("runs = %+v, want %s succeeded with its execution", runs[0], run.ID)
	}
	if out := c.ok("routine", "runs", ws.ID, rt.ID); !strings.Contains(out, "succeeded") || !strings.Contains(out, "manual") {
		t.Fatalf("routine runs = %q", out)
	}

	if out := c.ok("routine", "resume", ws.ID, rt.ID); !strings.Contains(out, "resumed routine "+rt.ID) {
		t.Fatalf("resume = %q", out)
	}
	c.json(&rt, "routine", "show", ws.ID, rt.ID)
	if !rt.Enabled || rt.NextRunAt.IsZero() {
		t.Fatalf("after resume %+v, want enabled with a next run", rt)
	}
	c.json(&rt, "routine", "pause", ws.ID, rt.ID)
	if rt.Enabled {
		t.Fatal("pause left it enabled")
	}
	c.ok("routine", "rm", ws.ID, rt.ID)
	c.fail(exitNotFound, "routine", "show", ws.ID, rt.ID)
}
