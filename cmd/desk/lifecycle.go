package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
)

// Files desk keeps in DESK_HOME about the running server. `desk serve`
// writes the pid and URL files once it listens and removes them when it
// stops cleanly; `desk start` sends the server's output to the log file.
const (
	pidFileName = "desk.pid"
	urlFileName = "desk.url"
	logFileName = "desk.log"
	// serveFileName is the configuration the server runs with, as serve
	// resolved it from its flags and environment; it outlives a stop so
	// that desk restart starts the same server, whatever the restarting
	// shell's environment holds.
	serveFileName = "desk.serve.json"
)

// serveConfig is what desk.serve.json holds: serve's flags with the values
// the server ran with (the bound address, not :0; settings that came from
// the environment as flags), never secrets of the environment (provider
// keys, the admin token). A Postgres DSN may hold a password: the file is
// 0600 in DESK_HOME, beside admin.token, and desk status shows the DSN
// without it.
type serveConfig struct {
	Args []string `json:"args"`
	// Store is "sqlite" or "postgres"; Addr the bound address.
	Store string `json:"store"`
	Addr  string `json:"addr"`
	PID   int    `json:"pid"`
}

// writeServeConfig records c in home (atomically: a restart never reads
// half a file).
func writeServeConfig(home string, c serveConfig) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(home, "."+serveFileName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(home, serveFileName))
}

