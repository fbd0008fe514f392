package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// setProcAttr puts the command in its own process group (so that the
// group can be signalled as a whole) and has the kernel kill it if desk
// dies first.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup signals the process group the command leads. It is only
// called before the leader is reaped, so the group id cannot have been
// reused.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}

// waitExited waits until the command's process has exited without reaping
// it (waitid with WNOWAIT), so that its pid and process group stay reserved
// while what it left behind is killed. reaped is false on success.
func waitExited(cmd *exec.Cmd) (reaped bool, err error) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return true, cmd.Wait()
		}
		return false, nil
	}
}

// noInheritedFDs marks every file descriptor of desk above 2 close-on-exec.
// Go opens its own descriptors close-on-exec, so this changes only those
// desk inherited from whatever started it (a shell's stray descriptor, a
// supervisor's socket), which a command would otherwise inherit in turn:
// bwrap passes on what it is given, and an open directory descriptor
// leads out of any sandbox. Descriptors handed to a command on purpose
// (exec.Cmd.ExtraFiles) are duplicated in the child and are not affected.
func noInheritedFDs() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	// Kernels before 5.11.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
