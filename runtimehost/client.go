package runtimehost

// desk as the client of an ACP agent: the agent's fs/* and terminal/*
// requests (wire.Client), answered through the session's guest file
// system and sandbox, never through host paths. (A full-access child,
// which runs on the host, names host paths; guestOf maps each back to
// the guest path behind it before anything is decided.)
//
// The view is the child's own: the session's guest mounts (/workspace,
// /artifacts with its read-only immutable/, /context, declared host
// paths), without the runtime's state directory (it may hold
// credentials, and an agent reads its own state itself). Writes keep to
// desk's write boundary through fsjail.Jail.Writable (read-only mounts,
// /artifacts/immutable and every path outside a mount are refused), and a
// file under /artifacts is written through the artifact service so it is
// a durable artifact with a row and revisions. Writes are not gated by a
// desk approval: the child itself runs with the same mounts writable, so
// an fs/write_text_file reaches nothing the agent could not write anyway;
// an ACP agent asks with session/request_permission before acting, and
// those requests are desk approvals.
//
// Terminals run in the session's sandbox like exec_command (the same
// mounts, network per the workspace, the workspace's command limits), one
// sandboxed command per terminal with its output kept up to the agent's
// outputByteLimit (the newest bytes, as ACP asks). Every terminal is
// killed with its process tree when the turn that created it ends, when
// the agent releases it, and when the child stops.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/runtimehost/wire"
	"github.com/desk-runtime/desk/sandbox"
)

// Bounds of the client's answers.
const (
	// MaxTextFile bounds a file fs/read_text_file reads and one
	// fs/write_text_file writes.
	MaxTextFile = 16 << 20
	// MaxTerminals is how many terminals may run at once for one child.
	MaxTerminals = 8
	// DefaultTerminalOutput is the output a terminal keeps when the agent
	// gives no outputByteLimit; MaxTerminalOutput caps what it may ask.
	DefaultTerminalOutput = 1 << 20
	MaxTerminalOutput     = 16 << 20
	// terminalTimeout bounds a terminal's command like exec_command's
	// longest timeout; the turn's end kills it sooner.
	terminalTimeout = 30 * time.Minute
)

// guestClient is one child's wire.Client.
type guestClient struct {
	h       *Host
	x       *desk.Session
	jail    *fsjail.Jail
	mounts  []sandbox.Mount
	runner  sandbox.Runner // nil: no terminals (no sandbox on this desk)
	direct  bool
	network bool
	limits  sandbox.Limits
	cwd     string

	ctx    context.Context // ends when the child stops
	cancel context.CancelFunc

	mu    sync.Mutex
	exe   *desk.Execution // the running turn's, nil between turns
	terms map[*terminal]bool
}

func (h *Host) newClient(x *desk.Session, st *desk.AgentSettings, jail *fsjail.Jail, mounts []sandbox.Mount, direct bool) *guestClient {
	runner := h.o.Commands
	if direct {
		runner = sandbox.Direct() // full-access: commands run on the host, as exec_command's do
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &guestClient{h: h, x: x, jail: jail, mounts: mounts, runner: runner, direct: direct, network: st.Network,
		limits: sandbox.Limits(st.Sandbox), cwd: guestCwd, ctx: ctx, cancel: cancel, terms: map[*terminal]bool{}}
}

// begin and end bracket a turn: what the client writes is the turn's, and
// the turn's end kills every terminal still running.
func (g *guestClient) begin(t *execution.Turn) {
	g.mu.Lock()
	g.exe = t.Execution
	g.mu.Unlock()
}

func (g *guestClient) end() {
	g.mu.Lock()
	g.exe = nil
	ts := make([]*terminal, 0, len(g.terms))
	for t := range g.terms {
		ts = append(ts, t)
	}
	g.mu.Unlock()
	for _, t := range ts {
		t.Release()
	}
}

// close kills every terminal and frees the jail; the child is gone.
func (g *guestClient) close() {
	g.end()
	g.cancel()
	g.jail.Close()
}

// actx is the context the artifact service sees: the session's actor
// (as an agent), stamped with the running turn.
func (g *guestClient) actx(ctx context.Context) context.Context {
	x := g.x
	ctx = desk.WithPrincipal(ctx, desk.Principal{WorkspaceID: x.WorkspaceID, ActorID: x.Actor, ActorKind: desk.ActorAgent})
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: x.Actor, Kind: desk.OriginAgent}
	g.mu.Lock()
	if g.exe != nil {
		o.ExecutionID, o.SurfaceID = g.exe.ID, g.exe.SurfaceID
	}
	g.mu.Unlock()
	return desk.WithOrigin(ctx, o)
}

