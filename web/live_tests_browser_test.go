package web_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// One turn with three model steps (text with a tool call, a command that
// waits for approval, the final text) is one Assistant block; the run bar
// says "Writing a reply…" while text streams and "Waiting for your
// approval…" while the command waits.
func browserOneBlockAndLabels(t *testing.T, s *suite) {
	x := s.f.script(t, "Labels demo",
		map[string]any{"text": "Let me write the notes first. " + strings.Repeat("Writing them down. ", 25), "delay_ms": 4000,
			"tool_calls": []any{map[string]any{"name": "write_file", "arguments": map[string]any{"path": "/artifacts/notes.md", "content": "# Notes\n"}}}},
		map[string]any{"tool_calls": []any{map[string]any{"name": "exec_command", "arguments": map[string]any{"command": "echo labelled"}}}},
		map[string]any{"text": "All done."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("Write the notes, then run the command")
	tb.wait("the run bar while text streams", `document.querySelector("#run .run-text") && document.querySelector("#run .run-text").textContent === "Writing a reply…"`)
	tb.wait("the run bar while the command waits", `(() => { const r = document.querySelector("#run .run-text"); return r && r.dataset.wait === "approval" && r.textContent === "Waiting for your approval to run exec_command"; })()`)
	tb.do("approve", chromedp.Click(chromedp.CSS(`#cards .card.approval button[value=approve]`)))
	tb.wait("the last step", `[...document.querySelectorAll("#transcript .msg.assistant .step")].some(s => s.textContent.includes("All done."))`)
	tb.wait("the run bar at rest", `document.querySelector("#run .run-text").textContent === "Ready."`)
	blocks := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant").length`)
	steps := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant .step").length`)
	times := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant time").length`)
	if blocks != 1 || steps != 3 || times != 1 {
		t.Fatalf("one turn shows %d assistant blocks, %d steps, %d times; want 1, 3, 1", blocks, steps, times)
	}
	// A reload shows the same one block.
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#composer-text")))
	if n := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant .step").length`); n != 3 ||
		evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant").length`) != 1 {
		t.Fatalf("after a reload: %d steps in %d blocks", n, evalJS[int](tb, `document.querySelectorAll("#transcript .msg.assistant").length`))
	}
}

// A failed turn says why in plain words, folds the raw detail, and Retry
// sends the message again (the model refuses it once, then answers).
func browserRetry(t *testing.T, s *suite) {
	var x desk.Session
	s.f.e.Must(201, "POST", "/v1/workspaces/"+s.f.ws.ID+"/sessions", map[string]any{"title": "Retry demo"}, &x)
	tb := s.tab(t)
	tb.openSession(x)
	const msg = "please answer, but fail once"
	tb.send(msg)
	tb.wait("the failure in plain words", `(() => { const f = document.querySelector("#run .run-failed"); return f && f.textContent.includes("The turn failed. The model provider refused desk's credentials."); })()`)
	if open := evalJS[bool](tb, `document.querySelector("#run .fail-detail").open`); open {
		t.Error("the raw detail is not folded")
	}
	if d := evalJS[string](tb, `document.querySelector("#run .fail-detail pre").textContent`); !strings.Contains(d, "401") && !strings.Contains(d, "Incorrect API key") {
		t.Errorf("the folded detail %q does not hold the provider's answer", d)
	}
	tb.wait("the failed row in the sidebar", `!!document.querySelector("#row-`+x.ID+`.tone-error")`)
	tb.do("retry", chromedp.Click(chromedp.CSS("#run #retry")))
	tb.wait("the answer to the retried message", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("Model answer to: `+msg+`"))`)
	var q struct{ Items []desk.QueueItem }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue?all=true", nil, &q)
	n := 0
	for _, it := range q.Items {
		if it.Text == msg {
			n++
		}
	}
	var exes struct{ Executions []desk.Execution }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &exes)
	if n != 2 || len(exes.Executions) != 2 {
		t.Fatalf("after Retry: %d queue rows with the message, %d executions; want 2 and 2", n, len(exes.Executions))
	}
	tb.wait("the row no longer failed", `!document.querySelector("#row-`+x.ID+`.tone-error")`)
}

// A rename through the API updates the open page's header and title; a
// session created through the API appears in the open sidebar, on a
// session page and on the workspace page alike.
func browserLiveRenameAndNewRows(t *testing.T, s *suite) {
	x := s.f.script(t, "Before the rename", map[string]any{"text": "hi"})
	tb := s.tab(t)
	tb.openSession(x)
	tb.wait("the stream connected", `document.querySelector("#conn").dataset.state === "ok"`)
	s.f.e.Must(200, "PATCH", "/v1/sessions/"+x.ID, map[string]any{"title": "Renamed elsewhere"}, nil)
	tb.wait("the header renamed", `document.querySelector("#ses-title").textContent === "Renamed elsewhere" && document.title.startsWith("Renamed elsewhere")`)
	tb.wait("the row renamed", `document.querySelector("#row-`+x.ID+` .row-title").textContent === "Renamed elsewhere"`)
	var y desk.Session
	s.f.e.Must(201, "POST", "/v1/workspaces/"+s.f.ws.ID+"/sessions", map[string]any{"title": "Made by the CLI", "model": "script",
		"script": map[string]any{"steps": []any{map[string]any{"text": "hi"}}}}, &y)
	tb.wait("the new session's row, without a message", `!!document.querySelector("#list-recent #row-`+y.ID+`")`)
	// The workspace page's sidebar is live too.
	tb.open("/w/" + s.f.ws.ID)
	tb.wait("the workspace page's stream", `!!document.querySelector("#sse-sink")`)
	var z desk.Session
	waitFor(t, "the workspace page's stream to connect", func() bool {
		return evalJS[bool](tb, `document.querySelector("#conn").dataset.state === "ok"`)
	})
	s.f.e.Must(201, "POST", "/v1/workspaces/"+s.f.ws.ID+"/sessions", map[string]any{"title": "Another from the CLI", "model": "script",
		"script": map[string]any{"steps": []any{map[string]any{"text": "hi"}}}}, &z)
	tb.wait("its row on the workspace page", `!!document.querySelector("#list-recent #row-`+z.ID+`")`)
}

// The connection indicator shows while desk is down and clears when the
// stream is back on the same address; the turn the restart cut short says
// so, and the page is live again.
func browserRestart(t *testing.T, s *suite) {
	x := s.f.script(t, "Restart demo",
		map[string]any{"text": "A long answer. " + strings.Repeat("Still going. ", 30), "delay_ms": 60000},
		map[string]any{"text": "Back after the restart."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("start a long turn")
	tb.wait("the running turn", `!!document.querySelector("#run #stop")`)
	if state := evalJS[string](tb, `document.querySelector("#conn").dataset.state`); state != "ok" {
		t.Fatalf("indicator %q before the restart", state)
	}
	// While desk is down, the browser logs each refused connection and
	// htmx each request that could not be sent: errors of the outage this
	// test makes, in every tab open on the desk. The page's own reaction
	// (the indicator) is what the test checks.
	for _, open := range []*tab{tb, s.home} {
		for _, outage := range []string{"net::ERR_CONNECTION_REFUSED", "htmx:sendError", "htmx:afterRequest"} {
			open.allowConsole(outage)
		}
	}
	s.restart(t, func() {
		tb.wait("the connection indicator", `document.querySelector("#conn").dataset.state === "lost" && document.querySelector("#conn").getBoundingClientRect().width > 0`)
	})
	tb.wait("the indicator to clear", `document.querySelector("#conn").dataset.state === "ok" && document.querySelector("#conn").getBoundingClientRect().width === 0`)
	tb.wait("the interrupted turn, said so", `(() => { const r = document.querySelector("#run .run-text"); return r && r.dataset.phase === "interrupted" && r.textContent === "Interrupted because desk restarted."; })()`)
	tb.send("and now?")
	tb.wait("a live reply after the restart", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("Back after the restart."))`)
}

