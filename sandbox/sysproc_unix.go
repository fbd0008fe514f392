//go:build unix && !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// waitExited reaps the command: without waitid(WNOWAIT) the process group
// is signalled after the leader is gone, which leaves a small window for
// the group id to be reused.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	return true, cmd.Wait()
}

// noInheritedFDs is a no-op here: see the Linux version.
func noInheritedFDs() {}
