package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
)

// SpawnSpec is a long-lived child with its standard streams as pipes: an
// external agent runtime the runtime host speaks a protocol with. Unlike
// a Spec's command it has no timeout and no output limit; it lives until
// its Process is killed.
type SpawnSpec struct {
	Mounts []Mount
	// Cwd is the guest working directory; it must lie inside a mount.
	Cwd string
	// Argv is the program (an absolute host path, bound read-only at the
	// same path inside the sandbox) and its arguments.
	Argv []string
	// ReadOnly are host paths bound read-only at the same path (the
	// program's installation: a Node package needs its whole tree).
	ReadOnly []string
	// Env is the child's whole environment besides PATH and LANG (and, in
	// the sandbox, HOME=/tmp and TERM=dumb unless Env sets them); the
	// host's is never inherited.
	Env     map[string]string
	Network bool
	// Limits bound the child as a command's bound a command, where they
	// make sense for a long-lived process (BubblewrapSpawner says which);
	// zero fields take DefaultLimits. Direct enforces none.
	Limits Limits
}

// Process is a spawned child. Its output pipes are desk's own, not
// exec.Cmd's: Cmd.Wait closes the pipes it made, so a reader racing the
// child's exit would lose what it printed last (its dying words on
// stderr). Here they stay readable to EOF after Wait; Close frees them.
type Process struct {
	Stdin     io.WriteCloser
	Stdout    io.Reader
	Stderr    io.Reader
	cmd       *exec.Cmd
	kill      func() error
	once      sync.Once
	done      chan struct{}
	err       error
	readers   []*os.File
	closeOnce sync.Once
	// exited, when set, runs once the child was reaped and before Wait
	// returns: the sandbox frees what it held for the child's life.
	exited func()
}

// Close closes the output pipes' read ends (idempotent). Call it when
// whoever reads them is done, after the child is gone.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		for _, r := range p.readers {
			r.Close()
		}
	})
	return nil
}

// Wait waits for the child to exit (any number of callers).
func (p *Process) Wait() error {
	p.once.Do(func() {
		go func() {
			p.err = p.cmd.Wait()
			if p.exited != nil {
				p.exited()
			}
			close(p.done)
		}()
	})
	<-p.done
	return p.err
}

// Kill kills the child's whole process tree; it does not wait.
func (p *Process) Kill() error { return p.kill() }

// Pid is the child's process id on the host.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Spawner starts long-lived children inside (or, Direct, outside) the
// sandbox.
type Spawner interface {
	Spawn(ctx context.Context, s SpawnSpec) (*Process, error)
}

// DirectSpawner spawns on the host WITHOUT a sandbox (full-access
// workspaces, and hosts without bubblewrap when the operator allows it):
// the child runs in the host directory behind Cwd, in its own process
// group, which Kill ends.
func DirectSpawner() Spawner { return directSpawner{} }

type directSpawner struct{}

func (directSpawner) Spawn(ctx context.Context, s SpawnSpec) (*Process, error) {
	if len(s.Argv) == 0 {
		return nil, fmt.Errorf("spawn: argv is empty")
	}
	dir := ""
	for _, m := range s.Mounts {
		if rel, ok := under(s.Cwd, m.Guest); ok {
			dir = m.Host + rel
		}
	}
	if dir == "" {
		return nil, fmt.Errorf("spawn: cwd %s is not inside a mount", s.Cwd)
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Dir = dir
	cmd.Env = spawnEnv(s.Env)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := start(cmd)
	if err != nil {
		return nil, err
	}
	p.kill = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return p, nil
}

func start(cmd *exec.Cmd) (*Process, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, outW, err := os.Pipe()
	if err != nil {
		in.Close()
		return nil, err
	}
	errp, errW, err := os.Pipe()
	if err != nil {
		in.Close()
		out.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	// The child holds its own copies of the write ends; desk's must go so
	// the readers see EOF when the child (and its group) is gone.
	outW.Close()
	errW.Close()
	if err != nil {
		in.Close()
		out.Close()
		errp.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return &Process{Stdin: in, Stdout: out, Stderr: errp, cmd: cmd, done: make(chan struct{}), readers: []*os.File{out, errp}}, nil
}

// under reports whether guest path p is g or inside it, and the rest.
func under(p, g string) (string, bool) {
	if p == g {
		return "", true
	}
	if len(p) > len(g) && p[:len(g)] == g && p[len(g)] == '/' {
		return p[len(g):], true
	}
	return "", false
}

func spawnEnv(extra map[string]string) []string {
	env := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
