// Package sandbox owns running one command of an agent: the exec_command
// tool hands it a Spec (the guest mounts of the execution, a working
// directory, a shell command, a few environment variables, whether the
// network is allowed, a timeout and an output limit) and gets back a Result
// (exit code, the kept head and tail of stdout and stderr, and whether the
// command timed out or was interrupted), with output streamed to a callback
// while the command runs.
//
// The sandboxed Runner is bubblewrap (Bubblewrap, Detect). Inside it the
// command sees only the guest file system of DESIGN "What an agent sees" —
// the mounts of the Spec at their guest paths, read-only or writable as
// declared — plus what ordinary tools need to run (/usr and its links, a
// minimal /etc, a private /proc, /dev and /tmp); the root itself is a
// read-only tmpfs, so nothing else of the host is there to find. The network
// is off (a private network namespace with only a loopback device) unless
// the Spec allows it. The whole process tree is killed when the command
// times out, when the caller's context ends, and when the command's main
// process exits: nothing an agent starts outlives its command.
//
// What this package must never do:
//
//   - Fall back to running a command without the sandbox when the sandbox
//     is missing or fails to set up. A sandbox failure is a *Denied error;
//     callers report it as a denial and never retry elsewhere. Running on
//     the host is Direct, a different Runner that a caller picks only for a
//     workspace in the explicit "full-access" approval mode.
//   - Pass the host environment (provider keys!) into a command. Every
//     command, sandboxed or not, starts from a small fixed environment
//     (PATH, HOME, LANG, TERM) plus the variables of its Spec; nothing of
//     desk's own environment is inherited.
//   - Hand a command a file descriptor that desk inherited from whatever
//     started it (an open directory leads out of any sandbox): they are
//     marked close-on-exec before each command starts.
//   - Bind a mount by its host path. Each mount's directory is opened in
//     desk (fsjail.OpenDir: no symbolic link at its last element, a
//     declared host path checked to be the declared directory) and bwrap
//     binds that descriptor, so a directory swapped after the checks (a
//     host path replaced by a link to DESK_HOME) is never what a command
//     sees.
//   - Put a host path in a message an agent can see: Spec errors and Denied
//     reasons name guest paths. (Inside the sandbox, /proc/self/mountinfo
//     still names the host directories behind the mounts; bind mounts
//     cannot hide that, and knowing a path gives no way to reach it.)
//
// Every command is bounded (Limits: processes and memory through a cgroup
// made for it where desk can write one, else rlimits; CPU time; the size
// of /tmp; its output), runs as uid 1000 inside its user namespace (mapped
// to desk's own uid, so its files belong to desk), and leaves no setuid or
// setgid file behind in the writable mounts. A finished command's failure
// that is the sandbox's doing is described by Result.Denial (classify).
//
// What the sandbox does not do (yet): filter system calls with seccomp, or
// bound /scratch (a host directory shared with the file tools). When desk
// runs as root, a command's uid maps to host root over the files bound
// into its sandbox; --cap-drop ALL and the minimal /etc keep that
// contained, but a dedicated user for desk is better.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// Defaults of a Spec's zero values.
const (
	DefaultTimeout   = 2 * time.Minute
	DefaultMaxOutput = 256 << 10
	// DefaultGrace is how long a command has to exit after SIGTERM (on
	// timeout or interrupt) before its whole process tree is killed.
	DefaultGrace = 2 * time.Second
)

// Stream names passed to an OutputFunc.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// Mount is one guest directory backed by a host directory. Mounts are
// applied in order, so a later mount may shadow part of an earlier one: a
// read-only /artifacts/immutable after a writable /artifacts.
//
// The sandbox binds each mount from a descriptor it opened itself, not by
// path (see bwrapArgs), so a mount is the directory that was checked.
type Mount struct {
	Guest    string // absolute, clean guest path; not "/", not under /proc or /dev
	Host     string // absolute host directory; must exist and not be a symbolic link
	Writable bool
	// Pin, when set, is the identity recorded when the host directory was
	// declared (a workspace's host path): the sandbox binds it only while
	// Host is still that directory (fsjail.OpenDir), else the run fails
	// with the *fsjail.SwappedError and nothing runs.
	Pin *fsjail.FileID

	// file: Host is a regular file bound by itself (prepare decides for
	// guest mounts; a spawn binds a program file this way), read-only only.
	file bool
}

