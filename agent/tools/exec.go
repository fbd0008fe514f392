package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/session"
)

// Command limits.
const (
	// execDefaultTimeout applies when the call gives none; the schema
	// bounds timeout_seconds to 1..1800 (30 minutes).
	execDefaultTimeout = 2 * time.Minute
	// execKeep is the output kept in the command record and shown to the
	// model, per stream; a command that writes more gets its output kept
	// as an artifact, up to the sandbox's output limit (Limits.OutputBytes,
	// at which the command is stopped; the rest is counted and dropped).
	execKeep = 64 << 10
)

// limits are the sandbox bounds of a command in the workspace: its agent
// settings, each zero field the sandbox's default.
func limits(env *Env) sandbox.Limits {
	if env.Settings == nil {
		return sandbox.Limits{}
	}
	return sandbox.Limits(env.Settings.Sandbox)
}

type execCommandArgs struct {
	Command        string `json:"command" jsonschema_description:"the shell command line, run with sh -c"`
	Cwd            string `json:"cwd,omitempty" jsonschema_description:"guest working directory; default the workspace's primary root, else /scratch"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"minimum=1,maximum=1800" jsonschema_description:"kill the command after this many seconds; default 120"`
	YieldTimeMS    int    `json:"yield_time_ms,omitempty" jsonschema:"minimum=1,maximum=30000" jsonschema_description:"return after at most this many milliseconds (earlier once output came and then paused, or the command ended) with the output so far and a session_id while the command keeps running; continue it with write_stdin. Without it the command runs to its end with empty stdin"`
}

type execCommand struct{ args[execCommandArgs] }

func (execCommand) Name() string { return "exec_command" }
func (execCommand) Description() string {
	return "Run a shell command in a sandbox that sees only the guest file system (/artifacts, /context, /scratch, /workspace, declared host paths). Network is off unless the workspace allows it. Working directory: cwd if given, else the workspace's primary root, else /scratch. Files the command writes under /artifacts become artifacts. $DESK_ARTIFACTS, $DESK_SCRATCH and $DESK_WORKSPACE name those directories; use them in commands, because a full-access workspace runs commands on the host without a sandbox, where the guest paths do not exist. May need approval."
}

// Gate: every valid command needs approval in the user mode; a call its
// schema refuses needs none, because Run refuses it before anything runs.
func (t execCommand) Gate(_ *Env, raw json.RawMessage) (bool, string) {
	a, bad, err := t.decode(raw)
	if bad != nil || err != nil {
		return false, ""
	}
	s := a.Command
	if a.Cwd != "" {
		s = "(in " + a.Cwd + ") " + s
	}
	return true, s
}

func (t execCommand) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if strings.TrimSpace(a.Command) == "" {
		return badArg("command", "is empty"), nil
	}
	timeout := execDefaultTimeout
	if a.TimeoutSeconds != 0 { // in 1..1800: the schema refused anything else
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	if a.YieldTimeMS > 0 {
		return startSession(ctx, env, call, a.Command, a.Cwd, timeout, time.Duration(a.YieldTimeMS)*time.Millisecond)
	}
	return runCommand(ctx, env, call, a.Command, a.Cwd, timeout)
}

// commandRun is a command ready to run: its runner and Spec, and what
// its result reports.
type commandRun struct {
	runner   sandbox.Runner
	spec     sandbox.Spec
	direct   bool
	hostDirs map[string]string
}

// prepareCommand chooses the runner of a command and builds its Spec; a
// non-nil Result is a mistake the model can fix. Shared by exec_command,
// its long-running sessions and execute_typescript, so they run under the
// same sandbox with the same bounds.
func prepareCommand(env *Env, command, guestCwd string, timeout time.Duration) (*commandRun, *Result, error) {
	runner := env.Sandbox
	direct := env.Settings != nil && env.Settings.ApprovalMode == desk.ApprovalModeFullAccess
	if direct {
		runner = sandbox.Direct() // full-access: no gate, no sandbox (documented)
	}
	if runner == nil {
		return nil, Fail(CodeNotConfigured, "no sandbox is available on this desk (install bubblewrap); commands cannot run"), nil
	}
	cwd, err := session.WorkDir(env.Jail, env.Workspace, env.View, guestCwd)
	if err != nil {
		r, err := fsResult(err, guestCwd)
		return nil, r, err
	}
	// A declared host path swapped since its declaration is refused here,
	// before anything runs (Direct, too, uses the mounts by path). The
	// sandbox opens every mount again itself and binds the descriptor it
	// checked (fsjail.OpenDir), so a swap after this check changes nothing.
	if err := env.Jail.CheckPinned(); err != nil {
		r, err := fsResult(err, guestCwd)
		return nil, r, err
	}
	// A session bound to a worktree also gets its checkout's .git, where
	// the worktree's git directory is (session.GitMounts).
	mounts, err := sandbox.FromJail(append(env.Jail.Mounts(), session.GitMounts(env.Home, env.Session, env.Settings != nil && env.Settings.GitWritable)...))
	if err != nil {
		return nil, nil, err
	}
	vars, hostDirs := guestVars(mounts, direct)
	maps.Copy(vars, identityVars(env)) // DESK_SESSION_ID, DESK_SIGNATURE, DESK_WORKSPACE_ID (identity.go)
	return &commandRun{runner: runner, direct: direct, hostDirs: hostDirs, spec: sandbox.Spec{Mounts: mounts, Cwd: cwd, Command: command,
		Network: env.Settings != nil && env.Settings.Network, Env: vars, Timeout: timeout, MaxOutput: execKeep, Limits: limits(env)}}, nil, nil
}

