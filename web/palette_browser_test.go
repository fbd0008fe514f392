package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/desk-runtime/desk"
)

// The palette: sections with their shortcuts; ">" is command mode, where
// "Pin this session" pins the open session and text no command matches
// starts a new session with it as the first message.
func browserPaletteCommands(t *testing.T, s *suite) {
	x := s.f.script(t, "Palette current", map[string]any{"text": "hi"})
	tb := s.tab(t)
	tb.openSession(x)
	// Ctrl+K, then ">": command mode.
	tb.do("ctrl+k >", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(chromedp.CSS("#palette-input")), chromedp.SendKeys(chromedp.CSS("#palette-input"), ">"))
	tb.wait("the palette in command mode", `document.querySelector("#palette").open && document.querySelector("#palette-input").value === ">"`)
	sections := evalJS[[]string](tb, `[...document.querySelectorAll("#palette-list .palette-section")].map(h => h.textContent)`)
	if strings.Join(sections, ",") != "Actions,Go to" {
		t.Errorf("command mode sections = %v, want Actions, Go to", sections)
	}
	opts := evalJS[[]string](tb, `[...document.querySelectorAll("#palette-list [role=option]")].map(o => o.textContent)`)
	for _, want := range []string{"New sessionN", "Pin this sessionP", "Archive this sessionA", "Open filesF", "Open logsL", "Open catalogC"} {
		if !contains(opts, want) {
			t.Errorf("command mode lacks %q (with its shortcut): %v", want, opts)
		}
	}
	for _, o := range opts {
		if strings.HasPrefix(o, "Session:") {
			t.Errorf("command mode lists a session: %q", o)
		}
	}
	tb.do("pin from the palette", chromedp.SendKeys(chromedp.CSS("#palette-input"), "pin"+kb.Enter))
	waitFor(t, "the session pinned", func() bool {
		var got desk.Session
		s.f.e.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &got)
		return got.Pinned
	})
	tb.wait("the row under Pinned", `!!document.querySelector("#list-pinned #row-`+x.ID+`")`)

	// Without ">", sessions are listed too, under their own section.
	tb.do("ctrl+k", chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	tb.wait("the palette", `document.querySelector("#palette").open && document.querySelector("#palette-input").value === ""`)
	if !contains(evalJS[[]string](tb, `[...document.querySelectorAll("#palette-list .palette-section")].map(h => h.textContent)`), "Sessions") {
		t.Error("the palette has no Sessions section")
	}
	// Unmatched command text + Enter: a new session with it as its first
	// message.
	const first = "Summarise the quarterly numbers for the board"
	tb.do("type a new session's first message", chromedp.SendKeys(chromedp.CSS("#palette-input"), "> "+first))
	tb.wait("the new-session option", `(() => { const o = document.querySelectorAll("#palette-list [role=option]"); return o.length === 1 && o[0].dataset.create === "1" && o[0].textContent.includes(`+jsString(first)+`); })()`)
	tb.do("Enter", chromedp.SendKeys(chromedp.CSS("#palette-input"), kb.Enter))
	tb.wait("the new session's page", `location.pathname.includes("/s/ses_") && !location.pathname.endsWith(`+jsString(x.ID)+`)`)
	path := evalJS[string](tb, `location.pathname`)
	id := path[strings.LastIndex(path, "/")+1:]
	var q struct{ Items []desk.QueueItem }
	s.f.e.Must(200, "GET", "/v1/sessions/"+id+"/queue?all=true", nil, &q)
	if len(q.Items) != 1 || q.Items[0].Text != first {
		t.Fatalf("the new session's queue = %+v, want its first message %q", q.Items, first)
	}
	var got desk.Session
	s.f.e.Must(200, "GET", "/v1/sessions/"+id, nil, &got)
	if got.WorkspaceID != s.f.ws.ID {
		t.Fatalf("the new session is in %s, want %s", got.WorkspaceID, s.f.ws.ID)
	}
	tb.wait("the first message on its page", `[...document.querySelectorAll("#transcript .msg.user, #queue .q-text")].some(m => m.textContent.includes(`+jsString(first)+`))`)

	// A shortcut outside a text field: F opens the files.
	tb.do("press f", chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`), chromedp.KeyEvent("f"))
	tb.wait("the files page", `location.pathname.endsWith("/files")`)
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
