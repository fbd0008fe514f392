package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/ownerlock"
	"github.com/desk-runtime/desk/internal/testwait"
)

// TestStaleEtcSparesAnotherNamespacesDesk: another desk sharing /tmp
// from its own PID namespace (a container, or a second desk on this
// machine) owns a copy named with a pid this process cannot see. The
// sweep must leave it while that desk lives, and remove it once it is
// gone. The other desk is a real process in a new PID namespace when
// unshare(1) can make one here, and an ordinary child otherwise; its copy
// is named with a pid above pid_max either way.
func TestStaleEtcSparesAnotherNamespacesDesk(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	const foreignPID = 4194305 // above the largest pid_max: no process here has it
	dir := filepath.Join(tmp, "desk-sandbox-etc-4194305-other")
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o700); err != nil {
		t.Fatal(err)
	}
	// flock(1) takes the same flock(2) lock ownerlock does, and holds it
	// for as long as its command runs; "locked" says it has it.
	lock := filepath.Join(dir, ownerlock.Name)
	holder := []string{"flock", lock, "sh", "-c", "echo locked; exec sleep 600"}
	ns := "this namespace"
	if exec.Command("unshare", "--pid", "--fork", "--map-root-user", "true").Run() == nil {
		holder = append([]string{"unshare", "--pid", "--fork", "--kill-child", "--map-root-user"}, holder...)
		ns = "a new PID namespace"
	}
	cmd := exec.Command(holder[0], holder[1:]...)
	// Its own process group, so that ending it ends every process that
	// holds the lock (flock's child inherits the locked descriptor).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a lock holder: %v", err)
	}
	defer kill()
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("the holder in %s did not take the lock: %q", ns, line)
	}
	t.Logf("the other desk runs in %s; its copy is named with pid %d", ns, foreignPID)
	removeStaleEtc()
	if _, err := os.Stat(filepath.Join(dir, "etc")); err != nil {
		t.Fatalf("the sweep removed a live desk's copy (in %s): %v", ns, err)
	}
	// The other desk ends (as kill -9 would): its copy is debris now.
	kill()
	cmd.Wait()
	testwait.Until(t, 10*time.Second, func() bool {
		removeStaleEtc()
		_, err := os.Stat(dir)
		return os.IsNotExist(err)
	}, "the sweep to remove the copy of a desk that is gone")
}