// indexArtifacts gives rows to the files the turn left in the session's
// artifact directory without going through fs/write_text_file: what the
// child wrote itself and what its terminals wrote. ctx carries the turn's
// origin. A failure is logged: the files stay, and the next command or
// the collector indexes them.
func (g *guestClient) indexArtifacts(ctx context.Context) {
	if g.h.o.Paths == nil {
		return
	}
	if _, err := g.h.o.Paths.IndexNew(ctx, g.x.ID); err != nil {
		g.h.o.Logger.Warn("index the runtime's artifacts", "session", g.x.ID, "err", err)
	}
}

// fsErr maps a guest file system error onto the wire's kinds; messages
// name guest paths only (fsjail's never carry host paths).
func fsErr(err error) error {
	switch desk.ErrorCode(err) {
	case desk.ENOTFOUND:
		return fmt.Errorf("%w: %s", wire.ErrNotFound, desk.ErrorMessage(err))
	case desk.EFORBIDDEN, desk.EINVALID, desk.ECONFLICT, desk.ETOOLARGE, desk.ENOSPACE:
		return fmt.Errorf("%w: %s", wire.ErrRefused, desk.ErrorMessage(err))
	}
	return err
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", wire.ErrRefused, fmt.Sprintf(format, args...))
}

// hostOf is the host path behind a guest path of the mounts (the guest
// path itself when no mount holds it).
func hostOf(mounts []sandbox.Mount, guest string) string {
	best, host := -1, guest
	for _, m := range mounts {
		if rel, ok := within(guest, m.Guest); ok && len(m.Guest) > best {
			best, host = len(m.Guest), filepath.Join(m.Host, filepath.FromSlash(rel))
		}
	}
	return host
}

// within reports whether p is dir or lies under it, and the rest of p.
func within(p, dir string) (string, bool) {
	if p == dir {
		return "", true
	}
	rest, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/")
	return rest, ok
}

// guestOf is the clean guest path an agent's path names. A sandboxed
// child sees the guest file system, so it names guest paths. A
// full-access child runs on the host (in the directory behind
// /workspace), so it names host paths: one under a mount's host directory
// is mapped back to the guest path behind it (the longest mount wins, as
// in the sandbox). Anything else is taken as a guest path, so a host path
// outside every mount names nothing and the jail refuses it; either way
// the jail decides what may be read or written.
func (g *guestClient) guestOf(p string) (string, error) {
	if g.direct && filepath.IsAbs(p) {
		hp := filepath.Clean(p)
		best, guest := -1, ""
		for _, m := range g.mounts {
			if rel, ok := within(hp, filepath.Clean(m.Host)); ok && len(m.Host) > best {
				best, guest = len(m.Host), path.Join(m.Guest, filepath.ToSlash(rel))
			}
		}
		if best >= 0 {
			p = guest
		}
	}
	return fsjail.Clean(p)
}

