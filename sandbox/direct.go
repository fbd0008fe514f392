package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Direct returns a Runner WITHOUT a sandbox. It is for a workspace in the
// explicit "full-access" approval mode only, where the user has chosen to
// let the agent's commands run on the host as desk's own user: they can
// read and write anything desk can, and reach the network whatever
// Spec.Network says.
//
// What Direct keeps: the command runs with /bin/sh -c in the host
// directory behind Spec.Cwd (the mounts map guest paths to host paths, so
// the working directory is the same directory a sandboxed run would use),
// with the same clean environment (HOME is the host directory behind
// /scratch, else the system's temporary directory; nothing of desk's
// environment is inherited), the same timeout, output limits and
// streaming, and the same kill: the command runs in its own process group,
// which gets SIGTERM on timeout or interrupt, SIGKILL after the grace
// period, and SIGKILL when the main process exits, so background children
// do not outlive the command. A child that leaves the process group
// (setsid) escapes that kill; only the sandbox's PID namespace prevents it.
//
// Guest paths inside the command text (cat /artifacts/x) mean nothing on
// the host: a caller that offers Direct must tell the agent the host paths.
func Direct() Runner { return &direct{grace: DefaultGrace} }

type direct struct {
	grace time.Duration
}

func (d *direct) Run(ctx context.Context, s Spec, onOutput OutputFunc) (*Result, error) {
	p, err := prepare(s, true)
	if err != nil {
		return nil, err
	}
	o, err := execute(ctx, p, onOutput, d.grace, d.launch)
	if err != nil {
		return nil, err
	}
	if o.res.Limit != "" { // the output limit holds without a sandbox too
		o.res.Denial = classify(p, o.res)
	}
	return o.res, nil
}

func (d *direct) launch(p *plan, stdout, stderr *os.File) (*process, error) {
	cmd := exec.Command("/bin/sh", "-c", p.command)
	cmd.Dir = p.hostCwd
	cmd.Env = p.env
	if p.stdin != nil {
		cmd.Stdin = p.stdin
	} // else /dev/null
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	setProcAttr(cmd)
	noInheritedFDs()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: direct: start /bin/sh: %w", err)
	}
	return &process{
		cmd:       cmd,
		gate:      startedGate(),
		terminate: func() { signalGroup(cmd, syscall.SIGTERM) },
		kill:      func() { signalGroup(cmd, syscall.SIGKILL) },
		finish:    func() { signalGroup(cmd, syscall.SIGKILL) },
		settled:   func() {},
	}, nil
}
