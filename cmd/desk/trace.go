package main

// A turn as a person reads it, for desk watch, desk exec show and desk
// message ls: the reply as it streams, each tool call as one line (what
// ran, how long, how it ended, the tail of its output when it failed), the
// decisions the turn waits on with the command that answers them, and the
// outcome. On a terminal the running call's line updates in place; any
// other output gets each line once, when it is settled, so it can be read
// by a program or compared with a golden file.

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/desk-runtime/desk"
)

// traceStyles colour the glyphs on a terminal; plain output has none.
type traceStyles struct{ ok, bad, wait, dim lipgloss.Style }

func newTraceStyles(w io.Writer, tty bool) traceStyles {
	if !tty {
		p := lipgloss.NewStyle()
		return traceStyles{p, p, p, p}
	}
	// The renderer reads the terminal's colour support from its
	// environment (TERM, NO_COLOR), not by asking the terminal.
	r := lipgloss.NewRenderer(w)
	return traceStyles{
		ok:   r.NewStyle().Foreground(lipgloss.Color("2")),
		bad:  r.NewStyle().Foreground(lipgloss.Color("1")),
		wait: r.NewStyle().Foreground(lipgloss.Color("3")),
		dim:  r.NewStyle().Faint(true),
	}
}

// liveCall is a tool call the trace has seen start and not yet settle.
type liveCall struct {
	tool    string
	args    string // the arguments as streamed so far (desk's own agent)
	what    string // the command or path, once known
	started time.Time
	last    string // the newest output line
}

// trace renders the events of one or more executions.
type trace struct {
	w     io.Writer
	tty   bool
	st    traceStyles
	now   func() time.Time
	calls map[string]*liveCall // by call id or command id
	// live is the key of the call whose line is drawn (tty only), "" when
	// none; col0 says the cursor is at the start of a line.
	live string
	col0 bool
	seen map[string]bool // executions given a header
	// streamed says this step's text came as deltas; a recorded
	// execution keeps no deltas, only each step's assistant.message.
	streamed bool
	final    *desk.Execution // the last terminal execution seen
}

func newTrace(w io.Writer, tty bool) *trace {
	return &trace{w: w, tty: tty, st: newTraceStyles(w, tty), now: time.Now, calls: map[string]*liveCall{}, col0: true, seen: map[string]bool{}}
}

// line writes one settled line, above the live call's line on a terminal.
func (t *trace) line(s string) {
	t.clearLive()
	if !t.col0 {
		fmt.Fprintln(t.w)
	}
	fmt.Fprintln(t.w, s)
	t.col0 = true
	t.drawLive()
}

// clearLive removes the live call's line (it is drawn without a newline).
func (t *trace) clearLive() {
	if t.tty && t.live != "" {
		fmt.Fprint(t.w, "\r\x1b[2K")
		t.col0 = true
	}
}

// drawLive draws the live call's line where the cursor is.
func (t *trace) drawLive() {
	if !t.tty || t.live == "" {
		return
	}
	c := t.calls[t.live]
	if c == nil {
		t.live = ""
		return
	}
	s := fmt.Sprintf("  %s %s", t.st.wait.Render("⋯"), c.tool)
	if c.what != "" {
		s += "  " + clip(c.what, 60)
	}
	s += t.st.dim.Render(fmt.Sprintf("  (%s)", fmtDur(t.now().Sub(c.started))))
	if c.last != "" {
		s += t.st.dim.Render("  │ " + clip(c.last, 40))
	}
	fmt.Fprint(t.w, s)
	t.col0 = false
}

// text writes streamed reply text.
func (t *trace) text(s string) {
	if s == "" {
		return
	}
	t.clearLive()
	t.live = ""
	fmt.Fprint(t.w, s)
	t.col0 = strings.HasSuffix(s, "\n")
}

// whatRe finds the command, path or URL in (possibly partial) arguments.
var whatRe = regexp.MustCompile(`"(command|cmd|path|url|query|file_path)"\s*:\s*"((?:[^"\\]|\\.)*)`)

// callWhat is what a call acts on, as a person names it: the command line,
// the file or the URL; else its arguments, clipped.
func callWhat(args string) string {
	if m := whatRe.FindStringSubmatch(args); m != nil {
		var s string
		if json.Unmarshal([]byte(`"`+m[2]+`"`), &s) == nil {
			return s
		}
		return m[2]
	}
	a := strings.TrimSpace(args)
	if a == "" || a == "{}" || a == "null" {
		return ""
	}
	return clip(a, 60)
}

