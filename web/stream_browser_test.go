package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/desk-runtime/desk"
)

// TestBrowserLiveView runs issue #28's live-view acceptance in one desk and one
// browser: what Stop keeps, and (as they land) tool arguments as they
// stream, the app log and the palette's shortcuts.
func TestBrowserLiveView(t *testing.T) {
	s := newSuite(t)
	t.Run("StopKeepsPartialText", func(t *testing.T) { browserStopKeeps(t, s) })
	t.Run("ToolArgumentsStream", func(t *testing.T) { browserToolArgsStream(t, s) })
	t.Run("HostileArgumentsStayText", func(t *testing.T) { browserHostileArgs(t, s) })
	t.Run("PaletteShortcuts", func(t *testing.T) { browserPaletteShortcuts(t, s) })
	t.Run("AppLogReadAndLinks", func(t *testing.T) { browserAppLog(t, s) })
	t.Run("RuntimeCallHasTargets", func(t *testing.T) { browserRuntimeCall(t, s) })
}

// Stop during a streamed reply: the text that had streamed stays, as a
// step marked interrupted, and the run bar says who stopped it; a reload
// shows the same (it is a stored message, not the live bubble).
func browserStopKeeps(t *testing.T, s *suite) {
	x := s.f.script(t, "Stop demo",
		map[string]any{"text": "First words of a long answer. " + strings.Repeat("More words. ", 60), "delay_ms": 60000})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("talk for a long time")
	tb.wait("the reply to start streaming", `(() => { const s = document.querySelector("#transcript .streaming .stream-text"); return s && s.textContent.includes("First words"); })()`)
	tb.do("stop", chromedp.Click(chromedp.CSS(`#run #stop`)))
	check := func(when string) {
		tb.wait("the kept partial step "+when, `(() => { const st = document.querySelector("#transcript .step.interrupted"); return st && st.querySelector(".md").textContent.includes("First words") && !!st.querySelector("[data-interrupted]"); })()`)
		note := evalJS[string](tb, `document.querySelector("#transcript .step.interrupted [data-interrupted]").textContent`)
		if !strings.Contains(note, "stopped by admin") {
			t.Errorf("%s: the interrupted note %q does not say who stopped it", when, note)
		}
		tb.wait("the run bar "+when, `(() => { const r = document.querySelector('#run [data-phase="interrupted"]'); return r && r.textContent.includes("Stopped by admin"); })()`)
		if n := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant").length`); n != 1 {
			t.Errorf("%s: %d assistant blocks, want the one kept", when, n)
		}
	}
	check("live")
	if evalJS[bool](tb, `!!document.querySelector("#transcript .streaming")`) {
		t.Error("the streaming bubble is still there after the stop")
	}
	tb.openSession(x)
	check("after a reload")
	var ms struct{ Messages []desk.Message }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages", nil, &ms)
	if last := ms.Messages[len(ms.Messages)-1]; last.Interrupted() == nil {
		t.Fatalf("the last message is not the interrupted partial: %+v", last)
	}
}

