// Package runtimehost owns running a desk session's turns on an external
// agent runtime (Codex app-server, Claude Code stream-json, any ACP
// agent): the operator's registry of runtimes (Registry) and the Host, an
// execution.Executor that supervises one child per live session inside
// the session's sandbox and maps what the runtime reports onto desk's
// records. The protocols themselves are transports behind
// runtimehost/wire; the host picks one by the runtime's protocol and
// never branches on a runtime's name.
package runtimehost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/conversation"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/gateway"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/runtimehost/wire"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/session"
)

// Defaults of Options' zero values.
const (
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultCancelGrace is how long a cancelled turn has to stop after
	// the protocol's cancel before the child's process tree is killed.
	DefaultCancelGrace = 2 * time.Second
	// DefaultGatewayFailAfter leaves a turn whose model calls fail (an
	// unreachable provider) failed within 30 s of its first failure,
	// whatever the runtime's own retries would do.
	DefaultGatewayFailAfter = 15 * time.Second
)

// Guest paths of a runtime's child.
const (
	GuestState = "/runtime-home" // the runtime's durable state directory: its HOME
	guestCwd   = "/workspace"
)

// Options are the host's collaborators.
type Options struct {
	Store Store
	Home  layout.Home
	// Transports maps a protocol to the transport speaking it.
	Transports map[wire.Protocol]wire.Transport
	// Spawner starts children in the sandbox; Direct starts them on the
	// host for full-access workspaces. A nil Spawner leaves only
	// full-access workspaces able to run a runtime.
	Spawner sandbox.Spawner
	Direct  sandbox.Spawner
	// Commands runs the terminals an ACP agent asks for (client.go) in
	// the session's sandbox; nil: none outside full-access workspaces.
	Commands sandbox.Runner
	// Paths writes the files an agent writes under /artifacts as
	// artifacts (client.go).
	Paths   desk.ArtifactPaths
	Archive *archive.Archive
	// Conversation is the gate a runtime's permission requests wait on a
	// person through, shared with the tool-loop agent and the doors. nil:
	// the host makes its own over Store and Archive.
	Conversation *conversation.Service
	Logger       *slog.Logger
	// LookupEnv reads the values of a runtime's passed-through variables
	// (os.LookupEnv when nil).
	LookupEnv   func(string) (string, bool)
	IdleTimeout time.Duration
	CancelGrace time.Duration
	// MaxLineBytes bounds one line of a child's stdout (a protocol
	// message); a longer one fails the turn naming the limit and stops
	// the child. 0 is wire.DefaultMaxLine (16 MiB). ACP agents are held
	// to at most 10 MiB, the ACP SDK's own bound.
	MaxLineBytes int
	// Gateway serves the children's model calls (gateway.go); nil: a
	// child gets no model endpoint (tests of the protocols alone).
	Gateway *gateway.Gateway
	// Bridge is the program that bridges a sandboxed child without
	// network to its endpoint (any binary linking package gateway; desk's
	// own executable when empty).
	Bridge string
	// GatewayFailAfter is how long a child's model calls may keep failing,
	// with nothing else from the child, before its turn is failed with the
	// gateway's reason (DefaultGatewayFailAfter when zero).
	GatewayFailAfter time.Duration
}

// Host is the runtime executor. Open/Close: Close stops every child.
type Host struct {
	o      Options
	bridge string

	mu       sync.Mutex
	children map[string]*child // session id → live child
	closed   bool
	// stops counts StopSession and StopWorkspace calls: a child started
	// while one ran is kept only if its session is still live after it.
	stops int
	wg    sync.WaitGroup
}

// New returns a host.
func New(o Options) *Host {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = DefaultCancelGrace
	}
	if o.Direct == nil {
		o.Direct = sandbox.DirectSpawner()
	}
	if o.GatewayFailAfter <= 0 {
		o.GatewayFailAfter = DefaultGatewayFailAfter
	}
	if o.Conversation == nil {
		co := conversation.Options{Logger: o.Logger}
		if o.Archive != nil {
			co.Archive = o.Archive
		}
		o.Conversation = conversation.New(o.Store, co)
	}
	h := &Host{o: o, children: map[string]*child{}, bridge: o.Bridge}
	if h.bridge == "" {
		if exe, err := os.Executable(); err == nil {
			h.bridge, _ = filepath.EvalSymlinks(exe)
		}
	}
	return h
}

func (h *Host) Open(context.Context) error { return nil }

// Close stops every child, all at once, and waits for their supervisors.
// A protocol close may wait for its child to end by itself; when ctx ends
// first, the process trees still there are killed at once and Close
// returns ctx.Err() without waiting further. A later Close (it is
// idempotent) waits for what the first one left running.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	h.closed = true
	cs := h.children
	h.children = map[string]*child{}
	h.mu.Unlock()
	for _, c := range cs {
		h.wg.Go(c.stop)
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	for _, c := range cs {
		c.kill()
	}
	return ctx.Err()
}

