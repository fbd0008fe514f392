//go:build !unix

package sandbox

import (
	"os/exec"
	"syscall"
)

func setProcAttr(cmd *exec.Cmd) {}

// signalGroup kills the main process only: there are no process groups.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	_ = cmd.Process.Kill()
}

func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	return true, cmd.Wait()
}

// noInheritedFDs is a no-op here: see the Linux version.
func noInheritedFDs() {}
