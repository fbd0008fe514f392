package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// cgroupBase is where desk can make a cgroup per command: for each of the
// pids and memory controllers, a directory desk may create children in
// ("" when it may not). With cgroup v2 both are desk's own cgroup, when
// its cgroup.subtree_control enables the controller; with v1 (or a hybrid
// system) each controller's own hierarchy at desk's place in it.
type cgroupBase struct {
	v2     bool
	pids   string
	memory string
}

var cgroups = sync.OnceValue(findCgroups)

func findCgroups() cgroupBase {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return cgroupBase{}
	}
	defer f.Close()
	var v2path string
	v1 := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2path = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			v1[c] = parts[2]
		}
	}
	var b cgroupBase
	for _, ctl := range []string{"pids", "memory"} {
		dir := ""
		if p, ok := v1[ctl]; ok {
			dir = filepath.Join("/sys/fs/cgroup", ctl, p)
		} else if v2path != "" && isCgroup2("/sys/fs/cgroup") {
			own := filepath.Join("/sys/fs/cgroup", v2path)
			if sub, err := os.ReadFile(filepath.Join(own, "cgroup.subtree_control")); err == nil && hasWord(string(sub), ctl) {
				dir, b.v2 = own, true
			}
		}
		if dir != "" && !usable(dir) {
			dir = ""
		}
		if dir != "" {
			removeStale(dir)
		}
		if ctl == "pids" {
			b.pids = dir
		} else {
			b.memory = dir
		}
	}
	return b
}

func isCgroup2(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "cgroup.controllers"))
	return err == nil
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// usable checks that desk may make a child cgroup in dir.
func usable(dir string) bool {
	probe := filepath.Join(dir, fmt.Sprintf("desk-probe-%d", os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return false
	}
	return os.Remove(probe) == nil
}

// removeStale removes the command cgroups a desk process that is gone
// left behind (a crash between making one and removing it). A cgroup
// still holding processes cannot be removed, and one of a live desk is
// left alone.
func removeStale(dir string) {
	for _, name := range deadDeskDirs(dir, "desk-cmd-") {
		_ = os.Remove(filepath.Join(dir, name))
	}
}

// deadDeskDirs lists the directories in dir named prefix, a desk
// process's pid, then anything, whose process is gone: what a crashed desk
// left behind. This process's own and a live desk's are not listed.
func deadDeskDirs(dir, prefix string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var dead []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			continue
		}
		dead = append(dead, e.Name())
	}
	return dead
}

var cgroupSeq atomic.Uint64

// cgroup is the cgroup (one directory per controller with v1) of one
// command.
type cgroup struct {
	v2          bool
	pids, mem   string // "" when not bounded this way
	procs       []string
	memoryBound bool
}

// newCgroup makes the command's cgroup and sets its limits. It returns
// nil, nil when desk cannot make cgroups here: the rlimit fallbacks apply.
func newCgroup(l Limits) (*cgroup, error) {
	base := cgroups()
	if base.pids == "" && base.memory == "" {
		return nil, nil
	}
	name := fmt.Sprintf("desk-cmd-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	c := &cgroup{v2: base.v2}
	mk := func(parent string) (string, error) {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return "", err
		}
		return dir, nil
	}
	fail := func(err error) (*cgroup, error) {
		c.remove()
		return nil, fmt.Errorf("sandbox: cgroup: %w", err)
	}
	if base.pids != "" {
		dir, err := mk(base.pids)
		if err != nil {
			return fail(err)
		}
		c.pids = dir
		if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(l.Processes)), 0); err != nil {
			return fail(err)
		}
		c.procs = append(c.procs, filepath.Join(dir, "cgroup.procs"))
	}
	if base.memory != "" {
		dir := c.pids
		if !base.v2 || dir == "" || base.memory != base.pids {
			d, err := mk(base.memory)
			if err != nil {
				return fail(err)
			}
			dir = d
			c.procs = append(c.procs, filepath.Join(dir, "cgroup.procs"))
		}
		c.mem = dir
		file, val := "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)
		if base.v2 {
			file = "memory.max"
			// No swap either: the limit is the memory the command gets.
			_ = os.WriteFile(filepath.Join(dir, "memory.swap.max"), []byte("0"), 0)
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(val), 0); err != nil {
			return fail(err)
		}
		c.memoryBound = true
	}
	return c, nil
}

// hit reports the limit the cgroup's event counters say was reached, or "".
func (c *cgroup) hit() string {
	if c.pids != "" && eventCount(filepath.Join(c.pids, "pids.events"), "max") > 0 {
		return LimitProcesses
	}
	if c.mem != "" {
		f := "memory.oom_control"
		if c.v2 {
			f = "memory.events"
		}
		if eventCount(filepath.Join(c.mem, f), "oom_kill") > 0 {
			return LimitMemory
		}
	}
	return ""
}

// watch polls the event counters until done closes, and stops the
// command at the first limit reached.
func (c *cgroup) watch(s *stopper, done <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			if l := c.hit(); l != "" {
				s.stop(l)
				return
			}
		}
	}
}

// remove deletes the cgroup's directories once every process in it has
// gone (the namespace's init was killed; its children may take a moment
// to be reaped).
func (c *cgroup) remove() {
	for _, d := range []string{c.pids, c.mem} {
		if d == "" {
			continue
		}
		// Usually free at once or within a millisecond (a fixed 2 ms
		// sleep made every command wait one); up to a second on a loaded
		// machine: the wait starts at 100 µs and doubles up to 2 ms.
		wait := 100 * time.Microsecond
		for deadline := time.Now().Add(time.Second); ; {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
				break
			}
			time.Sleep(wait)
			wait = min(2*wait, 2*time.Millisecond)
		}
	}
	c.pids, c.mem = "", ""
}

func eventCount(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// joinScript is the host-side wrapper that moves itself into the
// command's cgroup and then becomes bwrap (exec keeps the pid, the
// process group and the parent-death signal): every process of the
// sandbox is created inside the cgroup. If it cannot join, bwrap never
// runs and the run is a *Denied.
const joinScript = `while [ "$1" != -- ]; do echo $$ >"$1" || exit 125; shift; done; shift; exec "$@"`

func cgroupBoundsMemory(c *cgroup) bool { return c.memoryBound }