// StopSession stops the session's child, if it has one, and waits until
// its process tree is gone (desk.RuntimeChildren): the session is being
// deleted.
func (h *Host) StopSession(ctx context.Context, x *desk.Session) error {
	return h.stopWhere(ctx, func(c *child) bool { return c.sessionID == x.ID })
}

// StopWorkspace stops the children of every session of workspace ws and
// waits until their process trees are gone: the workspace is being
// offboarded, purged or absorbed.
func (h *Host) StopWorkspace(ctx context.Context, ws string) error {
	return h.stopWhere(ctx, func(c *child) bool { return c.workspaceID == ws })
}

// stopWhere stops the children that match, all at once: each gets the
// protocol's close and then its process tree killed (child.stop). A
// protocol close may wait for the child to end by itself (Claude Code's,
// up to 10 s): past CancelGrace, or when ctx ends, the process trees
// still there are killed at once. It returns when every matching process
// is gone.
func (h *Host) stopWhere(ctx context.Context, match func(*child) bool) error {
	h.mu.Lock()
	h.stops++
	var cs []*child
	for id, c := range h.children {
		if match(c) {
			cs = append(cs, c)
			delete(h.children, id)
		}
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.stop)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(h.o.CancelGrace)
	defer grace.Stop()
	select {
	case <-done:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	for _, c := range cs {
		c.kill()
	}
	<-done
	return nil
}

// live refuses a child for a session that is being deleted, or whose
// workspace no longer takes work, since it was started.
func (h *Host) live(ctx context.Context, id string) error {
	x, err := h.o.Store.GetSession(ctx, id)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return desk.Errorf(desk.ECONFLICT, "session %s is being deleted", id)
	}
	if err != nil {
		return err
	}
	if x.Deleting {
		return desk.Errorf(desk.ECONFLICT, "session %s is being deleted", id)
	}
	w, err := h.o.Store.GetWorkspace(ctx, x.WorkspaceID)
	if err != nil {
		return err
	}
	if w.State != desk.WorkspaceActive {
		return desk.Errorf(desk.ECONFLICT, "workspace %s is %s", w.ID, w.State)
	}
	return nil
}

// Running reports how many children are alive (tests and the UI).
func (h *Host) Running() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.children)
}

// RecoverTurn settles the records of a runtime turn whose desk process
// died (execution.Resumer). It never continues: the child died with that
// process, so the execution is interrupted, everything it left open is
// closed, and the next turn reopens the native conversation from its id.
func (h *Host) RecoverTurn(ctx context.Context, x *desk.Execution, _ bool) (bool, error) {
	return false, h.o.Conversation.SettleDeadTurn(ctx, x)
}

var _ execution.Resumer = (*Host)(nil)

// Available tells whether a runtime-backed session can take work: its
// runtime is registered and desk speaks its protocol.
func (h *Host) Available(ctx context.Context, s *desk.Session) error {
	rt, err := h.o.Store.GetRuntime(ctx, s.Runtime)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return errNotRegistered(s.Runtime)
	}
	if err != nil {
		return err
	}
	if h.o.Transports[wire.Protocol(rt.Protocol)] == nil {
		return desk.Errorf(desk.EUNAVAILABLE, "this desk has no transport for protocol %s (runtime %s)", rt.Protocol, rt.Name)
	}
	return nil
}

// child is one runtime process of one session.
type child struct {
	sessionID   string
	workspaceID string
	runtime     string
	proc        *sandbox.Process
	conn        wire.Conn
	client      *guestClient
	native      string
	stderr      *tail
	gw          *gateway.Endpoint // nil without a gateway
	exited      chan struct{}     // closed when the process is gone
	exitErr     error
	idle        *time.Timer
	busy        bool
	stopOnce    sync.Once
}

// kill ends the child's process tree now, unless it has already exited,
// without waiting for a protocol close that stop may be in.
func (c *child) kill() {
	select {
	case <-c.exited:
	default:
		c.proc.Kill()
	}
}

func (c *child) stop() {
	c.stopOnce.Do(func() {
		c.conn.Close()
		c.proc.Stdin.Close()
		c.proc.Kill()
	})
	<-c.exited
	c.proc.Close()
	c.client.close()
	if c.gw != nil {
		c.gw.Close()
	}
}

// why describes how the child ended, with the end of its stderr.
func (c *child) why() string {
	msg := "the runtime's process exited"
	if c.exitErr != nil {
		msg += " (" + c.exitErr.Error() + ")"
	}
	if s := strings.TrimSpace(c.stderr.String()); s != "" {
		msg += "; its stderr ends: " + s
	}
	return msg
}

