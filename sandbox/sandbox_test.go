//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/internal/testwait"
)

const secret = "SECRET-other-session-5d1c"

// home is a DESK_HOME-like tree: the session under test, another session
// beside it, a group, a scratch directory and a workspace checkout.
type home struct {
	root      string
	artifacts string // this session's artifacts
	other     string // another session's secret file
	group     string
	scratch   string
	workspace string
	mounts    []Mount
}

func newHome(t *testing.T) *home {
	t.Helper()
	root := t.TempDir()
	h := &home{
		root:      root,
		artifacts: filepath.Join(root, "workspaces/ws1/workspace/actor/sessions/ses1"),
		other:     filepath.Join(root, "workspaces/ws1/workspace/actor/sessions/ses2/secret.txt"),
		group:     filepath.Join(root, "workspaces/ws1/groups/grp1"),
		scratch:   filepath.Join(root, "workspaces/ws1/.scratch/exe1"),
		workspace: filepath.Join(root, "workspaces/ws1/checkout"),
	}
	write(t, filepath.Join(h.artifacts, "a.txt"), "artifact a\n")
	write(t, h.other, secret+"\n")
	write(t, filepath.Join(h.group, "item.txt"), "group item\n")
	write(t, filepath.Join(h.workspace, "README"), "workspace\n")
	write(t, filepath.Join(root, "admin.token"), secret+"\n")
	if err := os.MkdirAll(h.scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	ms, err := FromJail([]fsjail.Mount{
		{Guest: "/artifacts", Host: h.artifacts, ReadOnlyDirs: []string{"immutable"}},
		{Guest: "/workspace", Host: h.workspace},
		{Guest: "/context/grp1", Host: h.group, ReadOnly: true},
		{Guest: "/scratch", Host: h.scratch},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.mounts = ms
	write(t, filepath.Join(h.artifacts, "immutable/keep.txt"), "immutable\n")
	return h
}

func write(t *testing.T, name, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readHost(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func (h *home) spec(cmd string) Spec {
	return Spec{Mounts: h.mounts, Cwd: "/scratch", Command: cmd, Timeout: 30 * time.Second}
}

// sandboxed returns a bubblewrap runner with the given grace period, or
// skips the test when bwrap is not installed. A bwrap that is installed but
// cannot run a command fails the test: that is a broken sandbox, not a
// missing one.
func sandboxed(t *testing.T, grace time.Duration) *bubblewrap {
	t.Helper()
	path, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap (bwrap) is not installed; the sandbox tests need it: apt-get install bubblewrap")
	}
	b := newBubblewrap(path)
	b.grace = grace
	if err := b.init(); err != nil {
		t.Fatalf("bwrap is installed but cannot run a command: %v", err)
	}
	return b
}

func run(t *testing.T, r Runner, s Spec) *Result {
	t.Helper()
	res, err := r.Run(context.Background(), s, nil)
	if err != nil {
		t.Fatalf("Run(%q): %v", s.Command, err)
	}
	return res
}

func TestBubblewrapMounts(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)

	res := run(t, b, h.spec(`set -e
		cat /context/grp1/item.txt /artifacts/a.txt /artifacts/immutable/keep.txt
		echo new > /artifacts/new.txt
		echo w > /workspace/w.txt
		echo s > scratch.txt
		echo t > /tmp/t && cat /tmp/t`))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if want := "group item\nartifact a\nimmutable\nt\n"; res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
	for name, want := range map[string]string{
		filepath.Join(h.artifacts, "new.txt"):   "new\n",
		filepath.Join(h.workspace, "w.txt"):     "w\n",
		filepath.Join(h.scratch, "scratch.txt"): "s\n",
	} {
		if got := readHost(t, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}

	// Each of these must fail, and leave the host as it was.
	for _, cmd := range []string{
		`echo x > /context/grp1/item.txt`,
		`echo x > /context/grp1/new.txt`,
		`mkdir /context/grp1/d`,
		`echo x > /artifacts/immutable/keep.txt`,
		`rm /artifacts/immutable/keep.txt`,
		`touch /artifacts/immutable/new.txt`,
		`mv /artifacts/immutable /artifacts/moved`,
		// Without --cap-drop ALL a command of desk running as root could
		// do both of these.
		`umount /artifacts/immutable; echo x > /artifacts/immutable/keep.txt`,
		`mount -o remount,rw,bind /artifacts/immutable; echo x > /artifacts/immutable/keep.txt`,
		`touch /newfile`,
		`mkdir /context/more`,
		`echo x > /usr/x`,
	} {
		res := run(t, b, h.spec(cmd))
		if res.ExitCode == 0 {
			t.Errorf("%q succeeded; stdout %q", cmd, res.Stdout)
		}
	}
	// No capabilities at all, in any set.
	caps := run(t, b, h.spec(`grep ^Cap /proc/self/status`)).Stdout
	if strings.Count(caps, "\t0000000000000000") != 5 {
		t.Errorf("the command has capabilities:\n%s", caps)
	}
	if got := readHost(t, filepath.Join(h.artifacts, "immutable/keep.txt")); got != "immutable\n" {
		t.Errorf("immutable/keep.txt = %q", got)
	}
	if got := readHost(t, filepath.Join(h.group, "item.txt")); got != "group item\n" {
		t.Errorf("group item = %q", got)
	}
	for _, name := range []string{filepath.Join(h.artifacts, "moved"), filepath.Join(h.artifacts, "immutable/new.txt"), filepath.Join(h.group, "new.txt")} {
		if _, err := os.Lstat(name); err == nil {
			t.Errorf("%s exists", name)
		}
	}
}

func TestBubblewrapHidesHost(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	hidden := []string{
		h.other, filepath.Dir(h.other), h.root, filepath.Join(h.root, "admin.token"), h.artifacts,
		"/root", "/home", "/var", "/opt", "/run", "/srv", "/mnt", "/work", "/etc/shadow", "/etc/sudoers",
	}
	if cwd, err := os.Getwd(); err == nil && !within(cwd, "/tmp") && !inSystemDir(cwd) {
		hidden = append(hidden, cwd) // the test's own directory, the repository
	}
	var cmd strings.Builder
	for _, p := range hidden {
		fmt.Fprintf(&cmd, "if test -e '%s'; then echo 'VISIBLE %s'; fi\n", p, p)
	}
	// A link planted in a writable mount resolves inside the sandbox.
	fmt.Fprintf(&cmd, "ln -s '%s' /artifacts/link; cat /artifacts/link && echo READ-THROUGH-LINK\n", h.other)
	fmt.Fprintf(&cmd, "cat '%s' && echo READ-OTHER-SESSION\n", h.other)
	cmd.WriteString("echo ROOT; ls -A /; echo PASSWD; cat /etc/passwd")
	res := run(t, b, h.spec(cmd.String()))
	if strings.Contains(res.Stdout, "VISIBLE") || strings.Contains(res.Stdout, "READ-") || strings.Contains(res.Stdout, secret) {
		t.Errorf("host files visible inside the sandbox:\n%s", res.Stdout)
	}
	_, after, _ := strings.Cut(res.Stdout, "ROOT\n")
	rootList, passwd, _ := strings.Cut(after, "PASSWD\n")
	allowed := []string{"artifacts", "bin", "context", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "scratch", "tmp", "usr", "workspace"}
	got := strings.Fields(rootList)
	for _, name := range got {
		if !slices.Contains(allowed, name) {
			t.Errorf("ls / shows %q (all: %v)", name, got)
		}
	}
	for _, name := range []string{"artifacts", "context", "scratch", "workspace", "usr", "tmp"} {
		if !slices.Contains(got, name) {
			t.Errorf("ls / lacks %q (all: %v)", name, got)
		}
	}
	if n := strings.Count(passwd, "\n"); n > 2 {
		t.Errorf("/etc/passwd has %d lines, want only the command's user and nobody:\n%s", n, passwd)
	}
}

func TestBubblewrapNetwork(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is needed for /dev/tcp")
	}
	h := newHome(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	connect := fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d && echo connected'; test -e /etc/resolv.conf && echo resolv`, port)

	off := run(t, b, h.spec(connect))
	if strings.Contains(off.Stdout, "connected") || accepted.Load() != 0 {
		t.Errorf("network off: the command reached the host's listener (stdout %q, accepted %d)", off.Stdout, accepted.Load())
	}
	if strings.Contains(off.Stdout, "resolv") {
		t.Errorf("network off: /etc/resolv.conf is there")
	}

	s := h.spec(connect)
	s.Network = true
	on := run(t, b, s)
	if !strings.Contains(on.Stdout, "connected") {
		t.Errorf("network on: no connection (stdout %q, stderr %q)", on.Stdout, on.Stderr)
	}
	testwait.Poll(2*time.Second, func() bool { return accepted.Load() != 0 })
	if accepted.Load() != 1 {
		t.Errorf("network on: listener accepted %d connections, want 1", accepted.Load())
	}
}

func TestBubblewrapEnvironment(t *testing.T) {
	testEnvironment(t, sandboxed(t, DefaultGrace), false)
}

func TestDirectEnvironment(t *testing.T) {
	testEnvironment(t, &direct{grace: DefaultGrace}, true)
}

func testEnvironment(t *testing.T, r Runner, isDirect bool) {
	t.Setenv("OPENAI_API_KEY", "sk-leak-openai-9f2e")
	t.Setenv("ANTHROPIC_API_KEY", "sk-leak-anthropic-9f2e")
	t.Setenv("DESK_ADMIN_TOKEN", "leak-admin-token-9f2e")
	h := newHome(t)
	wantHome, wantHomeNoScratch := "/scratch", "/tmp"
	if isDirect {
		wantHome, wantHomeNoScratch = h.scratch, os.TempDir()
	}
	s := h.spec(`env; cat /proc/*/environ 2>/dev/null | tr '\0' '\n'`)
	s.Env = map[string]string{"FOO": "bar baz", "TERM": "xterm"}
	res := run(t, r, s)
	if strings.Contains(res.Stdout, "leak") {
		t.Errorf("host environment leaked:\n%s", res.Stdout)
	}
	env := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	for _, want := range []string{"HOME=" + wantHome, "LANG=C.UTF-8", "TERM=xterm", "FOO=bar baz", "PATH=" + basePath} {
		if !slices.Contains(env, want) {
			t.Errorf("environment lacks %q:\n%s", want, res.Stdout)
		}
	}

	// Without /scratch, HOME is the private /tmp (or the host's temporary
	// directory for Direct).
	var ms []Mount
	for _, m := range h.mounts {
		if m.Guest != "/scratch" {
			ms = append(ms, m)
		}
	}
	res = run(t, r, Spec{Mounts: ms, Cwd: "/artifacts", Command: "echo $HOME"})
	if got := strings.TrimSpace(res.Stdout); got != wantHomeNoScratch {
		t.Errorf("HOME without /scratch = %q, want %q", got, wantHomeNoScratch)
	}
}

// sleeper is a sleep command line no other process has.
func sleeper() string {
	return fmt.Sprintf("sleep %d.%06d", 900+rand.IntN(99), rand.IntN(1_000_000))
}

// alive lists live (not zombie) processes whose command line contains s.
func alive(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})), s) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitGone waits briefly for processes matching s to disappear: the
// kernel kills a PID namespace's processes as its init exits.
func waitGone(t *testing.T, s string) {
	t.Helper()
	var pids []int
	if !testwait.Poll(2*time.Second, func() bool { pids = alive(s); return len(pids) == 0 }) {
		t.Errorf("%q still running after the command ended: pids %v", s, pids)
	}
}

func TestBubblewrapKillsProcessTree(t *testing.T) {
	testKillsProcessTree(t, sandboxed(t, DefaultGrace))
}

func TestDirectKillsProcessTree(t *testing.T) {
	testKillsProcessTree(t, &direct{grace: DefaultGrace})
}

func testKillsProcessTree(t *testing.T, r Runner) {
	h := newHome(t)

	t.Run("timeout", func(t *testing.T) {
		bg := sleeper()
		s := h.spec(bg + " & sleep 60")
		s.Timeout = time.Second
		start := time.Now()
		res := run(t, r, s)
		elapsed := time.Since(start)
		if !res.TimedOut || res.Interrupted {
			t.Errorf("TimedOut %v, Interrupted %v; want a timeout", res.TimedOut, res.Interrupted)
		}
		if elapsed < time.Second || elapsed > time.Second+DefaultGrace {
			t.Errorf("returned after %v, want within [1s, 1s+grace]", elapsed)
		}
		if res.ExitCode < 128 {
			t.Errorf("exit code %d, want a signal's", res.ExitCode)
		}
		waitGone(t, bg)
	})

	t.Run("interrupt", func(t *testing.T) {
		bg := sleeper()
		ctx, cancel := context.WithCancel(context.Background())
		var cancelled time.Time
		time.AfterFunc(300*time.Millisecond, func() { cancelled = time.Now(); cancel() })
		res, err := r.Run(ctx, h.spec(bg+" & sleep 60"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(cancelled); took > DefaultGrace {
			t.Errorf("returned %v after the cancel, want within the grace period %v", took, DefaultGrace)
		}
		if !res.Interrupted || res.TimedOut {
			t.Errorf("Interrupted %v, TimedOut %v; want an interrupt", res.Interrupted, res.TimedOut)
		}
		waitGone(t, bg)
	})

	t.Run("exit", func(t *testing.T) {
		// A background child does not outlive its command.
		bg := sleeper()
		start := time.Now()
		res := run(t, r, h.spec(bg+" & echo started"))
		if res.ExitCode != 0 || res.Stdout != "started\n" || time.Since(start) > 10*time.Second {
			t.Errorf("exit %d, stdout %q after %v", res.ExitCode, res.Stdout, time.Since(start))
		}
		waitGone(t, bg)
	})
}

func TestBubblewrapGraceThenKill(t *testing.T) {
	testGraceThenKill(t, sandboxed(t, 500*time.Millisecond))
}

func TestDirectGraceThenKill(t *testing.T) {
	testGraceThenKill(t, &direct{grace: 500 * time.Millisecond})
}

// A command that survives SIGTERM is killed when the grace period ends.
func testGraceThenKill(t *testing.T, r Runner) {
	h := newHome(t)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var once sync.Once
	var cancelled time.Time
	go func() {
		<-started
		cancelled = time.Now()
		cancel()
	}()
	res, err := r.Run(ctx, h.spec(`trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done`), func(stream string, b []byte) {
		if strings.Contains(string(b), "ready") {
			once.Do(func() { close(started) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(cancelled)
	if !res.Interrupted {
		t.Errorf("not interrupted")
	}
	if took < 400*time.Millisecond || took > 3*time.Second {
		t.Errorf("returned %v after the cancel; want the 500ms grace, then the kill", took)
	}
	if !strings.Contains(res.Stdout, "got-term") {
		t.Errorf("the command never saw SIGTERM: stdout %q", res.Stdout)
	}
	if res.ExitCode != 128+9 {
		t.Errorf("exit code %d, want %d (SIGKILL)", res.ExitCode, 128+9)
	}
}

func TestBubblewrapStreaming(t *testing.T) {
	testStreaming(t, sandboxed(t, DefaultGrace))
}

func TestDirectStreaming(t *testing.T) {
	testStreaming(t, &direct{grace: DefaultGrace})
}

func testStreaming(t *testing.T, r Runner) {
	h := newHome(t)
	type event struct {
		at     time.Time
		stream string
		text   string
	}
	var mu sync.Mutex
	var events []event
	var returned atomic.Bool
	res, err := r.Run(context.Background(), h.spec(`echo first; echo oops >&2; sleep 1; echo second`), func(stream string, b []byte) {
		if returned.Load() {
			t.Errorf("output after Run returned: %s %q", stream, b)
		}
		mu.Lock()
		events = append(events, event{time.Now(), stream, string(b)})
		mu.Unlock()
	})
	end := time.Now()
	returned.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var firstAt, errAt time.Time
	var out, errs strings.Builder
	for _, e := range events {
		switch e.stream {
		case StreamStdout:
			out.WriteString(e.text)
			if strings.Contains(e.text, "first") && firstAt.IsZero() {
				firstAt = e.at
			}
		case StreamStderr:
			errs.WriteString(e.text)
			errAt = e.at
		default:
			t.Errorf("unknown stream %q", e.stream)
		}
	}
	if firstAt.IsZero() || end.Sub(firstAt) < 700*time.Millisecond {
		t.Errorf("\"first\" was not delivered while the command ran (at %v, end %v)", firstAt, end)
	}
	if errAt.IsZero() || end.Sub(errAt) < 700*time.Millisecond {
		t.Errorf("stderr was not delivered while the command ran")
	}
	if out.String() != "first\nsecond\n" || errs.String() != "oops\n" {
		t.Errorf("streamed stdout %q, stderr %q", out.String(), errs.String())
	}
	if res.Stdout != "first\nsecond\n" || res.Stderr != "oops\n" || res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("result %+v", res)
	}
}

func TestBubblewrapOutputLimit(t *testing.T) {
	testOutputLimit(t, sandboxed(t, DefaultGrace))
}

func TestDirectOutputLimit(t *testing.T) {
	testOutputLimit(t, &direct{grace: DefaultGrace})
}

func testOutputLimit(t *testing.T, r Runner) {
	h := newHome(t)
	s := h.spec(`printf HEAD; head -c 100000 /dev/zero | tr '\0' x; printf TAIL
		printf EHEAD >&2; head -c 5000 /dev/zero | tr '\0' y >&2; printf ETAIL >&2`)
	s.MaxOutput = 1000
	var streamed atomic.Int64
	res, err := r.Run(context.Background(), s, func(stream string, b []byte) {
		if stream == StreamStdout {
			streamed.Add(int64(len(b)))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutTruncated || !strings.HasPrefix(res.Stdout, "HEADxxx") || !strings.HasSuffix(res.Stdout, "xxxTAIL") ||
		!strings.Contains(res.Stdout, "bytes omitted") || len(res.Stdout) > 1100 {
		t.Errorf("stdout truncated %v, %d bytes: %.60q … %.60q", res.StdoutTruncated, len(res.Stdout), res.Stdout, res.Stdout[max(0, len(res.Stdout)-60):])
	}
	if !strings.Contains(res.Stdout, "[… 99008 bytes omitted …]") {
		t.Errorf("stdout does not say 99008 bytes are omitted")
	}
	if !res.StderrTruncated || !strings.HasPrefix(res.Stderr, "EHEADyyy") || !strings.HasSuffix(res.Stderr, "yyyETAIL") {
		t.Errorf("stderr truncated %v: %.60q", res.StderrTruncated, res.Stderr)
	}
	if res.StdoutBytes != 100008 || streamed.Load() != 100008 {
		t.Errorf("StdoutBytes %d, streamed %d, want 100008 each", res.StdoutBytes, streamed.Load())
	}
}

func TestSpecErrors(t *testing.T) {
	h := newHome(t)
	file := filepath.Join(h.root, "admin.token")
	cases := map[string]Spec{
		"cwd outside the mounts": {Mounts: h.mounts, Cwd: "/etc", Command: "true"},
		"cwd relative":           {Mounts: h.mounts, Cwd: "scratch", Command: "true"},
		"cwd unclean":            {Mounts: h.mounts, Cwd: "/scratch/../etc", Command: "true"},
		"cwd missing":            {Mounts: h.mounts, Cwd: "/scratch/nope", Command: "true"},
		"cwd a file":             {Mounts: h.mounts, Cwd: "/artifacts/a.txt", Command: "true"},
		"host path missing":      {Mounts: []Mount{{Guest: "/w", Host: filepath.Join(h.root, "missing")}}, Cwd: "/w", Command: "true"},
		"host path a file":       {Mounts: []Mount{{Guest: "/w", Host: file}}, Cwd: "/w", Command: "true"},
		"host path relative":     {Mounts: []Mount{{Guest: "/w", Host: "relative"}}, Cwd: "/w", Command: "true"},
		"guest root":             {Mounts: []Mount{{Guest: "/", Host: h.scratch}}, Cwd: "/", Command: "true"},
		"guest under /proc":      {Mounts: []Mount{{Guest: "/proc/x", Host: h.scratch}}, Cwd: "/proc/x", Command: "true"},
		"guest /dev":             {Mounts: []Mount{{Guest: "/dev", Host: h.scratch}}, Cwd: "/dev", Command: "true"},
		"guest relative":         {Mounts: []Mount{{Guest: "w", Host: h.scratch}}, Cwd: "/w", Command: "true"},
		"no mounts":              {Cwd: "/w", Command: "true"},
		"empty command":          {Mounts: h.mounts, Cwd: "/scratch", Command: "  "},
		"bad env name":           {Mounts: h.mounts, Cwd: "/scratch", Command: "true", Env: map[string]string{"A=B": "c"}},
		"negative timeout":       {Mounts: h.mounts, Cwd: "/scratch", Command: "true", Timeout: -time.Second},
		"negative output limit":  {Mounts: h.mounts, Cwd: "/scratch", Command: "true", MaxOutput: -1},
	}

	// A link planted where the read-only sub-mount's host directory was
	// would bind another session's files (or nothing) there.
	planted := t.TempDir()
	if err := os.MkdirAll(filepath.Join(planted, "ses1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(h.other), filepath.Join(planted, "ses1", "immutable")); err != nil {
		t.Fatal(err)
	}
	cases["read-only sub-mount through a link"] = Spec{Mounts: []Mount{
		{Guest: "/artifacts", Host: filepath.Join(planted, "ses1"), Writable: true},
		{Guest: "/artifacts/immutable", Host: filepath.Join(planted, "ses1", "immutable")},
	}, Cwd: "/artifacts", Command: "true"}
	cases["mount point through a link"] = Spec{Mounts: []Mount{
		{Guest: "/artifacts", Host: filepath.Join(planted, "ses1"), Writable: true},
		{Guest: "/artifacts/immutable", Host: h.scratch},
	}, Cwd: "/artifacts", Command: "true"}

	runners := map[string]Runner{"direct": Direct()}
	if _, err := exec.LookPath("bwrap"); err == nil {
		runners["bubblewrap"] = sandboxed(t, DefaultGrace)
	}
	for name, s := range cases {
		for rname, r := range runners {
			res, err := r.Run(context.Background(), s, nil)
			var d *Denied
			if res != nil || !desk.IsCode(err, desk.EINVALID) || errors.As(err, &d) {
				t.Errorf("%s, %s: result %v, error %v; want EINVALID before running", name, rname, res, err)
			}
			if err != nil && (strings.Contains(err.Error(), h.root) || strings.Contains(err.Error(), planted)) {
				t.Errorf("%s, %s: error names a host path: %v", name, rname, err)
			}
		}
	}
}

func TestBubblewrapDenied(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)

	// A set-up failure inside bwrap, after the Spec was found valid.
	bad := newBubblewrap(b.path)
	bad.extraArgs = []string{"--ro-bind", filepath.Join(h.artifacts, "gone"), "/gone"}
	bad.probed, bad.userns = true, b.userns // skip the probe: it would fail the same way
	res, err := bad.Run(context.Background(), h.spec("echo ran"), func(string, []byte) { t.Error("output streamed from a sandbox that never started") })
	var d *Denied
	if !errors.As(err, &d) || res != nil {
		t.Fatalf("result %v, error %v; want *Denied", res, err)
	}
	if strings.Contains(d.Reason, h.artifacts) || !strings.Contains(d.Reason, "/artifacts/gone") {
		t.Errorf("reason %q: want the guest path, not the host path", d.Reason)
	}

	// No bwrap at all.
	if _, err := Bubblewrap(filepath.Join(h.root, "no-bwrap")).Run(context.Background(), h.spec("echo ran"), nil); !errors.As(err, &d) {
		t.Errorf("missing bwrap: error %v, want *Denied", err)
	}

	// A command that fails, even one that looks like bwrap, is a Result.
	for cmd, code := range map[string]int{
		`echo "bwrap: Can't find source path /x: No such file or directory" >&2; exit 1`: 1,
		`no-such-command-here`: 127,
		`exit 126`:             126,
	} {
		res, err := b.Run(context.Background(), h.spec(cmd), nil)
		if err != nil || res.ExitCode != code {
			t.Errorf("%q: result %+v, error %v; want exit %d", cmd, res, err, code)
		}
	}
}

func TestBubblewrapNoInheritedDescriptors(t *testing.T) {
	testNoInheritedDescriptors(t, sandboxed(t, DefaultGrace))
}

func TestDirectNoInheritedDescriptors(t *testing.T) {
	testNoInheritedDescriptors(t, &direct{grace: DefaultGrace})
}

// A descriptor desk inherited without close-on-exec (here: a directory
// outside the guest file system, fd 100) never reaches a command.
func testNoInheritedDescriptors(t *testing.T, r Runner) {
	h := newHome(t)
	fd, err := openInheritable(filepath.Dir(h.other))
	if err != nil {
		t.Skip(err)
	}
	defer closeFD(fd)
	res := run(t, r, h.spec(`ls /proc/self/fd; cat /proc/self/fd/100/secret.txt`))
	fds := strings.Fields(res.Stdout)
	if slices.Contains(fds, "100") || strings.Contains(res.Stdout, secret) {
		t.Errorf("the command inherited fd 100: %q", res.Stdout)
	}
	for _, f := range fds {
		if n, _ := strconv.Atoi(f); n > 3 {
			t.Errorf("the command has fd %s open: %v", f, fds)
		}
	}
}

func TestDirect(t *testing.T) {
	h := newHome(t)
	s := h.spec(`pwd; echo direct > out.txt; cat /context/grp1/item.txt 2>/dev/null || echo no-guest-paths`)
	s.Cwd = "/workspace"
	res := run(t, Direct(), s)
	lines := strings.Split(res.Stdout, "\n")
	if lines[0] != h.workspace {
		t.Errorf("pwd %q, want the host directory behind /workspace %q", lines[0], h.workspace)
	}
	if lines[1] != "no-guest-paths" {
		t.Errorf("guest paths resolved on the host: %q", res.Stdout)
	}
	if got := readHost(t, filepath.Join(h.workspace, "out.txt")); got != "direct\n" {
		t.Errorf("out.txt = %q", got)
	}

	// Cwd maps through the mount that shows it (the later one wins).
	s.Cwd = "/artifacts/immutable"
	s.Command = "pwd"
	if got := strings.TrimSpace(run(t, Direct(), s).Stdout); got != filepath.Join(h.artifacts, "immutable") {
		t.Errorf("pwd %q", got)
	}
}

func TestFromJail(t *testing.T) {
	dir := t.TempDir()
	ms, err := FromJail([]fsjail.Mount{
		{Guest: "/artifacts", Host: dir, ReadOnlyDirs: []string{"immutable"}},
		{Guest: "/context/g", Host: dir, ReadOnly: true, ReadOnlyDirs: []string{"ignored"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Guest: "/artifacts", Host: dir, Writable: true},
		{Guest: "/context/g", Host: dir},
		{Guest: "/artifacts/immutable", Host: filepath.Join(dir, "immutable")},
	}
	// The read-only directory is pinned to the one FromJail found.
	if len(ms) == 3 && ms[2].Pin == nil {
		t.Errorf("the read-only directory is not pinned")
	}
	unpinned := slices.Clone(ms)
	for i := range unpinned {
		unpinned[i].Pin = nil
	}
	if !slices.Equal(unpinned, want) {
		t.Errorf("mounts %+v, want %+v", ms, want)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "immutable")); err != nil || !fi.IsDir() {
		t.Errorf("immutable was not created: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "ignored")); err == nil {
		t.Errorf("a read-only subdirectory of a read-only mount was created")
	}

	// A link where the read-only directory should be is refused.
	dir2 := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(dir2, "immutable")); err != nil {
		t.Fatal(err)
	}
	if _, err := FromJail([]fsjail.Mount{{Guest: "/artifacts", Host: dir2, ReadOnlyDirs: []string{"immutable"}}}); err == nil {
		t.Errorf("FromJail accepted a link in place of the read-only directory")
	}
}

func TestBubblewrapConcurrent(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	h := newHome(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Run(context.Background(), h.spec(fmt.Sprintf("echo %d; exit %d", i, i)), nil)
			if err != nil || res.ExitCode != i || res.Stdout != fmt.Sprintf("%d\n", i) {
				t.Errorf("run %d: %+v %v", i, res, err)
			}
		}()
	}
	wg.Wait()
}

func TestRunCancelledBeforeStart(t *testing.T) {
	h := newHome(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := Direct().Run(ctx, h.spec("echo ran"), nil); res != nil || !errors.Is(err, context.Canceled) {
		t.Errorf("result %v, error %v; want context.Canceled and nothing run", res, err)
	}
}

func TestDetect(t *testing.T) {
	_, lookErr := exec.LookPath("bwrap")
	r, err := Detect()
	if lookErr != nil {
		if err == nil || !desk.IsCode(err, desk.EUNAVAILABLE) || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
			t.Errorf("without bwrap: %v, want EUNAVAILABLE saying how to install it", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("Detect: %v", err)
	}
	if _, ok := r.(*bubblewrap); !ok {
		t.Errorf("Detect returned %T", r)
	}
}

// openInheritable opens dir as fd 100 without close-on-exec, as a
// descriptor desk inherited from its parent would be.
func openInheritable(dir string) (int, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.Dup3(fd, 100, 0); err != nil {
		return 0, err
	}
	return 100, nil
}

func closeFD(fd int) { unix.Close(fd) }

// desk's own commands nest no user namespace (--disable-userns): only a
// runtime child, which brings its own sandbox, may (spawnArgs).
func TestBubblewrapCommandsNestNoUserNamespace(t *testing.T) {
	b := sandboxed(t, DefaultGrace)
	if !b.userns {
		t.Skip("this bwrap runs without a user namespace")
	}
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	h := newHome(t)
	res := run(t, b, h.spec("/usr/bin/unshare -U id -u 2>&1 && echo NESTED"))
	if strings.Contains(res.Stdout, "NESTED") {
		t.Fatalf("a command made a user namespace:\n%s", res.Stdout)
	}
}
