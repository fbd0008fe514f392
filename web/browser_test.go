package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// The browser tests drive Debian's Chromium (headless) against a real desk
// started in the test, with script sessions, through the acceptance list of
// the web UI. Without a browser they skip. DESK_UI_SCREENSHOTS=1 rewrites
// docs/ui-session.png and docs/ui-artifacts.png.

// chromium finds the browser: DESK_CHROMIUM, or chromium on the PATH.
func chromium(t *testing.T) string {
	if p := os.Getenv("DESK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("the browser tests need chromium: apt-get install -y chromium (or set DESK_CHROMIUM to a Chrome binary)")
	return ""
}

// tab is one browser tab signed in to a desk.
type tab struct {
	t   *testing.T
	f   *fixture
	ctx context.Context

	mu      sync.Mutex
	errors  []string // uncaught exceptions and console errors
	allowed []string // console errors a test provokes on purpose
}

// suite is one desk and one browser shared by the browser tests.
type suite struct {
	f       *fixture
	browser context.Context
	home    *tab // the tab that signed in, open for the whole suite
}

func newSuite(t *testing.T) *suite {
	return newSuiteWith(t, app.Config{})
}

// newSuiteWith starts the desk with cfg (its stop timeout set).
func newSuiteWith(t *testing.T, cfg app.Config) *suite {
	path := chromium(t)
	cfg.Execution.StopTimeout = 10 * time.Second
	f := start(t, cfg)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	s := &suite{f: f, browser: browser}
	s.home = s.tab(t)
	s.home.login()
	return s
}

// tab opens a new tab (sharing the browser's cookies) for one test.
func (s *suite) tab(t *testing.T) *tab {
	ctx, cancel := chromedp.NewContext(s.browser)
	ctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancel() })
	tb := &tab{t: t, f: s.f, ctx: ctx}
	// Every uncaught exception and every error the page writes to the
	// console (htmx's oobErrorNoTarget among them) fails the test.
	console := chromedp.Console(ctx)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && !m.IsException() {
				continue
			}
			text := m.String()
			if m.Exception != nil {
				text = (&chromedp.ExceptionError{ExceptionDetails: m.Exception}).Error()
			}
			if m.URL != "" {
				text += " (" + m.URL + ")"
			}
			tb.mu.Lock()
			tb.errors = append(tb.errors, text)
			tb.mu.Unlock()
		}
	}()
	// Record every CSP violation of desk's pages: the policy must never
	// have to refuse one of desk's own scripts or styles.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", function (e) { window.__csp.push(e.violatedDirective + " " + e.blockedURI); });`,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.check)
	return tb
}

// allowConsole lets console errors containing substr pass check: for a
// test that provokes one on purpose (a refused request the browser logs).
func (tb *tab) allowConsole(substr string) {
	tb.mu.Lock()
	tb.allowed = append(tb.allowed, substr)
	tb.mu.Unlock()
}

// consoleErrors is what the page wrote as errors so far, less the allowed.
func (tb *tab) consoleErrors() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var errs []string
next:
	for _, e := range tb.errors {
		for _, a := range tb.allowed {
			if strings.Contains(e, a) {
				continue next
			}
		}
		errs = append(errs, e)
	}
	return errs
}

// check fails the test on uncaught exceptions, console errors or CSP
// violations of the page. Every browser test's tab runs it at cleanup.
func (tb *tab) check() {
	if errs := tb.consoleErrors(); len(errs) > 0 {
		tb.t.Errorf("%d console errors in the page:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	if tb.t.Failed() {
		return
	}
	csp, err := chromedp.Run(tb.ctx, chromedp.Evaluate[[]string](`window.__csp || []`))
	if err == nil && len(csp) > 0 {
		tb.t.Errorf("CSP violations: %v", csp)
	}
}

func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.fail(what, err)
	}
}

