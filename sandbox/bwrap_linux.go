package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// Bubblewrap returns the sandboxed Runner, running bwrap at bwrapPath. On
// its first Run it checks, once, which of its hardening options this bwrap
// and kernel support (see bwrapArgs); if bwrap cannot run a command at all,
// every Run answers *Denied. Detect does the same check up front.
func Bubblewrap(bwrapPath string) Runner { return newBubblewrap(bwrapPath) }

func newBubblewrap(path string) *bubblewrap {
	return &bubblewrap{path: path, grace: DefaultGrace}
}

type bubblewrap struct {
	path  string
	grace time.Duration
	// extraArgs are placed before the guest mounts; tests use them to make
	// the sandbox's set-up fail.
	extraArgs []string
	// opened, when set, runs after the mounts' directories were opened and
	// before bwrap starts: tests swap a directory there.
	opened func()

	mu      sync.Mutex
	probed  bool  // init has its answer
	userns  bool  // --unshare-user --disable-userns work here
	initErr error // *Denied when bwrap cannot run a command
}

var detect = sync.OnceValues(func() (Runner, error) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "bubblewrap (bwrap) is not installed: desk runs an agent's commands only inside its sandbox. "+
			"Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; Arch: pacman -S bubblewrap; Alpine: apk add bubblewrap), "+
			"or choose the full-access approval mode for a workspace to run its commands on the host without a sandbox")
	}
	b := newBubblewrap(path)
	if err := b.init(); err != nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "bubblewrap at %s does not work: %s", path, strings.TrimPrefix(err.Error(), "sandbox denied: "))
	}
	return b, nil
})

// Warm builds desk's copy of the sandbox's /etc ahead of the first
// command, so neither start-up nor the first command waits for it. It is
// safe to call at any time and returns once the copy exists (or cannot be
// made, in which case commands bind /etc entry by entry).
func Warm() { etcSnapshot(false) }

// Detect returns the bubblewrap Runner when bwrap is on PATH and runs a
// command (it tries `true` once per process), else an EUNAVAILABLE error
// that says how to install or enable it. It never returns Direct.
func Detect() (Runner, error) { return detect() }

