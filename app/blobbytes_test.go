package app_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

// TestArtifactWorkingCopy: the session's artifact directory is only this
// node's working copy. A file it lacks (as on a node that never held it,
// or after losing its disk) is fetched from the blob store before a
// command, and a command's edit of an artifact becomes its next revision
// in the blob store, which is what a download then reads.
func TestArtifactWorkingCopy(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := newAgentWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	x := w.script(calls(sh("cat /artifacts/note.txt > /artifacts/copy.txt && echo edited >> /artifacts/note.txt")), says("done"))
	note := w.put(x.ID, "note.txt", []byte("kept in the blob store\n"))
	if err := os.Remove(filepath.Join(w.sessionDir(x), "note.txt")); err != nil {
		t.Fatal(err)
	}
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	if got := string(w.content(x.ID, note.ID)); got != "kept in the blob store\nedited\n" {
		t.Fatalf("note.txt after the command's edit reads %q", got)
	}
	var list struct{ Artifacts []desk.Artifact }
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts", nil, &list)
	found := false
	for _, a := range list.Artifacts {
		switch a.Name {
		case "copy.txt":
			found = string(w.content(x.ID, a.ID)) == "kept in the blob store\n"
		case "note.txt":
			if a.Revision != 2 {
				t.Errorf("note.txt is at revision %d after the command's edit, want 2", a.Revision)
			}
		}
	}
	if !found {
		t.Fatalf("the command did not see note.txt's bytes fetched from the blob store: %+v", list.Artifacts)
	}
}
