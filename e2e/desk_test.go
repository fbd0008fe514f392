package e2e

// The one way these tests build and start desk: TestMain builds the binary
// once per test process; deskCmd runs one command line of it, startDesk
// starts a server and returns once it answers /healthz.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
)

// deskBin is the desk binary TestMain built for this test process.
var deskBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "desk-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		deskBin = filepath.Join(dir, "desk")
		args := []string{"build", "-o", deskBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		build := exec.Command("go", append(args, "github.com/desk-runtime/desk/cmd/desk")...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: building desk:", err)
			return 1
		}
		statSources()
		return m.Run()
	}()
	os.Exit(code)
}

// statSources stats every Go source and module file of the module, so that
// go test's result cache, which knows nothing of the go build above,
// counts them among this package's inputs: a change to cmd/desk or
// anything it imports reruns these tests.
func statSources() {
	root, err := filepath.Abs("..")
	if err != nil {
		return
	}
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if e.IsDir() {
			if n := e.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if n := e.Name(); strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum" {
			os.Stat(p)
		}
		return nil
	})
}

// Exit statuses of the desk command line (docs/troubleshooting.md, "Exit
// statuses"): the contract scripts rely on, restated here on purpose.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInvalid     = 3
	exitAuth        = 4
	exitNotFound    = 5
	exitConflict    = 6
	exitUnavailable = 7
	exitTurnFailed  = 8
	exitInterrupted = 9
	exitWaiting     = 10
	exitTooLarge    = 11
	exitRefused     = 12

	// desk status keeps the LSB init-script statuses.
	statusRunning = 0
	statusStale   = 1
	statusStopped = 3
)

// Files desk keeps in DESK_HOME about its running server, and the
// variable that lets several servers share a home.
const (
	pidFileName   = "desk.pid"
	urlFileName   = "desk.url"
	logFileName   = "desk.log"
	sharedHomeEnv = "DESK_SHARED_HOME"
)

