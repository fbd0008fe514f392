package execution

import (
	"context"

	"github.com/desk-runtime/desk"
)

// Usage sums live here because a token budget is an admission rule (the
// store's claim applies it) and because who may see a session's figures is
// the same question as who may see its executions.

// SessionUsage sums the model calls of a session the caller may see.
func (s *Service) SessionUsage(ctx context.Context, sessionID string) (*desk.SessionUsage, error) {
	x, err := s.session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	sum, err := s.store.SumUsage(ctx, desk.UsageFilter{SessionID: x.ID})
	if err != nil {
		return nil, err
	}
	return &desk.SessionUsage{SessionID: x.ID, UsageSum: *sum}, nil
}

// WorkspaceUsage sums a workspace's model calls: all of them for the
// admin, the caller's own sessions' for an actor token (as everywhere, an
// actor sees only its own sessions), with the workspace's budget figures.
func (s *Service) WorkspaceUsage(ctx context.Context, workspaceID string) (*desk.WorkspaceUsage, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if !p.CanSeeWorkspace(workspaceID) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %s not found", workspaceID)
	}
	st, err := s.store.GetAgentSettings(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	all, err := s.store.SumUsage(ctx, desk.UsageFilter{WorkspaceID: workspaceID})
	if err != nil {
		return nil, err
	}
	out := &desk.WorkspaceUsage{WorkspaceID: workspaceID, Scope: desk.UsageScopeWorkspace, UsageSum: *all,
		TokenBudget: st.TokenBudget, BudgetUsed: all.Total.TotalTokens}
	if !p.Admin {
		mine, err := s.store.SumUsage(ctx, desk.UsageFilter{WorkspaceID: workspaceID, ActorID: p.ActorID})
		if err != nil {
			return nil, err
		}
		out.Scope, out.ActorID, out.UsageSum = desk.UsageScopeActor, p.ActorID, *mine
	}
	return out, nil
}
