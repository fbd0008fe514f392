package app

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/runtimehost"
)

// router sends a runtime-backed session's turns to the runtime host and
// every other turn to desk's agent, keeping the agent's Resumer contract.
type router struct {
	store desk.Store
	agent *agent.Agent
	host  *runtimehost.Host
}

func (r router) Execute(ctx context.Context, t *execution.Turn) (*execution.Outcome, error) {
	if t.Session.Runtime != "" {
		return r.host.Execute(ctx, t)
	}
	return r.agent.Execute(ctx, t)
}

func (r router) Available(ctx context.Context, s *desk.Session) error {
	if s.Runtime != "" {
		return r.host.Available(ctx, s)
	}
	return r.agent.Available(ctx, s)
}

// RecoverTurn: a runtime's turn cannot continue in another desk process
// (its child died with the old one); its records are settled and the
// execution is interrupted, and the next turn reopens the native
// conversation.
func (r router) RecoverTurn(ctx context.Context, x *desk.Execution, canResume bool) (bool, error) {
	if s, err := r.store.GetSession(ctx, x.SessionID); err == nil && s.Runtime != "" {
		return r.host.RecoverTurn(ctx, x, canResume)
	}
	return r.agent.RecoverTurn(ctx, x, canResume)
}

var _ execution.Resumer = router{}
