package runtimehost_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/runtimehost/wire"
	"github.com/desk-runtime/desk/store/sqlite"
)

// double is a transport that speaks a one-line handshake over the real
// child's stdio (the child is /bin/cat, which echoes it) and scripts the
// rest, recording what the host asked of it.
type double struct {
	mu      sync.Mutex
	opens   []string
	prompts []string
	cannot  bool // Open of a stored id fails with ErrCannotLoad
	hang    bool // Prompt ignores Cancel until its ctx ends
	// opening, when set, is told when Open starts, and Open then waits
	// for hold to close.
	opening chan struct{}
	hold    chan struct{}
	// closeHold, when set, makes Close wait for it to close: a protocol
	// close that waits for its child to end by itself.
	closeHold chan struct{}
}

func (d *double) Args(string) []string { return nil }

func (d *double) Attach(ctx context.Context, s wire.Stdio, o wire.Options) (wire.Conn, error) {
	return &dconn{d: d, s: s, r: bufio.NewReader(s.Stdout), cancel: make(chan struct{}, 1)}, nil
}

type dconn struct {
	d      *double
	s      wire.Stdio
	r      *bufio.Reader
	cancel chan struct{}
}

func (c *dconn) Open(ctx context.Context, native string) (string, error) {
	c.d.mu.Lock()
	c.d.opens = append(c.d.opens, native)
	c.d.mu.Unlock()
	if c.d.opening != nil {
		c.d.opening <- struct{}{}
		<-c.d.hold
	}
	if _, err := c.s.Stdin.Write([]byte("hello\n")); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", errors.New("the runtime closed stdout before answering")
	}
	if line != "hello\n" {
		return "", errors.New("garbage on stdout: " + strings.TrimSpace(line))
	}
	if native != "" && c.d.cannot {
		return "", errors.Join(wire.ErrCannotLoad, errors.New("no such thread"))
	}
	return native, nil
}

func (c *dconn) Prompt(ctx context.Context, text string, s wire.Sink) (wire.Result, error) {
	c.d.mu.Lock()
	c.d.prompts = append(c.d.prompts, text)
	c.d.mu.Unlock()
	s.NativeID("thread-1")
	s.Tool(wire.ToolEvent{ID: "t1", Kind: wire.ToolCommand, Title: "ls", Status: wire.ToolInProgress, Input: []byte(`{"command":"ls"}`)})
	s.Tool(wire.ToolEvent{ID: "t1", Status: wire.ToolCompleted, Output: "a\nb\n"})
	s.Text("you said ")
	s.Text(text)
	if c.d.hang {
		<-ctx.Done()
		return wire.Result{}, ctx.Err()
	}
	select {
	case <-c.cancel:
		return wire.Result{StopReason: wire.StopCancelled}, nil
	default:
	}
	return wire.Result{StopReason: wire.StopEndTurn}, nil
}

func (c *dconn) Cancel(context.Context) error {
	select {
	case c.cancel <- struct{}{}:
	default:
	}
	return nil
}
func (c *dconn) Close() error {
	if c.d.closeHold != nil {
		<-c.d.closeHold
	}
	return nil
}

type fixture struct {
	store desk.Store
	home  layout.Home
	sess  *desk.Session
	d     *double
}

func setup(t *testing.T, argv ...string) *fixture {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.OpenWith(ctx, filepath.Join(dir, "desk.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	home := layout.Home{Root: dir}
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	a := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	must(t, st.CreateWorkspace(ctx, w, a, true))
	set, err := st.GetAgentSettings(ctx, w.ID)
	must(t, err)
	set.ApprovalMode = desk.ApprovalModeFullAccess // the direct spawner: no bwrap needed here
	must(t, st.SetAgentSettings(ctx, w.ID, set))
	must(t, st.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: argv, CreatedAt: now}))
	x := &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: a.ID,
		Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now, Runtime: "dbl"}
	must(t, st.CreateSession(ctx, x))
	must(t, os.MkdirAll(home.Abs(w.ID, layout.CheckoutDir), 0o755))
	must(t, os.MkdirAll(home.Abs(w.ID, layout.SessionRel(a.ID, x.ID)), 0o755))
	return &fixture{store: st, home: home, sess: x, d: &double{}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) host() *runtimehost.Host {
	return runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: 300 * time.Millisecond,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: f.d}})
}