// readServeConfig is the configuration the last server of home recorded;
// ok is false when there is none (a home served before this file existed).
func readServeConfig(home string) (serveConfig, bool, error) {
	var c serveConfig
	b, err := os.ReadFile(filepath.Join(home, serveFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, false, fmt.Errorf("%s is not desk's: %w", filepath.Join(home, serveFileName), err)
	}
	return c, true, nil
}

// redactArgs is serve flags with a --postgres DSN's password left out.
func redactArgs(args []string) []string {
	out := append([]string{}, args...)
	for i, a := range out {
		if v, ok := strings.CutPrefix(a, "--postgres="); ok {
			out[i] = "--postgres=" + redactDSN(v)
		}
	}
	return out
}

// redactDSN is a Postgres DSN without its password, for display.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return "(a DSN that is not a URL)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Exit statuses of `desk status`, as LSB init scripts use them.
const (
	statusRunning = 0
	statusStale   = 1
	statusStopped = 3
)

// managedMarkers are environment variables that say this process runs inside
// a managed AI execution environment, whose processes are reaped when the
// agent's command ends. value "" means "set to anything non-empty".
var managedMarkers = []struct{ name, value, host string }{
	{"CODEX_THREAD_ID", "", "Codex"},
	{"CODEX_CI", "1", "Codex CI"},
	{"CODEX_SANDBOX", "", "the Codex sandbox"},
	{"CLAUDECODE", "1", "Claude Code"},
	{"CLAUDE_CODE_ENTRYPOINT", "", "Claude Code"},
	{"GEMINI_CLI", "1", "Gemini CLI"},
	{"DESK_MANAGED_ENV", "1", "a host that declared itself managed"},
}

// managedEnv reports the first marker found, as "NAME (host)".
func managedEnv(getenv func(string) string) (string, bool) {
	for _, m := range managedMarkers {
		v := getenv(m.name)
		if v != "" && (m.value == "" || v == m.value) {
			return m.name + " is set (" + m.host + ")", true
		}
	}
	return "", false
}

type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

func refuseBackground(cmdName, marker string) error {
	return &refusedError{fmt.Sprintf(`refusing to start desk in the background: this looks like a managed AI execution environment (%s).
A background desk started here would be stopped when this environment ends, so "started" would not be true for long.
Run "desk %s" in your own terminal, or run "desk serve" to keep desk in the foreground here (or DESK_FOREGROUND=1 desk %s).`, marker, cmdName, cmdName)}
}

// runState is what the files in DESK_HOME say about a server.
type runState struct {
	State string `json:"state"` // running, stale or stopped
	PID   int    `json:"pid,omitempty"`
	URL   string `json:"url,omitempty"`
	Why   string `json:"why,omitempty"`
	// Config is the configuration the running server recorded (the
	// Postgres password left out), or the last server's when stopped.
	Config *serveConfig `json:"config,omitempty"`
}

func readRunState(ctx context.Context, home string) runState {
	b, err := os.ReadFile(filepath.Join(home, pidFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return runState{State: "stopped"}
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil || pid <= 0 {
		return runState{State: "stale", Why: "the pid file is unreadable"}
	}
	u, _ := os.ReadFile(filepath.Join(home, urlFileName))
	st := runState{PID: pid, URL: strings.TrimSpace(string(u))}
	if !alive(pid) {
		st.State, st.Why = "stale", fmt.Sprintf("process %d is gone", pid)
		return st
	}
	if st.URL == "" || !healthy(ctx, st.URL, 2*time.Second) {
		st.State, st.Why = "stale", fmt.Sprintf("process %d does not answer at %s", pid, orDash(st.URL))
		return st
	}
	st.State = "running"
	return st
}

// alive reports whether a process exists (EPERM still means it exists).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func healthy(ctx context.Context, url string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url+"/healthz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// writeRunFiles records the serving process; it is called by `desk serve`
// once it listens, so a pid file always names a server that got that far.
func writeRunFiles(home string, pid int, url string) error {
	for name, content := range map[string]string{pidFileName: strconv.Itoa(pid), urlFileName: url} {
		tmp := filepath.Join(home, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(content+"\n"), 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(home, name)); err != nil {
			return err
		}
	}
	return nil
}

// runningURL is the address in DESK_HOME/desk.url when the pid file next
// to it names a live process, so the CLI finds a server started with any
// --addr; "" when there is none.
func runningURL(home string) string {
	b, err := os.ReadFile(filepath.Join(home, pidFileName))
	if err != nil {
		return ""
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid <= 0 || !alive(pid) {
		return ""
	}
	u, err := os.ReadFile(filepath.Join(home, urlFileName))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(u))
}

// lockFileName is the lock `desk serve` holds for as long as it runs, so a
// second server on the same DESK_HOME is refused before it touches anything.
const lockFileName = "desk.lock"

// sharedHomeEnv lets several desk processes use one DESK_HOME on purpose:
// nodes of one Postgres database on a shared file system, or a peer that
// takes over a stopped process's work. Each of them sets it; a process
// without it still refuses to start beside them, and they beside it.
const sharedHomeEnv = "DESK_SHARED_HOME"

// lockHome takes DESK_HOME's lock (flock, released by the kernel when the
// process ends however it ends): exclusive, or shared when shared is set.
// It fails with a conflict naming the running server when the lock is
// held in a way that excludes this one.
func lockHome(home string, shared bool) (release func(), err error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(home, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := "another desk process"
			if b, err := os.ReadFile(filepath.Join(home, pidFileName)); err == nil {
				who = "desk (pid " + strings.TrimSpace(string(b)) + ")"
				if u := runningURL(home); u != "" {
					who += " at " + u
				}
			}
			return nil, desk.Errorf(desk.ECONFLICT, "desk is already running: %s holds %s; desk stop first, give this server its own DESK_HOME, or set %s=1 on every process meant to share it", who, path, sharedHomeEnv)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// removeRunFiles removes the run files if they still name pid.
func removeRunFiles(home string, pid int) {
	b, err := os.ReadFile(filepath.Join(home, pidFileName))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		return
	}
	os.Remove(filepath.Join(home, pidFileName))
	os.Remove(filepath.Join(home, urlFileName))
}

func startCmd(g *globals) *cobra.Command {
	var addr, pg string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run desk in the background and report success only once it answers",
		Long: `Start desk in the background: the server's output goes to DESK_HOME/desk.log,
its pid to DESK_HOME/desk.pid, and "started" is printed only once /healthz answers.

In a managed AI execution environment (Codex, Claude Code, Gemini CLI, ...; see
docs/troubleshooting.md) background mode is refused at once, because the
environment would stop desk when it ends. Run desk start in your own terminal,
run desk serve for the foreground, or set DESK_FOREGROUND=1 to run desk start in
the foreground.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return start(cmd, g, nil, addr, pg, wait, "start")
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address (env DESK_ADDR; default "+defaultAddr+")")
	cmd.Flags().StringVar(&pg, "postgres", "", "Postgres DSN (env DESK_POSTGRES)")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the server to answer")
	return cmd
}

// start runs desk serve in the background with recorded (a previous
// server's flags, for restart) and then the flags given here, which win.
func start(cmd *cobra.Command, g *globals, recorded []string, addr, pg string, wait time.Duration, name string) error {
	home := firstNonEmpty(g.home, os.Getenv("DESK_HOME"), defaultHome())
	// Not nil: cobra runs a command whose args are nil on os.Args, which
	// here would be "start" (unknown to serve).
	serveArgs := append([]string{}, recorded...)
	if addr != "" {
		serveArgs = append(serveArgs, "--addr", addr)
	}
	if pg != "" {
		serveArgs = append(serveArgs, "--postgres", pg)
	}
	if os.Getenv("DESK_FOREGROUND") == "1" {
		g.home = home
		serve := serveCmd(g)
		serve.SetArgs(serveArgs)
		serve.SetContext(cmd.Context())
		serve.SetOut(cmd.OutOrStdout())
		serve.SetErr(cmd.ErrOrStderr())
		return serve.Execute()
	}
	if marker, ok := managedEnv(os.Getenv); ok {
		return refuseBackground(name, marker)
	}
	if st := readRunState(cmd.Context(), home); st.State == "running" {
		return usagef("desk is already running (pid %d) at %s; desk stop first", st.PID, st.URL)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	logPath := filepath.Join(home, logFileName)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	startOffset, _ := logf.Seek(0, io.SeekEnd)
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The server's output goes to desk.log, which is no place for a
	// login link's code: this terminal asks for a link once desk answers.
	child := exec.Command(exe, append([]string{"serve", "--home", home, "--login-link=false"}, serveArgs...)...)
	child.Stdout, child.Stderr = logf, logf
	// A new session: the server does not die with this terminal's process
	// group, and a Ctrl-C here does not reach it.
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := child.Start(); err != nil {
		return fmt.Errorf("start desk: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.Now().Add(wait)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("desk exited while starting (%v); the end of %s:\n%s", err, logPath, logTail(logPath, startOffset))
		case <-time.After(100 * time.Millisecond):
		}
		st := readRunState(cmd.Context(), home)
		if st.State == "running" && st.PID == child.Process.Pid {
			link := startLoginLink(cmd, g, home, st.URL)
			return out(cmd, g, st, func(w io.Writer) {
				fmt.Fprintf(w, "desk started (pid %d) at %s\nlog: %s\n", st.PID, st.URL, logPath)
				if link != nil {
					fmt.Fprintf(w, "sign in (one-time link, until %s): %s\n", link.ExpiresAt.Local().Format(time.Kitchen), link.URL)
				}
			})
		}
		if time.Now().After(deadline) {
			child.Process.Signal(syscall.SIGTERM)
			return fmt.Errorf("desk did not answer within %v; stopped it. The end of %s:\n%s", wait, logPath, logTail(logPath, startOffset))
		}
	}
}

// logTail returns the last lines written to the log since offset.
func logTail(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b[offset:]), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

func statusCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Tell whether desk is running, stopped, or stale (exit 0, 3, 1)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			home := firstNonEmpty(g.home, os.Getenv("DESK_HOME"), defaultHome())
			st := readRunState(cmd.Context(), home)
			if c, ok, err := readServeConfig(home); err == nil && ok {
				c.Args = redactArgs(c.Args)
				st.Config = &c
			}
			err := out(cmd, g, st, func(w io.Writer) {
				switch st.State {
				case "running":
					fmt.Fprintf(w, "running (pid %d) at %s\n", st.PID, st.URL)
					if c := st.Config; c != nil && c.PID == st.PID {
						fmt.Fprintf(w, "store: %s\nserve flags (desk restart uses them): %s\n", c.Store, strings.Join(c.Args, " "))
					}
				case "stale":
					fmt.Fprintf(w, "stale: %s; the pid file is %s (desk stop clears it)\n", st.Why, filepath.Join(home, pidFileName))
				default:
					fmt.Fprintln(w, "stopped")
				}
			})
			if err != nil {
				return err
			}
			switch st.State {
			case "stale":
				return &statusExit{statusStale}
			case "stopped":
				return &statusExit{statusStopped}
			}
			return nil
		},
	}
}

// statusExit carries `desk status`'s exit code without printing an error.
type statusExit struct{ code int }

func (e *statusExit) Error() string { return "" }

func stopCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Stop the desk server of this DESK_HOME and wait until it has exited",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			home := firstNonEmpty(g.home, os.Getenv("DESK_HOME"), defaultHome())
			msg, err := stop(cmd.Context(), home, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 45*time.Second, "how long to wait for a clean exit")
	return cmd
}

func stop(ctx context.Context, home string, timeout time.Duration) (string, error) {
	st := readRunState(ctx, home)
	if st.State == "stopped" {
		return "desk is not running", nil
	}
	if st.PID == 0 || !alive(st.PID) {
		os.Remove(filepath.Join(home, pidFileName))
		os.Remove(filepath.Join(home, urlFileName))
		return "desk was not running; cleared the stale pid file", nil
	}
	if err := syscall.Kill(st.PID, syscall.SIGTERM); err != nil {
		return "", fmt.Errorf("stop desk (pid %d): %w", st.PID, err)
	}
	deadline := time.Now().Add(timeout)
	for alive(st.PID) {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("desk (pid %d) did not exit within %v after SIGTERM; it is still running", st.PID, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	removeRunFiles(home, st.PID)
	return fmt.Sprintf("desk stopped (pid %d)", st.PID), nil
}

func restartCmd(g *globals) *cobra.Command {
	var addr, pg string
	var wait, timeout time.Duration
	cmd := &cobra.Command{
		Use:   "restart",
		Short: "Stop desk and start it again in the background (refused in managed AI environments, before anything stops)",
		Long: `Stop desk and start it again in the background with the configuration it ran
with: its address, its store (--postgres) and every serve flag, including those
it took from its environment (recorded in DESK_HOME/desk.serve.json; desk status
shows them). Flags given to restart replace the recorded ones. Secrets (provider
keys, DESK_ADMIN_TOKEN) are never recorded: the new server reads them from the
environment desk restart runs in.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The refusal comes before the stop: refusing after stopping
			// would leave the user with no server at all.
			if marker, ok := managedEnv(os.Getenv); ok && os.Getenv("DESK_FOREGROUND") != "1" {
				return refuseBackground("restart", marker)
			}
			home := firstNonEmpty(g.home, os.Getenv("DESK_HOME"), defaultHome())
			// The server comes back as it ran (its address, store and
			// flags, desk.serve.json), not as this shell's environment
			// would start a new one; flags given here change that.
			cfg, _, err := readServeConfig(home)
			if err != nil {
				return err
			}
			msg, err := stop(cmd.Context(), home, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), msg)
			return start(cmd, g, cfg.Args, addr, pg, wait, "restart")
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address (env DESK_ADDR; default "+defaultAddr+")")
	cmd.Flags().StringVar(&pg, "postgres", "", "Postgres DSN (env DESK_POSTGRES)")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the server to answer")
	cmd.Flags().DurationVar(&timeout, "timeout", 45*time.Second, "how long to wait for the old server to exit")
	return cmd
}

// startLoginLink asks the server desk start just started for a login
// link, for the starting terminal. Without a usable admin token (an actor
// token in DESK_TOKEN, say) there is no link, and start still succeeds.
func startLoginLink(cmd *cobra.Command, g *globals, home, url string) *desk.LoginLink {
	cg := *g
	cg.home, cg.server = home, url
	c, err := cg.client()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
	defer cancel()
	l, err := c.LoginLink(ctx)
	if err != nil {
		return nil
	}
	return l
}
