package web_test

import (
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// A person starts a session from a profile in the new-session form, on a
// reasoning model behind the strict Anthropic server; the reply comes
// with its reasoning in a collapsed <details> labelled Reasoning, which
// opens on a click. DESK_UI_SCREENSHOTS=1 rewrites
// docs/img/ui-profile-reasoning.png.
func TestBrowserProfileReasoning(t *testing.T) {
	const thought = "The user asks why the sky is blue: Rayleigh scattering, shorter wavelengths scatter more."
	srv := strict.NewAnthropic(t)
	srv.Respond(func(r strict.Request) strict.Reply {
		if !r.Messages.ThinkingEnabled() {
			return strict.Reply{Text: "Why the sky is blue"} // the title
		}
		return strict.Reply{Reasoning: thought, Text: "Because air scatters **blue** light more than red (Rayleigh scattering)."}
	})
	t.Setenv("ANTHROPIC_BASE_URL", srv.BaseURL())
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	s := newSuiteWith(t, app.Config{Model: "anthropic:claude-sonnet-4-5;reasoning", Models: []string{"anthropic:claude-haiku-4-5"}})
	s.f.e.Must(201, "POST", "/v1/workspaces/"+s.f.ws.ID+"/profiles", map[string]any{"name": "deep-thinker", "reasoning_effort": "high",
		"instructions": "Explain the physics briefly."}, nil)

	tb := s.tab(t)
	tb.open("/w/" + s.f.ws.ID + "/new")
	tb.do("start a session from the profile",
		chromedp.WaitVisible(chromedp.CSS("#ns-profile")),
		chromedp.SendKeys(chromedp.CSS("#ns-title"), "Sky"),
		chromedp.SetValue(chromedp.CSS("#ns-profile"), "deep-thinker"),
		chromedp.Click(chromedp.CSS(`#new-session-form button[type=submit]`)),
	)
	tb.wait("the new session's page", `location.pathname.includes("/s/ses_") && !!document.querySelector("#composer-text")`)
	path := evalJS[string](tb, `location.pathname`)
	var x desk.Session
	s.f.e.Must(200, "GET", "/v1/sessions/"+path[strings.LastIndex(path, "/")+1:], nil, &x)
	if x.Profile != "deep-thinker" || x.ReasoningEffort != "high" {
		t.Fatalf("session %+v: want the profile and its effort", x)
	}
	tb.send("Why is the sky blue?")
	tb.wait("the reply", `[...document.querySelectorAll("#transcript .msg.assistant .md strong")].some(b => b.textContent === "blue")`)
	tb.wait("the collapsed, labelled reasoning", `(() => { const d = document.querySelector("#transcript details.reasoning"); return d && !d.open && d.querySelector("summary").textContent === "Reasoning"; })()`)
	if vis := evalJS[bool](tb, `(() => { const p = document.querySelector("#transcript details.reasoning .plain"); return p.checkVisibility({contentVisibilityAuto: true}); })()`); vis {
		t.Fatal("the reasoning shows before it is opened")
	}
	tb.do("open the reasoning", chromedp.Click(chromedp.CSS("#transcript details.reasoning summary")))
	tb.wait("the reasoning's text", `document.querySelector("#transcript details.reasoning").open && document.querySelector("#transcript details.reasoning .plain").textContent.includes("Rayleigh scattering, shorter")`)
	if n := evalJS[int](tb, `[...document.querySelectorAll("#transcript .md")].filter(m => m.textContent.includes("shorter wavelengths")).length`); n != 0 {
		t.Fatal("the reasoning leaked into the reply")
	}
	req := srv.Accepted()
	last := req[len(req)-1].Messages
	if last.Thinking == nil || last.Thinking.BudgetTokens != 16384 || !strings.Contains(last.System[0].Text, "Explain the physics briefly.") {
		t.Fatalf("the turn's request: thinking %+v", last.Thinking)
	}
	if os.Getenv("DESK_UI_SCREENSHOTS") == "1" {
		shot, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		writeShot(t, "img/ui-profile-reasoning.png", shot)
	}
}
