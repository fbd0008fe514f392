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

func patchCall(patch string) map[string]any {
	return tc("apply_patch", map[string]any{"patch": patch})
}

// patchFiles is the file change list of an apply_patch command record.
func patchFiles(t *testing.T, c *desk.Command) []map[string]any {
	t.Helper()
	var f struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal(c.Facts, &f); err != nil {
		t.Fatalf("facts %s: %v", c.Facts, err)
	}
	return f.Files
}

// patchRoot is a writable host path that is the workspace's primary root,
// holding the given files.
func patchRoot(t *testing.T, w *agentWorld, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w.Must(200, "PATCH", "/v1/workspaces/"+w.ws.ID, map[string]any{"host_paths": []map[string]string{{"path": root, "mode": "rw"}}, "primary_root": root}, nil)
	return root
}

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// TestAgentApplyPatch: through HTTP with a script session, one patch adds
// a file, updates one with context chunks (one found by its "@@" line),
// deletes one, moves one with a change, and updates an artifact (a new
// revision of the same artifact); every file is exactly as the patch says
// and the command's result lists each change with its counts and diff.
func TestAgentApplyPatch(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	root := patchRoot(t, w, map[string]string{
		"a.go":   "package a\n\nfunc One() int {\n\treturn 1\n}\n\nfunc Two() int {\n\treturn 1\n}\n",
		"old.md": "gone soon\n",
		"mv.txt": "first\nsecond\nthird\n",
	})
	patch := strings.Join([]string{
		"*** Begin Patch",
		"*** Add File: new.txt",
		"+hello",
		"+world",
		"*** Update File: " + root + "/a.go",
		"@@ func Two() int {",
		"-\treturn 1",
		"+\treturn 2",
		" }",
		"*** Delete File: old.md",
		"*** Update File: mv.txt",
		"*** Move to: moved.txt",
		"@@",
		" first",
		"-second",
		"+SECOND",
		" third",
		"*** Update File: /artifacts/notes.md",
		"@@",
		" # Notes",
		"+- patched",
		"*** End of File",
		"*** End Patch",
	}, "\n")
	x := w.script(calls(patchCall(patch)), says("done"))
	art := w.put(x.ID, "notes.md", []byte("# Notes\n"))
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	cs := w.commands(x.ID)
	c := cs[0]
	if c.Status != desk.CommandSucceeded {
		t.Fatalf("apply_patch: %s %s", c.Status, c.Error)
	}
	want := map[string]string{
		"a.go":      "package a\n\nfunc One() int {\n\treturn 1\n}\n\nfunc Two() int {\n\treturn 2\n}\n",
		"new.txt":   "hello\nworld\n",
		"moved.txt": "first\nSECOND\nthird\n",
	}
	got := readAll(t, root)
	if len(got) != len(want) {
		t.Fatalf("files after the patch: %v", got)
	}
	for name, body := range want {
		if got[name] != body {
			t.Fatalf("%s is %q; want %q", name, got[name], body)
		}
	}
	if body := string(w.content(x.ID, art.ID)); body != "# Notes\n- patched\n" {
		t.Fatalf("the artifact is %q", body)
	}
	var after desk.Artifact
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts/"+art.ID, nil, &after)
	if after.Revision != art.Revision+1 {
		t.Fatalf("artifact revision %d after %d", after.Revision, art.Revision)
	}
	files := patchFiles(t, c)
	type row struct {
		path, kind      string
		added, removed  float64
		diffHas, diffNo string
	}
	rows := []row{
		{root + "/new.txt", "add", 2, 0, "+hello\n+world\n", ""},
		{root + "/a.go", "update", 1, 1, "-\treturn 1\n+\treturn 2\n", "-package"},
		{root + "/old.md", "delete", 0, 1, "+++ /dev/null\n@@ -1 +0,0 @@\n-gone soon", ""},
		{root + "/moved.txt", "move", 1, 1, "-second\n+SECOND\n", ""},
		{"/artifacts/notes.md", "update", 1, 0, "+- patched", ""},
	}
	if len(files) != len(rows) {
		t.Fatalf("file changes: %v", files)
	}
	for i, r := range rows {
		f := files[i]
		diff, _ := f["diff"].(string)
		if f["path"] != r.path || f["kind"] != r.kind || f["added"] != r.added || f["removed"] != r.removed ||
			!strings.Contains(diff, r.diffHas) || (r.diffNo != "" && strings.Contains(strings.SplitN(diff, "@@", 2)[1], r.diffNo)) {
			t.Fatalf("change %d: %v; want %+v", i, f, r)
		}
	}
	if files[3]["from"] != root+"/mv.txt" || !strings.Contains(files[3]["diff"].(string), "+++ b"+root+"/moved.txt") {
		t.Fatalf("the move: %v", files[3])
	}
	if v := w.resultOf(x, c); v["added"] != float64(5) || v["removed"] != float64(3) {
		t.Fatalf("the model's result: %v", v)
	}
}

