package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/desk-runtime/desk"
)

// BubblewrapSpawner spawns children inside bubblewrap at bwrapPath with
// the same sandbox as a command's (bwrapArgs): the system read-only, a
// minimal /etc with a generated identity, private /proc, /dev and /tmp,
// the network off unless allowed, no capabilities, its own user, PID, IPC
// and UTS namespaces, and --die-with-parent so a child never outlives
// desk. Kill ends the sandbox's whole PID namespace.
//
// Like a command's, every mount is bound from a descriptor desk opened
// itself (fsjail.OpenDir: no link at the last element, a declared host
// path checked against its pin), never by path, so a directory swapped
// after the checks is never what the child sees; so are the read-only
// install paths of the program.
//
// Bounds: the child gets a cgroup of its own where desk can make one,
// with the pids and memory controllers set to the workspace's command
// limits (Processes, MemoryBytes) for its whole life, and a /tmp of
// TmpBytes. Where desk can make no cgroup, RLIMIT_NPROC bounds the
// processes and memory is not bounded: RLIMIT_AS, the commands' fallback,
// counts address space a runtime only reserves (V8 and Rust runtimes
// reserve gigabytes up front) and would stop Node at start. There is no
// CPU-time limit: RLIMIT_CPU counts the CPU a process used over its life,
// so it would kill a long-lived agent after hours of honest work; its
// turns are bounded by interrupts and the idle timeout instead. Output is
// the protocol itself and is not bounded here.
func BubblewrapSpawner(bwrapPath string) Spawner { return &bwrapSpawner{b: newBubblewrap(bwrapPath)} }

type bwrapSpawner struct {
	b *bubblewrap
	// opened, when set, runs after the mounts were opened and before bwrap
	// starts: tests swap a directory there.
	opened func()
}

// spawnWrapper is the child's start inside the sandbox: it reports on fd 3
// that the sandbox is set up, closes it, and becomes the program.
const spawnWrapper = `printf x >&3 || exit 126; exec 3>&-; exec "$@"`

func (s *bwrapSpawner) Spawn(ctx context.Context, sp SpawnSpec) (*Process, error) {
	if len(sp.Argv) == 0 {
		return nil, fmt.Errorf("spawn: argv is empty")
	}
	if !filepath.IsAbs(sp.Argv[0]) {
		return nil, fmt.Errorf("spawn: the program %q is not an absolute path", sp.Argv[0])
	}
	p, err := prepare(Spec{Mounts: sp.Mounts, Cwd: sp.Cwd, Command: sp.Argv[0], Env: sp.Env, Network: sp.Network, Limits: sp.Limits}, false)
	if err != nil {
		return nil, err
	}
	if err := s.b.init(); err != nil {
		return nil, err
	}
	installs, err := installMounts(sp, p.mounts)
	if err != nil {
		return nil, err
	}
	cg, err := newCgroup(p.limits)
	if err != nil {
		return nil, err
	}
	p.cgroup = cg
	proc, err := s.launch(p, installs, sp.Argv)
	if err != nil {
		if cg != nil {
			cg.remove()
		}
		return nil, err
	}
	return proc, nil
}

// installMounts are the program's read-only paths (SpawnSpec.ReadOnly,
// and the program's directory unless one of them holds it or is the
// program itself) outside the system
// directories, which are bound anyway. A path that is a guest mount's or
// lies in one is refused: the sandbox would shadow one with the other.
func installMounts(sp SpawnSpec, guest []Mount) ([]Mount, error) {
	var out []Mount
	add := func(p string) error {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) || p == "/" {
			return desk.Errorf(desk.EINVALID, "spawn: read-only path %q must be absolute and below /", p)
		}
		if inSystemDir(p) {
			return nil
		}
		// Below /tmp is fine (bound over the private tmpfs, as a program
		// under a temporary directory needs); over it, or in /proc, /dev,
		// /etc or a guest mount, is not.
		if within("/tmp", p) {
			return desk.Errorf(desk.EINVALID, "spawn: read-only path %s would hide the sandbox's /tmp", p)
		}
		for _, r := range append([]string{"/proc", "/dev", "/etc"}, mountGuests(guest)...) {
			if within(p, r) || within(r, p) {
				return desk.Errorf(desk.EINVALID, "spawn: read-only path %s overlaps the sandbox's %s", p, r)
			}
		}
		for _, m := range out {
			if within(p, m.Guest) {
				return nil
			}
		}
		fi, err := os.Stat(p)
		out = append(out, Mount{Guest: p, Host: p, file: err == nil && !fi.IsDir()})
		return nil
	}
	for _, p := range sp.ReadOnly {
		if err := add(p); err != nil {
			return nil, err
		}
	}
	// A program bound by itself (a file among ReadOnly: desk's own
	// executable as the gateway bridge) does not bring its directory.
	for _, m := range out {
		if m.Guest == filepath.Clean(sp.Argv[0]) {
			return out, nil
		}
	}
	if err := add(filepath.Dir(sp.Argv[0])); err != nil {
		return nil, err
	}
	return out, nil
}

