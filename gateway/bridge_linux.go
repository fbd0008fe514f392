package gateway

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the child when the bridge dies.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
