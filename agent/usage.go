package agent

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
)

// Every model call a provider answered is recorded with the counts it
// reported, whatever the call served: the steps of a turn, its auto-review
// decisions (both attributed to the execution) and a session's title (the
// session's, not one turn's, so it names no execution). A call is recorded
// as soon as its response arrives, before the step's message is written,
// so a crash between the two never loses tokens that were spent.

// recordUsage records a step of the turn.
func (tr *turn) recordUsage(resp *provider.Response) error {
	return tr.a.recordUsage(tr.ctx, tr.x, tr.t.Execution.SurfaceID, tr.t.Execution.ID, desk.UsageTurn, tr.spec, resp)
}

// recordReview records an auto-review call of the turn. A failure to
// record is logged: the review's decision stands (the turn's next step
// will meet a store that cannot be written anyway).
func (tr *turn) recordReview(resp *provider.Response) {
	if err := tr.a.recordUsage(tr.ctx, tr.x, tr.t.Execution.SurfaceID, tr.t.Execution.ID, desk.UsageReview, tr.spec, resp); err != nil {
		tr.a.log.Error("record review usage", desk.LogErr, err, desk.LogExecutionID, tr.t.Execution.ID)
	}
}

// recordTitle records a title call of the session.
func (a *Agent) recordTitle(x *desk.Session, spec provider.Spec, resp *provider.Response) {
	if err := a.recordUsage(context.Background(), x, x.SurfaceID, "", desk.UsageTitle, spec, resp); err != nil {
		a.log.Error("record title usage", desk.LogErr, err, desk.LogSessionID, x.ID)
	}
}

func (a *Agent) recordUsage(ctx context.Context, x *desk.Session, surface, exe, purpose string, spec provider.Spec, resp *provider.Response) error {
	if resp == nil {
		return nil
	}
	u := resp.Usage
	// The write is not cancelled with the turn: tokens already spent
	// count against the budget even when the turn is being interrupted.
	// It keeps ctx's fence, though: a process that lost the execution
	// writes nothing more of it (desk.Fence).
	return a.store.RecordUsage(context.WithoutCancel(ctx), &desk.ModelUsage{WorkspaceID: x.WorkspaceID, SessionID: x.ID, SurfaceID: surface,
		ExecutionID: exe, ActorID: x.Actor, Purpose: purpose, Model: modelName(spec),
		InputTokens: int64(u.InputTokens), OutputTokens: int64(u.OutputTokens), CachedTokens: int64(u.CachedTokens)})
}

// modelName is how usage names a model: provider and model, never an
// openai-compatible base URL (it may carry credentials, and the breakdown
// is per model, not per server).
func modelName(spec provider.Spec) string {
	if spec.Provider == "script" || spec.Model == "" {
		return spec.Provider
	}
	return spec.Provider + ":" + spec.Model
}

// Budget sources (see desk.ContextBudget).
const (
	BudgetEstimate = desk.BudgetEstimate
	BudgetProvider = desk.BudgetProvider
)

// reportedBudget is the context budget from the provider's own counts when
// the surface's last turn call reported them: that call's input plus its
// output is what the conversation held after it, exactly; what was
// appended since (tool results, a new message; not the response itself)
// is estimated on top. Without a reported call the estimate stands.
func (a *Agent) reportedBudget(ctx context.Context, surface string, est Budget) Budget {
	est.Source = BudgetEstimate
	u, err := a.store.LastTurnUsage(ctx, surface)
	if err != nil || !u.Reported() {
		return est
	}
	ms, err := a.store.ListMessages(ctx, surface, 0, pageSize)
	if err != nil {
		return est
	}
	used := int(u.InputTokens + u.OutputTokens)
	response := false
	for _, m := range ms {
		if m.CreatedAt.Before(u.CreatedAt) {
			continue
		}
		if !response && m.Role == desk.RoleAssistant && m.ExecutionID == u.ExecutionID {
			response = true // counted as the call's output
			continue
		}
		used += estimateTokens(m.Text)
		for _, c := range m.ToolCalls {
			used += estimateTokens(string(c.Arguments))
		}
	}
	pct := percent(used, est.Window)
	return Budget{UsedTokens: used, Window: est.Window, Percent: pct, Level: budgetLevel(pct), Source: BudgetProvider}
}