// tail keeps the last bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2048 {
		t.buf = t.buf[len(t.buf)-2048:]
	}
	t.mu.Unlock()
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// StateDir is the host directory of a runtime-backed session's durable
// state (its child's HOME): one per session, so no other session's child,
// of the same actor or another, ever sees the conversations and config
// kept there. It lies under the workspace's .system directory, outside
// every actor's file area, so neither the file API nor exports nor
// absorb carry it (it may hold the runtime's credentials); it moves with
// an offboarding and goes when the session is deleted or the workspace
// purged.
func StateDir(home layout.Home, x *desk.Session) string {
	return home.Abs(x.WorkspaceID, layout.RuntimeStateRel(x.ID))
}

// Execute runs one turn on the session's runtime.
func (h *Host) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	x := t.Session
	rt, err := h.o.Store.GetRuntime(ctx, x.Runtime)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, errNotRegistered(x.Runtime)
	}
	if err != nil {
		return nil, err
	}
	tr := h.o.Transports[wire.Protocol(rt.Protocol)]
	if tr == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "this desk has no transport for protocol %s (runtime %s)", rt.Protocol, rt.Name)
	}
	w, err := h.o.Store.GetWorkspace(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	settings, err := h.o.Store.GetAgentSettings(ctx, x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	// The stored session is the truth for the native id (another turn
	// may have recorded it since the turn's copy was read).
	cur, err := h.o.Store.GetSession(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	gt := gateway.Turn{WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: t.Execution.SurfaceID, ExecutionID: t.Execution.ID, ActorID: x.Actor, Runtime: rt.Name}
	c, err := h.acquire(ctx, rt, tr, w, settings, cur, gt)
	if err != nil {
		return nil, err
	}
	defer h.release(c)
	if c.gw != nil {
		c.gw.SetTurn(gt)
	}
	if err := t.Started(); err != nil {
		return nil, err
	}
	if h.o.Paths != nil {
		// The runtime reads /artifacts from this node's working copy.
		// As the session's actor, as its turn acts (the artifact service
		// checks who asks).
		actx := desk.WithPrincipal(ctx, desk.Principal{WorkspaceID: x.WorkspaceID, ActorID: x.Actor, ActorKind: desk.ActorAgent})
		if err := h.o.Paths.Materialize(actx, c.client.x.ID); err != nil {
			return nil, err
		}
	}
	c.client.begin(t)
	// Files the runtime left under /artifacts (its own writes, its
	// terminals') become artifacts of the turn once the turn and its
	// terminals are over: the deferred calls run end first.
	defer c.client.indexArtifacts(context.WithoutCancel(c.client.actx(ctx)))
	defer c.client.end()
	s := &sink{h: h, t: t, c: c, settings: settings, waits: h.o.Conversation.Gate(t, conversation.GateOptions{})}
	s.touch()
	begun := time.Now()
	if err := s.userMessage(ctx); err != nil {
		return nil, err
	}
	defer s.assistantMessage()
	type result struct {
		res wire.Result
		err error
	}
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	done := make(chan result, 1)
	go func() {
		r, err := c.conn.Prompt(pctx, t.Item.Text, s)
		done <- result{r, err}
	}()
	// gatewayWhy adds what the gateway saw go wrong in this turn to a
	// failure: the runtime's own words rarely name the provider.
	gatewayWhy := func() string {
		if c.gw == nil {
			return ""
		}
		if why, ok := c.gw.FailedSince(begun); ok {
			return "; desk's model gateway: " + why
		}
		return ""
	}
	// stop ends the turn: the protocol's cancel first, then the process
	// tree if the turn does not stop in time.
	stop := func() {
		cctx, ccancel := context.WithTimeout(context.Background(), h.o.CancelGrace)
		defer ccancel()
		_ = c.conn.Cancel(cctx)
		select {
		case <-done:
			if e, ok := c.conn.(wire.EndsAfterCancel); ok && e.EndsAfterCancel() {
				c.proc.Kill()
				h.drop(c)
			}
		case <-cctx.Done():
			h.o.Logger.Warn("runtime did not stop its turn in time; killing its process tree", "runtime", rt.Name, "session", x.ID)
			pcancel()
			h.drop(c)
			<-done
		}
	}
	// The watchdog: a child whose model calls keep failing (an
	// unreachable or refusing provider) and that reports nothing else may
	// retry for minutes; its turn fails with the gateway's reason instead.
	var watch <-chan time.Time
	if c.gw != nil {
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		watch = tk.C
	}
	var r result
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-c.exited:
			pcancel()
			r = <-done
			return nil, fmt.Errorf("runtime %s: %s%s", rt.Name, c.why(), gatewayWhy())
		case <-ctx.Done():
			stop()
			// The prompt returned (stop waits for it): the text it
			// streamed is complete up to the interrupt, and kept.
			s.stopped = true
			if part := s.text.String(); part != "" {
				return &execution.Outcome{Reply: part}, ctx.Err()
			}
			return nil, ctx.Err()
		case now := <-watch:
			since, why, ok := c.gw.Failing()
			if !ok {
				continue
			}
			from := since
			for _, t := range []time.Time{begun, s.lastEvent()} {
				if t.After(from) {
					from = t
				}
			}
			if now.Sub(from) < h.o.GatewayFailAfter {
				continue
			}
			h.o.Logger.Warn("runtime's model calls keep failing; failing its turn", "runtime", rt.Name, "session", x.ID, "reason", why)
			stop()
			// The child may be retrying still: a new one serves the
			// next turn.
			h.drop(c)
			return nil, desk.Errorf(desk.EUNAVAILABLE, "runtime %s: its model calls failed for %s: desk's model gateway: %s", rt.Name, now.Sub(since).Round(time.Second), why)
		}
	}
	if r.err != nil {
		if errors.Is(r.err, wire.ErrCannotLoad) {
			h.drop(c)
			return nil, cannotLoad(rt, c.native, r.err)
		}
		select {
		case <-c.exited:
			return nil, fmt.Errorf("runtime %s: %v; %s%s", rt.Name, r.err, c.why(), gatewayWhy())
		default:
		}
		h.drop(c)
		return nil, fmt.Errorf("runtime %s: %w%s", rt.Name, r.err, gatewayWhy())
	}
	reply := r.res.Reply
	if reply == "" {
		reply = s.text.String()
	}
	switch r.res.StopReason {
	case wire.StopFailed:
		return nil, fmt.Errorf("runtime %s failed the turn: %s%s", rt.Name, r.res.Error, gatewayWhy())
	case wire.StopCancelled:
		return nil, fmt.Errorf("runtime %s cancelled the turn by itself", rt.Name)
	}
	s.reply = reply
	return &execution.Outcome{Reply: reply}, nil
}

