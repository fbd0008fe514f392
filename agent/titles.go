package agent

import (
	"context"
	"strings"
	"time"
	"unicode"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
)

// startTitle titles a session from its first message, beside the turn: a
// short model call when the session has a real model, the first words
// otherwise. A person's rename stops automatic titling for good (the store
// only sets an auto title).
func (a *Agent) startTitle(x *desk.Session, first string, prov provider.Provider, spec provider.Spec) {
	if x.Title != "" {
		return
	}
	a.background(func(bg context.Context) {
		title := firstWords(first, 8, 60)
		if spec.Provider != "script" && prov != nil {
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			resp, err := prov.Stream(ctx, provider.Request{Model: spec.Model, MaxTokens: 30,
				System:   "Write a title of at most six words for a conversation that starts with the user's message. Answer with the title only.",
				Messages: []provider.Message{{Role: provider.RoleUser, Content: first}}}, func(provider.Event) {})
			cancel()
			if err == nil {
				a.recordTitle(x, spec, resp)
				if t := cleanTitle(resp.Text); t != "" {
					title = t
				}
			}
		}
		if title == "" {
			return
		}
		// Stored even when Close cancelled the model call: the store
		// closes only after the agent did.
		if _, err := a.store.SetAutoTitle(context.WithoutCancel(bg), x.ID, title); err != nil {
			a.log.Error("set title", "err", err, "session_id", x.ID)
		}
	})
}

// firstWords is the first n words of s, at most max characters.
func firstWords(s string, n, max int) string {
	s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "/plan"))
	words := strings.Fields(s)
	if len(words) > n {
		words = words[:n]
	}
	t := strings.Join(words, " ")
	if r := []rune(t); len(r) > max {
		t = string(r[:max-1]) + "…"
	}
	return t
}

func cleanTitle(s string) string {
	s = strings.TrimSpace(strings.Trim(strings.TrimSpace(s), `"'`))
	s = strings.TrimRightFunc(s, func(r rune) bool { return unicode.IsPunct(r) && r != ')' })
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return firstWords(s, 10, 80)
}