// init checks that bwrap runs a command, first with the user namespace
// options, then without them (bwrap older than 0.8, or a system where it
// must use its setuid mode). The answer is kept once bwrap has answered:
// a sandbox that works, or a *Denied. A failure of the machine before bwrap
// could answer (out of file descriptors, say) is not kept.
func (b *bubblewrap) init() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.probed {
		return b.initErr
	}
	dir, err := os.MkdirTemp("", "desk-sandbox-probe-")
	if err != nil {
		return fmt.Errorf("sandbox: prepare the bubblewrap check: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := prepare(Spec{Mounts: []Mount{{Guest: "/probe", Host: dir}}, Cwd: "/probe", Command: "true", Timeout: 30 * time.Second}, false)
	if err != nil {
		return err
	}
	p.probe = true
	var first error
	for _, userns := range []bool{true, false} {
		err := b.probe(p, userns)
		if err == nil {
			b.probed, b.userns, b.initErr = true, userns, nil
			return nil
		}
		var d *Denied
		if !errors.As(err, &d) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	b.probed, b.initErr = true, first
	return first
}

func (b *bubblewrap) probe(p *plan, userns bool) error {
	o, err := execute(context.Background(), p, nil, b.grace, func(p *plan, out, errw *os.File) (*process, error) {
		return b.launch(p, out, errw, userns)
	})
	if err != nil {
		return err
	}
	if !o.started {
		return b.denied(p, o)
	}
	if o.res.ExitCode != 0 {
		return &Denied{Reason: fmt.Sprintf("`true` exited with status %d inside the sandbox: %s", o.res.ExitCode, strings.TrimSpace(o.res.Stderr))}
	}
	return nil
}

func (b *bubblewrap) Run(ctx context.Context, s Spec, onOutput OutputFunc) (*Result, error) {
	p, err := prepare(s, false)
	if err != nil {
		return nil, err
	}
	if err := b.init(); err != nil {
		return nil, err
	}
	cg, err := newCgroup(p.limits)
	if err != nil {
		return nil, err
	}
	if cg != nil {
		p.cgroup = cg
		done, watched := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(watched)
			cg.watch(p.stop, done)
		}()
		// The watcher reads the cgroup's files: it is over before they
		// are removed.
		defer func() {
			close(done)
			<-watched
			cg.remove()
		}()
	}
	o, err := execute(ctx, p, onOutput, b.grace, func(p *plan, out, errw *os.File) (*process, error) {
		return b.launch(p, out, errw, b.userns)
	})
	if err != nil {
		return nil, err
	}
	if !o.started && !o.res.TimedOut && !o.res.Interrupted {
		return nil, b.denied(p, o)
	}
	if o.res.Limit == "" && cg != nil {
		// The OOM killer may have ended the command before the watch
		// looked.
		o.res.Limit = cg.hit()
	}
	o.res.Denial = classify(p, o.res)
	if err := stripSetid(p.mounts); err != nil {
		return nil, err
	}
	return o.res, nil
}

func (b *bubblewrap) denied(p *plan, o *outcome) *Denied {
	msg := o.setup
	if msg == "" {
		msg = fmt.Sprintf("bubblewrap exited with status %d before the command started", o.res.ExitCode)
	}
	if strings.Contains(msg, "uid map") || strings.Contains(msg, "No permissions to create") {
		msg += " (user namespaces are restricted here; on Ubuntu 23.10 and later: sysctl kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile that lets bwrap create them)"
	}
	return &Denied{Reason: sanitize(msg, p.mounts)}
}

// File descriptors bwrap inherits (ExtraFiles start at 3).
const (
	fdStarted  = 3 // the command writes one byte here once the sandbox is set up
	fdInfo     = 4 // --info-fd: {"child-pid": …} once bwrap has cloned the sandbox
	fdPasswd   = 5
	fdGroup    = 6
	fdHosts    = 7
	fdNsswitch = 8
	fdSeccomp  = 9 // --seccomp: the compiled filter (seccomp_linux.go)
	// fdMounts is the first guest mount's directory (--bind-fd); mount i
	// of the plan is fdMounts+i.
	fdMounts = 10
)

// startWrapper runs as the sandbox's command: it reports through fd 3 that
// the sandbox is set up and the shell runs, closes fd 3 so the command
// never sees it, and runs the command ($1). A run that never wrote the byte
// never started the command: its failure is the sandbox's, a *Denied,
// whatever bwrap's exit status and however the command's own output looks.
// (bwrap's --info-fd and --json-status-fd report the child pid before the
// mounts are set up, so they cannot tell the two apart.)
//
// The per-process limits (rlimitScript) are set before the byte is
// written: a limit that cannot be set fails the sandbox, not the command.
const startWrapper = `printf x >&3 || exit 126; exec 3>&-; exec /bin/sh -c "$1"`

// sandboxUID is the uid and gid a command has inside its user namespace:
// not root, so tools behave as for an ordinary user. The namespace maps it
// to desk's own uid outside, so the files it writes in /workspace and
// /artifacts belong to desk.
const sandboxUID = 1000

const sandboxHostname = "sandbox"

func (b *bubblewrap) launch(p *plan, stdout, stderr *os.File, userns bool) (*process, error) {
	fds, err := openLaunchFDs(p, nil, userns)
	if err != nil {
		return nil, err
	}
	startedR, infoR := fds.startedR, fds.infoR
	if b.opened != nil {
		b.opened()
	}

	cmd := bwrapCommand(b.path, bwrapArgs(p, userns, b.extraArgs), p.cgroup)
	cmd.Env = p.env // bwrap passes its environment to the command unchanged
	if p.stdin != nil {
		cmd.Stdin = p.stdin // bwrap hands its stdin to the command
	}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.ExtraFiles = fds.extra
	setProcAttr(cmd)
	noInheritedFDs()
	err = cmd.Start()
	fds.handedOver()
	if err != nil {
		startedR.Close()
		infoR.Close()
		return nil, &Denied{Reason: "cannot start bubblewrap: " + errText(err)}
	}

	gate := newGate()
	ns := &namespace{pidfd: -1}
	var helpers sync.WaitGroup
	helpers.Add(2)
	go func() {
		defer helpers.Done()
		defer startedR.Close()
		var one [1]byte
		n, _ := io.ReadFull(startedR, one[:])
		gate.decide(n == 1)
	}()
	go func() {
		defer helpers.Done()
		watchInfo(infoR, ns)
	}()
	return &process{
		cmd:  cmd,
		gate: gate,
		terminate: func() {
			// Before bwrap reports its child there is no command to be
			// gentle with: killing bwrap kills the sandbox (--die-with-parent).
			if !ns.signal(syscall.SIGTERM) {
				signalGroup(cmd, syscall.SIGKILL)
			}
		},
		kill: func() {
			ns.killInit()
			signalGroup(cmd, syscall.SIGKILL)
		},
		finish: func() {
			ns.killInit()
			signalGroup(cmd, syscall.SIGKILL)
		},
		settled: func() {
			helpers.Wait()
			ns.close()
		},
	}, nil
}

// namespace is the sandbox's PID namespace, known once bwrap reports its
// child: the namespace's init, whose death takes every process in it.
type namespace struct {
	mu    sync.Mutex
	pidfd int    // the init's pidfd, -1 until known
	ino   uint64 // the namespace's inode, 0 until known
}

func (n *namespace) set(pid int, ino uint64) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	// With the pidfd held, /proc/<pid> is the init's as long as it lives;
	// checking the namespace after opening rules out a reused pid.
	if got, ok := pidNamespace(pid); ok {
		if ino != 0 && got != ino {
			unix.Close(fd)
			return
		}
		ino = got
	}
	// Never treat desk's own PID namespace as the sandbox's: signalling
	// "every process in it" would signal the whole host. (bwrap always
	// unshares it; this guards against a bwrap that did not.)
	if own, ok := pidNamespace(os.Getpid()); !ok || ino == own {
		ino = 0
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pidfd >= 0 {
		unix.Close(fd)
		return
	}
	n.pidfd, n.ino = fd, ino
}

// signal sends sig to every process in the namespace. It reports false
// when the namespace is not known yet.
func (n *namespace) signal(sig syscall.Signal) bool {
	n.mu.Lock()
	ino := n.ino
	n.mu.Unlock()
	if own, ok := pidNamespace(os.Getpid()); ino == 0 || !ok || ino == own {
		return false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if got, ok := pidNamespace(pid); !ok || got != ino {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if got, ok := pidNamespace(pid); ok && got == ino {
			_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		}
		unix.Close(fd)
	}
	return true
}

// killInit kills the namespace's init and with it every process inside.
func (n *namespace) killInit() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pidfd >= 0 {
		_ = unix.PidfdSendSignal(n.pidfd, unix.SIGKILL, nil, 0)
	}
}

func (n *namespace) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pidfd >= 0 {
		unix.Close(n.pidfd)
		n.pidfd = -1
	}
}