func cannotLoad(rt *desk.Runtime, native string, err error) error {
	return desk.Errorf(desk.ECONFLICT, "runtime %s cannot reopen this session's conversation %s (%v). desk never starts a new conversation under an existing session: "+
		"restore the runtime's state directory if it was lost, or start a new session to begin afresh", rt.Name, native, err)
}

// acquire returns the session's live child, starting (and opening its
// native conversation) when there is none.
func (h *Host) acquire(ctx context.Context, rt *desk.Runtime, tr wire.Transport, w *desk.Workspace, st *desk.AgentSettings, x *desk.Session, gt gateway.Turn) (*child, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, desk.Errorf(desk.EUNAVAILABLE, "desk is shutting down")
	}
	if c := h.children[x.ID]; c != nil {
		select {
		case <-c.exited:
			delete(h.children, x.ID)
			go c.stop() // frees its pipes; it is already gone
		default:
			c.busy = true
			c.idle.Stop()
			h.mu.Unlock()
			return c, nil
		}
	}
	gen := h.stops
	h.mu.Unlock()
	c, err := h.start(ctx, rt, tr, w, st, x, gt)
	if err != nil {
		return nil, err
	}
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			go c.stop()
			return nil, desk.Errorf(desk.EUNAVAILABLE, "desk is shutting down")
		}
		if h.stops == gen {
			c.busy = true
			h.children[x.ID] = c
			h.mu.Unlock()
			return c, nil
		}
		// A stop ran while the child started: it could not see this
		// child, so the child is kept only if its session still is.
		gen = h.stops
		h.mu.Unlock()
		if err := h.live(ctx, x.ID); err != nil {
			c.stop()
			return nil, err
		}
	}
}

// release marks the child idle and arms its idle timeout.
func (h *Host) release(c *child) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.busy = false
	if h.children[c.sessionID] == c {
		c.idle.Reset(h.o.IdleTimeout)
	}
}

// drop stops a child and forgets it.
func (h *Host) drop(c *child) {
	h.mu.Lock()
	if h.children[c.sessionID] == c {
		delete(h.children, c.sessionID)
	}
	h.mu.Unlock()
	c.stop()
}