// A long write_file shows its path and a growing preview while the model
// writes it, before the tool has run; an apply_patch shows its diff while
// it streams; Markdown renders while the step streams.
func browserToolArgsStream(t *testing.T, s *suite) {
	var content strings.Builder
	for i := range 120 {
		fmt.Fprintf(&content, "line %03d of the long file\n", i)
	}
	patch := "*** Begin Patch\n*** Update File: /artifacts/long.txt\n@@\n-line 000 of the long file\n+the first line, patched\n"
	for i := range 80 {
		patch += fmt.Sprintf("+an added line, number %d\n", i)
	}
	patch += "*** End Patch\n"
	x := s.f.script(t, "Live arguments",
		map[string]any{"text": "Writing **the long file** now.\n\nIt has many lines.", "tool_calls": []any{map[string]any{"name": "write_file",
			"arguments": orderedArgs("path", "/artifacts/long.txt", "content", content.String())}}, "delay_ms": 9000},
		map[string]any{"tool_calls": []any{map[string]any{"name": "apply_patch",
			"arguments": map[string]any{"patch": patch}}}, "delay_ms": 6000},
		map[string]any{"text": "Both done."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("write a long file")
	tb.wait("Markdown rendered while the step streams", `(() => { const b = document.querySelector("#transcript .streaming .stream-text strong"); return b && b.textContent === "the long file"; })()`)
	tb.wait("the write_file call's path while it streams", `(() => { const c = document.querySelector('#transcript .streaming .live-call[data-tool="write_file"]'); return c && c.querySelector(".live-target") && c.querySelector(".live-target").textContent === "/artifacts/long.txt"; })()`)
	tb.wait("a growing preview", `(() => { const p = document.querySelector('#transcript .streaming .live-call[data-tool="write_file"] .live-preview'); return p && /line 0[0-9][0-9] of the long file/.test(p.textContent); })()`)
	if done := evalJS[bool](tb, `!!document.querySelector("#transcript .span.status-succeeded") || /line 119/.test(document.querySelector('#transcript .live-call[data-tool="write_file"] .live-preview').textContent)`); done {
		t.Fatal("the preview was first seen complete: the arguments did not render while they streamed")
	}
	tb.wait("the patch's diff while it streams", `(() => { const c = document.querySelector('#transcript .streaming .live-call[data-tool="apply_patch"]'); return c && c.querySelector(".live-target") && c.querySelector(".live-target").textContent === "/artifacts/long.txt" && [...c.querySelectorAll(".diff-add")].some(l => l.textContent.startsWith("+an added line")) && !/number 79/.test(c.textContent); })()`)
	if ran := evalJS[bool](tb, `[...document.querySelectorAll("#transcript .span")].some(s => s.textContent.includes("apply_patch"))`); ran {
		t.Fatal("the patch's span was there before its diff streamed")
	}
	tb.wait("the reply", `[...document.querySelectorAll("#transcript .msg.assistant .step:not(.streaming)")].some(m => m.textContent.includes("Both done."))`)
	tb.wait("no streaming step left", `!document.querySelector("#transcript .streaming")`)

	// An exec_command shows its command line while it is written.
	y := s.f.script(t, "Live command",
		map[string]any{"tool_calls": []any{map[string]any{"name": "exec_command",
			"arguments": orderedArgs("command", "echo live && ls /workspace", "cwd", "/workspace"+strings.Repeat(" ", 3000))}}, "delay_ms": 6000})
	tb.openSession(y)
	tb.send("run a command")
	tb.wait("the command line while it streams", `(() => { const c = document.querySelector('#transcript .streaming .live-call[data-tool="exec_command"] .live-target'); return c && c.textContent === "echo live && ls /workspace"; })()`)
	// Whatever the command then does (it waits for approval here), the
	// turn is stopped.
	evalJS[bool](tb, `(() => { const b = document.querySelector("#run #stop"); if (b) b.click(); return true; })()`)
	tb.wait("the turn stopped", `!document.querySelector("#run #stop")`)
}

// A model's hostile tool arguments and text (script tags, a closing pre,
// htmx attributes, one huge line) stay text while they stream: nothing
// runs, no element or attribute is made of them, the line is clipped.
func browserHostileArgs(t *testing.T, s *suite) {
	hostile := `</pre></div><script>window.__pwned = 1</script><div hx-get="/logout" hx-trigger="load" id="planted">x</div><img src=x onerror="window.__pwned = 2">`
	huge := strings.Repeat("A", 40000)
	x := s.f.script(t, "Hostile arguments",
		map[string]any{"text": "See <script>window.__pwned = 3</script> and <div hx-get=\"/logout\" hx-trigger=\"load\">y</div> here.\n\n", "tool_calls": []any{map[string]any{"name": "write_file",
			"arguments": orderedArgs("path", "/artifacts/"+hostile, "content", hostile+"\n"+huge+"\n"+hostile+"\nlast line")}}, "delay_ms": 5000},
		map[string]any{"text": "ok"})
	tb := s.tab(t)
	// The hostile path is refused by write_file; that is the model's problem,
	// not the page's: what matters is what the page did while it streamed.
	tb.openSession(x)
	tb.send("be hostile")
	tb.wait("the hostile preview streaming", `(() => { const p = document.querySelector('#transcript .streaming .live-call .live-preview'); return p && p.textContent.includes("AAAA"); })()`)
	if longest := evalJS[int](tb, `Math.max(0, ...[...document.querySelectorAll("#transcript .live-preview span")].map(l => l.textContent.length))`); longest > 401 {
		t.Fatalf("a preview line of %d characters: a huge line is not clipped", longest)
	}
	tb.wait("the preview's last line", `(() => { const p = document.querySelector('#transcript .live-call .live-preview'); return !p || p.textContent.includes("last line"); })()`)
	tb.wait("the turn to end", `!document.querySelector("#run #stop")`)
	checks := evalJS[map[string]any](tb, `(() => ({
		pwned: window.__pwned || 0,
		planted: !!document.getElementById("planted"),
		hx: document.querySelectorAll('#transcript [hx-get="/logout"], #transcript [hx-trigger]').length,
		scripts: document.querySelectorAll("#transcript script, #transcript img").length,
		loggedIn: !!document.querySelector("#sidebar"),
	}))()`)
	if checks["pwned"] != float64(0) || checks["planted"] != false || checks["hx"] != float64(0) || checks["scripts"] != float64(0) || checks["loggedIn"] != true {
		t.Fatalf("hostile arguments made markup: %v", checks)
	}
}

// orderedArgs is a JSON object with its keys in the order given, as a
// model writes them (a map would sort them).
func orderedArgs(kv ...string) json.RawMessage {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteString(",")
		}
		k, _ := json.Marshal(kv[i])
		v, _ := json.Marshal(kv[i+1])
		b.Write(k)
		b.WriteString(":")
		b.Write(v)
	}
	b.WriteString("}")
	return json.RawMessage(b.String())
}

