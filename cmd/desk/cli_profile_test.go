package main

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// TestCLIProfile drives the profile verbs and desk session set against a
// real server: a bad tool name is refused naming the field and stores
// nothing; a session made from a profile keeps it; set switches the
// profile for the next turn and the transcript shows the marker; an
// effort for a model not declared as reasoning is refused.
func TestCLIProfile(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "profiles")
	r := c.fail(exitInvalid, "profile", "create", ws.ID, "bad", "--tools", "list_files,launch_missiles")
	if !strings.Contains(r.e.Error(), "tools[1]") {
		t.Fatalf("bad tool error %v, want it to name tools[1]", r.e)
	}
	var p desk.Profile
	c.json(&p, "profile", "create", ws.ID, "reader", "--tools", "list_files,read_file", "--instructions", "Read only.", "--approval-mode", "user")
	if strings.Join(p.Tools, ",") != "list_files,read_file" || p.Instructions != "Read only." {
		t.Fatalf("created %+v", p)
	}
	c.json(&p, "profile", "create", ws.ID, "writer", "--instructions", "Write.")
	if out := c.ok("profile", "ls", ws.ID); !strings.Contains(out, "default (default)") || !strings.Contains(out, "list_files,read_file") || strings.Contains(out, "bad") {
		t.Fatalf("profile ls = %q", out)
	}
	if out := c.ok("profile", "show", ws.ID, "reader"); !strings.Contains(out, "Read only.") {
		t.Fatalf("profile show = %q", out)
	}
	var ses desk.Session
	c.json(&ses, "session", "create", ws.ID, "--profile", "reader", "--title", "p")
	if ses.Profile != "reader" || ses.ProfileSnapshot == nil || ses.ProfileSnapshot.Instructions != "Read only." {
		t.Fatalf("session %+v", ses)
	}
	r = c.fail(exitInvalid, "session", "set", ses.ID, "--reasoning-effort", "high")
	if !strings.Contains(r.e.Error(), "reasoning_effort") {
		t.Fatalf("effort error %v", r.e)
	}
	c.json(&ses, "session", "set", ses.ID, "--profile", "writer")
	if ses.Profile != "writer" || ses.ProfileSnapshot.Instructions != "Write." {
		t.Fatalf("after set: %+v", ses)
	}
	if out := c.ok("message", "ls", ses.ID, "--reasoning"); !strings.Contains(out, "marker") || !strings.Contains(out, "profile writer") {
		t.Fatalf("message ls = %q", out)
	}
	c.ok("profile", "rm", ws.ID, "reader")
	c.fail(exitInvalid, "profile", "rm", ws.ID, "default")
}