func pidNamespace(pid int) (uint64, bool) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/pid", &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}

// bwrapArgs is bwrap's command line. In order:
//
//   - --die-with-parent: the sandbox dies with bwrap, and bwrap with desk
//     (Pdeathsig), so nothing outlives a crash.
//   - --new-session: the command cannot reach a terminal (TIOCSTI).
//   - --unshare-all: new user (when possible), IPC, PID, network, UTS and
//     cgroup namespaces; --share-net only when the Spec allows the network.
//     In the PID namespace the command cannot see or signal host processes,
//     and its init's death kills every process the command started.
//   - --unshare-user --disable-userns (when this bwrap and kernel allow
//     them): a user namespace for certain, and none nested inside it.
//   - --cap-drop ALL: no capabilities. Without it a command of desk running
//     as root keeps every capability inside its user namespace and can
//     simply remount a read-only mount writable, or unmount
//     /artifacts/immutable.
//   - --hostname, --info-fd 4 (the child pid, for the process-tree kill;
//     --info-fd rather than --json-status-fd, which older bwrap lacks).
//   - --seccomp 9: the filter of seccomp_linux.go (no setuid or setgid
//     bit on any file the command makes), applied by bwrap just before
//     it runs the command, with no_new_privs.
//   - The system, read-only: /usr, and /bin, /sbin, /lib* as the host has
//     them (symbolic links on merged-/usr systems are recreated as links).
//     Nothing else of the host: no /home, /root, /var, /opt, /srv, /mnt,
//     /run, DESK_HOME.
//   - --proc /proc, --dev /dev (a private, minimal /dev), --tmpfs /tmp.
//   - A minimal /etc: what dynamic linking, certificates, time zones and
//     alternatives need (etcEntries; bound as one read-only copy, see
//     etc_linux.go), a generated passwd and group holding
//     only the command's own user, a generated hosts (localhost and the
//     sandbox's name) and nsswitch.conf; /etc/resolv.conf only with the
//     network. Not the host's /etc: as root, a command could read
//     /etc/shadow and any key file kept there.
//   - The guest mounts in the Spec's order, each from the descriptor desk
//     opened for it (--bind-fd or --ro-bind-fd, fdMounts+i; see launch),
//     their missing mount points created with --dir in the sandbox's root.
//   - --remount-ro /: the root tmpfs itself is read-only, so writes land
//     only in writable mounts and /tmp.
//   - --chdir, then /bin/sh running startWrapper and the command.
func bwrapArgs(p *plan, userns bool, extra []string) []string {
	a := []string{"--die-with-parent", "--new-session", "--unshare-all"}
	if userns {
		a = append(a, "--unshare-user", "--disable-userns", "--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID))
	}
	if p.network {
		a = append(a, "--share-net")
	}
	a = append(a, "--cap-drop", "ALL", "--hostname", sandboxHostname, "--info-fd", strconv.Itoa(fdInfo), "--seccomp", strconv.Itoa(fdSeccomp))
	a = append(a, systemArgs()...)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--size", strconv.FormatInt(p.limits.TmpBytes, 10), "--tmpfs", "/tmp")
	if p.probe {
		a = append(a, etcBinds(p.network)...)
	} else {
		a = append(a, etcArgs(p.network)...)
	}
	a = append(a, extra...)
	a = append(a, mountArgs(p.mounts)...)
	nproc := p.cgroup == nil || p.cgroup.pids == ""
	mem := p.cgroup == nil || !p.cgroup.memoryBound
	a = append(a, "--remount-ro", "/", "--chdir", p.cwd, "--", "/bin/sh", "-c", rlimitScript(p.limits, nproc, mem)+startWrapper, "desk-sandbox", p.command)
	return a
}

// systemDirs are bound read-only when the host has them as directories,
// and recreated when they are symbolic links (/bin -> usr/bin).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

func systemArgs() []string {
	var a []string
	for _, d := range systemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				a = append(a, "--symlink", target, d)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", d, d)
		}
	}
	return a
}