// Ctrl+Shift+P opens the palette in command mode, Ctrl+P as quick-open,
// both while the composer has the focus; pressed with the palette open
// they switch its mode.
func browserPaletteShortcuts(t *testing.T, s *suite) {
	x := s.f.script(t, "Shortcut target", map[string]any{"text": "hi"})
	tb := s.tab(t)
	tb.openSession(x)
	tb.do("focus the composer, press ctrl+shift+p", chromedp.Focus(chromedp.CSS("#composer-text")),
		chromedp.KeyEvent("P", chromedp.KeyModifiers(chromedp.ModifierCtrl|chromedp.ModifierShift)))
	tb.wait("the palette in command mode", `document.querySelector("#palette").open && document.querySelector("#palette-input").value.startsWith(">")`)
	opts := evalJS[[]string](tb, `[...document.querySelectorAll("#palette-list [role=option]")].map(o => o.textContent)`)
	if !contains(opts, "Pin this sessionP") {
		t.Errorf("command mode lacks the session's actions: %v", opts)
	}
	for _, o := range opts {
		if strings.HasPrefix(o, "Session:") {
			t.Errorf("command mode lists a session: %q", o)
		}
	}
	if typed := evalJS[string](tb, `document.querySelector("#composer-text").value`); typed != "" {
		t.Errorf("the shortcut typed %q into the composer", typed)
	}
	tb.do("ctrl+p in the open palette", chromedp.KeyEvent("p", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tb.wait("quick-open", `document.querySelector("#palette").open && document.querySelector("#palette-input").value === ""`)
	tb.do("close", chromedp.KeyEvent(kb.Escape))
	tb.wait("the palette closed", `!document.querySelector("#palette").open`)
	tb.do("ctrl+p", chromedp.KeyEvent("p", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tb.wait("quick-open with sessions", `document.querySelector("#palette").open && document.querySelector("#palette-input").value === "" && [...document.querySelectorAll("#palette-list [role=option]")].some(o => o.textContent.includes("Shortcut target"))`)
}

// An error entry about a session reads as one line (what, where, the
// kind of error) and links to its session; it becomes read once scrolled
// into view, which clears the error count; live entries keep the reader's
// scroll position.
func browserAppLog(t *testing.T, s *suite) {
	x := s.f.script(t, "Logged session", map[string]any{"text": "hi"})
	lg := s.f.e.App.Logger
	// The error is the newest entry: the last row of the list, below the
	// fold of a page that opens at its top.
	for i := range 220 {
		lg.Info("filler entry", "n", i)
	}
	lg.Error("run the tool", "component", "executor", desk.LogSessionID, x.ID, desk.LogExecutionID, "exe_01ARZ3NDEKTSV4RRFFQ69G5FAV",
		desk.LogErr, errors.New("context deadline exceeded\nwhile waiting for the sandbox"))
	if err := s.f.e.App.Logs.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb := s.tab(t)
	tb.open("/logs")
	sel := `[...document.querySelectorAll("#log-entries li.lvl-error")].find(l => l.textContent.includes("run the tool"))`
	tb.wait("the error entry", "!!"+sel)
	line := evalJS[map[string]string](tb, `(() => { const l = `+sel+`; return { what: l.querySelector(".log-what").textContent, where: l.querySelector(".log-where").textContent,
		kind: l.querySelector(".log-kind").textContent, detail: l.querySelector(".log-detail").textContent, ses: l.querySelector("a.log-ses").getAttribute("href") }; })()`)
	if line["what"] != "run the tool" || !strings.Contains(line["where"], "executor") || line["kind"] != "timeout" ||
		line["detail"] != "context deadline exceeded …" || line["ses"] != "/w/"+s.f.ws.ID+"/s/"+x.ID {
		t.Fatalf("the error entry reads %v", line)
	}
	if !evalJS[bool](tb, sel+`.classList.contains("unread")`) {
		t.Fatal("the error entry below the fold is read before it was seen")
	}
	tb.wait("the error count", `!!document.querySelector("#nav-unread .badge.error")`)
	evalJS[bool](tb, `(() => { `+sel+`.scrollIntoView({block: "center"}); return true; })()`)
	tb.wait("the entry read", `!`+sel+`.classList.contains("unread")`)
	tb.wait("the error count cleared", `!document.querySelector("#nav-unread .badge.error")`)
	var u desk.LogUnread
	s.f.e.Must(200, "GET", "/v1/logs/unread", nil, &u)
	if u.Counts["error"] != 0 {
		t.Fatalf("the server still counts %d unread errors", u.Counts["error"])
	}
	// A live entry arriving while the reader is scrolled up (Follow off)
	// leaves the view where it was.
	tb.do("stop following", chromedp.Click(chromedp.CSS("#follow")))
	before := evalJS[float64](tb, `document.scrollingElement.scrollTop + document.querySelector("#main").scrollTop`)
	lg.Info("arriving while scrolled up")
	tb.wait("the live entry", `[...document.querySelectorAll("#log-entries li")].some(l => l.textContent.includes("arriving while scrolled up"))`)
	if after := evalJS[float64](tb, `document.scrollingElement.scrollTop + document.querySelector("#main").scrollTop`); after != before {
		t.Fatalf("a live entry moved the view from %v to %v", before, after)
	}
	evalJS[bool](tb, `(() => { `+sel+`.querySelector("a.log-ses").click(); return true; })()`)
	tb.wait("the session page", `location.pathname.endsWith(`+jsString("/s/"+x.ID)+`)`)
}

// A runtime's tool call has a command before its message is stored: its
// call and output, streamed during the turn, land in the streaming step
// (before, the output had no target: htmx's oobErrorNoTarget, which the
// tab's console check now fails on). The events are the ones
// runtimehost emits, appended to a running turn of the page's session.
func browserRuntimeCall(t *testing.T, s *suite) {
	x := s.f.script(t, "Runtime-shaped call",
		map[string]any{"text": "Running a command for you. " + strings.Repeat("Still here. ", 20), "delay_ms": 60000})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("run something")
	tb.wait("the reply to start streaming", `!!document.querySelector("#transcript .streaming")`)
	exe := evalJS[string](tb, `document.querySelector("#run #stop").dataset.execution`)
	ev := func(typ string, data any) *desk.Event {
		b, _ := json.Marshal(data)
		return &desk.Event{At: desk.Now(), Type: typ, WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe, Data: b}
	}
	if err := s.f.e.App.Store.AppendEvents(context.Background(), []*desk.Event{
		ev("tool.call_started", map[string]any{"call_id": "rt-call-1", "tool": "execute", "command_id": "cmd_01ARZ3NDEKTSV4RRFFQ69G5FAV", "title": "ls -la /workspace"}),
		ev("tool.output", map[string]any{"command_id": "cmd_01ARZ3NDEKTSV4RRFFQ69G5FAV", "text": "total 0\n"}),
	}); err != nil {
		t.Fatal(err)
	}
	tb.wait("the runtime call in the streaming step", `(() => { const c = document.querySelector('#transcript .streaming .live-call[data-tool="execute"]'); return c && c.textContent.includes("ls -la /workspace") && c.querySelector("#out-cmd_01ARZ3NDEKTSV4RRFFQ69G5FAV").textContent.includes("total 0"); })()`)
	tb.do("stop", chromedp.Click(chromedp.CSS(`#run #stop`)))
	tb.wait("the turn stopped", `!document.querySelector("#run #stop")`)
}