func (h *Host) start(ctx context.Context, rt *desk.Runtime, tr wire.Transport, w *desk.Workspace, st *desk.AgentSettings, x *desk.Session, gt gateway.Turn) (*child, error) {
	// Checked again here, not only at registration: a registration older
	// than the check, or a DESK_HOME moved since, must not bind it.
	if err := CheckInstall(rt.Argv[0], h.o.Home); err != nil {
		return nil, fmt.Errorf("runtime %s is not started: %w; register it again from another directory", rt.Name, err)
	}
	state := StateDir(h.o.Home, x)
	for _, d := range []string{state, filepath.Join(state, "codex"), filepath.Join(state, "claude")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runtime state directory: %w", err)
		}
	}
	fm := session.Mounts(h.o.Home, session.View{Session: x, HostPaths: w.HostPaths, GitWritable: st.GitWritable})
	// A session bound to a git worktree also needs the checkout's .git at
	// its host path for git to work in /workspace (as commands get it);
	// the fs/* client's jail keeps to the guest mounts.
	mounts, err := sandbox.FromJail(append(append([]fsjail.Mount{}, fm...), session.GitMounts(h.o.Home, x, st.GitWritable)...))
	if err != nil {
		return nil, err
	}
	jail, err := fsjail.New(fm)
	if err != nil {
		return nil, err
	}
	sp, guestHome := h.o.Spawner, GuestState
	direct := st.ApprovalMode == desk.ApprovalModeFullAccess
	if direct {
		sp, guestHome = h.o.Direct, state
	}
	if sp == nil {
		jail.Close()
		return nil, desk.Errorf(desk.EUNAVAILABLE, "no sandbox is available on this desk (install bubblewrap); runtime %s runs only in full-access workspaces without one", rt.Name)
	}
	client := h.newClient(x, st, jail, mounts, direct)
	// A sandboxed child lives in the guest file system and starts in
	// /workspace. A full-access child runs on the host, in the directory
	// behind /workspace, and is told that directory: a guest path would
	// name nothing there. Its fs/* and terminal paths are host paths then,
	// which the client maps back through the mounts (guestClient.guestOf).
	cwd := guestCwd
	if direct {
		cwd = hostOf(mounts, guestCwd)
	}
	mounts = append(mounts, sandbox.Mount{Guest: GuestState, Host: state, Writable: true})
	env := map[string]string{"HOME": guestHome, "CODEX_HOME": guestHome + "/codex", "CLAUDE_CONFIG_DIR": guestHome + "/claude", "TERM": "dumb"}
	// The child knows whose it is, as desk's own commands do
	// (DESK_SESSION_ID, DESK_SIGNATURE, DESK_WORKSPACE_ID): it names, it
	// grants nothing. Copied after the registration's variables, so a
	// registration passing desk's own DESK_SESSION_ID cannot name another
	// session.
	identity := desk.IdentityOf(x, "").Vars()
	log := h.o.Logger.With("runtime", rt.Name, "session", x.ID)
	for _, name := range rt.Env {
		if why, refused := gateway.Refused(name); refused {
			// A registration from before the gateway: the name is
			// dropped, never its value passed.
			log.Warn("runtime registration passes "+name+"; not given to the child", "reason", why)
			continue
		}
		if v, ok := h.o.LookupEnv(name); ok {
			env[name] = v
		}
	}
	maps.Copy(env, identity)
	argv := append(append([]string{}, rt.Argv...), tr.Args(x.NativeID)...)
	readOnly := installRoot(rt.Argv[0])
	ep, gwEnv, err := h.endpoint(gt, direct || st.Network)
	if err != nil {
		client.close()
		return nil, fmt.Errorf("start runtime %s: %w", rt.Name, err)
	}
	if ep != nil {
		maps.Copy(env, gwEnv)
		url := gwEnv["DESK_GATEWAY_URL"]
		for i := 1; i < len(argv); i++ {
			argv[i] = strings.ReplaceAll(argv[i], "${DESK_GATEWAY_URL}", url)
		}
		if ga, ok := tr.(wire.GatewayArgs); ok {
			argv = append(argv, ga.GatewayArgs(url)...)
		}
		if ep.SocketDir() != "" {
			// No network: the endpoint's socket is bound into the
			// sandbox and the bridge, the sandbox's program, serves it
			// on the child's loopback.
			mounts = append(mounts, sandbox.Mount{Guest: gateway.GuestSocketDir, Host: ep.SocketDir()})
			argv = gateway.BridgeArgv(h.bridge, argv)
			readOnly = append(readOnly, h.bridge)
		}
	}
	proc, err := sp.Spawn(ctx, sandbox.SpawnSpec{Mounts: mounts, Cwd: guestCwd, Argv: argv, ReadOnly: readOnly, Env: env, Network: st.Network,
		Limits: sandbox.Limits(st.Sandbox)})
	if err != nil {
		client.close()
		if ep != nil {
			ep.Close()
		}
		return nil, fmt.Errorf("start runtime %s: %w", rt.Name, err)
	}
	c := &child{sessionID: x.ID, workspaceID: x.WorkspaceID, runtime: rt.Name, proc: proc, client: client, gw: ep, native: x.NativeID, stderr: &tail{}, exited: make(chan struct{})}
	c.idle = time.AfterFunc(time.Hour, func() {
		h.mu.Lock()
		idle := !c.busy && h.children[c.sessionID] == c
		if idle {
			delete(h.children, c.sessionID)
		}
		h.mu.Unlock()
		if idle {
			log.Info("runtime idle; stopping its process")
			c.stop()
		}
	})
	c.idle.Stop()
	h.wg.Add(2)
	stderrDone := make(chan struct{})
	go func() { // stderr: to the log, and its end kept for error messages
		defer h.wg.Done()
		defer close(stderrDone)
		drain(proc.Stderr, c.stderr, log)
	}()
	go func() {
		defer h.wg.Done()
		c.exitErr = proc.Wait()
		proc.Kill() // whatever it left in its group
		<-stderrDone
		close(c.exited)
	}()
	conn, err := tr.Attach(ctx, wire.Stdio{Stdin: proc.Stdin, Stdout: proc.Stdout}, wire.Options{Cwd: cwd, Client: client, Log: log, MaxLine: h.o.MaxLineBytes})
	if err != nil {
		proc.Stdin.Close()
		proc.Kill()
		<-c.exited
		proc.Close()
		client.close()
		if ep != nil {
			ep.Close()
		}
		return nil, fmt.Errorf("runtime %s: %v; %s", rt.Name, err, c.why())
	}
	c.conn = conn
	native, err := conn.Open(ctx, x.NativeID)
	if err != nil {
		c.stop()
		if errors.Is(err, wire.ErrCannotLoad) {
			return nil, cannotLoad(rt, x.NativeID, err)
		}
		return nil, fmt.Errorf("runtime %s: %v; %s", rt.Name, err, c.why())
	}
	if native != "" && x.NativeID != "" && native != x.NativeID {
		c.stop()
		return nil, desk.Errorf(desk.ECONFLICT, "runtime %s reopened conversation %s instead of this session's %s; the turn is refused", rt.Name, native, x.NativeID)
	}
	if native != "" && x.NativeID == "" {
		if err := h.o.Store.SetSessionNativeID(ctx, x.ID, native); err != nil {
			c.stop()
			return nil, err
		}
		c.native = native
	}
	return c, nil
}

