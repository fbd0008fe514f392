// Package inbox gathers everything waiting on a person across the
// sessions and routines they can see: approvals of gated tool calls,
// questions the agent asked, plans awaiting review, and routines whose
// latest run failed. It reads the store and applies the one visibility
// rule of sessions (desk.VisibleSession) to every item.
package inbox

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// Store is what the inbox reads.
type Store interface {
	desk.InboxStore
	desk.SessionReader
	GetRoutine(ctx context.Context, id string) (*desk.Routine, error)
}

// perKind bounds each kind of item an inbox lists: an inbox of more than
// this many of one kind is a backlog to work through, not to page.
const perKind = 500

// Service implements desk.InboxService.
type Service struct {
	store Store
	now   func() time.Time
}

var _ desk.InboxService = (*Service)(nil)

// New returns the inbox service.
func New(store Store) *Service { return &Service{store: store, now: desk.Now} }

// Inbox lists what waits on the caller, oldest first.
func (s *Service) Inbox(ctx context.Context) (*desk.Inbox, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	f := desk.InboxFilter{}
	if !p.Admin {
		f = desk.InboxFilter{WorkspaceID: p.WorkspaceID, ActorID: p.ActorID}
	}
	// The store narrows by the filter; every item is checked again with
	// the sessions' own rule, so the inbox can never show more than the
	// session routes would.
	sessions := map[string]*desk.Session{}
	visible := func(id string) *desk.Session {
		if x, ok := sessions[id]; ok {
			return x
		}
		x, err := desk.VisibleSession(ctx, s.store, id)
		if err != nil {
			x = nil
		}
		sessions[id] = x
		return x
	}
	now := s.now()
	out := &desk.Inbox{Items: []*desk.InboxItem{}, Counts: map[string]int{}}
	add := func(it *desk.InboxItem, x *desk.Session) {
		if x != nil {
			it.WorkspaceID, it.SessionTitle = x.WorkspaceID, x.Title
		}
		it.AgeSeconds = int64(max(now.Sub(it.CreatedAt), 0) / time.Second)
		out.Items = append(out.Items, it)
		out.Counts[it.Kind]++
	}

	as, err := s.store.PendingApprovals(ctx, f, perKind)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		if x := visible(a.SessionID); x != nil {
			sum := a.What
			if sum == "" {
				sum = a.Summary
			}
			add(&desk.InboxItem{Kind: desk.InboxApproval, ID: a.ID, SessionID: a.SessionID, Summary: a.Tool + ": " + oneLine(sum),
				CreatedAt: a.CreatedAt, Approval: a}, x)
		}
	}
	qs, err := s.store.PendingInputRequests(ctx, f, perKind)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if x := visible(q.SessionID); x != nil {
			sum := ""
			if len(q.Questions) > 0 {
				sum = q.Questions[0].Question
			}
			add(&desk.InboxItem{Kind: desk.InboxQuestion, ID: q.ID, SessionID: q.SessionID, SurfaceID: q.SurfaceID,
				Summary: oneLine(sum), CreatedAt: q.CreatedAt, Question: q}, x)
		}
	}
	ps, err := s.store.ProposedPlans(ctx, f, perKind)
	if err != nil {
		return nil, err
	}
	for _, pl := range ps {
		if x := visible(pl.SessionID); x != nil {
			var card struct {
				Title string `json:"title"`
			}
			_ = json.Unmarshal(pl.Card, &card)
			add(&desk.InboxItem{Kind: desk.InboxPlan, ID: pl.ID, SessionID: pl.SessionID, Summary: oneLine(card.Title),
				CreatedAt: pl.CreatedAt, Plan: pl}, x)
		}
	}
	runs, err := s.store.FailedRoutineRuns(ctx, f, perKind)
	if err != nil {
		return nil, err
	}
	for _, run := range runs {
		r, err := s.store.GetRoutine(ctx, run.RoutineID)
		if err != nil || !p.CanSeeActor(r.WorkspaceID, r.Actor) {
			continue
		}
		it := &desk.InboxItem{Kind: desk.InboxRoutineFailed, ID: run.ID, WorkspaceID: r.WorkspaceID,
			Summary: oneLine(r.Name + ": " + run.Error), CreatedAt: run.StartedAt, RoutineRun: run}
		if run.FinishedAt != nil {
			it.CreatedAt = *run.FinishedAt
		}
		var x *desk.Session
		if run.SessionID != "" {
			if x = visible(run.SessionID); x != nil {
				it.SessionID = run.SessionID
			}
		}
		add(it, x)
	}
	slices.SortStableFunc(out.Items, func(a, b *desk.InboxItem) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// oneLine shortens text to one line of at most 200 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return s
}
