package sandbox

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// Tests of the runtime children's spawner with the real bubblewrap.

func spawner(t *testing.T) *bwrapSpawner {
	t.Helper()
	sandboxed(t, DefaultGrace) // skips without bwrap, fails when it cannot run
	path, _ := exec.LookPath("bwrap")
	return BubblewrapSpawner(path).(*bwrapSpawner)
}

// spawnSpec is a child of newHome's session: its guest mounts, a state
// directory at /runtime-home and an install directory bound read-only.
func (h *home) spawnSpec(t *testing.T, script string) (SpawnSpec, string, string) {
	state := filepath.Join(h.root, "runtime-state/ws1/rt")
	write(t, filepath.Join(state, "state.txt"), "state\n")
	install := filepath.Join(t.TempDir(), "opt/rt/node_modules")
	write(t, filepath.Join(install, "pkg/index.js"), "installed\n")
	ms := append(slices.Clone(h.mounts), Mount{Guest: "/runtime-home", Host: state, Writable: true})
	return SpawnSpec{Mounts: ms, Cwd: "/workspace", Argv: []string{"/bin/sh", "-c", script}, ReadOnly: []string{install},
		Env: map[string]string{"HOME": "/runtime-home"}}, state, install
}

// output reads the child's stdout to its end and waits for it.
func output(t *testing.T, p *Process) string {
	t.Helper()
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(p.Stdout); done <- b }()
	select {
	case b := <-done:
		p.Wait()
		p.Close()
		return string(b)
	case <-time.After(60 * time.Second):
		p.Kill()
		t.Fatal("the child did not end")
		return ""
	}
}