func mountGuests(ms []Mount) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Guest)
	}
	return out
}

// openInstall opens a read-only install directory as an O_PATH descriptor without following a link at its last
// element (the registry stored the resolved path).
func openInstall(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("spawn: open %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("spawn: %s: %w", p, err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		f.Close()
		return nil, fmt.Errorf("spawn: %s is a symbolic link", p)
	}
	return f, nil
}

func (s *bwrapSpawner) launch(p *plan, installs []Mount, argv []string) (*Process, error) {
	userns := s.b.userns
	// The guest mounts, then the install paths, as descriptors (see
	// openLaunchFDs).
	fds, err := openLaunchFDs(p, installs, userns)
	if err != nil {
		return nil, err
	}
	startedR, infoR := fds.startedR, fds.infoR
	if s.opened != nil {
		s.opened()
	}

	cmd := bwrapCommand(s.b.path, spawnArgs(p, installs, userns, argv), p.cgroup)
	cmd.Env = p.env
	cmd.ExtraFiles = fds.extra
	setProcAttr(cmd)
	noInheritedFDs()
	proc, err := start(cmd)
	fds.handedOver()
	if err != nil {
		startedR.Close()
		infoR.Close()
		return nil, &Denied{Reason: "cannot start bubblewrap: " + errText(err)}
	}
	ns := &namespace{pidfd: -1}
	var helpers sync.WaitGroup
	helpers.Add(1)
	go func() {
		defer helpers.Done()
		watchInfo(infoR, ns)
	}()
	proc.kill = func() error {
		ns.killInit()
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cg, mounts := p.cgroup, p.mounts
	proc.exited = func() {
		// bwrap is gone; so is the namespace (its init dies with bwrap).
		// Kill what the group still holds, then free the cgroup.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		helpers.Wait()
		ns.close()
		if cg != nil {
			cg.remove()
		}
		_ = stripSetid(mounts)
	}

	// Wait until the sandbox is set up and the program is about to run:
	// a set-up failure is then an error of Spawn naming bwrap's reason,
	// not a child that dies before it speaks.
	started := make(chan bool, 1)
	go func() {
		defer startedR.Close()
		var one [1]byte
		n, _ := io.ReadFull(startedR, one[:])
		started <- n == 1
	}()
	select {
	case ok := <-started:
		if ok {
			return proc, nil
		}
	case <-time.After(2 * time.Minute):
	}
	proc.Kill()
	msg, _ := io.ReadAll(io.LimitReader(proc.Stderr, 4096))
	proc.Wait()
	proc.Close()
	reason := strings.TrimSpace(string(msg))
	if reason == "" {
		reason = "bubblewrap ended before the program started"
	}
	return nil, &Denied{Reason: sanitize(reason, p.mounts)}
}

// spawnArgs is bwrap's command line for a runtime child: bwrapArgs's, with
// the install paths bound read-only after the guest mounts, and the
// program itself (after the per-process limits) instead of a shell line.
//
// One difference: no --disable-userns. A runtime brings its own sandbox
// and runs every command in it (Codex's is bubblewrap: in its normal
// modes, read-only and workspace-write, each command runs in a user
// namespace of its own), which a sandbox that forbids nested user
// namespaces breaks for every command ("Creating new namespace failed …
// ENOSPC", issue 26). The child's own sandbox nests inside desk's and can
// only narrow it: the nested namespace's root is this sandbox's user
// (desk's uid on the host), with no capability outside it; the seccomp
// filter (no setuid or setgid bit) is inherited and cannot be dropped;
// no_new_privs holds; the mounts' nosuid, nodev and read-only flags are
// locked against a nested namespace; the cgroup and the PID namespace
// still hold every process. What a nested namespace adds is kernel
// surface (the calls a namespace's root may make), the price of running
// the runtime as its users do; desk's own commands keep --disable-userns
// (docs/decisions.md).
func spawnArgs(p *plan, installs []Mount, userns bool, argv []string) []string {
	a := []string{"--die-with-parent", "--new-session", "--unshare-all"}
	if userns {
		a = append(a, "--unshare-user", "--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID))
	}
	if p.network {
		a = append(a, "--share-net")
	}
	a = append(a, "--cap-drop", "ALL", "--hostname", sandboxHostname, "--info-fd", strconv.Itoa(fdInfo), "--seccomp", strconv.Itoa(fdSeccomp))
	a = append(a, systemArgs()...)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--size", strconv.FormatInt(p.limits.TmpBytes, 10), "--tmpfs", "/tmp")
	a = append(a, etcArgs(p.network)...)
	all := append(append([]Mount{}, p.mounts...), installs...)
	a = append(a, mountArgs(all)...)
	var limits string
	if p.cgroup == nil || p.cgroup.pids == "" {
		limits = fmt.Sprintf("{ ulimit -u %d || ulimit -p %d; } 2>/dev/null || exit 126; ", p.limits.Processes, p.limits.Processes)
	}
	a = append(a, "--remount-ro", "/", "--chdir", p.cwd, "--", "/bin/sh", "-c", limits+spawnWrapper, "desk-runtime")
	return append(a, argv...)
}