// TestAgentApplyPatchAllOrNothing: a patch whose last chunk does not match
// changes nothing, not even the files its earlier operations would have
// added, updated or deleted; a patch with a target outside the write
// boundary is refused before any change.
func TestAgentApplyPatchAllOrNothing(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	files := map[string]string{"a.txt": "one\ntwo\nthree\n", "b.txt": "alpha\nbeta\n"}
	root := patchRoot(t, w, files)
	bad := strings.Join([]string{
		"*** Begin Patch",
		"*** Add File: c.txt",
		"+new",
		"*** Update File: a.txt",
		" one",
		"-two",
		"+TWO",
		"@@",
		" three",
		"-four",
		"+FOUR",
		"*** Delete File: b.txt",
		"*** End Patch",
	}, "\n")
	outside := strings.Join([]string{
		"*** Begin Patch",
		"*** Add File: /artifacts/fine.txt",
		"+fine",
		"*** Update File: a.txt",
		"-two",
		"+TWO",
		"*** Add File: /artifacts/immutable/sneaky.txt",
		"+no",
		"*** End Patch",
	}, "\n")
	etc := "*** Begin Patch\n*** Add File: /scratch/ok.txt\n+ok\n*** Add File: /etc/passwd\n+root::0:0::/:/bin/sh\n*** End Patch\n"
	x, cs := w.run(calls(patchCall(bad), patchCall(outside), patchCall(etc)))
	if c := cs[0]; c.Status != desk.CommandFailed || !strings.Contains(c.Error, "nothing changed") || !strings.Contains(c.Error, "does not match") {
		t.Fatalf("bad hunk: %s %q", c.Status, c.Error)
	}
	for i, c := range cs[1:] {
		if c.Status != desk.CommandFailed || !strings.HasPrefix(c.Error, "FS_DENIED") || !strings.Contains(c.Error, "nothing changed") {
			t.Fatalf("outside %d: %s %q", i, c.Status, c.Error)
		}
	}
	if !strings.Contains(cs[1].Error, "/artifacts/immutable") || !strings.Contains(cs[2].Error, "/etc/passwd") {
		t.Fatalf("the refusals do not name the path: %q / %q", cs[1].Error, cs[2].Error)
	}
	if got := readAll(t, root); len(got) != 2 || got["a.txt"] != files["a.txt"] || got["b.txt"] != files["b.txt"] {
		t.Fatalf("files after refused patches: %v", got)
	}
	if arts := w.list(x.ID); len(arts) != 0 {
		t.Fatalf("a refused patch left artifacts: %+v", arts)
	}
}

// TestAgentApplyPatchGated: in the user approval mode a patch that
// touches the workspace's files waits for approval; one confined to
// /artifacts and /scratch does not.
func TestAgentApplyPatchGated(t *testing.T) {
	apptest.Parallel(t)
	w := newAgentWorld(t)
	root := patchRoot(t, w, map[string]string{"a.txt": "a\n"})
	x := w.script(calls(patchCall("*** Begin Patch\n*** Add File: /artifacts/free.txt\n+free\n*** End Patch")),
		calls(patchCall("*** Begin Patch\n*** Update File: "+root+"/a.txt\n-a\n+b\n*** End Patch")), says("done"))
	w.send(x.ID, "go")
	c := w.waitCommand(x.ID, "the workspace patch to wait", func(c *desk.Command) bool { return c.Status == desk.CommandWaiting })
	if !strings.Contains(string(c.Arguments), "a.txt") {
		t.Fatalf("the waiting command: %+v", c)
	}
	aps := w.approvals(x.ID, true)
	if len(aps) != 1 || !strings.Contains(aps[0].Summary, "update "+root+"/a.txt") {
		t.Fatalf("approvals: %+v", aps)
	}
	if cs := w.commands(x.ID); cs[0].Status != desk.CommandSucceeded {
		t.Fatalf("the artifacts patch: %+v", cs[0])
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.txt")); string(b) != "a\n" {
		t.Fatalf("a.txt changed before approval: %q", b)
	}
}
