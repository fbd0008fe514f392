package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/desk-runtime/desk"
)

// TestBrowserLiveView runs issue #28's live-view acceptance in one desk and one
// browser: what Stop keeps, and (as they land) tool arguments as they
// stream, the app log and the palette's shortcuts.
func TestBrowserLiveView(t *testing.T) {
	s := newSuite(t)
	t.Run("StopKeepsPartialText", func(t *testing.T) { browserStopKeeps(t, s) })
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
