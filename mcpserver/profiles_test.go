package mcpserver_test

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestProfileTools: over MCP an actor writes a profile (an unknown tool is
// a tool error naming the field), lists it with desk's default, makes a
// session from it, switches the session to another profile for its next
// turn (the transcript records it) and deletes the profile.
func TestProfileTools(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cs := w.connect(t, w.tokA)
	if msg := callErr(t, cs, "profile_put", map[string]any{"workspace_id": w.ws, "name": "bad", "tools": []string{"nope"}}); !strings.Contains(msg, "tools[0]") {
		t.Fatalf("unknown tool: %q, want it to name tools[0]", msg)
	}
	var p desk.Profile
	call(t, cs, "profile_put", map[string]any{"workspace_id": w.ws, "name": "reader", "tools": []string{"read_file"}, "instructions": "Only read."}, &p)
	if p.Name != "reader" || p.Instructions != "Only read." {
		t.Fatalf("profile_put = %+v", p)
	}
	call(t, cs, "profile_put", map[string]any{"workspace_id": w.ws, "name": "writer"}, nil)
	var list struct{ Profiles []*desk.Profile }
	call(t, cs, "profiles_list", map[string]any{"workspace_id": w.ws}, &list)
	var names []string
	for _, x := range list.Profiles {
		names = append(names, x.Name)
	}
	if strings.Join(names, ",") != "default,reader,writer" {
		t.Fatalf("profiles_list = %v", names)
	}
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "title": "p", "profile": "reader"}, &ses)
	if ses.Profile != "reader" || ses.ProfileSnapshot == nil {
		t.Fatalf("session_create = %+v", ses)
	}
	call(t, cs, "session_set", map[string]any{"session_id": ses.ID, "profile": "writer"}, &ses)
	if ses.Profile != "writer" {
		t.Fatalf("session_set = %+v", ses)
	}
	var tr struct{ Messages []desk.Message }
	call(t, cs, "session_transcript", map[string]any{"session_id": ses.ID}, &tr)
	if len(tr.Messages) != 1 || tr.Messages[0].Role != desk.RoleMarker {
		t.Fatalf("transcript %+v, want the marker", tr.Messages)
	}
	call(t, cs, "profile_delete", map[string]any{"workspace_id": w.ws, "name": "reader"}, nil)
}
