package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
)

// TestBinaryThreads drives handler threads through the real binary: a
// script session delegates to a handler thread that concludes with an
// episode; desk thread ls / show / episodes read it back, and desk send
// --thread talks to the thread, whose reply streams back while the
// orchestrator's transcript stays as it was.
func TestBinaryThreads(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	ws := d.workspace("threads", false)
	script, _ := json.Marshal(map[string]any{
		"steps": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_start", "arguments": map[string]any{
				"threads": []any{map[string]any{"title": "worker", "objective": "find the answer"}}}}}},
			map[string]any{"text": "delegated"},
			map[string]any{"text": "noted the episode"},
		},
		"handlers": map[string]any{"worker": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_report", "arguments": map[string]any{
				"title": "found it", "body": "worker-episode-body", "outcome": "delivered"}}}},
			map[string]any{"text": "worker done"},
			map[string]any{"text": "worker-direct-reply"},
		}},
	})
	f := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(f, script, 0o644); err != nil {
		t.Fatal(err)
	}
	var x desk.Session
	d.json(&x, "session", "create", ws, "--model", "script", "--script", f)
	if out := d.ok("send", x.ID, "please delegate"); !strings.Contains(out, "delegated") {
		t.Fatalf("desk send: %s", out)
	}
	var ts []desk.Thread
	if !testwait.Poll(90*time.Second, func() bool {
		d.json(&ts, "thread", "ls", x.ID)
		return len(ts) == 1 && ts[0].State == desk.ThreadConcluded
	}) {
		t.Fatalf("the thread never concluded: %+v", ts)
	}
	th := ts[0]
	if th.Title != "worker" || th.LatestEpisode == nil || th.LatestEpisode.Title != "found it" || th.SurfaceID == x.SurfaceID {
		t.Fatalf("thread: %+v", th)
	}
	if out := d.ok("thread", "ls", x.ID); !strings.Contains(out, th.ID) || !strings.Contains(out, "concluded") || !strings.Contains(out, "conclusion/delivered: found it") {
		t.Fatalf("desk thread ls:\n%s", out)
	}
	if out := d.ok("thread", "show", th.ID); !strings.Contains(out, "find the answer") || !strings.Contains(out, th.SurfaceID) || !strings.Contains(out, th.GroupID) {
		t.Fatalf("desk thread show:\n%s", out)
	}
	if out := d.ok("thread", "episodes", th.ID); !strings.Contains(out, "worker-episode-body") || !strings.Contains(out, "conclusion (delivered)") {
		t.Fatalf("desk thread episodes:\n%s", out)
	}
	var es []desk.Episode
	d.json(&es, "thread", "episodes", th.ID)
	if len(es) != 1 || es[0].ThreadID != th.ID || es[0].Body != "worker-episode-body" {
		t.Fatalf("desk --json thread episodes: %+v", es)
	}
	// Wait for the orchestrator to reconcile the notification, so its
	// transcript is settled before the direct conversation.
	var before []desk.Message
	if !testwait.Poll(90*time.Second, func() bool {
		d.json(&before, "message", "ls", x.ID)
		n := len(before)
		return n > 0 && strings.Contains(before[n-1].Text, "noted the episode")
	}) {
		t.Fatalf("the orchestrator never reconciled the episode: %+v", before)
	}
	if out := d.ok("send", x.ID, "--thread", th.ID, "hello worker"); !strings.Contains(out, "worker-direct-reply") {
		t.Fatalf("desk send --thread: %s", out)
	}
	var after []desk.Message
	d.json(&after, "message", "ls", x.ID)
	if len(after) != len(before) {
		t.Fatalf("the direct conversation changed the orchestrator's transcript: %d messages, was %d", len(after), len(before))
	}
	// Bad input names the problem.
	if e := d.fail(exitNotFound, "thread", "show", "thr_01JZZZZZZZZZZZZZZZZZZZZZZZ"); !strings.Contains(e, "thr_01JZZZZZZZZZZZZZZZZZZZZZZZ") {
		t.Fatalf("show unknown: %s", e)
	}
	var other desk.Session
	d.json(&other, "session", "create", ws, "--model", "script", "--script", f)
	if e := d.fail(exitInvalid, "send", other.ID, "--thread", th.ID, "hi"); !strings.Contains(e, "belongs to session "+x.ID) {
		t.Fatalf("send --thread to another session: %s", e)
	}
	if e := d.fail(exitUsage, "send", x.ID, "--thread", th.ID, "--surface", x.SurfaceID, "hi"); !strings.Contains(e, "--surface") {
		t.Fatalf("send --thread with another --surface: %s", e)
	}
	if e := d.fail(exitNotFound, "thread", "ls", "ses_01JZZZZZZZZZZZZZZZZZZZZZZZ"); !strings.Contains(e, "ses_01JZZZZZZZZZZZZZZZZZZZZZZZ") {
		t.Fatalf("ls unknown session: %s", e)
	}
}
