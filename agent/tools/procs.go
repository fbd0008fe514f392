package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/desk-runtime/desk/sandbox"
)

// Long-running commands: exec_command with yield_time_ms starts a command
// session that keeps running after the call returns; write_stdin writes
// to its standard input and returns the output that came since. The
// sessions of one execution live in its Procs and die with it.
const (
	// MaxCommandSessions is how many command sessions may run at once in
	// one execution; a session that ended and was collected frees its slot.
	MaxCommandSessions = 4
	// writeDefaultYield is write_stdin's wait when the call gives none.
	writeDefaultYield = time.Second
	// quietAfterOutput ends a wait early: once new output came, a pause of
	// this long returns it (the model need not sit out the whole yield for
	// an answer that is already there).
	quietAfterOutput = 300 * time.Millisecond
)

// Procs are the command sessions of one execution. Sessions are numbered
// 1, 2, … in the order they start (never reused), as Codex's unified exec
// numbers them, so a scripted model can address them.
type Procs struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	next   int
	live   map[int]*proc
	closed bool
}

// NewProcs returns the session registry of an execution. Its sessions run
// under ctx: when ctx ends (an interrupt) each is killed with its whole
// process tree, as Close does when the execution settles.
func NewProcs(ctx context.Context) *Procs {
	// Derived from the execution's context: an interrupt ends the
	// sessions even while no call waits on them.
	ctx, cancel := context.WithCancel(ctx)
	return &Procs{ctx: ctx, cancel: cancel, live: map[int]*proc{}}
}