// ReadTextFile reads a text file of the guest file system; line is
// 1-based (0: from the start), limit a number of lines (0: all).
func (g *guestClient) ReadTextFile(_ context.Context, guest string, line, limit int) (string, error) {
	if line < 0 || limit < 0 {
		return "", refused("line and limit must not be negative")
	}
	clean, err := g.guestOf(guest)
	if err != nil {
		return "", fsErr(err)
	}
	st, err := g.jail.Stat(clean)
	if err != nil {
		return "", fsErr(err)
	}
	if st.Type != fsjail.TypeFile {
		return "", refused("%s is not a regular file", clean)
	}
	if st.Size > MaxTextFile {
		return "", refused("%s is %d bytes; desk reads text files of at most %d bytes", clean, st.Size, MaxTextFile)
	}
	f, err := g.jail.Open(clean)
	if err != nil {
		return "", fsErr(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxTextFile+1))
	if err != nil {
		return "", fsErr(err)
	}
	if len(b) > MaxTextFile {
		return "", refused("%s is larger than %d bytes", clean, MaxTextFile)
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", refused("%s is not a text file", clean)
	}
	if line <= 1 && limit == 0 {
		return string(b), nil
	}
	lines := strings.SplitAfter(string(b), "\n")
	start := max(line-1, 0)
	if start >= len(lines) {
		return "", nil
	}
	end := len(lines)
	if limit > 0 && start+limit < end {
		end = start + limit
	}
	return strings.Join(lines[start:end], ""), nil
}

// WriteTextFile writes a whole file inside the write boundary.
func (g *guestClient) WriteTextFile(ctx context.Context, guest, content string) error {
	if len(content) > MaxTextFile {
		return refused("content is %d bytes; one write is at most %d", len(content), MaxTextFile)
	}
	clean, err := g.guestOf(guest)
	if err != nil {
		return fsErr(err)
	}
	r, root, err := g.jail.Writable(clean)
	if err != nil {
		return fsErr(err)
	}
	if rel, ok := strings.CutPrefix(clean, "/artifacts/"); ok {
		if g.h.o.Paths == nil {
			return refused("artifacts cannot be written on this desk (no artifact service)")
		}
		_, _, err := g.h.o.Paths.PutPath(g.actx(ctx), g.x.ID, rel, desk.ArtifactPathPut{Body: strings.NewReader(content), Size: int64(len(content))})
		if err != nil {
			return fsErr(err)
		}
		return nil
	}
	f, err := atomicfile.Create(root, r.Rel)
	if err != nil {
		return fsErr(err)
	}
	defer f.Abort()
	if _, err := io.WriteString(f, content); err != nil {
		return err
	}
	return f.Commit()
}

// Terminal starts a command in the session's sandbox.
func (g *guestClient) Terminal(_ context.Context, req wire.TerminalRequest) (wire.Terminal, error) {
	if g.runner == nil {
		return nil, refused("no sandbox is available on this desk (install bubblewrap); terminals cannot run")
	}
	if strings.TrimSpace(req.Command) == "" {
		return nil, refused("the command is empty")
	}
	limit := req.OutputByteLimit
	switch {
	case limit < 0:
		return nil, refused("outputByteLimit must not be negative")
	case limit == 0:
		limit = DefaultTerminalOutput
	case limit > MaxTerminalOutput:
		limit = MaxTerminalOutput
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = g.cwd
	}
	clean, err := g.guestOf(cwd)
	if err != nil {
		return nil, fsErr(err)
	}
	st, err := g.jail.Stat(clean)
	if err != nil {
		return nil, fsErr(err)
	}
	if st.Type != fsjail.TypeDir {
		return nil, refused("cwd %s is not a directory", clean)
	}
	// A declared host path swapped since its declaration is refused before
	// anything runs; the sandbox binds the descriptors it checked itself.
	if err := g.jail.CheckPinned(); err != nil {
		return nil, fsErr(err)
	}
	env := map[string]string{}
	for _, kv := range req.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, refused("environment variable %q is not NAME=value", kv)
		}
		env[k] = v
	}
	// With arguments the command is a program; without, a shell command
	// line (what agents send for "run this").
	line := req.Command
	if len(req.Args) > 0 {
		parts := []string{shellQuote(req.Command)}
		for _, a := range req.Args {
			parts = append(parts, shellQuote(a))
		}
		line = strings.Join(parts, " ")
	}
	spec := sandbox.Spec{Mounts: g.mounts, Cwd: clean, Command: line, Env: env, Network: g.network,
		Timeout: terminalTimeout, MaxOutput: 4 << 10, Limits: g.limits}

	g.mu.Lock()
	if len(g.terms) >= MaxTerminals {
		g.mu.Unlock()
		return nil, refused("%d terminals are running already, the most one agent may hold; release one first", len(g.terms))
	}
	ctx, cancel := context.WithCancel(g.ctx)
	t := &terminal{g: g, limit: limit, cancel: cancel, done: make(chan struct{})}
	g.terms[t] = true
	g.mu.Unlock()
	go t.run(ctx, spec)
	return t, nil
}

