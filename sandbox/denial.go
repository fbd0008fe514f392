package sandbox

import (
	"path"
	"regexp"
	"strings"
	"syscall"
)

// Denial says why a command's failure is the sandbox's doing.
type Denial struct {
	// Limit names the limit reached (LimitProcesses, …), "network" for a
	// connection the network namespace refused, or "" for a path.
	Limit string `json:"limit,omitempty"`
	// Path is the guest path outside the write boundary, when one was.
	Path string `json:"path,omitempty"`
	// Reason is one sentence naming the limit or the path.
	Reason string `json:"reason"`
}

// LimitNetwork is Denial.Limit for a connection refused because the
// network is off.
const LimitNetwork = "network"

// scanBytes bounds how much of stderr classify reads: the kept tail of the
// stream, where a failing command says why.
const scanBytes = 16 << 10

var (
	errnoPath = []string{"Read-only file system", "Permission denied", "Operation not permitted"}
	netErrors = []string{"Network is unreachable", "Temporary failure in name resolution", "Could not resolve host",
		"Name or service not known", "No address associated with hostname", "getaddrinfo ENOTFOUND", "EAI_AGAIN"}
	forkErrors = []string{"Cannot fork", "fork: retry", "fork: Resource temporarily unavailable", "can't fork", "BlockingIOError: [Errno 11]"}
	memErrors  = []string{"MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory", "Out of memory"}
	// A path as tools print it: quoted ('…', "…", ‘…’, `…'), after
	// dash's "cannot create", and, failing those, bare absolute paths
	// (not the program name that starts the line).
	quotedPath = regexp.MustCompile("'([^']+)'|\"([^\"]+)\"|‘([^’]+)’|`([^`']+)'|cannot create ([^:‘'\"`]+):")
	barePath   = regexp.MustCompile(`\s(/[^\s:'"]*)`)
)

// classify decides whether a finished command's failure is the sandbox's
// doing. In order: a limit desk observed itself (Result.Limit: the output
// limit, the cgroup's pids and OOM counters); the CPU limit's SIGXCPU; and,
// for a command that exited non-zero, a bounded scan of the tail of its
// stderr for the messages tied to the sandbox's walls: EROFS, EACCES or
// EPERM naming a path outside the write boundary, a refused connection
// while the network is off, ENOSPC on /tmp, and (where no cgroup counts
// them) a failed fork or allocation.
//
// The scan is a heuristic and says so: it sees only what the command
// printed (a tool that swallows the error, or prints it in another
// language, is not recognised); it trusts the path the message names (a
// command can print such a line itself); and a relative path is resolved
// against the working directory, not the directory the failing process
// was in.
func classify(p *plan, r *Result) *Denial {
	if r.TimedOut || r.Interrupted {
		return nil
	}
	if r.Limit != "" {
		return &Denial{Limit: r.Limit, Reason: "the command was stopped at the sandbox's " + p.limits.Describe(r.Limit)}
	}
	if r.ExitCode == 128+int(syscall.SIGXCPU) {
		return &Denial{Limit: LimitCPU, Reason: "the command was killed at the sandbox's " + p.limits.Describe(LimitCPU)}
	}
	if r.ExitCode == 0 {
		return nil
	}
	tail := r.Stderr
	if len(tail) > scanBytes {
		tail = tail[len(tail)-scanBytes:]
	}
	for _, line := range strings.Split(tail, "\n") {
		switch {
		case containsAny(line, "No space left on device"):
			paths := linePaths(line, p.cwd)
			if len(paths) == 0 || within(paths[0], "/tmp") {
				return &Denial{Limit: LimitTmp, Reason: "the command filled /tmp: the sandbox's " + p.limits.Describe(LimitTmp)}
			}
		case containsAny(line, errnoPath...):
			for _, g := range linePaths(line, p.cwd) {
				if !writableGuest(p.mounts, g) {
					return &Denial{Path: g, Reason: g + " is outside the sandbox's write boundary (" + errnoIn(line) + ")"}
				}
			}
		case !p.network && containsAny(line, netErrors...):
			return &Denial{Limit: LimitNetwork, Reason: "the network is off for this workspace's commands"}
		case p.cgroup == nil && containsAny(line, forkErrors...):
			return &Denial{Limit: LimitProcesses, Reason: "the command could not start a process: the sandbox's " + p.limits.Describe(LimitProcesses)}
		case (p.cgroup == nil || !cgroupBoundsMemory(p.cgroup)) && containsAny(line, memErrors...):
			return &Denial{Limit: LimitMemory, Reason: "the command ran out of memory: the sandbox's " + p.limits.Describe(LimitMemory)}
		}
	}
	return nil
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}

func errnoIn(line string) string {
	for _, e := range errnoPath {
		if strings.Contains(line, e) {
			return e
		}
	}
	return ""
}

// linePaths are the guest paths a message line names, cleaned, relative
// ones resolved against cwd.
func linePaths(line, cwd string) []string {
	var out []string
	ms := quotedPath.FindAllStringSubmatch(line, -1)
	if len(ms) == 0 {
		ms = barePath.FindAllStringSubmatch(line, -1)
	}
	for _, m := range ms {
		for _, g := range m[1:] {
			g = strings.TrimSpace(g)
			if g == "" || strings.ContainsAny(g, "\n\x00") {
				continue
			}
			if !strings.HasPrefix(g, "/") {
				if strings.Contains(g, " ") {
					continue // prose in quotes, not a file name
				}
				g = path.Join(cwd, g)
			}
			out = append(out, path.Clean(g))
		}
	}
	return out
}

// writableGuest reports whether the sandbox lets a command write guest
// path g: inside a writable mount (and no read-only one over it), /tmp, or
// the devices of /dev.
func writableGuest(ms []Mount, g string) bool {
	if within(g, "/tmp") || within(g, "/dev") {
		return true
	}
	i := effectiveMount(ms, g)
	return i >= 0 && ms[i].Writable
}
