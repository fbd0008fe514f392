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
// otherwise. The job is a durable row until the title is set, so a crash
// mid-title retries it once at the next start (RecoverTitles). A person's
// rename stops automatic titling for good (the store only sets an auto
// title).
func (a *Agent) startTitle(x *desk.Session, first string, prov provider.Provider, spec provider.Spec) {
	if x.Title != "" {
		return
	}
	if _, err := a.store.BeginTitleJob(context.Background(), x.ID, first, desk.Now()); err != nil {
		a.log.Error("record title job", desk.LogErr, err, desk.LogSessionID, x.ID)
	}
	a.goTitle(x, first, prov, spec)
}

// goTitle runs a title job in the background; Close cancels its model
// call, and the first words still make the title.
func (a *Agent) goTitle(x *desk.Session, first string, prov provider.Provider, spec provider.Spec) {
	a.background(func(bg context.Context) {
		title := firstWords(first, 8, 60)
		if spec.Provider != "script" && prov != nil {
			ctx, cancel := context.WithTimeout(bg, 30*time.Second)
			resp, err := prov.Stream(ctx, provider.Request{Model: spec.Model, MaxTokens: 30,
				System:   titlePrompt,
				Messages: []provider.Message{{Role: provider.RoleUser, Content: first}}}, func(provider.Event) {})
			cancel()
			if err == nil {
				a.recordTitle(x, spec, resp)
				if t := cleanTitle(resp.Text); t != "" {
					title = t
				}
			}
		}
		a.endTitle(x.ID, title)
	})
}

// titlePrompt is the system prompt of the title call.
const titlePrompt = "Write a title of at most six words for a conversation that starts with the user's message. Answer with the title only."

// endTitle sets an automatic title (a manual one stays) and ends the job.
func (a *Agent) endTitle(sessionID, title string) {
	ctx := context.Background()
	if title != "" {
		if _, err := a.store.SetAutoTitle(ctx, sessionID, title); err != nil {
			a.log.Error("set title", desk.LogErr, err, desk.LogSessionID, sessionID)
			return // the job stays for the next start
		}
	}
	if err := a.store.EndTitleJob(ctx, sessionID); err != nil {
		a.log.Error("end title job", desk.LogErr, err, desk.LogSessionID, sessionID)
	}
}

// RecoverTitles retries, once, the title jobs a dead desk process left
// unfinished; a job already retried gets the first words of its message
// instead of a third model call. Sessions that were renamed, deleted or
// titled meanwhile just end their job.
func (a *Agent) RecoverTitles(ctx context.Context) error {
	jobs, err := a.store.ListTitleJobs(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		x, err := a.store.GetSession(ctx, j.SessionID)
		if desk.IsCode(err, desk.ENOTFOUND) {
			if err := a.store.EndTitleJob(ctx, j.SessionID); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if x.Title != "" || j.Attempts >= 2 {
			a.endTitle(x.ID, firstWordsUnless(x.Title, j.FirstMessage))
			continue
		}
		if _, err := a.store.BeginTitleJob(ctx, x.ID, j.FirstMessage, desk.Now()); err != nil {
			return err
		}
		prov, spec, err := a.provider(ctx, x, nil, a.modelOf(x))
		if err != nil {
			prov = nil // the first words still make a title
		}
		a.log.Info("retrying a title job a dead desk process left", desk.LogSessionID, x.ID)
		a.goTitle(x, j.FirstMessage, prov, spec)
	}
	return nil
}

// firstWordsUnless is the first words of first, or "" when the session
// already has a title.
func firstWordsUnless(title, first string) string {
	if title != "" {
		return ""
	}
	return firstWords(first, 8, 60)
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