// terminal is one command run for the agent.
type terminal struct {
	g      *guestClient
	limit  int
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	out       []byte
	truncated bool
	exit      *wire.ExitStatus
}

func (t *terminal) run(ctx context.Context, spec sandbox.Spec) {
	res, err := t.g.runner.Run(ctx, spec, func(_ string, chunk []byte) { t.add(chunk) })
	t.mu.Lock()
	switch {
	case err != nil:
		// The sandbox refused or failed to set up: said in the output, with
		// the shell's "cannot execute" status.
		t.appendLocked([]byte("desk: " + errMessage(err) + "\n"))
		code := 126
		t.exit = &wire.ExitStatus{Code: &code}
	case (res.Interrupted || res.TimedOut) && res.ExitCode > 128:
		t.exit = &wire.ExitStatus{Signal: signalName(res.ExitCode - 128)}
	default:
		code := res.ExitCode
		t.exit = &wire.ExitStatus{Code: &code}
	}
	t.mu.Unlock()
	close(t.done)
}

func errMessage(err error) string {
	var d *sandbox.Denied
	if errors.As(err, &d) {
		return "sandbox denied: " + d.Reason
	}
	if m := desk.ErrorMessage(err); m != "" {
		return m
	}
	return err.Error()
}

func (t *terminal) add(chunk []byte) {
	t.mu.Lock()
	t.appendLocked(chunk)
	t.mu.Unlock()
}

// appendLocked keeps the newest limit bytes, cut at a character
// boundary (ACP truncates from the beginning).
func (t *terminal) appendLocked(b []byte) {
	t.out = append(t.out, b...)
	if len(t.out) <= t.limit {
		return
	}
	cut := len(t.out) - t.limit
	for cut < len(t.out) && !utf8.RuneStart(t.out[cut]) {
		cut++
	}
	t.out = append([]byte(nil), t.out[cut:]...)
	t.truncated = true
}

func (t *terminal) Output() (string, bool, *wire.ExitStatus) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := strings.ToValidUTF8(string(t.out), "\uFFFD")
	if t.exit == nil {
		return out, t.truncated, nil
	}
	e := *t.exit
	return out, t.truncated, &e
}

func (t *terminal) Wait(ctx context.Context) (wire.ExitStatus, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return wire.ExitStatus{}, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return *t.exit, nil
}

// Kill ends the command with its whole process tree; its output stays.
func (t *terminal) Kill() error {
	t.cancel()
	<-t.done
	return nil
}

// Release kills the command if it runs and forgets the terminal
// (idempotent).
func (t *terminal) Release() error {
	t.Kill()
	t.g.mu.Lock()
	delete(t.g.terms, t)
	t.g.mu.Unlock()
	return nil
}

var signalNames = map[int]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 6: "SIGABRT", 9: "SIGKILL", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM", 24: "SIGXCPU"}

func signalName(n int) string {
	if s, ok := signalNames[n]; ok {
		return s
	}
	return syscall.Signal(n).String()
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var _ wire.Client = (*guestClient)(nil)