// restart stops the desk (its listener, then the app), runs down while it
// is stopped, and starts it again on the same home and the same address.
func (s *suite) restart(t *testing.T, down func()) {
	t.Helper()
	e := s.f.e
	addr := e.Server.Listener.Addr().String()
	e.App.Streams.Shutdown()
	e.Server.Close()
	e.Server = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.App.Close(ctx); err != nil {
		t.Fatalf("close desk: %v", err)
	}
	e.App = nil
	down()
	a, err := app.Open(context.Background(), e.Config)
	if err != nil {
		t.Fatalf("reopen desk: %v", err)
	}
	e.App, e.Token = a, a.AdminToken
	var l net.Listener
	waitFor(t, "the old address to be free", func() bool {
		l, err = net.Listen("tcp", addr)
		return err == nil
	})
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: a.Handler}}
	srv.Start()
	e.Server = srv
}

// A plan card is "waiting" like an approval or a question: the row's dot,
// its words and the run bar say so; the legend explains the dots.
func browserPlanWaits(t *testing.T, s *suite) {
	x := s.f.script(t, "Plan demo",
		map[string]any{"tool_calls": []any{map[string]any{"name": "clarify", "arguments": map[string]any{
			"plan": map[string]any{"title": "Ship the report", "steps": []any{"Draft it", "Check the numbers"}}}}}},
		map[string]any{"text": "Following the plan."})
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("Plan the report first")
	tb.wait("the plan card", `(() => { const c = document.querySelector("#cards .card.plan"); return c && c.textContent.includes("Ship the report"); })()`)
	tb.wait("the run bar waiting on the plan", `(() => { const r = document.querySelector("#run .run-text"); return r && r.dataset.wait === "plan" && r.textContent === "Waiting for your decision on the plan"; })()`)
	tb.wait("the row waiting, in words", `(() => { const r = document.querySelector("#row-`+x.ID+`"); return r && r.classList.contains("tone-waiting") && !r.classList.contains("tone-running") && r.querySelector(".tone").getAttribute("aria-label").startsWith("Waiting for you"); })()`)
	tb.do("open the legend", chromedp.Click(chromedp.CSS("#legend > summary")))
	legend := evalJS[[]string](tb, `[...document.querySelectorAll("#legend li")].map(l => l.className + ":" + l.textContent.trim())`)
	if len(legend) != 4 || !strings.HasPrefix(legend[1], "tone-waiting:Waiting for you") || !strings.Contains(legend[1], "plan decision") {
		t.Errorf("legend = %v", legend)
	}
	// The waiting dot has its own shape, not only its colour.
	if shape := evalJS[string](tb, `(() => { const w = getComputedStyle(document.querySelector("#legend .tone-waiting .tone")), r = getComputedStyle(document.querySelector("#legend .tone-running .tone")); return w.backgroundColor === r.backgroundColor && w.borderStyle === r.borderStyle && w.borderRadius === r.borderRadius ? "same" : "differs"; })()`); shape != "differs" {
		t.Error("the waiting and running dots look the same")
	}
	tb.do("approve the plan", chromedp.Click(chromedp.CSS(`#cards .card.plan button[value=approve]`)))
	tb.wait("the turn to go on", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("Following the plan."))`)
	tb.wait("the row idle", `!document.querySelector("#row-`+x.ID+`").className.includes("tone-")`)
}