// managedMarkers are the variables by which desk recognises a managed AI
// execution environment (cmd/desk/lifecycle.go).
var managedMarkers = []string{"CODEX_THREAD_ID", "CODEX_CI", "CODEX_SANDBOX", "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "GEMINI_CLI", "DESK_MANAGED_ENV"}

// cleanEnv is this process's environment without any managed-environment
// marker and without the variables that point the CLI at a server, so the
// "own terminal" case is tested even when the tests run under an AI agent,
// plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		managed := name == "DESK_FOREGROUND" || name == "DESK_TOKEN" || name == "DESK_SERVER" || name == "DESK_ADDR"
		for _, m := range managedMarkers {
			managed = managed || name == m
		}
		if !managed {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// deskCmd is the desk command line with args in the environment env (see
// cleanEnv), not yet started; ctx ending kills it.
func deskCmd(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, deskBin, args...)
	cmd.Env = env
	return cmd
}

// run runs the desk command line to completion and returns its combined
// output and exit status.
func run(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	out, err := deskCmd(t.Context(), env, args...).CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// deskOpts says how to start a desk server.
type deskOpts struct {
	Home  string   // DESK_HOME; "" for a new temporary one
	Env   []string // added to cleanEnv's environment
	Token string   // DESK_ADMIN_TOKEN; "" for the one desk generates into admin.token
	Args  []string // more flags of desk serve
}

// Desk is a running `desk serve` on 127.0.0.1:0.
type Desk struct {
	t     *testing.T
	opts  deskOpts
	Home  string
	URL   string   // http://127.0.0.1:port
	Addr  string   // 127.0.0.1:port
	Token string   // the admin token
	Env   []string // the environment for the CLI: cleanEnv with DESK_HOME (and DESK_TOKEN for a Token given)

	cmd     *exec.Cmd
	done    chan struct{} // closed once the process exited and its output is read
	waitErr error
	stdout  safeBuffer
	stderr  lineLog
}

var servingURL = regexp.MustCompile(`url=(http://[0-9.:]+)`)

// startDesk starts `desk serve --addr 127.0.0.1:0`; it returns once the
// server logged its address and answers /healthz, and kills it when the
// test ends. A failing test shows the end of desk's log.
func startDesk(t *testing.T, opts deskOpts) *Desk {
	t.Helper()
	if opts.Home == "" {
		opts.Home = filepath.Join(t.TempDir(), "home")
	}
	d := &Desk{t: t, opts: opts, Home: opts.Home, Token: opts.Token, Env: cleanEnv("DESK_HOME=" + opts.Home), done: make(chan struct{})}
	env := append(cleanEnv("DESK_HOME="+opts.Home), opts.Env...)
	if opts.Token != "" {
		env = append(env, "DESK_ADMIN_TOKEN="+opts.Token)
		// No admin.token file then: the CLI gets the token from here.
		d.Env = append(d.Env, "DESK_TOKEN="+opts.Token)
	}
	d.cmd = deskCmd(context.Background(), env, append([]string{"serve", "--addr", "127.0.0.1:0"}, opts.Args...)...)
	d.cmd.Stdout = &d.stdout
	d.stderr.url = make(chan string, 1)
	d.cmd.Stderr = &d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.waitErr = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("desk's log (pid %d, last lines):\n%s", d.Pid(), d.stderr.tail(200))
		}
	})
	select {
	case u := <-d.stderr.url:
		d.URL = u
	case <-d.done:
		t.Fatalf("desk serve exited (%v) before serving:\n%s", d.waitErr, d.stderr.tail(200))
	case <-time.After(90 * time.Second):
		t.Fatalf("desk serve did not start:\n%s", d.stderr.tail(200))
	}
	d.Addr = strings.TrimPrefix(d.URL, "http://")
	testwait.Until(t, 30*time.Second, func() bool { return healthy(d.URL) }, "desk at "+d.URL+" to answer /healthz")
	if d.Token == "" {
		tok, err := os.ReadFile(filepath.Join(d.Home, "admin.token"))
		if err != nil {
			t.Fatalf("desk serves without DESK_ADMIN_TOKEN but wrote no admin.token: %v", err)
		}
		d.Token = strings.TrimSpace(string(tok))
	}
	return d
}

// Pid is the server's process id.
func (d *Desk) Pid() int { return d.cmd.Process.Pid }

// Exit sends sig and waits for the process to exit, returning its exit
// error (nil: a clean exit).
func (d *Desk) Exit(sig os.Signal) error {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		d.t.Fatal(err)
	}
	select {
	case <-d.done:
		return d.waitErr
	case <-time.After(60 * time.Second):
		d.t.Fatalf("desk (pid %d) did not exit on %v", d.Pid(), sig)
	}
	return nil
}

// Stop ends the server with SIGTERM and fails the test unless it exits
// cleanly.
func (d *Desk) Stop() {
	d.t.Helper()
	if err := d.Exit(syscall.SIGTERM); err != nil {
		d.t.Fatalf("desk did not exit cleanly on SIGTERM: %v\n%s", err, d.stderr.tail(50))
	}
}

// Kill ends the server with SIGKILL (a crash) and waits for it to exit.
func (d *Desk) Kill() {
	d.t.Helper()
	d.Exit(syscall.SIGKILL)
}

// End ends the server with sig and waits for it to exit: SIGTERM is a
// clean stop (Stop), any other signal a crash.
func (d *Desk) End(sig syscall.Signal) {
	d.t.Helper()
	if sig == syscall.SIGTERM {
		d.Stop()
		return
	}
	d.Exit(sig)
}

// Restart ends the server with sig (End), waits for it to exit, and starts
// a new one on the same home with the same options.
func (d *Desk) Restart(sig syscall.Signal) *Desk {
	d.t.Helper()
	d.End(sig)
	return d.Again()
}

