package session

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// DefaultProfile is the profile desk ships in every workspace: desk's
// agent on the default model, the workspace's approval mode, all tools.
// A workspace that stores a profile of this name replaces it.
const DefaultProfile = "default"

var profileNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// maxInstructions bounds a profile's instructions (they ride in every
// request's system prompt).
const maxInstructions = 20000

// builtins are desk's default profiles of a workspace.
func builtins(ws string) []*desk.Profile {
	return []*desk.Profile{{WorkspaceID: ws, Name: DefaultProfile, Builtin: true}}
}

// SetToolNames gives the service the names of desk's tools, which a
// profile's tool set is checked against (the agent owns the tools; the
// application wires their names in). Without it any name is taken.
func (s *Service) SetToolNames(names []string) { s.toolNames = slices.Clone(names) }

// ListProfiles lists the workspace's profiles and the defaults it does
// not replace, by name.
func (s *Service) ListProfiles(ctx context.Context, ws string) ([]*desk.Profile, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	ps, err := s.store.ListProfiles(ctx, ws)
	if err != nil {
		return nil, err
	}
	for _, b := range builtins(ws) {
		if !slices.ContainsFunc(ps, func(p *desk.Profile) bool { return p.Name == b.Name }) {
			ps = append(ps, b)
		}
	}
	slices.SortFunc(ps, func(a, b *desk.Profile) int { return strings.Compare(a.Name, b.Name) })
	return ps, nil
}

// GetProfile is a workspace's profile or default of that name.
func (s *Service) GetProfile(ctx context.Context, ws, name string) (*desk.Profile, error) {
	if _, err := s.workspaces.GetWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	return s.profile(ctx, ws, name)
}

func (s *Service) profile(ctx context.Context, ws, name string) (*desk.Profile, error) {
	p, err := s.store.GetProfile(ctx, ws, name)
	if desk.IsCode(err, desk.ENOTFOUND) {
		for _, b := range builtins(ws) {
			if b.Name == name {
				return b, nil
			}
		}
	}
	return p, err
}