// endpoint makes a child's model endpoint and the variables that point
// the child at it: on the host's loopback for a child sharing the host's
// network, else a socket bridged into the sandbox to GuestPort.
func (h *Host) endpoint(gt gateway.Turn, hostNet bool) (*gateway.Endpoint, map[string]string, error) {
	if h.o.Gateway == nil {
		return nil, nil, nil
	}
	if hostNet {
		ep, err := h.o.Gateway.NewEndpoint(gt, gateway.HostLoopback)
		if err != nil {
			return nil, nil, err
		}
		return ep, ep.Env(ep.Addr()), nil
	}
	if h.bridge == "" {
		return nil, nil, desk.Errorf(desk.EUNAVAILABLE, "desk cannot find its own executable to bridge the runtime's model calls out of its sandbox")
	}
	ep, err := h.o.Gateway.NewEndpoint(gt, gateway.UnixSocket)
	if err != nil {
		return nil, nil, err
	}
	return ep, ep.Env(fmt.Sprintf("127.0.0.1:%d", gateway.GuestPort)), nil
}

// installRoot is what the sandbox binds read-only for a program: its
// directory, or for a program inside a node_modules tree the outermost
// node_modules (a Node package needs its dependencies).
func installRoot(bin string) []string {
	dir := filepath.Dir(bin)
	root := dir
	for d := dir; d != "/" && d != "."; d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			root = d
		}
	}
	return []string{root}
}

func drain(r io.Reader, keep io.Writer, log *slog.Logger) {
	buf := make([]byte, 4096)
	var line bytes.Buffer
	for {
		n, err := r.Read(buf)
		if n > 0 {
			keep.Write(buf[:n])
			line.Write(buf[:n])
			for {
				i := bytes.IndexByte(line.Bytes(), '\n')
				if i < 0 {
					break
				}
				log.Info("runtime stderr", "line", string(line.Bytes()[:i]))
				line.Next(i + 1)
			}
		}
		if err != nil {
			if line.Len() > 0 {
				log.Info("runtime stderr", "line", line.String())
			}
			return
		}
	}
}

// sink maps one turn's wire events onto desk's records.
type sink struct {
	h        *Host
	t        *execution.Turn
	c        *child
	settings *desk.AgentSettings
	waits    *conversation.Gate // approvals
	text     strings.Builder
	reply    string                   // the turn's final reply, once it ended
	stopped  bool                     // interrupted: the reply is what streamed until then
	cmds     map[string]*desk.Command // runtime tool call id → record
	last     atomic.Int64             // unix nanos of the child's newest event (the watchdog)
}

func (s *sink) touch() { s.last.Store(time.Now().UnixNano()) }

func (s *sink) lastEvent() time.Time { return time.Unix(0, s.last.Load()) }

func (s *sink) log() *slog.Logger { return s.h.o.Logger.With("session", s.t.Session.ID) }

