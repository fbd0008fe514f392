package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestAgentSandboxHostPathSwapped: a declared host path swapped for a link
// to DESK_HOME between two commands of one execution is refused to the
// second command (FS_DENIED), which never sees desk's home: the sandbox
// opens the path again for every command, checks it against the
// declaration, and binds what it opened.
func TestAgentSandboxHostPathSwapped(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := newAgentWorld(t)
	dir := filepath.Join(t.TempDir(), "proj")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("declared"), 0o644))
	w.Must(200, "PATCH", "/v1/workspaces/"+w.ws.ID, map[string]any{"host_paths": []map[string]string{{"path": dir, "mode": "rw"}}}, nil)
	w.settings(map[string]any{"approval_mode": "user"})
	x := w.script(calls(sh("cat "+dir+"/a.txt")), calls(sh("cat "+dir+"/admin.token; ls "+dir)), says("done"))
	res := w.send(x.ID, "go")
	waitApproval := func(n int) string {
		t.Helper()
		eventually(t, "command to wait for approval", func() bool { return len(w.approvals(x.ID, true)) == 1 && len(w.commands(x.ID)) == n })
		return w.approvals(x.ID, true)[0].ID
	}
	approve := func(id string) {
		w.Must(200, "POST", "/v1/approvals/"+id, map[string]string{"decision": "approve"}, nil)
	}
	approve(waitApproval(1))
	second := waitApproval(2)
	// The second command waits for approval: swap the host path now.
	must(t, os.Rename(dir, dir+".old"))
	must(t, os.Symlink(w.App.Home.Root, dir))
	approve(second)
	w.settled(res.ExecutionID)

	cs := w.commands(x.ID)
	if len(cs) != 2 {
		t.Fatalf("%d commands, want 2", len(cs))
	}
	if exitCode(cs[0]) != 0 || !strings.Contains(cs[0].Output, "declared") {
		t.Fatalf("the first command: exit %d, %q", exitCode(cs[0]), cs[0].Output)
	}
	c := cs[1]
	if strings.Contains(c.Output, w.Token) || strings.Contains(c.Output, "desk.db") || strings.Contains(c.Output, "workspaces") || strings.Contains(string(c.Facts), w.Token) {
		t.Fatalf("the second command saw desk's home through the swapped host path: %q", c.Output)
	}
	if r := w.resultOf(x, c); c.Status != desk.CommandFailed || errCode(r) != "FS_DENIED" || !strings.Contains(c.Error, "no longer the directory that was declared") {
		t.Fatalf("the second command: status %s, error %q, result %v; want it refused with FS_DENIED", c.Status, c.Error, r)
	}
}
