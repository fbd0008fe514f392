package e2e

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/desk-runtime/desk/internal/testwait"
)

// desk watch in a real pseudo-terminal, started before the turn: the
// reply and each command as one line that updates in place, the approvals
// with the command that answers them (answered with desk approve from
// another process while it watches), a command that exited 3 shown as a
// failure with its output's tail, and the turn's failure. Then desk watch
// EXE and desk exec show of the settled turn, through a pipe: the same
// lines, once each (issue 28 item 1).
func TestBinaryWatch(t *testing.T) {
	t.Parallel()
	d := startDesk(t, deskOpts{})
	ws := d.workspace("watch", false)
	ses := d.scriptSession(ws, `{"text":"Looking.","tool_calls":[{"name":"exec_command","arguments":{"command":"echo hello-watch"}}]}`,
		execStep("echo oops >&2; exit 3"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := exec.CommandContext(ctx, deskBin, "--server", d.URL, "watch", ses)
	w.Env = append(append([]string{}, d.Env...), "TERM=xterm-256color")
	tty, err := pty.StartWithSize(w, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var raw safeBuffer
	copied := make(chan struct{})
	go func() { io.Copy(&raw, tty); close(copied) }()
	exited := make(chan error, 1)
	go func() { exited <- w.Wait() }()

	// The watch is listening before the turn starts.
	send := d.start("send", ses, "go")
	aprRe := regexp.MustCompile(`waiting for approval (apr_[0-9A-Za-z]+) to run`)
	approve := func(n int) {
		var apr string
		testwait.Until(t, 90*time.Second, func() bool {
			ms := aprRe.FindAllStringSubmatch(screenOf(raw.String()), -1)
			if len(ms) >= n {
				apr = ms[n-1][1]
			}
			return apr != ""
		}, "approval "+string(rune('0'+n))+" on the watch's screen:\n"+screenOf(raw.String()))
		d.ok("approve", apr)
	}
	approve(1)
	approve(2)
	testwait.Until(t, 90*time.Second, func() bool { return strings.Contains(screenOf(raw.String()), "failed:") }, "the turn's outcome on the watch's screen")
	w.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("desk watch SES ended by Ctrl-C: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("desk watch did not end on Ctrl-C")
	}
	tty.Close()
	<-copied
	if code := send.wait(t); code != exitTurnFailed {
		t.Fatalf("desk send: exit %d", code)
	}

	scr := screenOf(raw.String())
	t.Logf("the watch's screen:\n%s", scr)
	if !strings.Contains(raw.String(), "\x1b[2K") {
		t.Fatal("no line was updated in place on the terminal")
	}
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?m)^── exe_\w+ \(session ` + ses + `\)$`),
		regexp.MustCompile(`(?m)^Looking\.`),
		regexp.MustCompile(`(?m)^  \? waiting for approval apr_\w+ to run ` + "`echo hello-watch`" + `; answer with desk approve apr_\w+ or desk deny apr_\w+$`),
		regexp.MustCompile(`(?m)^  · apr_\w+ approved`),
		regexp.MustCompile(`(?m)^  ✓ exec_command  echo hello-watch  \(\d+(ms|\.\ds), exit 0\)$`),
		regexp.MustCompile(`(?m)^  ✗ exec_command  echo oops >&2; exit 3  \(\d+(ms|\.\ds), exit 3\)$`),
		regexp.MustCompile(`(?m)^      │ .*oops`),
		regexp.MustCompile(`(?m)^✗ exe_\w+ failed: .+$`),
	}
	at := 0
	for _, re := range want {
		loc := re.FindStringIndex(scr[at:])
		if loc == nil {
			t.Fatalf("the screen lacks %s after what came before", re)
		}
		at += loc[1]
	}
	if strings.Contains(scr, "⋯") {
		t.Fatal("a running line is left on the screen")
	}
	if strings.Contains(scr, "exit 3)") && strings.Contains(scr, "✓ exec_command  echo oops") {
		t.Fatal("a command that exited 3 is shown as succeeded")
	}

	// The settled turn through a pipe: desk watch EXE and desk exec show.
	exe := regexp.MustCompile(`── (exe_\w+)`).FindStringSubmatch(scr)[1]
	out, _, code := d.run("watch", exe)
	if code != exitTurnFailed {
		t.Fatalf("desk watch %s: exit %d", exe, code)
	}
	show := d.ok("exec", "show", exe)
	for _, s := range []string{"Looking.", "✓ exec_command  echo hello-watch", "✗ exec_command  echo oops >&2; exit 3", "failed:"} {
		if !strings.Contains(out, s) || !strings.Contains(show, s) {
			t.Fatalf("%q missing\nwatch:\n%s\nexec show:\n%s", s, out, show)
		}
	}
	if strings.Contains(out, "\x1b") || strings.Contains(out, "⋯") {
		t.Fatalf("escape codes in piped output: %q", out)
	}
	// The transcript shows the tool steps as those lines.
	if ms := d.ok("message", "ls", ses); !strings.Contains(ms, "✓ exec_command  echo hello-watch") || !strings.Contains(ms, "exit 3") {
		t.Fatalf("desk message ls:\n%s", ms)
	}
}

// sgrCodes are colour and style sequences.
var sgrCodes = regexp.MustCompile(`\x1b\[[0-9;?]*[mhlHJ]`)

// screenOf is what a terminal shows after out (carriage returns, line
// feeds and erase-line applied, colours dropped): the trace writes no
// other control.
func screenOf(out string) string {
	out = strings.ReplaceAll(sgrCodes.ReplaceAllString(out, ""), "\r\n", "\n")
	var lines []string
	var cur []rune
	col := 0
	for i := 0; i < len(out); {
		switch {
		case strings.HasPrefix(out[i:], "\x1b[2K"):
			cur, i = cur[:0], i+4
			continue
		case out[i] == '\r':
			col, i = 0, i+1
			continue
		case out[i] == '\n':
			lines = append(lines, string(cur))
			cur, col, i = cur[:0], 0, i+1
			continue
		}
		r := []rune(out[i:])[0]
		if col < len(cur) {
			cur[col] = r
		} else {
			cur = append(cur, r)
		}
		col++
		i += len(string(r))
	}
	if len(cur) > 0 {
		lines = append(lines, string(cur))
	}
	return strings.Join(lines, "\n")
}
