package web_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// TestBrowserLive runs the browser half of #17's acceptance list that is
// about what the page says while things happen: the palette's command
// mode, one block per turn, the run bar's state labels, Retry, live
// renames and new sessions, the connection indicator. The desk's default
// model is a strict OpenAI-compatible server on loopback: it answers
// every message, except that a message containing "fail once" is refused
// (401) the first time it is sent.
func TestBrowserLive(t *testing.T) {
	srv := strict.NewOpenAI(t)
	var mu sync.Mutex
	failed := map[string]bool{}
	srv.Respond(func(r strict.Request) strict.Reply {
		us := r.UserTexts()
		last := ""
		if len(us) > 0 {
			last = us[len(us)-1]
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(last, "fail once") && !failed[last] {
			failed[last] = true
			return strict.Reply{Error: &strict.APIError{Status: 401, Type: "authentication_error", Message: "Incorrect API key provided: sk-test"}}
		}
		return strict.Reply{Text: "Model answer to: " + last}
	})
	s := newSuiteWith(t, app.Config{Model: "openai-compatible:" + srv.BaseURL() + "#test-model"})
	t.Run("PaletteCommands", func(t *testing.T) { browserPaletteCommands(t, s) })
	t.Run("OneBlockAndLabels", func(t *testing.T) { browserOneBlockAndLabels(t, s) })
	t.Run("Retry", func(t *testing.T) { browserRetry(t, s) })
	t.Run("PlanWaits", func(t *testing.T) { browserPlanWaits(t, s) })
	t.Run("LiveRenameAndNewRows", func(t *testing.T) { browserLiveRenameAndNewRows(t, s) })
	t.Run("Restart", func(t *testing.T) { browserRestart(t, s) }) // last: it restarts the desk
}
