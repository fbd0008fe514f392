package agent

import (
	"context"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/extensions"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/session"
)

// readInstructions reads the checkout's external instruction files for a
// turn (once, at its start: an edit is seen from the next turn on).
func readInstructions(j *fsjail.Jail, w *desk.Workspace, st *desk.AgentSettings) []extensions.Instruction {
	return extensions.ReadInstructions(j, extensions.Roots(w), st == nil || st.ExternalInstructions)
}

// loadedSkills reads the skills a surface loaded, for one step: a load
// recorded by the previous step's load_extension is in the next request,
// never in the one whose step made it.
func (a *Agent) loadedSkills(ctx context.Context, j *fsjail.Jail, surface string) ([]LoadedSkill, []*desk.LoadedExtension, error) {
	recs, err := a.store.LoadedExtensions(ctx, surface)
	if err != nil {
		return nil, nil, err
	}
	out := make([]LoadedSkill, 0, len(recs))
	for _, r := range recs {
		k := LoadedSkill{Name: r.Name, Path: r.Path}
		txt, err := extensions.ReadSkill(j, extensions.Skill{Name: r.Name, Path: r.Path})
		if err != nil {
			k.Problem = desk.ErrorMessage(err)
		} else {
			k.Text = &txt
		}
		out = append(out, k)
	}
	return out, recs, nil
}

// toolEnv is what decides which optional tools are declared.
func (a *Agent) toolEnv(st *desk.AgentSettings) *tools.Env {
	return &tools.Env{Sandbox: a.opts.Sandbox, Settings: st, TypeScript: a.opts.TypeScript, TypeScriptAbsent: a.opts.TypeScriptAbsent, Dispatch: a.opts.Dispatch}
}

// guestJail is the guest file system of a session outside an execution
// (no /scratch), for the context view.
func (a *Agent) guestJail(ctx context.Context, x *desk.Session, w *desk.Workspace) (*fsjail.Jail, error) {
	groups, err := a.store.ListBindings(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	v := session.View{Session: x, HostPaths: w.HostPaths}
	for _, g := range groups {
		v.GroupIDs = append(v.GroupIDs, g.ID)
	}
	return fsjail.New(session.Mounts(a.home, v))
}
