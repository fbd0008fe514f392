package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// BubblewrapSpawner spawns children inside bubblewrap at bwrapPath: the
// same system view as a command's sandbox (/usr and its links, a minimal
// /etc, private /proc, /dev and /tmp), the Spec's mounts and read-only
// paths, no network unless allowed, and --die-with-parent so a child never
// outlives desk. Kill ends the sandbox's whole PID namespace.
//
// Unlike Run it binds mounts by host path, not from descriptors desk
// opened, and sets no cgroup limits: a runtime's child is an operator's
// program, not a model's command; see docs/runtimes.md.
func BubblewrapSpawner(bwrapPath string) Spawner { return bwrapSpawner{path: bwrapPath} }

type bwrapSpawner struct{ path string }

func (b bwrapSpawner) Spawn(ctx context.Context, s SpawnSpec) (*Process, error) {
	if len(s.Argv) == 0 {
		return nil, fmt.Errorf("spawn: argv is empty")
	}
	a := []string{"--die-with-parent", "--new-session", "--unshare-all"}
	if s.Network {
		a = append(a, "--share-net")
	}
	a = append(a, "--cap-drop", "ALL", "--hostname", sandboxHostname)
	a = append(a, systemArgs()...)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--dir", "/etc")
	for _, pat := range append(etcEntries, "passwd", "group", "nsswitch.conf", "hosts") {
		matches, _ := filepath.Glob(filepath.Join("/etc", pat))
		for _, m := range matches {
			if filepath.Dir(m) == "/etc" {
				a = append(a, "--ro-bind-try", m, m)
			}
		}
	}
	if s.Network {
		a = append(a, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	for _, m := range s.Mounts {
		if _, err := os.Stat(m.Host); err != nil {
			return nil, fmt.Errorf("spawn: mount %s: %w", m.Guest, err)
		}
		op := "--ro-bind"
		if m.Writable {
			op = "--bind"
		}
		a = append(a, op, m.Host, m.Guest)
	}
	for _, p := range append([]string{s.Argv[0]}, s.ReadOnly...) {
		if !inSystemDir(p) {
			a = append(a, "--ro-bind", p, p)
		}
	}
	a = append(a, "--chdir", s.Cwd, "--")
	a = append(a, s.Argv...)
	cmd := exec.Command(b.path, a...)
	cmd.Env = spawnEnv(s.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p, err := start(cmd)
	if err != nil {
		return nil, err
	}
	// bwrap is the PID namespace's parent: killing its group ends the
	// namespace's init, and with it every process inside.
	p.kill = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return p, nil
}
