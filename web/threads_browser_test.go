package web_test

import (
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/desk-runtime/desk"
)

// TestBrowserThreads: an orchestrator delegates to a handler thread; the
// thread is a nested row under its session (title, state, latest
// episode), the orchestrator's transcript shows a thread card for the
// thread_start and an episode card for the report, each linking to the
// thread; the thread's page shows its own transcript, and its composer
// talks to the handler. DESK_UI_SCREENSHOTS=1 rewrites docs/ui-thread.png.
func TestBrowserThreads(t *testing.T) {
	s := newSuite(t)
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
	}
	var x desk.Session
	s.f.e.Must(201, "POST", "/v1/workspaces/"+s.f.ws.ID+"/sessions", map[string]any{"title": "Board pack", "model": "script", "script": map[string]any{
		"steps": []any{
			call("thread_start", map[string]any{"threads": []any{map[string]any{"title": "figures", "objective": "Collect the regional figures for Q2"}}}),
			map[string]any{"text": "I asked a thread to collect the figures."},
			map[string]any{"text": "The figures are in: North 14, South 11."},
		},
		"handlers": map[string]any{"figures": []any{
			call("thread_report", map[string]any{"title": "Figures collected", "body": "North **14**, South **11**.", "outcome": "delivered"}),
			map[string]any{"text": "Reported the figures."},
			call("exec_command", map[string]any{"command": "echo from-the-thread"}),
			map[string]any{"text": "Yes, I am the figures thread."},
		}},
	}}, &x)
	tb := s.tab(t)
	tb.openSession(x)
	tb.send("Prepare the board pack")
	card := `document.querySelector("#transcript .thread-card")`
	tb.wait("the thread card", card+` && `+card+`.querySelector(".tc-objective").textContent === "Collect the regional figures for Q2"`)
	tb.wait("the episode card", `[...document.querySelectorAll("#transcript .episode-card")].some(c => c.querySelector(".ec-title").textContent === "Figures collected" && c.querySelector(".ec-body strong") && c.textContent.includes("North"))`)
	tb.wait("the orchestrator's reconciling turn", `document.querySelector("#transcript").textContent.includes("The figures are in")`)
	th := `document.querySelector("#row-` + x.ID + ` .thread-rows .thread-row")`
	tb.wait("the nested thread row, concluded, with its latest episode", th+` && `+th+`.querySelector(".thread-title").textContent === "figures" && `+th+`.querySelector(".thread-state").textContent === "concluded" && `+th+`.querySelector(".thread-latest").textContent === "Figures collected"`)
	tb.wait("the thread card updated live", card+`.querySelector(".tc-state").textContent.trim() === "concluded" && `+card+`.querySelector(".tc-latest").textContent.includes("Figures collected")`)
	// After a reload the cards are the same (rendered from the store).
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#composer-text")))
	tb.wait("the cards after a reload", card+` && document.querySelector("#transcript .episode-card") && `+card+`.querySelector(".tc-state").textContent.trim() === "concluded" && `+card+`.querySelector(".tc-latest").textContent.includes("Figures collected")`)
	// Once the orchestrator's turns settled its row is idle, whatever its
	// thread did.
	waitFor(t, "the orchestrator's turns to settle", func() bool {
		var exes struct{ Executions []desk.Execution }
		s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &exes)
		for _, e := range exes.Executions {
			if desk.PhaseActive(e.Phase) {
				return false
			}
		}
		return len(exes.Executions) >= 3
	})
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#composer-text")))
	if tone := evalJS[string](tb, `document.querySelector("#row-`+x.ID+`").className`); strings.Contains(tone, "tone-") {
		t.Errorf("the orchestrator's row looks %q after its turns settled", tone)
	}
	// The card links to the thread's page.
	tb.do("open the thread", chromedp.Click(chromedp.CSS(`#transcript .thread-card h4 a`)))
	tb.wait("the thread page", `location.pathname.includes("/t/thr_") && document.querySelector("#ses-title").textContent === "Thread: figures"`)
	tb.wait("the handler's transcript", `(() => { const t = document.querySelector("#transcript").textContent; return t.includes("Collect the regional figures for Q2") && t.includes("Reported the figures.") && !t.includes("The figures are in"); })()`)
	tb.wait("the thread row marked current", `!!document.querySelector(".thread-row .row-link[aria-current=page]")`)
	tb.send("Are you there?")
	tb.wait("the direct message on the thread page", `[...document.querySelectorAll("#transcript .msg.user")].some(m => m.textContent.includes("Are you there?"))`)
	// The handler's command waits for approval: the thread's page and row
	// say so, the orchestrator's row does not.
	tb.wait("the thread's run bar waiting", `(() => { const r = document.querySelector("#run .run-text"); return r && r.dataset.wait === "approval" && r.textContent === "Waiting for your approval to run exec_command"; })()`)
	tb.wait("the thread row waiting", `!!document.querySelector(".thread-row.tone-waiting")`)
	if cls := evalJS[string](tb, `document.querySelector("#row-`+x.ID+`").className`); strings.Contains(cls, "tone-") {
		t.Errorf("the handler's wait colours the orchestrator's row: %q", cls)
	}
	// The orchestrator's own page shows neither the handler's card nor a
	// waiting turn; its palette offers the thread in command mode.
	ob := s.tab(t)
	ob.openSession(x)
	ob.wait("the orchestrator page at rest", `document.querySelector("#run .run-text").textContent === "Ready."`)
	if n := evalJS[int](ob, `document.querySelectorAll("#cards .card").length`); n != 0 {
		t.Errorf("the orchestrator's page shows %d cards of the handler's turn", n)
	}
	ob.do("ctrl+k >", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(chromedp.CSS("#palette-input")), chromedp.SendKeys(chromedp.CSS("#palette-input"), ">fig"))
	ob.wait("the thread in command mode", `[...document.querySelectorAll("#palette-list [role=option]")].some(o => o.textContent === "Open thread: figures")`)
	tb.do("approve on the thread page", chromedp.Click(chromedp.CSS(`#cards .card.approval button[value=approve]`)))
	tb.wait("the handler's live answer", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("Yes, I am the figures thread."))`)
	var ths []*desk.Thread
	ths, err := s.f.e.App.Store.ListThreads(tb.ctx, x.ID, "")
	if err != nil || len(ths) != 1 {
		t.Fatalf("threads: %v %v", ths, err)
	}
	var out struct{ Messages []desk.Message }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages?surface="+ths[0].SurfaceID, nil, &out)
	found := false
	for _, m := range out.Messages {
		found = found || (m.Role == desk.RoleUser && m.Text == "Are you there?")
	}
	if !found {
		t.Fatalf("the thread's transcript lacks the direct message: %+v", out.Messages)
	}
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages", nil, &out)
	for _, m := range out.Messages {
		if strings.Contains(m.Text, "Are you there?") || strings.Contains(m.Text, "Yes, I am the figures thread.") {
			t.Fatalf("the direct conversation reached the orchestrator: %q", m.Text)
		}
	}
	if os.Getenv("DESK_UI_SCREENSHOTS") == "1" {
		tb.open("/w/" + s.f.ws.ID + "/s/" + x.ID)
		tb.wait("the cards", card)
		shot, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, "ui-thread.png", shot)
	}
}