// runError turns an error of Runner.Run into a result the model can act
// on (a denial, a bad Spec), or returns it as a machine failure.
func runError(err error, command, cwd string) (*Result, error) {
	var denied *sandbox.Denied
	if errors.As(err, &denied) {
		// Reported as a denial; never retried without the sandbox.
		r := Fail(CodeSandboxDenied, "the sandbox refused to run the command: %s", denied.Reason)
		r.Facts = map[string]any{"command": command, "cwd": cwd, "sandbox_denied": true, "reason": denied.Reason}
		return r, nil
	}
	switch desk.ErrorCode(err) {
	case desk.EINVALID, desk.ENOTFOUND: // ENOTFOUND: a mount's directory vanished meanwhile
		return Fail(CodeBadInput, "%s", desk.ErrorMessage(err)), nil
	case desk.EFORBIDDEN:
		// A mount the sandbox refused to bind: a host path swapped
		// after the check above, a directory replaced by a link.
		return fsResult(err, cwd)
	}
	return nil, err
}

// markDenial records a finished command's failure that is the sandbox's
// doing: a failed command with the limit or path named; never retried
// without the sandbox.
func markDenial(out *Result, v, facts map[string]any, d *sandbox.Denial) {
	if d == nil {
		return
	}
	facts["sandbox_denied"] = true
	facts["reason"] = d.Reason
	if d.Limit != "" {
		facts["limit"] = d.Limit
	}
	if d.Path != "" {
		facts["path"] = d.Path
	}
	v["sandbox_denied"] = true
	v["error"] = map[string]string{"code": CodeSandboxDenied, "message": d.Reason}
	out.Code, out.Message = CodeSandboxDenied, d.Reason
}

// runCommand runs one command to its end.
func runCommand(ctx context.Context, env *Env, call *Call, command, guestCwd string, timeout time.Duration) (*Result, error) {
	if err := materialize(ctx, env); err != nil {
		return nil, err
	}
	cr, bad, err := prepareCommand(env, command, guestCwd, timeout)
	if bad != nil || err != nil {
		return bad, err
	}
	return runPrepared(ctx, env, call, cr)
}