// etcEntries are the parts of the host's /etc a command sees (read-only,
// when present; patterns as in filepath.Match, relative to /etc).
var etcEntries = []string{
	// The dynamic linker.
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	// Debian's /usr/bin/x -> /etc/alternatives/x links.
	"alternatives",
	// TLS roots and settings (never ssl/private or pki/tls/private).
	"ssl/certs", "ssl/openssl.cnf", "ca-certificates", "ca-certificates.conf",
	"pki/ca-trust", "pki/tls/certs", "pki/tls/cert.pem", "pki/tls/openssl.cnf", "crypto-policies",
	// Time, system identity, protocol tables, file types.
	"localtime", "timezone", "os-release", "lsb-release", "debian_version",
	"protocols", "services", "gai.conf", "host.conf", "mime.types", "magic", "magic.mime",
	// Tools whose files under /usr link into /etc.
	"fonts", "java-*", "python3*",
}

const hostsFile = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + sandboxHostname + "\n"

const nsswitchFile = "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"

// identityPipes writes the sandbox's /etc/passwd, /etc/group, hosts and
// nsswitch.conf (in that order, as both launches bind them) into pipes made
// by pipe and returns their read ends. Each is far below a pipe's buffer,
// so the writes do not block.
func identityPipes(pipe func() (r, w *os.File, err error), home string, userns bool) ([]*os.File, error) {
	uid, gid := os.Getuid(), os.Getgid()
	if userns {
		uid, gid = sandboxUID, sandboxUID
	}
	passwd, group := identityFiles(home, uid, gid)
	var out []*os.File
	for _, data := range []string{passwd, group, hostsFile, nsswitchFile} {
		r, w, err := pipe()
		if err != nil {
			return nil, err
		}
		if _, err := io.WriteString(w, data); err != nil {
			return nil, err
		}
		w.Close()
		out = append(out, r)
	}
	return out, nil
}