// PutProfile creates (create) or replaces a profile after checking every
// field against what the operator declared.
func (s *Service) PutProfile(ctx context.Context, p *desk.Profile, create bool) (*desk.Profile, error) {
	if err := s.adminOrOwner(ctx, p.WorkspaceID); err != nil {
		return nil, err
	}
	if !profileNameRE.MatchString(p.Name) {
		return nil, desk.Errorf(desk.EINVALID, "name %q must be 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", p.Name)
	}
	spec, err := s.checkSpec(ctx, p.WorkspaceID, p.Name, p.ProfileSpec)
	if err != nil {
		return nil, err
	}
	now := desk.Now()
	out := &desk.Profile{WorkspaceID: p.WorkspaceID, Name: p.Name, ProfileSpec: spec, CreatedAt: now, UpdatedAt: now}
	if create {
		if err := s.store.CreateProfile(ctx, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	old, err := s.store.GetProfile(ctx, p.WorkspaceID, p.Name)
	if desk.IsCode(err, desk.ENOTFOUND) {
		// Replacing a default (or a profile that is not there) stores it.
		if err := s.store.CreateProfile(ctx, out); err != nil {
			return nil, err
		}
		return out, nil
	} else if err != nil {
		return nil, err
	}
	out.CreatedAt = old.CreatedAt
	return out, s.store.UpdateProfile(ctx, out)
}

// DeleteProfile removes a stored profile; a default cannot be removed.
// Sessions made from it keep their snapshot.
func (s *Service) DeleteProfile(ctx context.Context, ws, name string) error {
	if err := s.adminOrOwner(ctx, ws); err != nil {
		return err
	}
	err := s.store.DeleteProfile(ctx, ws, name)
	if desk.IsCode(err, desk.ENOTFOUND) && slices.ContainsFunc(builtins(ws), func(b *desk.Profile) bool { return b.Name == name }) {
		return desk.Errorf(desk.EINVALID, "profile %s is one of desk's defaults; it cannot be removed (store one of that name to replace it)", name)
	}
	return err
}

// adminOrOwner lets the admin and the workspace's actors manage its
// profiles (a profile chooses only among what the operator declared).
func (s *Service) adminOrOwner(ctx context.Context, ws string) error {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if _, err := s.workspaces.GetWorkspace(ctx, ws); err != nil {
		return err
	}
	if !p.Admin && p.WorkspaceID != ws {
		return desk.Errorf(desk.ENOTFOUND, "workspace %s not found", ws)
	}
	return nil
}

// checkSpec checks a profile's settings, naming the field at fault, and
// returns them in their declared form.
func (s *Service) checkSpec(ctx context.Context, ws, name string, in desk.ProfileSpec) (desk.ProfileSpec, error) {
	out := in
	out.Model, out.Runtime = strings.TrimSpace(in.Model), strings.TrimSpace(in.Runtime)
	if out.Model != "" && out.Runtime != "" {
		return out, desk.Errorf(desk.EINVALID, "model and runtime: a profile runs desk's agent on a model or a registered runtime, not both")
	}
	if out.Model != "" {
		m, err := s.models.Resolve(out.Model)
		if err != nil {
			return out, desk.Errorf(desk.EINVALID, "model: %s", desk.ErrorMessage(err))
		}
		if m == "script" {
			return out, desk.Errorf(desk.EINVALID, "model: the script model needs a session's own script; a profile cannot name it")
		}
		out.Model = m
	}
	if out.Runtime != "" {
		if _, err := s.store.GetRuntime(ctx, out.Runtime); desk.IsCode(err, desk.ENOTFOUND) {
			return out, desk.Errorf(desk.EINVALID, "runtime: %q is not registered (the admin registers runtimes: desk runtime add)", out.Runtime)
		} else if err != nil {
			return out, err
		}
		if out.ReasoningEffort != "" {
			return out, desk.Errorf(desk.EINVALID, "reasoning_effort: runtime %s reasons as its own configuration says; a profile sets reasoning only for desk's agent", out.Runtime)
		}
	}
	if out.Runtime == "" {
		if err := s.models.CheckEffort("reasoning_effort", out.Model, out.ReasoningEffort); err != nil {
			return out, err
		}
	}
	if out.ApprovalMode != "" {
		if err := desk.CheckApprovalMode(out.ApprovalMode); err != nil {
			return out, err
		}
	}
	if !utf8.ValidString(out.Instructions) || len(out.Instructions) > maxInstructions {
		return out, desk.Errorf(desk.EINVALID, "instructions must be valid UTF-8 of at most %d bytes", maxInstructions)
	}
	seen := map[string]bool{}
	for i, t := range out.Tools {
		if s.toolNames != nil && !slices.Contains(s.toolNames, t) {
			return out, desk.Errorf(desk.EINVALID, "tools[%d]: desk has no tool named %q (tools: %s)", i, t, strings.Join(s.toolNames, ", "))
		}
		if seen[t] {
			return out, desk.Errorf(desk.EINVALID, "tools[%d]: %q is named twice", i, t)
		}
		seen[t] = true
	}
	if out.ThreadProfile != "" && out.ThreadProfile != name {
		tp, err := s.profile(ctx, ws, out.ThreadProfile)
		if desk.IsCode(err, desk.ENOTFOUND) {
			return out, desk.Errorf(desk.EINVALID, "thread_profile: the workspace has no profile %q", out.ThreadProfile)
		} else if err != nil {
			return out, err
		}
		if tp.Runtime != "" {
			return out, desk.Errorf(desk.EINVALID, "thread_profile: %s runs runtime %s; handler threads run desk's agent", tp.Name, tp.Runtime)
		}
	}
	return out, nil
}

// applyProfile fills a new session's executor from its profile; what the
// request gives itself wins.
func (s *Service) applyProfile(ctx context.Context, in *desk.SessionCreate) (*desk.ProfileSpec, error) {
	if in.Profile == "" {
		return nil, nil
	}
	p, err := s.profile(ctx, in.WorkspaceID, in.Profile)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return nil, desk.Errorf(desk.EINVALID, "profile: the workspace has no profile %q", in.Profile)
	} else if err != nil {
		return nil, err
	}
	snap := p.ProfileSpec
	if in.Model == "" && in.Runtime == "" && len(in.Script) == 0 {
		in.Model, in.Runtime = snap.Model, snap.Runtime
	}
	if in.ReasoningEffort == "" && in.Runtime == "" && in.Model == snap.Model {
		in.ReasoningEffort = snap.ReasoningEffort
	}
	return &snap, nil
}

// changeAgent checks a change of a session's profile, model or reasoning
// effort and returns the update and the marker recording it (nil when
// nothing changes).
func (s *Service) changeAgent(ctx context.Context, x *desk.Session, u *desk.SessionUpdate) (*desk.SessionChange, error) {
	if u.Profile == nil && u.Model == nil && u.ReasoningEffort == nil {
		return nil, nil
	}
	model, effort, profile := x.Model, x.ReasoningEffort, x.Profile
	var snap *desk.ProfileSpec
	if u.Profile != nil {
		p, err := s.profile(ctx, x.WorkspaceID, *u.Profile)
		if desk.IsCode(err, desk.ENOTFOUND) {
			return nil, desk.Errorf(desk.EINVALID, "profile: the workspace has no profile %q", *u.Profile)
		} else if err != nil {
			return nil, err
		}
		if p.Runtime != x.Runtime {
			return nil, desk.Errorf(desk.EINVALID, "profile: %s runs %s, and this session runs %s; a session's executor is chosen when it is created", p.Name, executorName(p.Runtime), executorName(x.Runtime))
		}
		sp := p.ProfileSpec
		snap, profile = &sp, p.Name
		if x.Runtime == "" {
			model, effort = p.Model, p.ReasoningEffort
		}
	}
	if x.Runtime != "" && (u.Model != nil || u.ReasoningEffort != nil) {
		return nil, desk.Errorf(desk.EINVALID, "model and reasoning_effort: session %s runs runtime %s, which chooses its own model and reasoning", x.ID, x.Runtime)
	}
	if u.Model != nil {
		m, err := s.models.Resolve(*u.Model)
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "model: %s", desk.ErrorMessage(err))
		}
		if m == "script" && x.Model != "script" {
			return nil, desk.Errorf(desk.EINVALID, "model: the script model is chosen, with its script, when a session is created")
		}
		if x.Model == "script" && m != "script" {
			return nil, desk.Errorf(desk.EINVALID, "model: a script session keeps the script model")
		}
		if m != model && u.ReasoningEffort == nil && !s.models.Reasoning(m) {
			effort = "" // the new model takes none
		}
		model = m
	}
	if u.ReasoningEffort != nil {
		effort = *u.ReasoningEffort
	}
	if x.Runtime == "" {
		if err := s.models.CheckEffort("reasoning_effort", model, effort); err != nil {
			return nil, err
		}
	}
	c := &desk.SessionChange{At: desk.Now()}
	if p, ok := desk.PrincipalFrom(ctx); ok {
		c.By = p.ActorID
		if p.Admin {
			c.By = "admin"
		}
	}
	changed := false
	if profile != x.Profile || snap != nil {
		c.Profile, c.FromProfile, changed = profile, x.Profile, true
	}
	if model != x.Model {
		c.Model, c.FromModel, changed = modelName(s.models, model), modelName(s.models, x.Model), true
	}
	if effort != x.ReasoningEffort {
		c.ReasoningEffort, c.FromReasoningEffort, changed = effortName(effort), effortName(x.ReasoningEffort), true
	}
	u.Profile, u.ProfileSnapshot, u.Model, u.ReasoningEffort = nil, nil, nil, nil
	if !changed {
		return nil, nil
	}
	if snap != nil {
		u.Profile, u.ProfileSnapshot = &profile, snap
	}
	if model != x.Model {
		u.Model = &model
	}
	if effort != x.ReasoningEffort {
		u.ReasoningEffort = &effort
	}
	return c, nil
}

func executorName(runtime string) string {
	if runtime == "" {
		return "desk's agent"
	}
	return "runtime " + runtime
}

func modelName(c desk.ModelCatalog, m string) string {
	if m == "" {
		if d := c.Default(); d != "" {
			return d + " (default)"
		}
		return "(default)"
	}
	return m
}

func effortName(e string) string {
	if e == "" {
		return "default"
	}
	return e
}

// MarkerText is how a marker message reads.
func MarkerText(c *desk.SessionChange) string {
	var parts []string
	if c.Profile != "" {
		parts = append(parts, fmt.Sprintf("profile %s", c.Profile))
	}
	if c.Model != "" {
		parts = append(parts, fmt.Sprintf("model %s → %s", c.FromModel, c.Model))
	}
	if c.ReasoningEffort != "" {
		parts = append(parts, fmt.Sprintf("reasoning effort %s → %s", c.FromReasoningEffort, c.ReasoningEffort))
	}
	return "Agent changed from the next turn: " + strings.Join(parts, "; ")
}
