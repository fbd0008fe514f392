//go:build unix

package transfer

import (
	"errors"
	"syscall"
)

// alive reports whether a process with this pid exists on this host.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