// identityFiles are the sandbox's /etc/passwd and /etc/group: the
// command's own user (sandboxUID in a user namespace, else desk's uid and
// gid), and nobody.
func identityFiles(home string, uid, gid int) (passwd, group string) {
	user, grp := "agent", "agent"
	if uid == 0 {
		user = "root"
	}
	if gid == 0 {
		grp = "root"
	}
	var pw, gr strings.Builder
	if uid != 65534 {
		fmt.Fprintf(&pw, "%s:x:%d:%d:%s:%s:/bin/sh\n", user, uid, gid, user, home)
	}
	pw.WriteString("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	if gid != 65534 {
		fmt.Fprintf(&gr, "%s:x:%d:\n", grp, gid)
	}
	gr.WriteString("nogroup:x:65534:\n")
	return pw.String(), gr.String()
}

// etcArgs binds the sandbox's /etc: desk's copy of the entries in one
// mount (etcSnapshot), or, without one, each entry on its own; then the
// generated files over it.
func etcArgs(network bool) []string {
	if dir := etcSnapshot(network); dir != "" {
		a := []string{"--ro-bind", dir, "/etc"}
		a = append(a, etcData...)
		if network {
			a = append(a, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
		}
		return a
	}
	return etcBinds(network)
}

// etcData binds the generated passwd, group, hosts and nsswitch.conf.
var etcData = []string{
	"--ro-bind-data", strconv.Itoa(fdPasswd), "/etc/passwd",
	"--ro-bind-data", strconv.Itoa(fdGroup), "/etc/group",
	"--ro-bind-data", strconv.Itoa(fdHosts), "/etc/hosts",
	"--ro-bind-data", strconv.Itoa(fdNsswitch), "/etc/nsswitch.conf",
}

// etcBinds binds each entry of etcEntries on its own into a tmpfs /etc.
func etcBinds(network bool) []string {
	a := []string{"--dir", "/etc"}
	dirs := map[string]bool{"/etc": true}
	for _, pat := range etcEntries {
		matches, _ := filepath.Glob(filepath.Join("/etc", pat))
		for _, m := range matches {
			var chain []string // missing parents, innermost first
			for d := filepath.Dir(m); !dirs[d]; d = filepath.Dir(d) {
				chain = append(chain, d)
			}
			for i := len(chain) - 1; i >= 0; i-- {
				a = append(a, "--dir", chain[i])
				dirs[chain[i]] = true
			}
			a = append(a, "--ro-bind-try", m, m)
		}
	}
	a = append(a, etcData...)
	if network {
		a = append(a, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	return a
}

// mountArgs binds the guest mounts in order, mount i from descriptor
// fdMounts+i (never by host path: see launch). A mount point inside an
// earlier mount exists already (prepare checked it); any other is created
// with --dir in the sandbox's tmpfs root, parents first, unless it lies in
// a read-only system directory, where it must exist.
func mountArgs(ms []Mount) []string {
	var a []string
	made := map[string]bool{"/": true, "/etc": true, "/tmp": true}
	for i, m := range ms {
		inner := false
		for _, e := range ms[:i] {
			if within(m.Guest, e.Guest) {
				inner = true
				break
			}
		}
		if !inner && !inSystemDir(m.Guest) {
			var chain []string
			start := m.Guest
			if m.file {
				start = filepath.Dir(start) // bwrap makes the file itself
			}
			for d := start; !made[d]; d = filepath.Dir(d) {
				chain = append(chain, d)
			}
			for j := len(chain) - 1; j >= 0; j-- {
				a = append(a, "--dir", chain[j])
				made[chain[j]] = true
			}
		}
		op := "--ro-bind-fd"
		if m.Writable {
			op = "--bind-fd"
		}
		a = append(a, op, strconv.Itoa(fdMounts+i), m.Guest)
	}
	return a
}

func inSystemDir(g string) bool {
	for _, d := range systemDirs {
		if within(g, d) {
			return true
		}
	}
	return false
}

// launchFDs are the descriptors a bwrap launch hands its child, opened
// in desk: the start and info pipes, the identity files, the seccomp filter, one descriptor
// per guest mount and then one per install path, in the order bwrapArgs
// and spawnArgs number them (fdMounts+i is mount i of all).
type launchFDs struct {
	startedR, infoR *os.File   // desk's ends, read after the start
	extra           []*os.File // cmd.ExtraFiles
	closers         []*os.File // every descriptor opened here
}

// openLaunchFDs opens them. The guest mounts are opened here, in desk,
// and handed to bwrap as descriptors: bwrap binds what they refer to
// (--bind-fd), so a directory swapped for a symbolic link after these
// opens (after CheckPinned, after prepare) changes nothing. Binding by
// path would leave that window open, and a declared host path replaced
// by a link to DESK_HOME would show the command desk's own home.
func openLaunchFDs(p *plan, installs []Mount, userns bool) (*launchFDs, error) {
	l := &launchFDs{}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			l.closers = append(l.closers, r, w)
		}
		return r, w, err
	}
	fail := func(err error) (*launchFDs, error) {
		for _, f := range l.closers {
			f.Close()
		}
		return nil, err
	}
	startedR, startedW, err := pipe()
	if err != nil {
		return fail(fmt.Errorf("sandbox: pipe: %w", err))
	}
	infoR, infoW, err := pipe()
	if err != nil {
		return fail(fmt.Errorf("sandbox: pipe: %w", err))
	}
	ids, err := identityPipes(pipe, getenv(p.env, "HOME"), userns)
	if err != nil {
		return fail(fmt.Errorf("sandbox: pipe: %w", err))
	}
	filter, err := seccompPipe(pipe)
	if err != nil {
		return fail(fmt.Errorf("sandbox: seccomp filter: %w", err))
	}
	l.startedR, l.infoR = startedR, infoR
	l.extra = append(append([]*os.File{startedW, infoW}, ids...), filter)
	for _, m := range p.mounts {
		open := fsjail.OpenDir
		if m.file {
			open = openFileMount
		}
		f, err := open(fsjail.Mount{Guest: m.Guest, Host: m.Host, Pin: m.Pin})
		if err != nil {
			return fail(err)
		}
		l.closers = append(l.closers, f)
		l.extra = append(l.extra, f)
	}
	for _, m := range installs {
		f, err := openInstall(m.Host)
		if err != nil {
			return fail(err)
		}
		l.closers = append(l.closers, f)
		l.extra = append(l.extra, f)
	}
	return l, nil
}

// handedOver closes desk's copies of everything but its two read ends,
// once bwrap has been started (or failed to be): bwrap has its own copies
// and closes those of the mounts once bound, before the command runs.
func (l *launchFDs) handedOver() {
	for _, f := range l.closers {
		if f != l.startedR && f != l.infoR {
			f.Close()
		}
	}
}

// bwrapCommand is bwrap with args, started through joinScript when desk
// made a cgroup for it, so bwrap is in the cgroup before it forks.
func bwrapCommand(path string, args []string, cg *cgroup) *exec.Cmd {
	if cg != nil && len(cg.procs) > 0 {
		a := append([]string{"-c", joinScript, "desk-cgroup"}, cg.procs...)
		return exec.Command("/bin/sh", append(append(a, "--", path), args...)...)
	}
	return exec.Command(path, args...)
}

// watchInfo reads bwrap's --info-fd reports until it closes, recording
// the command's pid and pid namespace in ns; it closes infoR.
func watchInfo(infoR *os.File, ns *namespace) {
	defer infoR.Close()
	dec := json.NewDecoder(infoR)
	for {
		var st struct {
			ChildPid     int    `json:"child-pid"`
			PidNamespace uint64 `json:"pid-namespace"`
		}
		if err := dec.Decode(&st); err != nil {
			return
		}
		if st.ChildPid > 0 {
			ns.set(st.ChildPid, st.PidNamespace)
		}
	}
}
