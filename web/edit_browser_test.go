package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/desk-runtime/desk"
)

// TestBrowserEditAndResend edits the second of three sent messages through
// the UI: Edit warns before replacing a draft, marks the message being
// edited, and sending it leaves the new branch on the page while the API
// keeps the original branch.
func TestBrowserEditAndResend(t *testing.T) {
	s := newSuite(t)
	x := s.f.script(t, "Edit demo", map[string]any{"text": "reply one"}, map[string]any{"text": "reply two"},
		map[string]any{"text": "reply three"}, map[string]any{"text": "reply to the revision"})
	tb := s.tab(t)
	tb.openSession(x)
	for i, q := range []string{"first", "second", "third"} {
		tb.send(q)
		tb.wait("reply "+q, `[...document.querySelectorAll("#transcript .msg.assistant:not(.streaming)")].length === `+string(rune('1'+i)))
	}
	tb.wait("Edit on every user message", `document.querySelectorAll("#transcript .msg.user [data-msg-action=edit]").length === 3`)
	if n := evalJS[int](tb, `document.querySelectorAll("#transcript .msg.user [data-msg-action=copy]").length`); n != 3 {
		t.Fatalf("%d Copy buttons, want 3", n)
	}

	const draft = "an unfinished thought"
	tb.do("type a draft", chromedp.SendKeys(chromedp.CSS("#composer-text"), draft))
	tb.do("edit the second message", chromedp.Click(chromedp.CSS(`#transcript .msg.user:nth-of-type(3) [data-msg-action=edit]`)))
	tb.wait("the warning about the draft", `!!document.querySelector("#edit-banner [data-msg-action=replace-draft]")`)
	if got := evalJS[string](tb, `document.querySelector("#composer-text").value`); got != draft {
		t.Fatalf("the draft was replaced before the user agreed: %q", got)
	}
	tb.do("replace the draft", chromedp.Click(chromedp.CSS(`#edit-banner [data-msg-action=replace-draft]`)))
	tb.wait("the message in the composer", `document.querySelector("#composer-text").value === "second"`)
	if got := evalJS[string](tb, `document.querySelector("#transcript .msg.editing .plain").textContent`); got != "second" {
		t.Fatalf("the message marked as being edited is %q", got)
	}
	// The send's answer is held until the stream has delivered the whole
	// new branch, as happens under load.
	h := tb.hold("*/s/" + x.ID + "/send")
	tb.do("revise and send", chromedp.SendKeys(chromedp.CSS("#composer-text"), ", revised"+kb.Enter))
	id := h.next("the send")
	tb.wait("the revision's reply, live, before the send's answer", `[...document.querySelectorAll("#transcript .msg.assistant")].some(m => m.textContent.includes("reply to the revision")) && document.querySelector("#run .run-text").dataset.phase === "ended"`)
	h.release(id)
	tb.wait("the composer to clear", `document.querySelector("#composer-text").value === ""`)
	if got := evalJS[string](tb, `document.querySelector("#run .run-text").textContent`); got != "Ready." {
		t.Fatalf("after the late answer of the send the run bar says %q", got)
	}
	// The page holds the new branch in order, and nothing of the replaced
	// one (assistant steps sit inside turn blocks, so the text is read
	// from the transcript as a whole).
	// Live, without a reload: the branch the send replaced is taken when
	// the request leaves, so a new branch the stream delivers before the
	// send's answer lands stays (under CI load it was removed with the old
	// one, and the turn seemed to stall at "Starting…").
	tb.wait("the revised branch on the page",
		`(() => { const t = document.querySelector("#transcript").innerText; const at = ["first", "reply one", "second, revised", "reply to the revision"].map(w => t.indexOf(w));
			return at.every((v, i) => v >= 0 && (i === 0 || v > at[i-1])) && !t.includes("reply two") && !t.includes("third") && !t.includes("reply three"); })()`)
	if evalJS[bool](tb, `!!document.querySelector("#transcript .msg.editing, #edit-banner")`) {
		t.Fatal("the page still shows an edit in progress after sending")
	}

	var tr struct{ Messages []desk.Message }
	s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages?branches=true", nil, &tr)
	var got []string
	for _, m := range tr.Messages {
		got = append(got, m.Text)
	}
	if strings.Join(got, "|") != "first|reply one|second|reply two|third|reply three|second, revised|reply to the revision" {
		t.Fatalf("all branches: %v", got)
	}
	if ed := tr.Messages[6]; ed.EditOf != tr.Messages[2].ID || ed.ParentID != tr.Messages[1].ID {
		t.Fatalf("the revision is not a branch from the original's parent: %+v", ed)
	}
}