type emitted struct {
	mu    sync.Mutex
	types []string
}

func (f *fixture) turn(e *emitted, text string) *execution.Turn {
	x, _ := f.store.GetSession(context.Background(), f.sess.ID)
	return &execution.Turn{Session: x, Execution: &desk.Execution{ID: desk.NewID("exe"), SurfaceID: x.SurfaceID},
		Item: &desk.QueueItem{Text: text}, Started: func() error { return nil }, Closing: func() bool { return false },
		Emit: func(typ string, data any) { e.mu.Lock(); e.types = append(e.types, typ); e.mu.Unlock() }}
}

func TestContinuationMappingAndRestart(t *testing.T) {
	f := setup(t, "/bin/cat")
	h := f.host()
	ctx := context.Background()
	e := &emitted{}
	out, err := h.Execute(ctx, f.turn(e, "one"))
	must(t, err)
	if out.Reply != "you said one" {
		t.Fatalf("reply %q", out.Reply)
	}
	x, _ := f.store.GetSession(ctx, f.sess.ID)
	if x.NativeID != "thread-1" {
		t.Fatalf("native id %q not recorded", x.NativeID)
	}
	if !strings.Contains(strings.Join(e.types, ","), "assistant.delta") || !strings.Contains(strings.Join(e.types, ","), "tool.call_started") {
		t.Fatalf("events %v", e.types)
	}
	if _, err := h.Execute(ctx, f.turn(e, "two")); err != nil {
		t.Fatal(err)
	}
	if len(f.d.opens) != 1 || h.Running() != 1 {
		t.Fatalf("second turn reopened (opens %v) or children %d", f.d.opens, h.Running())
	}
	must(t, h.Close(ctx))
	if h.Running() != 0 {
		t.Fatal("children left after Close")
	}
	// A new host (a restarted desk) reopens exactly the stored id.
	h2 := f.host()
	defer h2.Close(ctx)
	if _, err := h2.Execute(ctx, f.turn(e, "three")); err != nil {
		t.Fatal(err)
	}
	if len(f.d.opens) != 2 || f.d.opens[1] != "thread-1" {
		t.Fatalf("opens %v, want a reopen of thread-1", f.d.opens)
	}
}

func TestCannotLoadFailsWithGuidance(t *testing.T) {
	f := setup(t, "/bin/cat")
	ctx := context.Background()
	must(t, f.store.SetSessionNativeID(ctx, f.sess.ID, "gone"))
	f.d.cannot = true
	h := f.host()
	defer h.Close(ctx)
	_, err := h.Execute(ctx, f.turn(&emitted{}, "hi"))
	if err == nil || !strings.Contains(err.Error(), "cannot reopen") || !strings.Contains(err.Error(), "never starts a new conversation") {
		t.Fatalf("err %v", err)
	}
	if len(f.d.prompts) != 0 || h.Running() != 0 {
		t.Fatalf("prompted %v / children %d after a failed reopen", f.d.prompts, h.Running())
	}
	x, _ := f.store.GetSession(ctx, f.sess.ID)
	if x.NativeID != "gone" {
		t.Fatalf("native id changed to %q", x.NativeID)
	}
}

func TestChildThatExitsOrPrintsGarbage(t *testing.T) {
	for name, argv := range map[string][]string{
		"exits":   {"/bin/sh", "-c", "echo boom-on-stderr >&2; exit 3"},
		"garbage": {"/bin/sh", "-c", "echo not-the-protocol; sleep 30"},
	} {
		t.Run(name, func(t *testing.T) {
			f := setup(t, argv...)
			ctx := context.Background()
			h := f.host()
			defer h.Close(ctx)
			_, err := h.Execute(ctx, f.turn(&emitted{}, "hi"))
			want := map[string]string{"exits": "boom-on-stderr", "garbage": "not-the-protocol"}[name]
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v, want it to name %q", err, want)
			}
			if h.Running() != 0 {
				t.Fatal("a child is left running")
			}
		})
	}
}

func TestInterruptKillsAHungTurn(t *testing.T) {
	f := setup(t, "/bin/cat")
	f.d.hang = true
	h := f.host()
	defer h.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := h.Execute(ctx, f.turn(&emitted{}, "hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the interrupt took %v", d)
	}
	if h.Running() != 0 {
		t.Fatal("the hung child was not killed")
	}
}