// Spec is one command to run.
type Spec struct {
	Mounts []Mount
	// Cwd is the guest working directory. It must lie inside a mount and
	// exist (session.WorkDir chooses it).
	Cwd string
	// Command is run with /bin/sh -c. Its standard input is Stdin, or
	// empty (/dev/null) when Stdin is nil.
	Command string
	// Stdin, when set, is the command's standard input: typically the read
	// end of an os.Pipe whose write end the caller keeps (a long-running
	// command driven by write_stdin). A file rather than an io.Reader so
	// that no copying goroutine can outlive the command: the process gets
	// the descriptor itself. The caller closes it after Run returns.
	Stdin *os.File
	// Env is added to the command's small clean environment (PATH,
	// HOME=/scratch when /scratch is mounted else /tmp, LANG=C.UTF-8,
	// TERM=dumb) and may override those four. The host's environment is
	// never inherited.
	Env map[string]string
	// Network allows the network. When false the command has no network at
	// all: its own network namespace with a loopback device only, not even
	// the host's 127.0.0.1. Direct cannot turn the network off.
	Network bool
	// Timeout bounds the command's run time; zero means DefaultTimeout.
	Timeout time.Duration
	// MaxOutput is the number of bytes kept per stream; beyond it the first
	// and last halves are kept and the stream is marked truncated. Zero
	// means DefaultMaxOutput. The OutputFunc sees every byte up to
	// Limits.OutputBytes.
	MaxOutput int
	// Limits bound the command's processes, memory, CPU time, /tmp and
	// output; zero fields take DefaultLimits. Direct enforces only the
	// output limit.
	Limits Limits
}

// Result is how a command ended. A command that ran and failed is a Result
// with a non-zero ExitCode, not an error.
type Result struct {
	// ExitCode is the command's exit status in the shell's convention:
	// 128+n when it was killed by signal n (also when desk killed it on
	// timeout or interrupt).
	ExitCode int
	// Stdout and Stderr hold the kept bytes of each stream. When a stream
	// was truncated they hold its head, a line "[… N bytes omitted …]" and
	// its tail.
	Stdout, Stderr                   string
	StdoutTruncated, StderrTruncated bool
	// StdoutBytes and StderrBytes count every byte the command wrote.
	StdoutBytes, StderrBytes int64
	Duration                 time.Duration
	TimedOut                 bool // the Spec's timeout ran out and desk killed the command
	Interrupted              bool // the caller's context ended and desk killed the command
	// Limit names the limit of Spec.Limits that stopped the command
	// (LimitProcesses, LimitMemory, LimitOutput) when desk observed it
	// directly; Denial interprets the rest.
	Limit string
	// Denial is set when the command's failure is the sandbox's doing: a
	// limit reached, or a write outside the write boundary (see
	// classify). Nil for a command that failed on its own.
	Denial *Denial
}

// OutputFunc receives output as the command writes it, in small chunks that
// the function may keep. It is called from one goroutine per stream, so
// calls for stdout and stderr may overlap, and never after Run returns. It
// must not block for long: a slow function holds the command back (as a
// slow terminal would), though the timeout still runs.
type OutputFunc func(stream string, chunk []byte)

// Runner runs commands. A nil OutputFunc is allowed.
//
// Run returns an error, and no Result, when the Spec is invalid (EINVALID,
// before anything runs), when the sandbox refused or failed to set up
// (*Denied), or when the machine failed. Implementations are safe for
// concurrent use.
type Runner interface {
	Run(ctx context.Context, s Spec, onOutput OutputFunc) (*Result, error)
}

// Denied is the error when the sandbox itself refused or failed to set up,
// as opposed to the command failing. Callers report it as a denial and must
// never retry the command without the sandbox.
type Denied struct {
	// Reason says why, with host paths of the Spec's mounts replaced by
	// their guest paths; it may be shown to the agent.
	Reason string
}

func (d *Denied) Error() string { return "sandbox denied: " + d.Reason }