// Again starts another server with this one's options and home, beside
// it or after it.
func (d *Desk) Again() *Desk {
	d.t.Helper()
	return startDesk(d.t, d.opts)
}

// Log is what the server wrote to stderr (its log) so far; complete once
// the process exited.
func (d *Desk) Log() string { return d.stderr.tail(0) }

// StartLog is the server's log up to the line saying it serves.
func (d *Desk) StartLog() []string {
	d.stderr.mu.Lock()
	defer d.stderr.mu.Unlock()
	return d.stderr.before
}

// Stdout is what the server wrote to stdout so far.
func (d *Desk) Stdout() string { return d.stdout.String() }

// lineLog keeps a process's stderr and announces the serving address.
type lineLog struct {
	mu      sync.Mutex
	partial []byte
	lines   []string
	before  []string // the lines up to the serving address
	url     chan string
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		l.lines = append(l.lines, line)
		if len(l.lines) > 5000 { // bounded: a busy server logs a lot
			l.lines = l.lines[len(l.lines)-4000:]
		}
		if m := servingURL.FindStringSubmatch(line); m != nil && l.url != nil {
			l.url <- m[1]
			l.url = nil
			l.before = append([]string(nil), l.lines...)
		}
	}
	return len(p), nil
}

// tail is the last n lines (all for n <= 0).
func (l *lineLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := l.lines
	if n > 0 && len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, "\n")
	if len(l.partial) > 0 {
		s += "\n" + string(l.partial)
	}
	return s
}

// safeBuffer is a bytes.Buffer a child process writes while a test reads.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// healthy reports whether a desk answers 200 at url/healthz.
func healthy(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url + "/healthz")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// runState is what desk's files in a home say about its server, read as
// desk status reads them: running (alive and answering), stale, stopped.
type runState struct {
	State string
	PID   int
	URL   string
}

func readRunState(home string) runState {
	b, err := os.ReadFile(filepath.Join(home, pidFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return runState{State: "stopped"}
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil || pid <= 0 {
		return runState{State: "stale"}
	}
	u, _ := os.ReadFile(filepath.Join(home, urlFileName))
	st := runState{State: "stale", PID: pid, URL: strings.TrimSpace(string(u))}
	if alive(pid) && st.URL != "" && healthy(st.URL) {
		st.State = "running"
	}
	return st
}

// alive reports whether a process exists (EPERM still means it exists).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// reap kills whatever server a test left behind in home.
func reap(t *testing.T, home string) {
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(home, pidFileName)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
}

// get is a GET with an optional bearer token: status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// foreground is a desk command line that runs a server in the foreground
// (DESK_FOREGROUND=1 desk start), started by startForeground.
type foreground struct {
	cmd  *exec.Cmd
	out  safeBuffer
	done chan struct{}
	err  error
}

func startForeground(t *testing.T, env []string, args ...string) *foreground {
	t.Helper()
	f := &foreground{cmd: deskCmd(context.Background(), env, args...), done: make(chan struct{})}
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.out
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.err = f.cmd.Wait(); close(f.done) }()
	t.Cleanup(func() { f.cmd.Process.Kill(); <-f.done })
	return f
}

// running waits until desk's files in home describe this process as a
// running, answering server.
func (f *foreground) running(t *testing.T, home string) {
	t.Helper()
	exited := false
	testwait.Until(t, 60*time.Second, func() bool {
		select {
		case <-f.done:
			exited = true
			return true
		default:
		}
		st := readRunState(home)
		return st.State == "running" && st.PID == f.cmd.Process.Pid
	}, "the foreground server to run and answer")
	if exited {
		t.Fatalf("foreground start exited (%v): %s", f.err, f.out.String())
	}
}

// wait waits for the process to exit and returns its exit error.
func (f *foreground) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-f.done:
		return f.err
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not exit: %s", f.cmd.Args, f.out.String())
	}
	return nil
}
