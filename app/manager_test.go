package app_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestWorkspaceManager (#27 item 6): the reserved workspace-manager is
// made on first use, once; it is listed apart and refuses offboard,
// purge and export. Its agent lists the other workspaces and their
// sessions, reads a peer checkout read-only (a planted link out of the
// checkout is refused, not followed), and asks a peer session with
// peer_ask, whose answer comes back as a dispatch_reply; it writes
// nothing into the peer's checkout.
func TestWorkspaceManager(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	var m, again desk.Workspace
	w.Must(200, "POST", "/v1/workspace-manager", nil, &m)
	w.Must(200, "POST", "/v1/workspace-manager", nil, &again)
	if m.ID != desk.ManagerWorkspaceID || again.ID != m.ID || !again.CreatedAt.Equal(m.CreatedAt) || m.Name != desk.ManagerName {
		t.Fatalf("the manager: %+v, then %+v", m, again)
	}
	var list desk.WorkspaceList
	w.Must(200, "GET", "/v1/workspaces", nil, &list)
	for _, x := range list.Workspaces {
		if x.ID == desk.ManagerWorkspaceID {
			t.Fatal("the manager is listed with the users' workspaces")
		}
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/workspaces/" + desk.ManagerWorkspaceID + "/offboard", map[string]string{"reason": "x"}},
		{"POST", "/v1/workspaces/" + desk.ManagerWorkspaceID + "/purge", map[string]string{"confirm": desk.ManagerWorkspaceID}},
		{"GET", "/v1/workspaces/" + desk.ManagerWorkspaceID + "/export", nil},
	} {
		r := w.Admin(c.method, c.path, c.body)
		if r.Status != 400 || !strings.Contains(string(r.Body), "reserved coordination workspace") {
			t.Errorf("%s %s = %d %s", c.method, c.path, r.Status, r.Body)
		}
	}

	// A peer with a session that answers, a file, and a link out.
	var peer desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": "peer", "model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "the build is green"}}}}, &peer)
	writeCheckout(w.Env, w.ws.ID, "notes/plan.md", "ship on friday\n")
	if err := os.Symlink("/etc/passwd", checkoutPath(w.Env, w.ws.ID, "notes/escape")); err != nil {
		t.Fatal(err)
	}
	before := checkoutTree(t, checkoutPath(w.Env, w.ws.ID, "."))

	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []map[string]any{{"name": name, "arguments": args}}}
	}
	var mgr desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+desk.ManagerWorkspaceID+"/sessions", map[string]any{"title": "coordination", "model": "script",
		"script": map[string]any{"steps": []map[string]any{
			call("peer_list", map[string]any{}),
			call("peer_sessions", map[string]any{"workspace_id": w.ws.ID}),
			call("peer_path", map[string]any{"workspace_id": w.ws.ID, "path": "/workspace/notes/plan.md"}),
			call("peer_path", map[string]any{"workspace_id": w.ws.ID, "path": "notes/escape"}),
			call("peer_path", map[string]any{"workspace_id": w.ws.ID, "path": "../../../../etc"}),
			call("peer_ask", map[string]any{"target": peer.Signature, "subject": "status", "text": "is the build green?", "reply": "caller"}),
			{"text": "asked"},
			{"text": "noted"},
		}}}, &mgr)
	w.Must(202, "POST", "/v1/sessions/"+mgr.ID+"/messages", map[string]any{"text": "how are the desks?"}, nil)
	waitFor(t, "the manager's second turn (the reply)", func() bool {
		var xs desk.ExecutionList
		w.Must(200, "GET", "/v1/sessions/"+mgr.ID+"/executions", nil, &xs)
		n := 0
		for _, x := range xs.Executions {
			if x.Phase == desk.PhaseEnded {
				n++
			}
		}
		return n == 2
	})
	var msgs desk.MessageList
	w.Must(200, "GET", "/v1/sessions/"+mgr.ID+"/messages", nil, &msgs)
	var transcript []string
	for _, msg := range msgs.Messages {
		transcript = append(transcript, msg.Text)
	}
	// What each call gave the model (the command's result).
	var xs desk.ExecutionList
	w.Must(200, "GET", "/v1/sessions/"+mgr.ID+"/executions", nil, &xs)
	var ids []string
	for _, x := range xs.Executions {
		ids = append(ids, x.ID)
	}
	cmds, err := w.App.Store.ListCommands(t.Context(), ids)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string][]string{}
	for _, c := range cmds {
		text := c.Error
		if c.Result != nil {
			text = c.Result.Text
		}
		results[c.Tool] = append(results[c.Tool], c.Status+" "+text)
	}
	got, _ := json.MarshalIndent(results, "", " ")
	if len(results["peer_list"]) != 1 || !strings.Contains(results["peer_list"][0], w.ws.ID) || strings.Contains(results["peer_list"][0], `"id":"`+desk.ManagerWorkspaceID) {
		t.Fatalf("peer_list: %s", got)
	}
	if len(results["peer_sessions"]) != 1 || !strings.Contains(results["peer_sessions"][0], peer.Signature) {
		t.Fatalf("peer_sessions: %s", got)
	}
	paths := results["peer_path"]
	if len(paths) != 3 || !strings.Contains(paths[0], "ship on friday") ||
		strings.Contains(paths[1], "root:") || !strings.HasPrefix(paths[1], desk.CommandFailed) ||
		strings.Contains(paths[2], "passwd") || !strings.HasPrefix(paths[2], desk.CommandFailed) && !strings.Contains(paths[2], `"path":"/etc"`) {
		t.Fatalf("peer_path: %s", got)
	}
	if len(results["peer_ask"]) != 1 || !strings.HasPrefix(results["peer_ask"][0], desk.CommandSucceeded) {
		t.Fatalf("peer_ask: %s", got)
	}
	if all := strings.Join(transcript, "\n"); !strings.Contains(all, "<dispatch_reply") || !strings.Contains(all, "the build is green") {
		t.Fatalf("the manager's transcript:\n%s", all)
	}
	if after := checkoutTree(t, checkoutPath(w.Env, w.ws.ID, ".")); after != before {
		t.Fatalf("the peer's checkout changed:\nbefore %s\nafter  %s", before, after)
	}
	// An actor token cannot open the manager.
	var actor struct {
		Token string `json:"token"`
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &actor)
	if r := w.Req("POST", "/v1/workspace-manager", actor.Token, nil); r.Status != 403 {
		t.Fatalf("an actor opening the manager: %d %s", r.Status, r.Body)
	}
}

// checkoutTree is every path under dir with its size, one string.
func checkoutTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + info.Mode().String())
		if info.Mode().IsRegular() {
			b.WriteString(" " + string(rune('0'+info.Size()%10)))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