func (s *sink) NativeID(id string) {
	s.touch()
	if id == "" || id == s.c.native {
		return
	}
	if err := s.h.o.Store.SetSessionNativeID(s.t.WriteContext(), s.t.Session.ID, id); err != nil {
		s.log().Warn("record native id", "err", err)
		return
	}
	s.c.native = id
}

func (s *sink) Text(delta string) {
	s.touch()
	s.text.WriteString(delta)
	s.t.Emit("assistant.delta", map[string]any{"text": delta})
}

// Notice records one of the runtime's own warnings or notices as an event
// of its own (runtime.notice), so it never reads as the reply.
func (s *sink) Notice(level, text string) {
	s.touch()
	s.log().Info("runtime notice", "level", level, "text", text)
	s.t.Emit("runtime.notice", map[string]any{"level": level, "text": text, "runtime": s.c.runtime})
}

var toolStatus = map[string]string{
	wire.ToolPending: desk.CommandRequested, wire.ToolInProgress: desk.CommandRunning,
	wire.ToolCompleted: desk.CommandSucceeded, wire.ToolFailed: desk.CommandFailed,
}

// command returns the record of a runtime tool call, creating it.
func (s *sink) command(id, kind, title string, input json.RawMessage) *desk.Command {
	if s.cmds == nil {
		s.cmds = map[string]*desk.Command{}
	}
	if c := s.cmds[id]; c != nil {
		return c
	}
	exe := s.t.Execution
	args := input
	if len(args) == 0 || !json.Valid(args) {
		args, _ = json.Marshal(map[string]string{"title": title})
	}
	tool := kind
	if tool == "" {
		tool = wire.ToolOther
	}
	c := &desk.Command{ID: desk.NewID("cmd"), ExecutionID: exe.ID, SessionID: s.t.Session.ID, SurfaceID: exe.SurfaceID,
		CallID: id, Tool: tool, Arguments: args, Status: desk.CommandRequested, CreatedAt: desk.Now()}
	if err := s.h.o.Store.CreateCommand(s.t.WriteContext(), c); err != nil {
		s.log().Warn("record runtime tool call", "err", err)
	}
	s.cmds[id] = c
	s.t.Emit("tool.call_started", map[string]any{"call_id": id, "tool": tool, "command_id": c.ID, "title": title})
	return c
}

