package sandbox

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Limits bound the resources of one command. A zero field takes its
// default (DefaultLimits); every field is enforced by the sandbox, not
// asked of the command.
type Limits struct {
	// Processes bounds the tasks (processes and threads) alive in the
	// sandbox at once: the pids controller of a cgroup made for the
	// command; where desk can make none, RLIMIT_NPROC (which the kernel
	// does not enforce for a command running as host root).
	Processes int `json:"processes"`
	// MemoryBytes bounds the memory of the whole sandbox (a cgroup's
	// memory controller; the kernel's OOM killer acts at the limit, and
	// the tmpfs /tmp counts against it); without a cgroup it is each
	// process's address space (RLIMIT_AS), which also counts memory a
	// runtime only reserves.
	MemoryBytes int64 `json:"memory_bytes"`
	// CPUSeconds is the CPU time each process may use (RLIMIT_CPU:
	// SIGXCPU at the limit, SIGKILL a second later). The wall-clock
	// timeout of the Spec bounds the whole command.
	CPUSeconds int `json:"cpu_seconds"`
	// TmpBytes is the size of the sandbox's private /tmp tmpfs.
	TmpBytes int64 `json:"tmp_bytes"`
	// OutputBytes bounds everything the command writes to stdout and
	// stderr together: at the limit the command is stopped; what it wrote
	// after is counted (Result.StdoutBytes/StderrBytes) and dropped.
	OutputBytes int64 `json:"output_bytes"`
}

// DefaultLimits are the bounds of a command whose Spec sets none.
var DefaultLimits = Limits{
	Processes:   512,
	MemoryBytes: 2 << 30,
	CPUSeconds:  600,
	TmpBytes:    512 << 20,
	OutputBytes: 16 << 20,
}

// Limit names, as Denial.Limit reports them.
const (
	LimitProcesses = "processes"
	LimitMemory    = "memory"
	LimitCPU       = "cpu"
	LimitTmp       = "tmp"
	LimitOutput    = "output"
)

// WithDefaults returns l with its zero fields filled from DefaultLimits,
// or an error when a field is negative.
func WithDefaults(l Limits) (Limits, error) { return l.withDefaults() }

// withDefaults fills zero fields and refuses negative ones.
func (l Limits) withDefaults() (Limits, error) {
	if l.Processes < 0 || l.MemoryBytes < 0 || l.CPUSeconds < 0 || l.TmpBytes < 0 || l.OutputBytes < 0 {
		return l, fmt.Errorf("a limit is negative")
	}
	d := DefaultLimits
	if l.Processes == 0 {
		l.Processes = d.Processes
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.CPUSeconds == 0 {
		l.CPUSeconds = d.CPUSeconds
	}
	if l.TmpBytes == 0 {
		l.TmpBytes = d.TmpBytes
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = d.OutputBytes
	}
	return l, nil
}

// Describe names a limit with its value, as a denial reason does.
func (l Limits) Describe(limit string) string {
	switch limit {
	case LimitProcesses:
		return fmt.Sprintf("process limit (%d processes)", l.Processes)
	case LimitMemory:
		return fmt.Sprintf("memory limit (%s)", byteSize(l.MemoryBytes))
	case LimitCPU:
		return fmt.Sprintf("CPU time limit (%d s)", l.CPUSeconds)
	case LimitTmp:
		return fmt.Sprintf("/tmp size limit (%s)", byteSize(l.TmpBytes))
	case LimitOutput:
		return fmt.Sprintf("output limit (%s)", byteSize(l.OutputBytes))
	}
	return limit
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}

// rlimitScript sets the per-process limits inside the sandbox before the
// command runs (dash's ulimit takes one option per call; values in KiB
// for -v). memory is false when a cgroup bounds memory instead.
func rlimitScript(l Limits, nproc, memory bool) string {
	var b strings.Builder
	// SIGXCPU at the soft limit (the command's exit status says so),
	// SIGKILL at the hard one for a process that ignores it.
	fmt.Fprintf(&b, "ulimit -S -t %d || exit 126; ulimit -H -t %d || exit 126; ", l.CPUSeconds, l.CPUSeconds+5)
	if memory {
		fmt.Fprintf(&b, "ulimit -v %d || exit 126; ", max(l.MemoryBytes>>10, 1))
	}
	if nproc {
		// bash and busybox call it -u, dash -p.
		fmt.Fprintf(&b, "{ ulimit -u %d || ulimit -p %d; } 2>/dev/null || exit 126; ", l.Processes, l.Processes)
	}
	return b.String()
}

// stopper is how a limit stops a running command: the first hit wins,
// names the limit and closes C; execute kills the process tree on it.
type stopper struct {
	once  sync.Once
	C     chan struct{}
	mu    sync.Mutex
	limit string
}

func newStopper() *stopper { return &stopper{C: make(chan struct{})} }

func (s *stopper) stop(limit string) {
	s.once.Do(func() {
		s.mu.Lock()
		s.limit = limit
		s.mu.Unlock()
		close(s.C)
	})
}

func (s *stopper) hit() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit
}