func TestSpawnerSandboxView(t *testing.T) {
	s := spawner(t)
	h := newHome(t)
	t.Setenv("DESK_LEAK_CHECK", secret) // desk's environment never reaches the child
	sp, state, install := h.spawnSpec(t, ``)
	sp.Argv[2] = strings.Join([]string{
		`echo "cwd $(pwd)"`,
		`cat README`,
		`cat /runtime-home/state.txt`,
		`echo made > /runtime-home/made.txt && echo state-writable`,
		`cat ` + install + `/pkg/index.js`,
		`echo x > ` + install + `/pkg/new.js 2>/dev/null && echo INSTALL-WRITABLE`,
		`cat ` + h.root + `/admin.token 2>/dev/null`,
		`cat ` + h.other + ` 2>/dev/null`,
		`ls /home /root 2>/dev/null`,
		`echo "net $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ,)"`,
		`echo "host $(cat /proc/sys/kernel/hostname)"`,
		`env`,
	}, "; ")
	p, err := s.Spawn(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	out := output(t, p)
	for _, want := range []string{"cwd /workspace\n", "workspace\n", "state\n", "state-writable\n", "installed\n", "net lo,\n", "host sandbox\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) || strings.Contains(out, "INSTALL-WRITABLE") {
		t.Fatalf("the child reached what it must not:\n%s", out)
	}
	if got := readHost(t, filepath.Join(state, "made.txt")); got != "made\n" {
		t.Errorf("state write landed elsewhere: %q", got)
	}

	// With the network allowed, the host's interfaces are there.
	ifs, _ := os.ReadFile("/proc/net/dev")
	if strings.Count(string(ifs), ":") < 2 {
		return // a host with loopback only shows no difference
	}
	sp.Network = true
	sp.Argv[2] = `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ,`
	p, err = s.Spawn(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if out := output(t, p); out == "lo," || out == "" {
		t.Errorf("network allowed, interfaces %q", out)
	}
}

func TestSpawnerKillsProcessTree(t *testing.T) {
	s := spawner(t)
	h := newHome(t)
	a, b := sleeper(), sleeper()
	sp, _, _ := h.spawnSpec(t, a+" & "+b+" & echo ready; wait")
	p, err := s.Spawn(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(p.Stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if len(alive(a)) == 0 || len(alive(b)) == 0 {
		t.Fatal("the children are not running")
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	p.Close()
	waitGone(t, a)
	waitGone(t, b)
}

// TestSpawnerBindsOpenedDirectory: as for commands, a declared host path
// swapped for a link to desk's home after desk opened it shows the child
// the declared directory, and the next spawn refuses the swapped path.
func TestSpawnerBindsOpenedDirectory(t *testing.T) {
	s := spawner(t)
	h := newHome(t)
	proj, pin := hostPath(t)
	var once sync.Once
	s.opened = func() {
		once.Do(func() {
			if err := os.Rename(proj, proj+".declared"); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(h.root, proj); err != nil {
				t.Error(err)
			}
		})
	}
	sp, _, _ := h.spawnSpec(t, `cat /home/me/proj/a.txt; cat /home/me/proj/admin.token 2>/dev/null; ls /home/me/proj`)
	sp.Mounts = append(sp.Mounts, Mount{Guest: "/home/me/proj", Host: proj, Writable: true, Pin: pin})
	p, err := s.Spawn(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	out := output(t, p)
	if strings.Contains(out, secret) || strings.Contains(out, "workspaces") || !strings.HasPrefix(out, "declared\n") {
		t.Fatalf("the child saw the swapped path's target:\n%s", out)
	}
	_, err = s.Spawn(t.Context(), sp)
	var sw *fsjail.SwappedError
	if !errors.As(err, &sw) || !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("spawn over the swapped host path: %v; want a SwappedError", err)
	}
}

// cgroupDirs lists this process's command cgroups under dir.
func cgroupDirs(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "desk-cmd-"+strconv.Itoa(os.Getpid())+"-") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// TestSpawnerCgroupLimits: the child lives in a cgroup of its own with
// the pids and memory limits, for its whole life, and the cgroup goes with
// it; forks past the process limit fail inside the child.
func TestSpawnerCgroupLimits(t *testing.T) {
	s := spawner(t)
	base := cgroups()
	if base.pids == "" {
		t.Skip("desk cannot make cgroups with the pids controller here")
	}
	h := newHome(t)
	sp, _, _ := h.spawnSpec(t, `echo ready; read _; i=0; while [ $i -lt 40 ]; do sleep 30 2>/dev/null & i=$((i+1)); echo started; done`)
	sp.Limits = Limits{Processes: 16, MemoryBytes: 96 << 20}
	before := cgroupDirs(base.pids)
	p, err := s.Spawn(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(p.Stdout)
	if line, _ := r.ReadString('\n'); line != "ready\n" {
		t.Fatalf("first line %q", line)
	}
	dirs := cgroupDirs(base.pids)
	if len(dirs) != len(before)+1 {
		t.Fatalf("cgroups of this process: %v (before %v)", dirs, before)
	}
	dir := dirs[len(dirs)-1]
	if got := strings.TrimSpace(readHost(t, filepath.Join(dir, "pids.max"))); got != "16" {
		t.Errorf("pids.max %q", got)
	}
	if base.memory != "" {
		mdir := dir
		if !base.v2 {
			mdir = filepath.Join(base.memory, filepath.Base(dir))
		}
		file := "memory.limit_in_bytes"
		if base.v2 {
			file = "memory.max"
		}
		if got := strings.TrimSpace(readHost(t, filepath.Join(mdir, file))); got != strconv.Itoa(96<<20) {
			t.Errorf("%s %q", file, got)
		}
	}
	p.Stdin.Write([]byte("go\n"))
	// Each line is a fork that worked; the shell fails (or dies) at the
	// first fork past the limit, so output ends early.
	rest, _ := io.ReadAll(r)
	n := strings.Count(string(rest), "started\n")
	if n >= 40 || n == 0 {
		t.Errorf("%d forks under a 16-process limit", n)
	}
	t.Logf("%d of 40 forks worked under a 16-process limit", n)
	p.Kill()
	p.Wait()
	p.Close()
	if dirs := cgroupDirs(base.pids); len(dirs) != len(before) {
		t.Errorf("the child's cgroup was left behind: %v", dirs)
	}
}

func TestSpawnerBadSpec(t *testing.T) {
	s := spawner(t)
	h := newHome(t)
	sp, _, _ := h.spawnSpec(t, `true`)
	bad := sp
	bad.Cwd = "/nowhere"
	if _, err := s.Spawn(t.Context(), bad); !desk.IsCode(err, desk.EINVALID) {
		t.Errorf("cwd outside the mounts: %v", err)
	}
	bad = sp
	bad.ReadOnly = []string{filepath.Join(t.TempDir(), "missing")}
	if _, err := s.Spawn(t.Context(), bad); err == nil {
		t.Error("a missing install path was accepted")
	}
	bad = sp
	bad.ReadOnly = []string{"/workspace"}
	if _, err := s.Spawn(t.Context(), bad); !desk.IsCode(err, desk.EINVALID) {
		t.Errorf("an install path over a guest mount: %v", err)
	}
}

// A runtime child may nest a user namespace (its own sandbox, as Codex's
// bubblewrap does), and that is all it gains: root of the nested
// namespace, it tries what an attacker would, and every attempt fails. It
// cannot make a read-only mount writable (remount, or a bind over it),
// unmount what hides the host, make a setuid file (the inherited seccomp
// filter), reach a file desk did not mount, or make a file the host sees
// as root's. desk's own commands still cannot nest one at all.
func TestSpawnerNestedUserNamespaceOnlyNarrows(t *testing.T) {
	s := spawner(t)
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	h := newHome(t)
	attack := strings.Join([]string{
		`id -u`,
		`mount -o remount,rw /context/grp1 2>/dev/null && echo REMOUNTED-RW`,
		`mount -o remount,rw,bind /artifacts/immutable 2>/dev/null && echo IMMUTABLE-RW`,
		`echo x > /context/grp1/new.txt 2>/dev/null && echo CONTEXT-WRITTEN`,
		`echo x > /artifacts/immutable/new.txt 2>/dev/null && echo IMMUTABLE-WRITTEN`,
		`umount -l /artifacts/immutable 2>/dev/null && echo UNMOUNTED`,
		`mount -o remount,bind,suid /workspace 2>/dev/null && echo SUID-MOUNT`,
		`echo '#!/bin/sh' > /workspace/sx && chmod 4755 /workspace/sx 2>/dev/null; chmod u+s /workspace/sx 2>/dev/null; ls -l /workspace/sx`,
		`echo owned > /workspace/by-nested-root`,
		`cat ` + h.root + `/admin.token 2>/dev/null && echo TOKEN-READ`,
		`cat ` + h.other + ` 2>/dev/null && echo OTHER-READ`,
		`echo done`,
	}, "; ")
	sp, _, _ := h.spawnSpec(t, "")
	sp.Argv = []string{"/usr/bin/unshare", "-Urm", "/bin/sh", "-c", "exec 2>&1; " + attack}
	p, err := s.Spawn(t.Context(), sp)
	if err != nil {
		t.Fatal(err)
	}
	out := output(t, p)
	t.Logf("nested:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || lines[0] != "0" || !strings.Contains(out, "done") {
		t.Fatalf("the child did not become root of a nested user namespace:\n%s", out)
	}
	for _, bad := range []string{"REMOUNTED-RW", "IMMUTABLE-RW", "CONTEXT-WRITTEN", "IMMUTABLE-WRITTEN", "UNMOUNTED", "SUID-MOUNT", "TOKEN-READ", "OTHER-READ", secret} {
		if strings.Contains(out, bad) {
			t.Errorf("nested root got %s:\n%s", bad, out)
		}
	}
	fi, err := os.Stat(filepath.Join(h.workspace, "sx"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("a setuid file on the host: %v", fi.Mode())
	}
	for _, f := range []string{"sx", "by-nested-root"} {
		fi, err := os.Stat(filepath.Join(h.workspace, f))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Getuid() {
			t.Fatalf("%s belongs to uid %d on the host, not desk's %d", f, uid, os.Getuid())
		}
	}
	if _, err := os.Stat(filepath.Join(h.group, "new.txt")); err == nil {
		t.Fatal("a file appeared in the read-only context mount")
	}
}