func (tb *tab) fail(what string, err error) {
	tb.t.Helper()
	html, _ := chromedp.Run(context.WithoutCancel(tb.ctx), chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
	tb.t.Fatalf("%s: %v\npage text:\n%s", what, err, html)
}

// wait polls a JavaScript condition until it holds (generous: the machine
// may be loaded). Errors while a navigation replaces the page are retried.
func (tb *tab) wait(what, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		if err == nil && ok {
			return
		}
		if tb.ctx.Err() != nil {
			break
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	if last == nil {
		last = fmt.Errorf("still false after 60s")
	}
	tb.fail("waiting for "+what, last)
}

func evalJS[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.fail("evaluate "+expr, err)
	}
	return v
}

func (tb *tab) open(path string) {
	tb.t.Helper()
	tb.do("open "+path, chromedp.Navigate(tb.f.e.Server.URL+path), chromedp.WaitVisible(chromedp.CSS("#main")))
}

func (tb *tab) login() {
	tb.t.Helper()
	tb.do("log in",
		chromedp.Navigate(tb.f.e.Server.URL+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), tb.f.e.Token),
		chromedp.Click(chromedp.CSS(`.login button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("#sidebar")),
	)
}

// send types a message into the composer and presses Enter.
func (tb *tab) send(text string) {
	tb.t.Helper()
	tb.do("send "+text, chromedp.WaitVisible(chromedp.CSS("#composer-text")),
		chromedp.SendKeys(chromedp.CSS("#composer-text"), text+kb.Enter))
	tb.wait("the composer to clear after sending", `document.querySelector("#composer-text").value === ""`)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (tb *tab) openSession(x desk.Session) {
	tb.t.Helper()
	tb.open("/w/" + tb.f.ws.ID + "/s/" + x.ID)
	// The page's event stream is connected when the hold it keeps shows.
	tb.wait("the composer", `!!document.querySelector("#composer-text")`)
}

// TestBrowser runs the acceptance list in one desk and one browser.
func TestBrowser(t *testing.T) {
	s := newSuite(t)
	t.Run("CreateSessionAndStream", func(t *testing.T) { browserCreateAndStream(t, s) })
	t.Run("ToolSpanAndArtifact", func(t *testing.T) { browserToolSpan(t, s) })
	t.Run("QueueSteerStop", func(t *testing.T) { browserQueueSteerStop(t, s) })
	t.Run("Approval", func(t *testing.T) { browserApproval(t, s) })
	t.Run("InputRequest", func(t *testing.T) { browserInputRequest(t, s) })
	t.Run("HTMLPreviewSandbox", func(t *testing.T) { browserHTMLSandbox(t, s) })
	t.Run("PinArchive", func(t *testing.T) { browserPinArchive(t, s) })
	t.Run("LogsFilter", func(t *testing.T) { browserLogs(t, s) })
	t.Run("DraftSurvivesReload", func(t *testing.T) { browserDraft(t, s) })
	t.Run("PaletteAndNarrowScreen", func(t *testing.T) { browserPalette(t, s) })
}

// Log in (the suite did), create a session with the model picker, send a
// message and see the reply stream in.
func browserCreateAndStream(t *testing.T, s *suite) {
	tb := s.tab(t)
	tb.open("/w/" + s.f.ws.ID + "/new")
	script := `{"steps":[{"text":"Hello from the **scripted** agent: this reply streams in word by word so you can watch it arrive.","delay_ms":3000}]}`
	tb.do("fill the new-session form",
		chromedp.WaitVisible(chromedp.CSS("#ns-model")),
		chromedp.SendKeys(chromedp.CSS("#ns-title"), "Streaming demo"),
		chromedp.SetValue(chromedp.CSS("#ns-model"), "script"),
		chromedp.SetValue(chromedp.CSS("#ns-script"), script),
		chromedp.Click(chromedp.CSS(`#new-session-form button[type=submit]`)),
	)
	tb.wait("the new session's page", `location.pathname.includes("/s/ses_") && !!document.querySelector("#composer-text")`)
	if title := evalJS[string](tb, `document.querySelector("#ses-title").textContent`); title != "Streaming demo" {
		t.Fatalf("session title = %q", title)
	}
	tb.wait("the session's row in the sidebar", `!!document.querySelector("#list-recent li.current")`)
	tb.send("Say hello")
	tb.wait("the user's message", `[...document.querySelectorAll("#transcript .msg.user")].some(m => m.textContent.includes("Say hello"))`)
	tb.wait("the reply streaming in", `(() => { const s = document.querySelector("#transcript .streaming .stream-text"); return s && s.textContent.length > 0 && !s.textContent.includes("watch it arrive"); })()`)
	tb.wait("the whole reply, rendered", `[...document.querySelectorAll("#transcript .msg.assistant .step:not(.streaming) .md strong")].some(b => b.textContent === "scripted")`)
	tb.wait("the streaming text to give way to the message", `!document.querySelector("#transcript .streaming")`)
	if n := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant").length`); n != 1 {
		t.Fatalf("%d assistant messages after one turn, want 1", n)
	}
}

func testPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 120, 80))
	for y := 0; y < 80; y++ {
		for x := 0; x < 120; x++ {
			img.Set(x, y, color.RGBA{uint8(40 + x), uint8(90 + y), 200, 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

// A tool call shows as an execution span that settles with its artifact
// linked; the link opens the preview. Screenshots of the session view and
// the artifact shelf come from here.
func browserToolSpan(t *testing.T, s *suite) {
	report := "# Quarterly report\n\nRevenue grew in every region.\n\n| Region | Q1 | Q2 |\n|---|---:|---:|\n| North | 10 | 14 |\n| South | 8 | 11 |\n\n```sh\ndesk artifact list\n```\n"
	x := s.f.script(t, "Quarterly report",
		map[string]any{"text": "I'll write the report.", "tool_calls": []any{map[string]any{"name": "write_file",
			"arguments": map[string]any{"path": "/artifacts/report.md", "content": report}}}, "delay_ms": 600},
		map[string]any{"text": "Done: **report.md** is on the shelf.\n\n| file | kind |\n|---|---|\n| report.md | markdown |"})
	s.f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=chart.png", testPNG(), nil)
	s.f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=summary.html", []byte("<!doctype html><h1>Summary</h1>"), nil)
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("Write the quarterly report as an artifact")
	tb.wait("the tool span", `!!document.querySelector("#transcript .span")`)
	tb.wait("the span to settle", `!!document.querySelector("#transcript .span.status-succeeded")`)
	summary := evalJS[string](tb, `document.querySelector("#transcript .span.status-succeeded summary").textContent`)
	for _, want := range []string{"write_file", "/artifacts/report.md", "succeeded", "written"} {
		if !strings.Contains(summary, want) {
			t.Errorf("span summary %q lacks %q", summary, want)
		}
	}
	tb.wait("the artifact linked from the span", `[...document.querySelectorAll("#transcript .span .art-link")].some(a => a.textContent.includes("report.md"))`)
	tb.wait("the reply", `[...document.querySelectorAll("#transcript .msg.assistant .md strong")].some(b => b.textContent === "report.md")`)
	tb.wait("the shelf to count the new artifact", `document.querySelector("#shelf-summary").dataset.count === "3"`)
	tb.do("open the artifact from the span", chromedp.Click(chromedp.CSS(`#transcript .span .art-link`)))
	tb.wait("the Markdown preview", `(() => { const h = document.querySelector("#preview .md h1"); return h && h.textContent === "Quarterly report" && !!document.querySelector("#preview .md table"); })()`)
	// At 1280px the open preview leaves the transcript room to read.
	if w := evalJS[float64](tb, `document.querySelector("#transcript").getBoundingClientRect().width`); w < 500 {
		t.Errorf("with the preview open the transcript is %vpx wide at 1280px", w)
	}
	tb.wait("the copy button on the code block", `!!document.querySelector("#transcript .md pre .copy-btn, #preview .md pre .copy-btn")`)
	// The span expands to its arguments and output.
	tb.do("expand the span", chromedp.Click(chromedp.CSS(`#transcript .span.status-succeeded summary`)))
	tb.wait("the expanded arguments", `document.querySelector("#transcript .span.status-succeeded details").open && document.querySelector("#transcript .span.status-succeeded .span-body pre").textContent.includes("Quarterly report")`)
	if os.Getenv("DESK_UI_SCREENSHOTS") == "1" {
		tb.do("collapse the span", chromedp.Click(chromedp.CSS(`#transcript .span.status-succeeded summary`)))
		shot, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, "ui-session.png", shot)
		tb.do("open the image", chromedp.Click(chromedp.CSS(`.art[data-kind="png"] .art-open`)))
		tb.wait("the image preview", `(() => { const i = document.querySelector("#preview img"); return i && i.complete && i.naturalWidth === 120; })()`)
		shelf, err := chromedp.Run(tb.ctx, chromedp.Screenshot(chromedp.CSS("#shelf-panel")))
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, "ui-artifacts.png", shelf)
	}
}

func writeShot(t *testing.T, name string, b []byte) {
	p := filepath.Join("..", "docs", name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", p, len(b))
}

type execList struct{ Executions []desk.Execution }

// A second message while the first runs is a queued row; Steer moves the
// third ahead of the second; Stop interrupts exactly the running turn.
func browserQueueSteerStop(t *testing.T, s *suite) {
	x := s.f.script(t, "Queue demo",
		map[string]any{"text": "Working on the first request. " + strings.Repeat("Still working. ", 20), "delay_ms": 60000},
		map[string]any{"text": "Answer to the steered message."},
		map[string]any{"text": "Answer to the other message."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("first")
	tb.wait("the Stop button of the running turn", `!!document.querySelector("#run #stop")`)
	tb.send("second")
	tb.send("third")
	tb.wait("two queued rows", `document.querySelectorAll("#queue li.queued").length === 2`)
	order := evalJS[[]string](tb, `[...document.querySelectorAll("#queue li.queued .q-text")].map(e => e.textContent)`)
	if strings.Join(order, ",") != "second,third" {
		t.Fatalf("queue = %v, want second,third", order)
	}
	// Moving the last row to the back changes nothing, so the redraws it
	// causes (its answer and the queue event) leave the rows' nodes alone.
	evalJS[bool](tb, `(() => {
		document.querySelector("#queue").__mark = "kept"; // a property: not part of the node's equality
		window.__queueRedraws = 0;
		document.addEventListener("htmx:oobBeforeSwap", e => { if (e.detail.target.id === "queue") { window.__queueRedraws++; window.__queueSkipped = (window.__queueSkipped || 0) + (e.detail.shouldSwap ? 0 : 1); } });
		const li = [...document.querySelectorAll("#queue li.queued")].find(l => l.querySelector(".q-text").textContent === "third");
		li.querySelector('button[aria-label="Move to the back"]').click();
		return true; })()`)
	tb.wait("the queue redraw of the no-op move", `window.__queueRedraws >= 1`)
	if kept := evalJS[bool](tb, `document.querySelector("#queue").__mark === "kept" && window.__queueSkipped === window.__queueRedraws`); !kept {
		t.Fatalf("a redraw that changed nothing replaced the queue (%d redraws, %d skipped)",
			evalJS[int](tb, `window.__queueRedraws`), evalJS[int](tb, `window.__queueSkipped || 0`))
	}
	tb.do("steer the third", chromedp.Click(chromedp.CSS(`#queue li.queued:nth-child(2) button[aria-label^="Steer"]`)))
	tb.wait("the third to lead the queue", `(() => { const r = [...document.querySelectorAll("#queue li.queued .q-text")].map(e => e.textContent); return r.join(",") === "third,second"; })()`)
	running := evalJS[string](tb, `document.querySelector("#run #stop").dataset.execution`)
	tb.do("stop", chromedp.Click(chromedp.CSS(`#run #stop`)))
	// The exact execution the button named was interrupted, and the
	// steered row ran next.
	waitFor(t, "the stopped turn to be interrupted", func() bool {
		var e desk.Execution
		s.f.e.Must(200, "GET", "/v1/executions/"+running, nil, &e)
		return e.Phase == desk.PhaseInterrupted
	})
	tb.wait("the steered message's answer", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("steered message"))`)
	users := evalJS[[]string](tb, `[...document.querySelectorAll("#transcript .msg.user .plain")].map(e => e.textContent)`)
	if len(users) < 2 || users[0] != "first" || users[1] != "third" {
		t.Fatalf("delivered user messages = %v, want first, then the steered third", users)
	}
	tb.wait("the last turn to finish", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("other message"))`)
}

// An approval card shows the command; Approve lets it run.
func browserApproval(t *testing.T, s *suite) {
	x := s.f.script(t, "Approval demo",
		map[string]any{"tool_calls": []any{map[string]any{"name": "exec_command", "arguments": map[string]any{"command": "echo approved-run"}}}},
		map[string]any{"text": "The command ran."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("Run the command")
	tb.wait("the approval card with the command", `(() => { const c = document.querySelector("#cards .card.approval"); return c && c.textContent.includes("echo approved-run"); })()`)
	tb.wait("the span waiting", `!!document.querySelector("#transcript .span.status-waiting")`)
	tb.wait("the sidebar to show the session waiting", `!!document.querySelector("#row-`+x.ID+`.tone-waiting")`)
	tb.do("approve", chromedp.Click(chromedp.CSS(`#cards .card.approval button[value=approve]`)))
	tb.wait("the card to go", `!document.querySelector("#cards .card.approval")`)
	tb.wait("the command's output", `[...document.querySelectorAll("#transcript .span.status-succeeded pre.out")].some(p => p.textContent.includes("approved-run"))`)
	if got := evalJS[string](tb, `document.querySelector("#transcript .span.status-succeeded .span-outcome").textContent`); got != "exit 0" {
		t.Fatalf("span outcome = %q, want exit 0", got)
	}
	tb.wait("the reply", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("The command ran."))`)
	var aps struct{ Approvals []desk.Approval }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/approvals", nil, &aps)
	if len(aps.Approvals) != 1 || aps.Approvals[0].Status != desk.ApprovalApproved || aps.Approvals[0].DecidedBy != desk.AdminActor {
		t.Fatalf("approvals = %+v", aps.Approvals)
	}
}

// An input-request card marks the recommended option; the answer reaches
// the queue as an answer row.
func browserInputRequest(t *testing.T, s *suite) {
	x := s.f.script(t, "Question demo",
		map[string]any{"tool_calls": []any{map[string]any{"name": "request_user_input", "arguments": map[string]any{"questions": []any{
			map[string]any{"id": "colour", "question": "Which colour should the chart use?", "options": []any{
				map[string]any{"label": "teal", "recommended": true}, map[string]any{"label": "orange"}}}}}}}},
		map[string]any{"text": "Going on with teal for now. " + strings.Repeat("Working. ", 20), "delay_ms": 60000},
		map[string]any{"text": "Thanks, switching colours."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("Make a chart")
	tb.wait("the question card", `(() => { const c = document.querySelector("#cards .card.input"); return c && c.textContent.includes("Which colour should the chart use?"); })()`)
	rec := evalJS[string](tb, `(() => { const l = [...document.querySelectorAll("#cards .card.input label.option")].find(l => l.querySelector(".badge.rec")); return l ? l.querySelector("input").value + (l.querySelector("input").checked ? ":checked" : "") : ""; })()`)
	if rec != "teal:checked" {
		t.Fatalf("recommended option = %q, want teal preselected", rec)
	}
	// Typing an answer of one's own chooses it; picking an option after
	// that is what is sent (never the typed text silently).
	tb.do("type an own answer", chromedp.SendKeys(chromedp.CSS(`#cards .card.input [data-custom-answer]`), "purple"))
	if !evalJS[bool](tb, `document.querySelector("#cards .card.input [data-custom-choice]").checked`) {
		t.Fatal("typing an answer did not choose it")
	}
	tb.do("choose orange and answer",
		chromedp.Click(chromedp.CSS(`#cards .card.input input[value=orange]`)),
		chromedp.Click(chromedp.CSS(`#cards .card.input button`)))
	tb.wait("the answer row in the queue", `(() => { const r = document.querySelector("#queue li.kind-request_user_input_answer"); return r && r.textContent.includes("orange"); })()`)
	tb.wait("the card to go", `!document.querySelector("#cards .card.input")`)
	var q struct{ Items []desk.QueueItem }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue", nil, &q)
	var queued []desk.QueueItem
	for _, it := range q.Items {
		if it.Status == desk.QueueStatusQueued {
			queued = append(queued, it)
		}
	}
	if len(queued) != 1 || queued[0].Kind != desk.QueueInputAnswer || queued[0].Priority != desk.PriorityAnswer || !strings.Contains(queued[0].Text, "orange") {
		t.Fatalf("queued rows = %+v", queued)
	}
	// Stop the long turn: the answer is delivered next.
	tb.do("stop", chromedp.Click(chromedp.CSS(`#run #stop`)))
	tb.wait("the answer delivered", `[...document.querySelectorAll("#transcript .msg.user")].some(m => m.textContent.includes("orange"))`)
}

// The HTML preview is a sandboxed frame without allow-same-origin: a script
// inside runs but cannot read the parent's cookie.
func browserHTMLSandbox(t *testing.T, s *suite) {
	x := s.f.script(t, "Sandbox demo", map[string]any{"text": "hi"})
	probe := `<!doctype html><html><body><p id="p">probe</p><script>
var r = {};
try { r.own = document.cookie; } catch (e) { r.own = "denied:" + e.name; }
try { r.parent = parent.document.cookie; } catch (e) { r.parent = "denied:" + e.name; }
try { r.top = top.location.href; } catch (e) { r.top = "denied:" + e.name; }
parent.postMessage(JSON.stringify(r), "*");
</script></body></html>`
	var a desk.Artifact
	s.f.e.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=probe.html", []byte(probe), &a)
	if a.Kind != "html" {
		t.Fatalf("probe kind = %s", a.Kind)
	}
	tb := s.tab(t)
	tb.openSession(x)
	evalJS[bool](tb, `(() => { document.cookie = "visible_probe=parent-secret; path=/"; window.__probe = null;
		window.addEventListener("message", e => { window.__probe = e.data; }); return true; })()`)
	tb.do("open the HTML preview", chromedp.Click(chromedp.CSS(`#art-`+a.ID+` .art-open`)))
	tb.wait("the preview frame", `!!document.querySelector("#preview iframe")`)
	sandbox := evalJS[string](tb, `document.querySelector("#preview iframe").getAttribute("sandbox")`)
	if sandbox != "allow-scripts" {
		t.Fatalf("sandbox = %q, want exactly allow-scripts (never allow-same-origin, top navigation, popups or forms)", sandbox)
	}
	tb.wait("the script inside to report", `window.__probe !== null`)
	var r map[string]string
	if err := json.Unmarshal([]byte(evalJS[string](tb, `window.__probe`)), &r); err != nil {
		t.Fatal(err)
	}
	for k, v := range r {
		if strings.Contains(v, "parent-secret") || strings.Contains(v, s.f.e.Token) {
			t.Fatalf("the sandboxed script read %s = %q", k, v)
		}
	}
	if !strings.HasPrefix(r["parent"], "denied:") || !strings.HasPrefix(r["own"], "denied:") {
		t.Fatalf("the sandboxed script was not refused: %v", r)
	}
	// The frame's own document is an opaque origin, so the parent cannot
	// reach into it either.
	if got := evalJS[string](tb, `(() => { try { return document.querySelector("#preview iframe").contentDocument ? "reachable" : "opaque"; } catch (e) { return "opaque"; } })()`); got != "opaque" {
		t.Fatalf("the frame's document is %s from the parent", got)
	}
}

// Pin and archive move the row between the sidebar's groups.
func browserPinArchive(t *testing.T, s *suite) {
	x := s.f.script(t, "Move me", map[string]any{"text": "hi"})
	tb := s.tab(t)
	tb.open("/w/" + s.f.ws.ID)
	row := "#row-" + x.ID
	tb.wait("the row under Sessions", `!!document.querySelector("#list-recent `+row+`")`)
	click := func(label string) {
		tb.do("open the row menu", chromedp.Click(chromedp.CSS(row+` .row-menu summary`)))
		tb.wait("the menu", `!!document.querySelector("`+row+` .row-menu[open]")`)
		ok := evalJS[bool](tb, `(() => { const b = [...document.querySelectorAll("`+row+` .row-menu button")].find(b => b.textContent.trim() === `+jsString(label)+`); if (!b) return false; b.click(); return true; })()`)
		if !ok {
			t.Fatalf("no %q in the row menu", label)
		}
	}
	click("Pin")
	tb.wait("the row under Pinned", `!!document.querySelector("#list-pinned `+row+`") && !document.querySelector("#list-recent `+row+`")`)
	click("Archive")
	tb.wait("the row under Archived", `!!document.querySelector("#list-archived `+row+`") && !document.querySelector("#list-pinned `+row+`")`)
	if open := evalJS[bool](tb, `document.querySelector("#archived-group").open`); open {
		t.Fatal("the Archived group is open by default")
	}
	var got desk.Session
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
	if !got.Pinned || !got.Archived {
		t.Fatalf("session after pin and archive: %+v", got)
	}
	tb.do("expand Archived", chromedp.Click(chromedp.CSS("#archived-group > summary")))
	click("Unarchive")
	tb.wait("the row back under Pinned", `!!document.querySelector("#list-pinned `+row+`")`)
}

// The logs filter narrows the list, and the live tail appends what
// matches.
func browserLogs(t *testing.T, s *suite) {
	lg := s.f.e.App.Logger
	lg.Warn("needle in the haystack", "where", "browser test")
	lg.Info("ordinary entry one")
	lg.Info("ordinary entry two")
	if err := s.f.e.App.Logs.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	tb := s.tab(t)
	tb.open("/logs")
	tb.wait("the entries", `[...document.querySelectorAll("#log-entries li.log")].some(l => l.textContent.includes("ordinary entry two"))`)
	all := evalJS[int](tb, `document.querySelectorAll("#log-entries li.log").length`)
	tb.do("filter by text", chromedp.SendKeys(chromedp.CSS("#log-q"), "needle"))
	tb.wait("the list to narrow", `(() => { const ls = [...document.querySelectorAll("#log-entries li.log")]; return ls.length > 0 && ls.every(l => l.textContent.includes("needle")); })()`)
	narrowed := evalJS[int](tb, `document.querySelectorAll("#log-entries li.log").length`)
	if narrowed >= all {
		t.Fatalf("filter kept %d of %d entries", narrowed, all)
	}
	tb.do("filter by level", chromedp.Click(chromedp.CSS(`.levels input[value=error]`)))
	tb.wait("no warn entry under error only", `document.querySelectorAll("#log-entries li.log").length === 0`)
	tb.do("add warn", chromedp.Click(chromedp.CSS(`.levels input[value=warn]`)))
	tb.wait("the warn entry back", `document.querySelectorAll("#log-entries li.lvl-warn").length > 0`)
	// A new matching entry arrives by the live tail; one that does not
	// match stays out.
	// The tail resumes after the newest entry the list was rendered with,
	// so what is logged now arrives however soon it connects.
	lg.Warn("needle arriving live")
	lg.Warn("unrelated warning")
	tb.wait("the live entry", `[...document.querySelectorAll("#log-entries li.log")].some(l => l.textContent.includes("needle arriving live"))`)
	if n := evalJS[int](tb, `[...document.querySelectorAll("#log-entries li.log")].filter(l => l.textContent.includes("unrelated warning")).length`); n != 0 {
		t.Fatal("an entry outside the filter was appended")
	}
	// Marking the entries of a filtered list seen clears the warn count
	// in the navigation (unfiltered, entries are read as they come into
	// view: TestBrowserLiveView/AppLogReadAndLinks).
	tb.open("/logs?level=warn")
	tb.wait("the warn badge", `!!document.querySelector("#nav-unread .badge.warn")`)
	tb.do("mark as seen", chromedp.Click(chromedp.CSS("#mark-seen")))
	tb.wait("the warn badge to clear", `!document.querySelector("#nav-unread .badge.warn")`)
}

// The draft is saved on the server as it is typed and survives a reload.
func browserDraft(t *testing.T, s *suite) {
	x := s.f.script(t, "Draft demo", map[string]any{"text": "hi"})
	tb := s.tab(t)
	tb.openSession(x)
	const text = "A thought I have not finished"
	tb.do("type a draft", chromedp.SendKeys(chromedp.CSS("#composer-text"), text))
	waitFor(t, "the draft on the server", func() bool {
		var d desk.Draft
		s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/draft", nil, &d)
		return d.Text == text
	})
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#composer-text")))
	if got := evalJS[string](tb, `document.querySelector("#composer-text").value`); got != text {
		t.Fatalf("after reload the composer holds %q, want %q", got, text)
	}
	// Shift+Enter adds a line instead of sending.
	tb.do("shift+enter", chromedp.Focus(chromedp.CSS("#composer-text")),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)))
	if got := evalJS[string](tb, `document.querySelector("#composer-text").value`); !strings.Contains(got, "\n") {
		t.Fatalf("shift+enter did not add a line: %q", got)
	}
	var q struct{ Items []desk.QueueItem }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue?all=true", nil, &q)
	if len(q.Items) != 0 {
		t.Fatal("shift+enter sent the message")
	}
}

// Ctrl+K opens the palette and switches sessions; at 390×844 the page
// fits the width and the sidebar opens from its labelled button.
func browserPalette(t *testing.T, s *suite) {
	x := s.f.script(t, "Palette target", map[string]any{"text": "hi"})
	tb := s.tab(t)
	tb.open("/w/" + s.f.ws.ID)
	tb.do("press ctrl+k", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tb.wait("the palette", `document.querySelector("#palette").open`)
	tb.do("find the session", chromedp.SendKeys(chromedp.CSS("#palette-input"), "Palette target"+kb.Enter))
	tb.wait("the session page", `location.pathname.endsWith(`+jsString("/s/"+x.ID)+`)`)
	tb.do("narrow screen", chromedp.EmulateViewport(390, 844), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#composer-text")))
	tb.wait("no horizontal overflow", `document.documentElement.scrollWidth <= 392`)
	if off := evalJS[bool](tb, `document.querySelector("#sidebar").getBoundingClientRect().right <= 1`); !off {
		t.Fatal("the sidebar covers the conversation on a narrow screen")
	}
	tb.do("open the sidebar", chromedp.Click(chromedp.CSS("#side-toggle")))
	tb.wait("the sidebar to slide in", `document.querySelector("#sidebar").getBoundingClientRect().left >= 0 && document.querySelector("#side-toggle").getAttribute("aria-expanded") === "true"`)
	// Every button has a name a screen reader can say.
	unnamed := evalJS[[]string](tb, `[...document.querySelectorAll("button, summary, a[href]")].filter(b => !(b.getAttribute("aria-label") || b.textContent.trim())).map(b => b.outerHTML.slice(0, 80))`)
	if len(unnamed) > 0 {
		t.Fatalf("controls without a label: %v", unnamed)
	}
}