// runPrepared runs a prepared command to its end: exec_command's and
// execute_typescript's one path through the sandbox, its limits, its
// denials and its output caps.
func runPrepared(ctx context.Context, env *Env, call *Call, cr *commandRun) (*Result, error) {
	command, cwd, direct := cr.spec.Command, cr.spec.Cwd, cr.direct
	spill := &spillWriter{dir: env.Home.Abs(env.Session.WorkspaceID, layout.ScratchRel(env.Execution.ID))}
	defer spill.close()
	res, err := cr.runner.Run(ctx, cr.spec, func(stream string, chunk []byte) {
		spill.write(stream, chunk)
		if call.Output != nil {
			call.Output(stream, chunk)
		}
	})
	if err != nil {
		return runError(err, command, cwd)
	}
	if res.Interrupted && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	facts := map[string]any{"command": command, "cwd": cwd, "exit_code": res.ExitCode, "duration_ms": res.Duration.Milliseconds(),
		"timed_out": res.TimedOut, "stdout_bytes": res.StdoutBytes, "stderr_bytes": res.StderrBytes}
	v := map[string]any{"exit_code": res.ExitCode, "stdout": res.Stdout, "stderr": res.Stderr, "timed_out": res.TimedOut,
		"truncated": res.StdoutTruncated || res.StderrTruncated}
	facts["sandboxed"] = !direct
	if direct {
		// Said plainly to the model too: what it ran touched the host.
		v["sandboxed"] = false
		v["host_dirs"] = cr.hostDirs
		v["note"] = "full-access: this command ran on the host without a sandbox; the guest directories are at the host paths in host_dirs ($DESK_ARTIFACTS, $DESK_SCRATCH, $DESK_WORKSPACE)"
	}
	lim, _ := sandbox.WithDefaults(limits(env))
	if total := res.StdoutBytes + res.StderrBytes; total > lim.OutputBytes {
		dropped := total - lim.OutputBytes
		facts["output_dropped_bytes"] = dropped
		v["note"] = fmt.Sprintf("the command wrote %d bytes; the first %d were kept (see full_output), %d were counted and dropped", total, lim.OutputBytes, dropped)
	}
	out := &Result{Value: v, Facts: facts, Output: joinOutput(res.Stdout, res.Stderr)}
	markDenial(out, v, facts, res.Denial)
	// Files the command left in /artifacts become artifacts of the session.
	made, err := indexNew(ctx, env)
	if err != nil {
		return nil, err
	}
	// Big outputs are kept as an artifact, up to the output limit.
	if res.StdoutTruncated || res.StderrTruncated {
		if art, err := spill.keep(ctx, env, call.CommandID); err == nil && art != nil {
			made = append(made, art.ID)
			v["full_output"] = art.Path
		}
	}
	if len(made) > 0 {
		v["artifacts"] = made
		facts["artifacts"] = len(made)
	}
	out.Artifacts = made
	return out, nil
}

// guestDirs are the guest directories a command finds through variables.
var guestDirs = map[string]string{"DESK_ARTIFACTS": "/artifacts", "DESK_SCRATCH": "/scratch", "DESK_WORKSPACE": "/workspace"}

// guestVars are the variables naming the guest directories: their guest
// paths inside the sandbox, their host paths for a command that runs on
// the host (full-access), where the guest paths mean nothing. hostDirs
// maps guest to host path in the latter case.
func guestVars(mounts []sandbox.Mount, direct bool) (vars, hostDirs map[string]string) {
	vars = map[string]string{}
	if direct {
		hostDirs = map[string]string{}
	}
	for name, guest := range guestDirs {
		for _, m := range mounts {
			if m.Guest != guest {
				continue
			}
			vars[name] = guest
			if direct {
				vars[name] = m.Host
				hostDirs[guest] = m.Host
			}
		}
	}
	return vars, hostDirs
}

func joinOutput(stdout, stderr string) string {
	if stderr == "" {
		return stdout
	}
	if stdout == "" {
		return stderr
	}
	return stdout + "\n" + stderr
}

// materialize fetches into this node's working copy the artifacts it
// lacks (kept by another node, or lost with this node's disk), before the
// command's mounts are prepared.
func materialize(ctx context.Context, env *Env) error {
	if env.Paths == nil {
		return nil
	}
	return env.Paths.Materialize(ctx, env.Session.ID)
}

// indexNew gives rows to the files the command left in /artifacts and
// returns their ids.
func indexNew(ctx context.Context, env *Env) ([]string, error) {
	if env.Paths == nil {
		return nil, nil
	}
	arts, err := env.Paths.IndexNew(ctx, env.Session.ID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, a := range arts {
		ids = append(ids, a.ID)
	}
	return ids, nil
}

// spillWriter keeps a command's whole output in a scratch file once it
// grows past what the record keeps.
type spillWriter struct {
	mu    sync.Mutex
	dir   string
	f     *os.File
	total int
}

func (s *spillWriter) write(stream string, chunk []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += len(chunk)
	if s.f == nil {
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return
		}
		f, err := os.CreateTemp(s.dir, "output-*.txt")
		if err != nil {
			return
		}
		s.f = f
	}
	s.f.Write(chunk)
}

func (s *spillWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f != nil {
		s.f.Close()
		os.Remove(s.f.Name())
		s.f = nil
	}
}

// keep stores the whole output as the artifact output-<command>.txt.
func (s *spillWriter) keep(ctx context.Context, env *Env, commandID string) (*desk.Artifact, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil, nil
	}
	if _, err := s.f.Seek(0, 0); err != nil {
		return nil, err
	}
	st, err := s.f.Stat()
	if err != nil {
		return nil, err
	}
	a, _, err := env.Paths.PutPath(ctx, env.Session.ID, path.Join("outputs", "output-"+commandID+".txt"),
		desk.ArtifactPathPut{Body: s.f, Size: st.Size(), MediaType: "text/plain"})
	return a, err
}