// FromJail converts the guest mounts of a session (session.Mounts) into
// sandbox mounts: each fsjail mount, then each read-only subdirectory or
// file of a writable mount (/artifacts/immutable, /workspace/.git/hooks,
// /workspace/.git/config) as a read-only mount over it.
//
// A read-only subdirectory that does not exist yet is created (empty, mode
// 0755, through the mount's os.Root so a planted symbolic link cannot
// redirect it): without it, a command could create the directory itself
// and write into what the rest of desk treats as immutable. A read-only
// file must exist (session.Mounts names only files that do).
//
// The directories between the mount and a read-only entry (/workspace/.git)
// are bound onto themselves, writable, first: a mount point cannot be
// renamed or removed, so a command cannot move the read-only entries
// away with their directory and put writable ones in its place. Every
// such mount is pinned to the directory or file found here, through the
// mount's os.Root, so a link swapped in later is refused at launch.
func FromJail(ms []fsjail.Mount) ([]Mount, error) {
	out := make([]Mount, 0, len(ms))
	var sub []Mount
	for _, m := range ms {
		out = append(out, Mount{Guest: m.Guest, Host: m.Host, Writable: !m.ReadOnly, Pin: m.Pin})
		if m.ReadOnly {
			continue
		}
		above := map[string]bool{}
		for _, d := range m.ReadOnlyDirs {
			pins, err := prepareReadOnly(m.Host, d)
			if err != nil {
				return nil, desk.Errorf(desk.EUNAVAILABLE, "mount %s: cannot prepare read-only %s: %s", m.Guest, d, errText(err))
			}
			for _, pe := range pins {
				if pe.rel != d && above[pe.rel] {
					continue
				}
				above[pe.rel] = true
				sub = append(sub, Mount{
					Guest:    path.Join(m.Guest, pe.rel),
					Host:     filepath.Join(m.Host, filepath.FromSlash(pe.rel)),
					Writable: pe.rel != d,
					Pin:      &pe.id,
				})
			}
		}
	}
	return append(out, sub...), nil
}

type pinned struct {
	rel string
	id  fsjail.FileID
}

// prepareReadOnly makes the read-only entry rel of host ready to bind:
// it creates a missing directory (ensureDir) and returns the identity of
// each directory above rel (outermost first) and of rel itself. Every one
// must be a real directory, but rel may be a regular file.
func prepareReadOnly(host, rel string) ([]pinned, error) {
	r, err := os.OpenRoot(host)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	fi, err := r.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		if err := ensureDir(host, rel); err != nil {
			return nil, err
		}
	}
	var out []pinned
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := r.Lstat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() && !(p == rel && fi.Mode().IsRegular()) {
			return nil, fmt.Errorf("%s is not a directory", p)
		}
		id, ok := fsjail.IdentityOf(fi)
		if !ok {
			return nil, fmt.Errorf("%s has no identity to pin", p)
		}
		out = append(out, pinned{rel: p, id: id})
	}
	return out, nil
}

func ensureDir(host, rel string) error {
	r, err := os.OpenRoot(host)
	if err != nil {
		return err
	}
	defer r.Close()
	fi, err := r.Lstat(rel)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("not a directory")
		}
		return nil
	}
	if !os.IsNotExist(err) {
		return err
	}
	if err := r.MkdirAll(rel, 0o755); err != nil && !os.IsExist(err) {
		return err
	}
	return nil
}

// errText is the text of a file system error without the path it names.
func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	if le, ok := err.(*os.LinkError); ok {
		return le.Err.Error()
	}
	return err.Error()
}

// plan is a validated Spec.
type plan struct {
	mounts    []Mount // cleaned, in the Spec's order
	cwd       string  // guest
	hostCwd   string  // the host directory behind cwd (Direct)
	command   string
	stdin     *os.File // nil: /dev/null
	env       []string // the complete environment, sorted
	network   bool
	timeout   time.Duration
	maxOutput int
	limits    Limits
	stop      *stopper
	cgroup    *cgroup // bubblewrap's, when desk can make one
	// probe marks the check that bwrap runs at all: it binds /etc entry
	// by entry rather than building desk's copy, which would put that
	// copy (most of desk's start-up time) on the way to serving.
	probe bool
}

// Guest paths a mount may not take: the sandbox provides them.
var reservedGuest = []string{"/proc", "/dev"}