// event renders one event; it returns true when the event ended an
// execution (t.final holds it).
func (t *trace) event(e *desk.Event) bool {
	switch {
	case strings.HasPrefix(e.Type, "execution."):
		var x desk.Execution
		if json.Unmarshal(e.Data, &x) != nil || x.ID == "" {
			return false
		}
		if !t.seen[x.ID] {
			t.seen[x.ID] = true
			t.line(t.st.dim.Render(fmt.Sprintf("── %s (session %s)", x.ID, x.SessionID)))
		}
		if x.Terminal() {
			t.outcome(&x)
			return true
		}
	case e.Type == "assistant.delta":
		var d struct{ Text string }
		if json.Unmarshal(e.Data, &d) == nil && d.Text != "" {
			t.text(d.Text)
			t.streamed = true
		}
	case e.Type == "assistant.message":
		var d struct {
			Text        string
			Interrupted *desk.Interruption
		}
		if json.Unmarshal(e.Data, &d) == nil && !t.streamed {
			t.text(d.Text)
		}
		t.streamed = false
		if !t.col0 && t.live == "" {
			fmt.Fprintln(t.w)
			t.col0 = true
		}
		if d.Interrupted != nil {
			t.line(t.st.wait.Render("… interrupted here: " + desk.StoppedBy(d.Interrupted) + " (the text above is kept)"))
		}
	case e.Type == "tool.call_started":
		var d struct {
			CallID    string `json:"call_id"`
			CommandID string `json:"command_id"`
			Tool      string `json:"tool"`
			Title     string `json:"title"`
		}
		if json.Unmarshal(e.Data, &d) != nil {
			return false
		}
		key := firstNonEmpty(d.CommandID, d.CallID)
		t.calls[key] = &liveCall{tool: d.Tool, what: d.Title, started: e.At}
		if d.CommandID != "" && d.CallID != "" {
			t.calls[d.CallID] = t.calls[key]
		}
		t.setLive(key)
	case e.Type == "tool.args_delta":
		// desk's agent streams arguments by index; the newest call is the
		// one being written.
		var d struct{ Delta string }
		if json.Unmarshal(e.Data, &d) == nil && t.live != "" {
			c := t.calls[t.live]
			c.args += d.Delta
			if w := callWhat(c.args); w != "" && strings.Contains(c.args, `"`) {
				c.what = w
			}
			t.redraw()
		}
	case e.Type == "tool.output":
		var d struct {
			CommandID string `json:"command_id"`
			Text      string `json:"text"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			if c := t.calls[d.CommandID]; c != nil {
				if ls := strings.Split(strings.TrimRight(d.Text, "\n"), "\n"); len(ls) > 0 && ls[len(ls)-1] != "" {
					c.last = ls[len(ls)-1]
				}
				if t.live == "" {
					t.setLive(d.CommandID)
				} else {
					t.redraw()
				}
			}
		}
	case strings.HasPrefix(e.Type, "command."):
		var c desk.Command
		if json.Unmarshal(e.Data, &c) != nil {
			return false
		}
		if c.FinishedAt == nil {
			// Running: the call's line knows its command id now.
			lc := t.calls[c.CallID]
			if lc == nil {
				lc = &liveCall{tool: c.Tool, started: e.At}
			}
			if w := callWhat(string(c.Arguments)); w != "" {
				lc.what = w
			}
			t.calls[c.ID] = lc
			if c.Status == desk.CommandRunning {
				t.setLive(c.ID)
			}
			return false
		}
		for _, k := range []string{c.ID, c.CallID} {
			if k == t.live {
				t.clearLive()
				t.live = ""
			}
			delete(t.calls, k)
		}
		t.line(t.commandLine(&c))
		if tail := failureTail(&c); tail != "" {
			for _, l := range strings.Split(tail, "\n") {
				t.line(t.st.dim.Render("      │ " + l))
			}
		}
	default:
		if line, _ := waitLine(e); line != "" {
			t.line("  " + t.st.wait.Render("?") + " " + line)
			return false
		}
		if id := resolvedID(e); id != "" && e.Type != "input.requested" {
			var d struct {
				Status    string `json:"status"`
				DecidedBy string `json:"decided_by"`
			}
			_ = json.Unmarshal(e.Data, &d)
			by := ""
			if d.DecidedBy != "" {
				by = " by " + d.DecidedBy
			}
			if d.Status != "" && d.Status != desk.ApprovalPending && d.Status != desk.InputPending {
				t.line(fmt.Sprintf("  %s %s %s%s", t.st.dim.Render("·"), id, d.Status, by))
			}
		}
	}
	return false
}

// setLive makes key the call whose line is drawn.
func (t *trace) setLive(key string) {
	if !t.tty {
		return
	}
	t.clearLive()
	if !t.col0 {
		fmt.Fprintln(t.w)
		t.col0 = true
	}
	t.live = key
	t.drawLive()
}

// redraw draws the live call's line again (its arguments or output grew).
func (t *trace) redraw() {
	if t.tty && t.live != "" {
		t.clearLive()
		t.drawLive()
	}
}

// tick redraws the live line so its duration moves while nothing arrives.
func (t *trace) tick() { t.redraw() }

// commandExit is the exit status a command's facts report, if any.
func commandExit(c *desk.Command) (int, bool) {
	var f struct {
		ExitCode *int `json:"exit_code"`
	}
	if json.Unmarshal(c.Facts, &f) != nil || f.ExitCode == nil {
		return 0, false
	}
	return *f.ExitCode, true
}

// commandOK says whether a settled call did what it was asked: a command
// that exited non-zero is a failure, however the tool call itself ended.
func commandOK(c *desk.Command) bool {
	if c.Status != desk.CommandSucceeded {
		return false
	}
	code, has := commandExit(c)
	return !has || code == 0
}

// commandLine is a settled call's line.
func (t *trace) commandLine(c *desk.Command) string {
	glyph := t.st.ok.Render("✓")
	switch {
	case c.Status == desk.CommandDeclined || c.Status == desk.CommandCancelled:
		glyph = t.st.wait.Render("■")
	case !commandOK(c):
		glyph = t.st.bad.Render("✗")
	}
	s := fmt.Sprintf("  %s %s", glyph, c.Tool)
	if w := callWhat(string(c.Arguments)); w != "" {
		s += "  " + clip(w, 60)
	}
	var facts []string
	if c.StartedAt != nil && c.FinishedAt != nil {
		facts = append(facts, fmtDur(c.FinishedAt.Sub(*c.StartedAt)))
	}
	if code, has := commandExit(c); has {
		facts = append(facts, fmt.Sprintf("exit %d", code))
	}
	if c.Status != desk.CommandSucceeded {
		facts = append(facts, c.Status)
	}
	if c.Error != "" {
		facts = append(facts, clip(c.Error, 80))
	}
	if len(facts) > 0 {
		s += t.st.dim.Render("  (" + strings.Join(facts, ", ") + ")")
	}
	return s
}

// failureTail is the last lines of a failed call's output.
func failureTail(c *desk.Command) string {
	if commandOK(c) || c.Status == desk.CommandDeclined || c.Status == desk.CommandCancelled {
		return ""
	}
	out := strings.TrimRight(c.Output, "\n")
	if out == "" {
		return ""
	}
	ls := strings.Split(out, "\n")
	if len(ls) > 5 {
		ls = ls[len(ls)-5:]
	}
	for i, l := range ls {
		ls[i] = clip(l, 100)
	}
	return strings.Join(ls, "\n")
}

// outcome is the line an execution ends with.
func (t *trace) outcome(x *desk.Execution) {
	t.final = x
	switch x.Phase {
	case desk.PhaseEnded:
		t.line(fmt.Sprintf("%s %s ended", t.st.ok.Render("✓"), x.ID))
	case desk.PhaseFailed:
		t.line(fmt.Sprintf("%s %s failed: %s", t.st.bad.Render("✗"), x.ID, orDash(x.Reason)))
	case desk.PhaseInterrupted:
		why := orDash(x.Reason)
		if i := x.Interruption; i != nil {
			why = strings.TrimSpace(firstNonEmpty(i.Reason, x.Reason))
			if i.By != "" {
				why += " (stopped by " + i.By + ")"
			}
		}
		t.line(fmt.Sprintf("%s %s interrupted: %s", t.st.wait.Render("■"), x.ID, why))
	}
}

// fmtDur is a duration as a person reads it: 40ms, 1.2s, 3m04s.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0ms"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
