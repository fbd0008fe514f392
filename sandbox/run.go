package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startGate records whether the command itself began to run, as opposed
// to the sandbox failing to set up around it. Output is held back until it
// is decided; output of a command that never started is the sandbox's own
// error text.
type startGate struct {
	once    sync.Once
	decided chan struct{}
	started bool

	mu    sync.Mutex
	setup bytes.Buffer // bounded by maxSetupOutput
}

const maxSetupOutput = 16 << 10

func newGate() *startGate { return &startGate{decided: make(chan struct{})} }

func startedGate() *startGate {
	g := newGate()
	g.decide(true)
	return g
}

func (g *startGate) decide(started bool) {
	g.once.Do(func() {
		g.started = started
		close(g.decided)
	})
}

func (g *startGate) wait() bool {
	<-g.decided
	return g.started
}

func (g *startGate) setupOutput(_ string, b []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := maxSetupOutput - g.setup.Len(); n > 0 {
		g.setup.Write(b[:min(n, len(b))])
	}
}

func (g *startGate) setupText() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return strings.TrimSpace(g.setup.String())
}

// process is a started command as execute drives it.
type process struct {
	cmd  *exec.Cmd
	gate *startGate
	// terminate asks the whole process tree to stop (SIGTERM).
	terminate func()
	// kill kills the whole process tree (SIGKILL).
	kill func()
	// finish runs once the main process has exited, before it is reaped:
	// it kills whatever the command left behind.
	finish func()
	// settled runs after the main process was reaped: it waits for the
	// launcher's helpers and decides the gate.
	settled func()
}

// launcher starts the command of p with the given stdout and stderr.
type launcher func(p *plan, stdout, stderr *os.File) (*process, error)

// outcome is what execute observed.
type outcome struct {
	res     *Result
	started bool   // the command itself ran
	setup   string // the sandbox's own output when it did not
}

// drainWait bounds how long execute waits for the output pipes to reach
// EOF after the process tree is gone (a Direct command's escaped
// grandchild may still hold them).
const drainWait = 2 * time.Second

// execute runs one command: it starts it, streams its output, enforces
// the timeout and the caller's context with SIGTERM then SIGKILL after
// grace, and collects the result.
func execute(ctx context.Context, p *plan, onOutput OutputFunc, grace time.Duration, launch launcher) (*outcome, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sandbox: not started: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}

	// The process is started, and waited for, on one locked OS thread:
	// Pdeathsig fires when the thread that started a process exits, and a
	// locked thread neither runs other goroutines (one of which might lock
	// it and exit) nor exits until the process has.
	type exit struct {
		reaped bool
		err    error
	}
	type launched struct {
		proc *process
		err  error
	}
	launchedC := make(chan launched, 1)
	exited := make(chan exit, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		proc, err := launch(p, outW, errW)
		launchedC <- launched{proc, err}
		if err != nil {
			return
		}
		reaped, err := waitExited(proc.cmd)
		exited <- exit{reaped, err}
	}()
	l := <-launchedC
	outW.Close()
	errW.Close()
	if l.err != nil {
		outR.Close()
		errR.Close()
		return nil, l.err
	}
	proc := l.proc
	begin := time.Now()

	stdout, stderr := newCapture(p.maxOutput), newCapture(p.maxOutput)
	budget := &outputBudget{left: p.limits.OutputBytes, stop: p.stop}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); pump(outR, StreamStdout, stdout, proc.gate, budget, onOutput) }()
	go func() { defer pumps.Done(); pump(errR, StreamStderr, stderr, proc.gate, budget, onOutput) }()

	timer := time.NewTimer(p.timeout)
	defer timer.Stop()
	var graceC <-chan time.Time
	var timedOut, interrupted bool
	ctxDone := ctx.Done()
	stopC := p.stop.C
	var ex exit
wait:
	for {
		select {
		case ex = <-exited:
			break wait
		case <-stopC:
			// A limit was reached: no grace, the tree is killed now.
			stopC = nil
			proc.kill()
		case <-timer.C:
			if !interrupted {
				timedOut = true
			}
			ctxDone = nil
			proc.terminate()
			graceC = time.After(grace)
		case <-ctxDone:
			interrupted = true
			ctxDone = nil
			timer.Stop()
			proc.terminate()
			graceC = time.After(grace)
		case <-graceC:
			graceC = nil
			proc.kill()
		}
	}
	proc.finish()
	waitErr := ex.err
	if !ex.reaped {
		waitErr = proc.cmd.Wait()
	}
	duration := time.Since(begin)
	proc.settled()
	proc.gate.decide(false) // a no-op when the launcher decided already

	drained := make(chan struct{})
	go func() { pumps.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(drainWait):
		// Something outside the killed tree still holds a pipe; closing
		// our ends ends the reads. Output after this point is lost.
		outR.Close()
		errR.Close()
		<-drained
	}
	outR.Close()
	errR.Close()

	if proc.cmd.ProcessState == nil {
		return nil, fmt.Errorf("sandbox: wait: %w", waitErr)
	}
	res := &Result{
		ExitCode:    exitCode(proc.cmd.ProcessState),
		Duration:    duration,
		TimedOut:    timedOut,
		Interrupted: interrupted,
		StdoutBytes: stdout.total,
		StderrBytes: stderr.total,
		Limit:       p.stop.hit(),
	}
	res.Stdout, res.StdoutTruncated = stdout.result()
	res.Stderr, res.StderrTruncated = stderr.result()
	return &outcome{res: res, started: proc.gate.wait(), setup: proc.gate.setupText()}, nil
}

// exitCode is the shell's view of how a process ended.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