// prepare validates s for a sandboxed run, or for Direct when direct is
// set. Every message names guest paths only.
func prepare(s Spec, direct bool) (*plan, error) {
	p := &plan{command: s.Command, stdin: s.Stdin, network: s.Network, timeout: s.Timeout, maxOutput: s.MaxOutput}
	if strings.TrimSpace(s.Command) == "" {
		return nil, desk.Errorf(desk.EINVALID, "the command is empty")
	}
	if strings.IndexByte(s.Command, 0) >= 0 {
		return nil, desk.Errorf(desk.EINVALID, "the command contains a NUL byte")
	}
	if p.timeout < 0 {
		return nil, desk.Errorf(desk.EINVALID, "the timeout is negative")
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	if p.maxOutput < 0 {
		return nil, desk.Errorf(desk.EINVALID, "the output limit is negative")
	}
	if p.maxOutput == 0 {
		p.maxOutput = DefaultMaxOutput
	}
	lim, err := s.Limits.withDefaults()
	if err != nil {
		return nil, desk.Errorf(desk.EINVALID, "%s", err)
	}
	p.limits, p.stop = lim, newStopper()
	if len(s.Mounts) == 0 {
		return nil, desk.Errorf(desk.EINVALID, "the command has no mounts")
	}
	for _, m := range s.Mounts {
		g := m.Guest
		if g == "" || strings.IndexByte(g, 0) >= 0 || !strings.HasPrefix(g, "/") || path.Clean(g) != g {
			return nil, desk.Errorf(desk.EINVALID, "mount %q: the guest path must be absolute and clean", g)
		}
		if g == "/" {
			return nil, desk.Errorf(desk.EINVALID, "mount /: the guest root cannot be a mount")
		}
		for _, r := range reservedGuest {
			if within(g, r) {
				return nil, desk.Errorf(desk.EINVALID, "mount %s: %s belongs to the sandbox", g, r)
			}
		}
		if m.Host == "" || strings.IndexByte(m.Host, 0) >= 0 || !filepath.IsAbs(m.Host) {
			return nil, desk.Errorf(desk.EINVALID, "mount %s: the host directory must be an absolute path", g)
		}
		h := filepath.Clean(m.Host)
		fi, err := os.Stat(h)
		if err != nil {
			if os.IsNotExist(err) {
				return nil, desk.Errorf(desk.EINVALID, "mount %s: its host directory does not exist", g)
			}
			return nil, desk.Errorf(desk.EINVALID, "mount %s: its host directory cannot be used: %s", g, errText(err))
		}
		file := false
		if !fi.IsDir() {
			// A read-only file over a file of a writable mount
			// (/workspace/.git/config, see FromJail).
			lfi, err := os.Lstat(h)
			if m.Writable || err != nil || !lfi.Mode().IsRegular() {
				return nil, desk.Errorf(desk.EINVALID, "mount %s: its host path is not a directory (only a read-only mount may be a regular file)", g)
			}
			file = true
		}
		p.mounts = append(p.mounts, Mount{Guest: g, Host: h, Writable: m.Writable, Pin: m.Pin, file: file})
	}
	if err := checkNesting(p.mounts); err != nil {
		return nil, err
	}

	c := s.Cwd
	if c == "" || strings.IndexByte(c, 0) >= 0 || !strings.HasPrefix(c, "/") || path.Clean(c) != c {
		return nil, desk.Errorf(desk.EINVALID, "working directory %q: must be an absolute, clean guest path", c)
	}
	i := effectiveMount(p.mounts, c)
	if i < 0 {
		return nil, desk.Errorf(desk.EINVALID, "working directory %s: not inside the guest file system", c)
	}
	m := p.mounts[i]
	rel := relGuest(m.Guest, c)
	if err := statDirIn(m.Host, rel); err != nil {
		return nil, desk.Errorf(desk.EINVALID, "working directory %s: %s", c, err)
	}
	p.cwd = c
	p.hostCwd = filepath.Join(m.Host, filepath.FromSlash(rel))

	env, err := environment(p.mounts, s.Env, direct)
	if err != nil {
		return nil, err
	}
	p.env = env
	return p, nil
}

// checkNesting refuses mounts that a symbolic link could redirect. When a
// mount's host directory lies inside a writable mount's host directory (the
// read-only /artifacts/immutable inside /artifacts), and when its guest path
// lies inside an earlier mount's guest path (its mount point), every
// directory between the two must be a real directory: otherwise a command
// of an earlier execution could have planted a link there that makes the
// next sandbox bind another session's files, or mount the read-only
// directory somewhere harmless.
func checkNesting(ms []Mount) error {
	for i, b := range ms {
		for j, a := range ms {
			if i == j {
				continue
			}
			if a.Writable && b.Host != a.Host && withinHost(b.Host, a.Host) {
				rel, _ := filepath.Rel(a.Host, b.Host)
				if err := realDirs(a.Host, filepath.ToSlash(rel), b.file); err != nil {
					return desk.Errorf(desk.EINVALID, "mount %s: its host directory is reached through mount %s: %s", b.Guest, a.Guest, err)
				}
			}
			if j < i && b.Guest != a.Guest && within(b.Guest, a.Guest) {
				if err := realDirs(a.Host, relGuest(a.Guest, b.Guest), b.file); err != nil {
					return desk.Errorf(desk.EINVALID, "mount %s: its mount point inside mount %s: %s", b.Guest, a.Guest, err)
				}
			}
		}
	}
	return nil
}

// realDirs checks that every component of rel (slash separated) below host
// is a directory and not a symbolic link; with file, the last one is a
// regular file.
func realDirs(host, rel string, file bool) error {
	cur := host
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case file && i == len(parts)-1 && err == nil && fi.Mode().IsRegular():
		case os.IsNotExist(err):
			return fmt.Errorf("%s does not exist", part)
		case err != nil:
			return fmt.Errorf("%s: %s", part, errText(err))
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link", part)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", part)
		}
	}
	return nil
}

