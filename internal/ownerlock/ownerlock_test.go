//go:build unix

package ownerlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/ownerlock"
)

const holdEnv = "DESK_OWNERLOCK_TEST_HOLD"

// held keeps the child's lock file reachable.
var held *os.File

// TestHelperHold, run as a child process, holds the directory it is given
// and waits to be killed.
func TestHelperHold(t *testing.T) {
	dir := os.Getenv(holdEnv)
	if dir == "" {
		t.Skip("a child process of TestSweep")
	}
	f, err := ownerlock.Hold(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	// The file must stay reachable: a collected *os.File is closed by its
	// finalizer, which would release the lock while this process lives.
	held = f
	// Sleep, not select {}: with every goroutine blocked and no timer, the
	// runtime ends the process as deadlocked, which released the lock
	// (and let TestSweep remove a live owner's directory, now and then).
	for {
		time.Sleep(time.Hour)
	}
}

// hold starts a child process holding dir; kill ends it as kill -9 would.
func hold(t *testing.T, dir string) (kill func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := out.Read(b); err != nil || !strings.HasPrefix(string(b), "held") {
		cmd.Process.Kill()
		t.Fatalf("the child did not hold %s: %v %q", dir, err, b)
	}
	kill = func() { cmd.Process.Kill(); cmd.Wait() }
	t.Cleanup(kill)
	return kill
}

func mk(t *testing.T, base, name string) string {
	t.Helper()
	d := filepath.Join(base, name)
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// A sweep removes a killed process's directory and keeps a live
// process's (another process's, as a desk in another PID namespace would
// be, whose pid this one cannot see), its own, one without a lock, and
// names without the prefix.
func TestSweep(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	live := mk(t, base, "x-999999999-live") // a pid nobody here has
	hold(t, live)
	killed := mk(t, base, "x-1-killed")
	kill := hold(t, killed)
	own := mk(t, base, "x-own")
	ownLock, err := ownerlock.Hold(own)
	if err != nil {
		t.Fatal(err)
	}
	defer ownLock.Close()
	ownOther := mk(t, base, "x-own-other-fd")
	f, err := ownerlock.Hold(ownOther)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unlocked := mk(t, base, "x-being-made")
	other := mk(t, base, "y-other")
	os.WriteFile(filepath.Join(other, ownerlock.Name), nil, 0o600)

	if n := ownerlock.Sweep(base, "x-", own); n != 0 {
		t.Fatalf("swept %d while every owner lives", n)
	}
	kill()
	if n := ownerlock.Sweep(base, "x-", own); n != 1 || exists(killed) {
		t.Fatalf("swept %d; the killed process's directory exists: %v", n, exists(killed))
	}
	for _, d := range []string{live, own, ownOther, unlocked, other} {
		if !exists(d) {
			t.Errorf("%s was swept", filepath.Base(d))
		}
	}
}
