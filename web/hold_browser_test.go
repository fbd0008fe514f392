package web_test

import (
	"context"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// held holds the answers of a tab's requests matching a URL pattern until
// the test releases them: how a test makes "the answer to a POST lands
// after the event stream's newer redraw" happen every time, not only
// under CI load.
type held struct {
	tb     *tab
	cancel context.CancelFunc
	ids    chan fetch.RequestID
}

func (tb *tab) hold(urlPattern string) *held {
	tb.t.Helper()
	ctx, cancel := context.WithCancel(tb.ctx)
	h := &held{tb: tb, cancel: cancel, ids: make(chan fetch.RequestID, 16)}
	events := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			h.ids <- ev.RequestID
		}
	}()
	if _, err := chromedp.Call(tb.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: urlPattern, RequestStage: fetch.RequestStageResponse}}}); err != nil {
		cancel()
		tb.t.Fatalf("hold %s: %v", urlPattern, err)
	}
	tb.t.Cleanup(cancel)
	return h
}

// next waits for the next held answer.
func (h *held) next(what string) fetch.RequestID {
	h.tb.t.Helper()
	select {
	case id := <-h.ids:
		return id
	case <-time.After(60 * time.Second):
		h.tb.t.Fatalf("no answer of %s was held within 60 s", what)
	}
	return ""
}

// release lets a held answer through, and stops holding new ones.
func (h *held) release(id fetch.RequestID) {
	h.tb.t.Helper()
	if _, err := chromedp.Call(h.tb.ctx, fetch.ContinueResponse, fetch.ContinueResponseParams{RequestID: id}); err != nil {
		h.tb.t.Fatalf("release a held answer: %v", err)
	}
	if _, err := chromedp.Call(h.tb.ctx, fetch.Disable, cdp.Empty{}); err != nil {
		h.tb.t.Fatalf("stop holding: %v", err)
	}
	h.cancel()
}