// statDirIn checks that rel (slash separated, "." for the root) is a
// directory inside host, resolving links only inside it.
func statDirIn(host, rel string) error {
	r, err := os.OpenRoot(host)
	if err != nil {
		return fmt.Errorf("cannot open its mount: %s", errText(err))
	}
	defer r.Close()
	fi, err := r.Stat(rel)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("does not exist")
		}
		return fmt.Errorf("%s", errText(err))
	}
	if !fi.IsDir() {
		return fmt.Errorf("not a directory")
	}
	return nil
}

// effectiveMount is the index of the mount that shows guest path g: the
// last one, in order, whose guest path holds g. -1 when none does.
func effectiveMount(ms []Mount, g string) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if within(g, ms[i].Guest) {
			return i
		}
	}
	return -1
}

// within reports whether guest path p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

func withinHost(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}

// relGuest is p relative to dir (p within dir), "." for dir itself.
func relGuest(dir, p string) string {
	if p == dir {
		return "."
	}
	return strings.TrimPrefix(p, dir+"/")
}

// basePath is the PATH of every command.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// environment builds the complete environment of a command: the fixed base
// with the Spec's variables over it. HOME is /scratch when it is mounted
// (writable), else /tmp (the sandbox's private tmpfs); for Direct, the host
// directories behind them.
func environment(ms []Mount, extra map[string]string, direct bool) ([]string, error) {
	home := "/tmp"
	if direct {
		home = os.TempDir()
	}
	if i := effectiveMount(ms, "/scratch"); i >= 0 && ms[i].Guest == "/scratch" && ms[i].Writable {
		home = "/scratch"
		if direct {
			home = ms[i].Host
		}
	}
	env := map[string]string{
		"PATH": basePath,
		"HOME": home,
		"LANG": "C.UTF-8",
		"TERM": "dumb",
	}
	for k, v := range extra {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, desk.Errorf(desk.EINVALID, "environment variable %q: invalid name", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, desk.Errorf(desk.EINVALID, "environment variable %s: the value contains a NUL byte", k)
		}
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// getenv reads a variable of a built environment.
func getenv(env []string, k string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return ""
}

// sanitize replaces the host directories of the mounts in a message with
// their guest paths, longest host path first.
func sanitize(msg string, ms []Mount) string {
	ms = slices.Clone(ms)
	slices.SortStableFunc(ms, func(a, b Mount) int { return len(b.Host) - len(a.Host) })
	for _, m := range ms {
		msg = strings.ReplaceAll(msg, m.Host, m.Guest)
	}
	return msg
}
