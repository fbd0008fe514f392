package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
)

// profileOf is the profile a surface of x runs: the session's snapshot on
// its orchestrator surface; on a handler thread, the snapshot's thread
// profile, read now (threads start from the profile as it is), or the
// snapshot itself when it names none. nil: no profile (all tools, the
// workspace's approval mode, no extra instructions).
func (a *Agent) profileOf(ctx context.Context, x *desk.Session, th *desk.Thread) (*desk.ProfileSpec, error) {
	snap := x.ProfileSnapshot
	if th == nil || snap == nil || snap.ThreadProfile == "" || snap.ThreadProfile == x.Profile {
		return snap, nil
	}
	p, err := a.store.GetProfile(ctx, x.WorkspaceID, snap.ThreadProfile)
	if desk.IsCode(err, desk.ENOTFOUND) && snap.ThreadProfile == "default" {
		return &desk.ProfileSpec{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the thread profile %q of session %s: %w", snap.ThreadProfile, x.ID, err)
	}
	return &p.ProfileSpec, nil
}

// agentOf is the model and reasoning effort a surface of x runs: a
// handler thread's own profile's when it names a model.
func (a *Agent) agentOf(x *desk.Session, prof *desk.ProfileSpec, th *desk.Thread) (model, effort string) {
	model, effort = a.modelOf(x), x.ReasoningEffort
	if th != nil && prof != nil && prof != x.ProfileSnapshot && prof.Model != "" {
		model, effort = prof.Model, prof.ReasoningEffort
	}
	return model, effort
}

// checkEffort refuses, before any request leaves desk, a reasoning effort
// the model was not declared to take (the operator may have changed the
// declaration since the session chose it).
func (a *Agent) checkEffort(model, effort string) error {
	if effort == "" {
		return nil
	}
	if err := a.opts.Models.CheckEffort("reasoning_effort", model, effort); err != nil {
		return fmt.Errorf("%s", desk.ErrorMessage(err))
	}
	return nil
}

// allowTools keeps the tools a profile names (all when it names none).
func allowTools(prof *desk.ProfileSpec, ts []provider.Tool) []provider.Tool {
	if prof == nil || len(prof.Tools) == 0 {
		return ts
	}
	return slices.DeleteFunc(ts, func(t provider.Tool) bool { return !slices.Contains(prof.Tools, t.Name) })
}

// toolAllowed says whether a profile offers a tool.
func toolAllowed(prof *desk.ProfileSpec, name string) bool {
	return prof == nil || len(prof.Tools) == 0 || slices.Contains(prof.Tools, name)
}