// setArguments gives the command the call's input, and reports whether
// it changed. An agent may announce a call before its input is known
// (claude-code-acp's tool_call carries {}) and send it later, in an
// update or in its permission request: an empty object never replaces
// arguments the record has.
func setArguments(c *desk.Command, input json.RawMessage) bool {
	if len(input) == 0 || !json.Valid(input) || bytes.Equal(input, c.Arguments) {
		return false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(input, &m) == nil && m != nil && len(m) == 0 && len(c.Arguments) > 0 {
		return false
	}
	c.Arguments = input
	return true
}

func (s *sink) Tool(ev wire.ToolEvent) {
	s.touch()
	c := s.command(ev.ID, ev.Kind, ev.Title, ev.Input)
	setArguments(c, ev.Input)
	if st := toolStatus[ev.Status]; st != "" && st != c.Status {
		now := desk.Now()
		if st == desk.CommandRunning && c.StartedAt == nil {
			c.StartedAt = &now
		}
		if st == desk.CommandSucceeded || st == desk.CommandFailed {
			if c.StartedAt == nil {
				c.StartedAt = &now
			}
			c.FinishedAt = &now
		}
		c.Status = st
	}
	if ev.Output != "" {
		if len(ev.Output) > len(c.Output) && strings.HasPrefix(ev.Output, c.Output) {
			s.t.Emit("tool.output", map[string]any{"command_id": c.ID, "text": ev.Output[len(c.Output):]})
		}
		c.Output = ev.Output
	}
	if err := s.h.o.Store.UpdateCommand(s.t.WriteContext(), c); err != nil {
		s.log().Warn("update runtime tool call", "err", err)
	}
}

func (s *sink) Plan(entries []wire.PlanEntry) {
	s.touch()
	steps := make([]string, 0, len(entries))
	for _, e := range entries {
		steps = append(steps, fmt.Sprintf("[%s] %s", e.Status, e.Content))
	}
	card, _ := json.Marshal(map[string]any{"title": "Plan", "steps": steps, "entries": entries})
	exe := s.t.Execution
	p := &desk.Plan{ID: desk.NewID("pln"), SessionID: s.t.Session.ID, ExecutionID: exe.ID, Card: card, Status: desk.PlanApproved, CreatedAt: desk.Now()}
	if err := s.h.o.Store.CreatePlan(s.t.WriteContext(), p); err != nil {
		s.log().Warn("record runtime plan", "err", err)
		return
	}
	s.t.Emit("plan.updated", map[string]any{"plan_id": p.ID})
}

// pick returns the option of the first kind found, in order.
func pick(opts []wire.PermissionOption, kinds ...string) (string, bool) {
	for _, k := range kinds {
		for _, o := range opts {
			if o.Kind == k {
				return o.ID, true
			}
		}
	}
	return "", false
}

// readOnly kinds an auto-review workspace lets a runtime do unasked.
var readOnly = map[string]bool{wire.ToolRead: true, wire.ToolSearch: true}

func (s *sink) Permission(ctx context.Context, req wire.PermissionRequest) (wire.PermissionAnswer, error) {
	s.touch()
	defer s.touch() // a person may take long to answer
	allow := func() (wire.PermissionAnswer, error) {
		if id, ok := pick(req.Options, wire.AllowOnce, wire.AllowAlways); ok {
			return wire.PermissionAnswer{OptionID: id}, nil
		}
		return wire.PermissionAnswer{}, fmt.Errorf("the runtime offered no allow option")
	}
	reject := func() (wire.PermissionAnswer, error) {
		if id, ok := pick(req.Options, wire.RejectOnce, wire.RejectAlways); ok {
			return wire.PermissionAnswer{OptionID: id}, nil
		}
		return wire.PermissionAnswer{Cancelled: true}, nil
	}
	id := req.ToolCallID
	if id == "" {
		id = "permission-" + desk.NewID("p")
	}
	cmd := s.command(id, req.Kind, req.Title, req.Input)
	if setArguments(cmd, req.Input) {
		_ = s.h.o.Store.UpdateCommand(s.t.WriteContext(), cmd)
	}
	rq := readable(req)
	summary := rq.What
	// The approval is the conversation service's gate, the tool-loop
	// agent's own: only the auto-review verdict is the runtime's (it may
	// do reads and searches unasked).
	v, err := s.waits.Decide(ctx, conversation.Approval{Command: cmd, Summary: summary, Request: rq, Mode: s.settings.ApprovalMode,
		Review: func() (bool, string) {
			if readOnly[req.Kind] {
				return true, "auto-review: a read-only action"
			}
			return false, "auto-review: the runtime asked to " + req.Kind + "; only reads and searches are allowed unasked"
		}})
	ok := v.Allowed
	if err != nil {
		if ctx.Err() == nil {
			return wire.PermissionAnswer{}, err
		}
		// The turn was interrupted while a person was asked: the gate
		// withdrew the request, and the call never runs.
		cmd.Status = desk.CommandCancelled
		_ = s.h.o.Store.UpdateCommand(s.t.WriteContext(), cmd)
		return wire.PermissionAnswer{Cancelled: true}, nil
	}
	switch s.settings.ApprovalMode {
	case desk.ApprovalModeFullAccess, desk.ApprovalModeAutoReview:
	default:
		// A person decided: the call no longer waits.
		cmd.Status = desk.CommandRequested
		if !ok {
			cmd.Status = desk.CommandDeclined
		}
		_ = s.h.o.Store.UpdateCommand(s.t.WriteContext(), cmd)
	}
	// The runtime gets the exact option a person chose (its "always"
	// options included); a verdict without one (full-access,
	// auto-review, a deny the runtime offered no option for) its first
	// option of the verdict's kind.
	if v.Option.ID != "" && slices.ContainsFunc(req.Options, func(o wire.PermissionOption) bool { return o.ID == v.Option.ID }) {
		return wire.PermissionAnswer{OptionID: v.Option.ID}, nil
	}
	if ok {
		return allow()
	}
	return reject()
}

// readable is a runtime's permission request as a person reads it:
// what the transport made of it (the command line, the file), and the
// runtime's own options under desk's kinds. Without either it is the
// request's title, never its JSON.
func readable(req wire.PermissionRequest) desk.ApprovalRequest {
	rq := desk.ApprovalRequest{What: req.Command, Diff: req.Diff, Cwd: req.Cwd, Why: req.Reason}
	if rq.What == "" {
		rq.What = req.Path
	}
	if rq.What == "" {
		rq.What = req.Title
	}
	if rq.What == "" {
		rq.What = req.Kind
	}
	for _, o := range req.Options {
		kind := o.Kind
		switch kind {
		case wire.AllowOnce, wire.AllowAlways, wire.RejectOnce, wire.RejectAlways:
		default:
			// An option of a kind desk does not know is offered as a
			// one-off of its direction, never as a standing answer.
			kind = wire.RejectOnce
		}
		label := o.Name
		if label == "" {
			label = o.ID
		}
		rq.Options = append(rq.Options, desk.ApprovalOption{ID: o.ID, Kind: kind, Label: label})
	}
	return rq
}

var _ execution.Executor = (*Host)(nil)
var _ desk.RuntimeChildren = (*Host)(nil)
var _ wire.Sink = (*sink)(nil)
