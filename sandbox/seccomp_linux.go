package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The seccomp filter every sandbox runs under (bwrap --seccomp): no file
// the sandbox makes ever carries a setuid or setgid bit, not even for a
// moment. Such a file belongs to desk's uid on the host, and the bit would
// let any host user who can run it become desk. The sandbox's mounts are
// nosuid, so inside the sandbox the bit is useless anyway; the only use of
// it is to attack the host. The post-run strip (stripSetid) and the startup
// sweep (SweepSetid) are the second and third lines.
//
// The filter denies, with EPERM:
//
//   - chmod, fchmod, fchmodat, fchmodat2 when the mode sets S_ISUID or
//     S_ISGID (of files and directories alike: seccomp cannot tell which);
//   - open, openat with O_CREAT or O_TMPFILE, and creat, when the mode
//     sets them (umask does not clear S_ISUID: open(…, O_CREAT, 04755)
//     makes a setuid file directly);
//   - mknod, mknodat when the mode sets them.
//
// and, with ENOSYS (so libc and language runtimes fall back):
//
//   - openat2, whose mode lies in a structure behind a pointer that a
//     filter cannot read; libc and Go fall back to openat;
//   - io_uring_setup: an io_uring's operations (IORING_OP_OPENAT carries
//     a mode) are not system calls and no filter sees them.
//
// mkdir and mkdirat are not filtered: the kernel keeps only the permission
// and sticky bits of their mode. A mode is a register, not memory, so what
// the filter checked is what the kernel uses. Calls of another
// architecture (the i386 ABI through int 0x80 on x86_64, AArch32 on arm64)
// kill the process: their numbers differ and the filter does not know
// them; x32 calls answer ENOSYS (the library's guard). Everything else is
// allowed: the filter narrows nothing else of what a command may do.
var seccompFilter = sync.OnceValues(buildSeccomp)

// setidBits are S_ISUID and S_ISGID.
const setidBits = unix.S_ISUID | unix.S_ISGID

// oTmpfile is __O_TMPFILE, the bit that makes O_TMPFILE (which also sets
// O_DIRECTORY) create an unnamed file with the call's mode.
const oTmpfile = unix.O_TMPFILE &^ unix.O_DIRECTORY

// errnoENOSYS is the filter's answer for calls denied outright.
const errnoENOSYS = seccomp.Action(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))

// seccompPolicy is the filter's policy for the running architecture: rules
// of calls the architecture lacks (arm64 has no chmod, open, creat or
// mknod, only their *at forms) are left out.
func seccompPolicy(info *arch.Info) seccomp.Policy {
	bits := func(argument uint32) seccomp.Condition {
		return seccomp.Condition{Argument: argument, Operation: seccomp.BitsSet, Value: setidBits}
	}
	flag := func(argument uint32, f uint64) seccomp.Condition {
		return seccomp.Condition{Argument: argument, Operation: seccomp.BitsSet, Value: f}
	}
	rules := []seccomp.NameWithConditions{
		// chmod(path, mode), fchmod(fd, mode), fchmodat(dirfd, path, mode),
		// fchmodat2(dirfd, path, mode, flags).
		{Name: "chmod", Conditions: seccomp.ArgumentConditions{bits(1)}},
		{Name: "fchmod", Conditions: seccomp.ArgumentConditions{bits(1)}},
		{Name: "fchmodat", Conditions: seccomp.ArgumentConditions{bits(2)}},
		{Name: "fchmodat2", Conditions: seccomp.ArgumentConditions{bits(2)}},
		// open(path, flags, mode), openat(dirfd, path, flags, mode): the
		// mode counts only when the call creates (O_CREAT, O_TMPFILE); a
		// plain open may pass anything there.
		{Name: "open", Conditions: seccomp.ArgumentConditions{flag(1, unix.O_CREAT), bits(2)}},
		{Name: "open", Conditions: seccomp.ArgumentConditions{flag(1, oTmpfile), bits(2)}},
		{Name: "openat", Conditions: seccomp.ArgumentConditions{flag(2, unix.O_CREAT), bits(3)}},
		{Name: "openat", Conditions: seccomp.ArgumentConditions{flag(2, oTmpfile), bits(3)}},
		// creat(path, mode); mknod(path, mode, dev), mknodat(dirfd, path,
		// mode, dev).
		{Name: "creat", Conditions: seccomp.ArgumentConditions{bits(1)}},
		{Name: "mknod", Conditions: seccomp.ArgumentConditions{bits(1)}},
		{Name: "mknodat", Conditions: seccomp.ArgumentConditions{bits(2)}},
	}
	var known []seccomp.NameWithConditions
	for _, r := range rules {
		if _, ok := info.SyscallNames[r.Name]; ok {
			known = append(known, r)
		}
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, NamesWithCondtions: known}, // EPERM
			{Action: errnoENOSYS, Names: []string{"openat2", "io_uring_setup"}},
		},
	}
}

// seccompInstructions assembles the policy for the running architecture
// (info; the library assembles only for the running one) behind an
// architecture check of its own: the library's check lets a foreign
// architecture's calls through to the default action (allow), which would
// let an i386 chmod (number 15, through int 0x80) pass.
func seccompInstructions(info *arch.Info) ([]bpf.Instruction, error) {
	p := seccompPolicy(info)
	body, err := p.Assemble()
	if err != nil {
		return nil, err
	}
	const archOffset = 4 // seccomp_data.arch
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
	}
	return append(prog, body...), nil
}

func buildSeccomp() ([]byte, error) {
	info, err := arch.GetInfo(runtime.GOARCH)
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	prog, err := seccompInstructions(info)
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
	}
	// bwrap reads struct sock_filter entries, in the machine's byte order.
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}

// seccompPipe returns a pipe's read end holding the compiled filter, for
// bwrap's --seccomp (it reads to the end). The filter is a few hundred
// bytes, far below a pipe's buffer, so the write does not block.
func seccompPipe(pipe func() (r, w *os.File, err error)) (*os.File, error) {
	prog, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	r, w, err := pipe()
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(prog); err != nil {
		return nil, err
	}
	w.Close()
	return r, nil
}