// Close kills every session's process tree and waits for them to end.
// Idempotent.
func (p *Procs) Close() {
	p.mu.Lock()
	p.closed = true
	for _, s := range p.live {
		s.stdinW.Close() // EOF first: a reader may end on its own
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// proc is one command session.
type proc struct {
	id      int
	command string
	cwd     string
	cr      *commandRun
	stdinW  *os.File

	mu      sync.Mutex
	stdout  *chunkBuf
	stderr  *chunkBuf
	sink    func(stream string, chunk []byte) // the waiting call's Output
	changed chan struct{}                     // new output (capacity 1)

	done chan struct{} // closed when the command ended
	res  *sandbox.Result
	err  error
}

// chunkBuf is the output of one stream since the last read, its head kept
// up to execKeep bytes and the rest counted.
type chunkBuf struct {
	b       []byte
	dropped int64
}

func (c *chunkBuf) add(b []byte) {
	if n := execKeep - len(c.b); n > 0 {
		k := min(n, len(b))
		c.b = append(c.b, b[:k]...)
		b = b[k:]
	}
	c.dropped += int64(len(b))
}

// take returns what the buffer holds, with a note for dropped bytes, and
// empties it.
func (c *chunkBuf) take() (string, bool) {
	s, cut := string(c.b), c.dropped > 0
	if cut {
		s += fmt.Sprintf("\n[… %d bytes omitted …]", c.dropped)
	}
	c.b, c.dropped = nil, 0
	return s, cut
}

func (s *proc) output(stream string, chunk []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stream == sandbox.StreamStderr {
		s.stderr.add(chunk)
	} else {
		s.stdout.add(chunk)
	}
	if s.sink != nil {
		s.sink(stream, chunk)
	}
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func (s *proc) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// start starts a session, or returns a result the model can act on when
// the execution holds MaxCommandSessions running ones already.
func (p *Procs) start(cr *commandRun, command string) (*proc, *Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, fmt.Errorf("the execution's command sessions are closed")
	}
	running := 0
	for _, s := range p.live {
		if !s.ended() {
			running++
		}
	}
	if running >= MaxCommandSessions {
		return nil, Fail(CodeTooMany, "%d command sessions are running already, the most one execution may hold; finish one (write_stdin until it exits) before starting another", running), nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	p.next++
	s := &proc{id: p.next, command: command, cwd: cr.spec.Cwd, cr: cr, stdinW: w,
		stdout: &chunkBuf{}, stderr: &chunkBuf{}, changed: make(chan struct{}, 1), done: make(chan struct{})}
	p.live[s.id] = s
	spec := cr.spec
	spec.Stdin = r
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		res, err := cr.runner.Run(p.ctx, spec, s.output)
		r.Close()
		w.Close()
		s.res, s.err = res, err
		close(s.done)
	}()
	return s, nil, nil
}

func (p *Procs) get(id int) *proc {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live[id]
}

func (p *Procs) forget(id int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, id)
}

// wait waits up to yield for the session: until it ends, or output came
// and then paused for quietAfterOutput, or ctx ends. Output that arrives
// meanwhile streams to out.
func (s *proc) wait(ctx context.Context, yield time.Duration, out func(string, []byte)) {
	s.mu.Lock()
	s.sink = out
	// What arrived while no call waited (the buffers hold only output
	// since the last report) streams now, so the tool.output events carry
	// all of it, as the records do.
	if out != nil {
		if len(s.stdout.b) > 0 {
			out(sandbox.StreamStdout, slices.Clone(s.stdout.b))
		}
		if len(s.stderr.b) > 0 {
			out(sandbox.StreamStderr, slices.Clone(s.stderr.b))
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.sink = nil
		s.mu.Unlock()
	}()
	deadline := time.NewTimer(yield)
	defer deadline.Stop()
	var quiet <-chan time.Time
	for {
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-s.changed:
			quiet = time.After(quietAfterOutput)
		case <-quiet:
			return
		}
	}
}

// report is the result of a call on session s: the output since the last
// call, and how the command ended when it did.
func (p *Procs) report(ctx context.Context, env *Env, s *proc, facts map[string]any) (*Result, error) {
	if !s.ended() && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s.mu.Lock()
	stdout, cutOut := s.stdout.take()
	stderr, cutErr := s.stderr.take()
	s.mu.Unlock()
	facts["session_id"] = s.id
	facts["command"] = s.command
	facts["cwd"] = s.cwd
	v := map[string]any{"session_id": s.id, "stdout": stdout, "stderr": stderr, "truncated": cutOut || cutErr}
	out := &Result{Value: v, Facts: facts, Output: joinOutput(stdout, stderr)}
	if !s.ended() {
		v["running"], facts["running"] = true, true
		return out, nil
	}
	p.forget(s.id) // collected: its slot and its number are done
	v["running"], facts["running"] = false, false
	if s.err != nil {
		r, err := runError(s.err, s.command, s.cwd)
		if r != nil {
			r.Facts = facts
			facts["error"] = r.Message
		}
		return r, err
	}
	res := s.res
	if res.Interrupted && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	v["exit_code"], facts["exit_code"] = res.ExitCode, res.ExitCode
	v["timed_out"], facts["timed_out"] = res.TimedOut, res.TimedOut
	facts["sandboxed"] = !s.cr.direct
	facts["stdout_bytes"], facts["stderr_bytes"] = res.StdoutBytes, res.StderrBytes
	if s.cr.direct {
		v["sandboxed"] = false
		v["host_dirs"] = s.cr.hostDirs
	}
	markDenial(out, v, facts, res.Denial)
	made, err := indexNew(ctx, env)
	if err != nil {
		return nil, err
	}
	if len(made) > 0 {
		v["artifacts"] = made
		facts["artifacts"] = len(made)
	}
	out.Artifacts = made
	return out, nil
}

// startSession starts command as a session and waits up to yield for it.
func startSession(ctx context.Context, env *Env, call *Call, command, guestCwd string, timeout, yield time.Duration) (*Result, error) {
	if env.Procs == nil {
		return Fail(CodeNotConfigured, "long-running commands are not available here; run the command without yield_time_ms"), nil
	}
	if err := materialize(ctx, env); err != nil {
		return nil, err
	}
	cr, bad, err := prepareCommand(env, command, guestCwd, timeout)
	if bad != nil || err != nil {
		return bad, err
	}
	s, bad, err := env.Procs.start(cr, command)
	if bad != nil || err != nil {
		return bad, err
	}
	s.wait(ctx, yield, call.Output)
	return env.Procs.report(ctx, env, s, map[string]any{})
}

type writeStdinArgs struct {
	SessionID   int    `json:"session_id" jsonschema:"minimum=1" jsonschema_description:"the session_id exec_command returned for a command still running"`
	Chars       string `json:"chars,omitempty" jsonschema_description:"at most 64 KiB of text to write to the command's standard input (include \\n to end a line); empty to only collect new output"`
	YieldTimeMS int    `json:"yield_time_ms,omitempty" jsonschema:"minimum=1,maximum=30000" jsonschema_description:"return after at most this many milliseconds, earlier once output came and then paused or the command ended; default 1000"`
}

type writeStdin struct{ args[writeStdinArgs] }

func (writeStdin) Name() string { return "write_stdin" }
func (writeStdin) Description() string {
	return "Write to the standard input of a command that exec_command started with yield_time_ms and that is still running (its session_id), then return the output it wrote since the last call; empty chars only collects new output. When the command has ended the result has its exit_code and running false; the session is then gone. Every session is killed when this turn ends."
}

// Gate: approval applies to starting the process (exec_command), not to
// each write: the person approved that command line with its stdin open
// to the agent, and a write cannot reach anything the command could not.
func (writeStdin) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

// Unavailable: as exec_command.
func (writeStdin) Unavailable(env *Env) string { return execCommand{}.Unavailable(env) }

func (t writeStdin) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	var s *proc
	if env.Procs != nil {
		s = env.Procs.get(a.SessionID)
	}
	if s == nil {
		return badArg("session_id", "there is no command session %d in this turn (sessions end with their command, and with the turn)", a.SessionID), nil
	}
	if len(a.Chars) > 64<<10 {
		return badArg("chars", "is %d bytes; write at most 64 KiB per call", len(a.Chars)), nil
	}
	facts := map[string]any{"chars_bytes": len(a.Chars)}
	if a.Chars != "" {
		if s.ended() {
			facts["write_error"] = "the command had ended"
		} else {
			s.stdinW.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := s.stdinW.WriteString(a.Chars); err != nil {
				// The command closed its stdin or stopped reading: said in
				// the result; its output and end are still reported.
				facts["write_error"] = "the command does not read its standard input: " + errText(err)
			}
		}
	}
	yield := writeDefaultYield
	if a.YieldTimeMS > 0 {
		yield = time.Duration(a.YieldTimeMS) * time.Millisecond
	}
	s.wait(ctx, yield, call.Output)
	r, err := env.Procs.report(ctx, env, s, facts)
	if r != nil {
		if we, ok := facts["write_error"]; ok {
			if m, ok := r.Value.(map[string]any); ok {
				m["write_error"] = we
			}
		}
	}
	return r, err
}

func errText(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err.Error()
	}
	return err.Error()
}
