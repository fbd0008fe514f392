// Package npmbin finds, for tests, the real programs .ci/run installs
// from npm (pinned in .ci/npm): the directory DESK_NPM_BIN names, or a
// skip that says what is missing, so every test of a real counterpart
// skips the same way on a machine without them.
package npmbin

import (
	"os"
	"path/filepath"
	"testing"
)

// Find returns the path of the npm program name (what describes it in
// the skip message), or skips t.
func Find(t testing.TB, name, what string) string {
	t.Helper()
	dir := os.Getenv("DESK_NPM_BIN")
	if dir == "" {
		t.Skipf("DESK_NPM_BIN is not set: the real %s is needed (.ci/run installs it from .ci/npm)", what)
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is not installed at %s: %v", what, bin, err)
	}
	return bin
}
