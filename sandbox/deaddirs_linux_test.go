package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// deadDeskDirs lists only the directories of desk processes that are gone:
// not this process's, not a live one's (pid 1), not files, not other names.
func TestDeadDeskDirs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{
		"desk-cmd-999999999-1", // no such process
		"desk-cmd-" + strconv.Itoa(os.Getpid()) + "-1",
		"desk-cmd-1-1",
		"desk-cmd-x",
		"other-999999999-1",
	} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "desk-cmd-999999998-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got := deadDeskDirs(dir, "desk-cmd-")
	if want := []string{"desk-cmd-999999999-1"}; !slices.Equal(got, want) {
		t.Fatalf("dead dirs %q, want %q", got, want)
	}
}
