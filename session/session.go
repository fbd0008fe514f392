// Package session owns sessions and everything a session owns: its
// artifacts (bytes and rows together), its bindings to selection groups, and
// the guest file system view of them. It enforces that a session is bound to
// one workspace and one actor forever, that actor tokens see only their own
// sessions, and that deleting a session removes what it owns and nothing
// else (selection groups stay).
package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
)

// Service is the session service and its startup recovery (deletes a
// crash interrupted are finished).
type Service struct {
	store      Store
	home       layout.Home
	workspaces desk.WorkspaceService
	// stopper stops whatever runs in a session before its files and rows
	// go (the execution service); nil on a desk that runs nothing.
	stopper desk.SessionStopper
	// models is the operator's catalog: a session's model is one of its
	// models, whoever asks (nil: the script model only).
	models desk.ModelCatalog
	// reconstructMu makes finding or creating a reconstructed session one
	// step (Resolve).
	reconstructMu sync.Mutex
	// worktreeMu makes checking a worktree name free and binding it one
	// step (bindWorktree).
	worktreeMu sync.Mutex
	// git reads sessions' branches for Get and List, remembering each
	// until its .git or HEAD changes.
	git checkout.GitReader
	// toolNames are desk's tools, a profile's tool set is checked against.
	toolNames []string
	// agentMu makes a change of a session's agent and its marker one step.
	agentMu sync.Mutex
}

var (
	_ desk.SessionService = (*Service)(nil)
	_ desk.ProfileService = (*Service)(nil)
	_ desk.Recoverer      = (*Service)(nil)
)

// New returns the session service. stopper is called when a session is
// deleted, once the session is hidden and before its files and rows are
// removed. models is the operator's model catalog a session's model must
// be in.
func New(store Store, home layout.Home, workspaces desk.WorkspaceService, stopper desk.SessionStopper, models desk.ModelCatalog) *Service {
	if models == nil {
		models = noModels{}
	}
	return &Service{store: store, home: home, workspaces: workspaces, stopper: stopper, models: models}
}

// noModels is the catalog of a desk that declares no model.
type noModels struct{}

func (noModels) Default() string  { return "" }
func (noModels) Models() []string { return []string{"script"} }
func (noModels) Resolve(m string) (string, error) {
	if m = strings.TrimSpace(m); m == "" || m == "script" {
		return m, nil
	}
	return "", desk.Errorf(desk.EINVALID, "model %q is not offered by this desk; choose one of: script", m)
}

// SessionModel takes the default only: checking a script takes the
// operator's catalog (models.Catalog), which a desk always has.
func (noModels) SessionModel(m string, scr []byte) (string, error) {
	if m = strings.TrimSpace(m); m == "" && len(scr) == 0 {
		return "", nil
	}
	return "", desk.Errorf(desk.EINVALID, "this desk has no model catalog; a session takes the default model and no script")
}

func (noModels) Reasoning(string) bool { return false }

func (noModels) CheckEffort(field, _, effort string) error {
	if err := desk.CheckEffort(field, effort); err != nil || effort == "" {
		return err
	}
	return desk.Errorf(desk.EINVALID, "%s: this desk declares no reasoning model", field)
}

// visibleSession returns the session if the caller may see it. Sessions of
// other actors answer not_found, never forbidden, so their existence does
// not leak.
func visibleSession(ctx context.Context, store Store, id string) (*desk.Session, error) {
	return desk.VisibleSession(ctx, store, id)
}

// originOf stamps provenance from the authenticated caller. Request bodies
// never reach it.
func originOf(ctx context.Context, x *desk.Session) desk.Origin {
	if o, ok := desk.OriginFrom(ctx); ok {
		o.WorkspaceID, o.SessionID = x.WorkspaceID, x.ID
		return o
	}
	p, _ := desk.PrincipalFrom(ctx)
	o := desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: p.ActorID, Kind: desk.OriginUser}
	if p.Admin {
		o.Actor = desk.AdminActor
	}
	return o
}

func validTitle(t string) error {
	if !utf8.ValidString(t) || utf8.RuneCountInString(t) > 200 {
		return desk.Errorf(desk.EINVALID, "title must be valid UTF-8 of at most 200 characters")
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return desk.Errorf(desk.EINVALID, "title must not contain control characters")
		}
	}
	return nil
}

func (s *Service) Create(ctx context.Context, in desk.SessionCreate) (*desk.Session, error) {
	return s.create(ctx, in, "")
}

func (s *Service) create(ctx context.Context, in desk.SessionCreate, reconstructedFrom string) (*desk.Session, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	w, err := s.workspaces.GetWorkspace(ctx, in.WorkspaceID)
	if err != nil {
		return nil, err
	}
	if w.State != desk.WorkspaceActive {
		return nil, desk.Errorf(desk.ECONFLICT, "workspace %s is %s; sessions can only be created in an active workspace", w.ID, w.State)
	}
	if err := validTitle(in.Title); err != nil {
		return nil, err
	}
	snap, err := s.applyProfile(ctx, &in)
	if err != nil {
		return nil, err
	}
	// An undeclared model is refused for every caller, the admin
	// included, before anything is made.
	model, err := s.models.SessionModel(in.Model, in.Script)
	if err != nil {
		return nil, err
	}
	in.Model = model
	if in.Runtime != "" {
		// A session picks a runtime the operator registered, by name; it
		// never brings its own program.
		if in.Model != "" || len(in.Script) > 0 {
			return nil, desk.Errorf(desk.EINVALID, "a runtime-backed session takes no model or script: runtime %s runs its own", in.Runtime)
		}
		if _, err := s.store.GetRuntime(ctx, in.Runtime); desk.IsCode(err, desk.ENOTFOUND) {
			return nil, desk.Errorf(desk.EINVALID, "runtime %q is not registered (the admin registers runtimes: desk runtime add)", in.Runtime)
		} else if err != nil {
			return nil, err
		}
		if in.ReasoningEffort != "" {
			return nil, desk.Errorf(desk.EINVALID, "reasoning_effort: runtime %s reasons as its own configuration says", in.Runtime)
		}
	} else if err := s.models.CheckEffort("reasoning_effort", in.Model, in.ReasoningEffort); err != nil {
		return nil, err
	}
	var actor *desk.Actor
	switch {
	case in.Actor == "" && p.Admin:
		actor, err = s.workspaces.ResolveActor(ctx, w.ID, desk.OwnerActorName)
	case in.Actor == "":
		actor, err = s.workspaces.ResolveActor(ctx, w.ID, p.ActorID)
	default:
		actor, err = s.workspaces.ResolveActor(ctx, w.ID, in.Actor)
		if err == nil && !p.Admin && actor.ID != p.ActorID {
			return nil, desk.Errorf(desk.EFORBIDDEN, "an actor token creates sessions for its own actor only")
		}
		if desk.IsCode(err, desk.ENOTFOUND) && !p.Admin {
			return nil, desk.Errorf(desk.EFORBIDDEN, "an actor token creates sessions for its own actor only")
		}
	}
	if err != nil {
		return nil, err
	}
	now := desk.Now()
	x := &desk.Session{
		ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: actor.ID,
		Title: strings.TrimSpace(in.Title), Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now,
		ReconstructedFrom: reconstructedFrom, Model: in.Model, Script: in.Script, Runtime: in.Runtime,
		ReasoningEffort: in.ReasoningEffort, Profile: in.Profile, ProfileSnapshot: snap,
	}
	x.Origin = originOf(ctx, x)
	// The artifact directory exists from birth so /artifacts is always
	// listable; it is created before the row so a visible session never
	// lacks it.
	if err := os.MkdirAll(s.home.Abs(w.ID, layout.SessionRel(actor.ID, x.ID)), 0o755); err != nil {
		return nil, fmt.Errorf("create session directory: %w", err)
	}
	if err := s.store.CreateSession(ctx, x); err != nil {
		return nil, err
	}
	return x, nil
}

func (s *Service) Get(ctx context.Context, id string) (*desk.Session, error) {
	x, err := visibleSession(ctx, s.store, id)
	return s.withGit(x), err
}

func (s *Service) List(ctx context.Context, f desk.SessionFilter) ([]*desk.Session, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if _, err := s.workspaces.GetWorkspace(ctx, f.WorkspaceID); err != nil {
		return nil, err
	}
	if !p.Admin {
		f.ActorID = p.ActorID
	}
	xs, err := s.store.ListSessions(ctx, f)
	for _, x := range xs {
		s.withGit(x)
	}
	return xs, err
}

func (s *Service) Update(ctx context.Context, id string, u desk.SessionUpdate) (*desk.Session, error) {
	x, err := visibleSession(ctx, s.store, id)
	if err != nil {
		return nil, err
	}
	if u.Worktree != nil {
		s.worktreeMu.Lock()
		defer s.worktreeMu.Unlock()
		if err := s.bindWorktree(ctx, x, *u.Worktree); err != nil {
			return nil, err
		}
	}
	if u.Title != nil {
		t := strings.TrimSpace(*u.Title)
		if err := validTitle(t); err != nil {
			return nil, err
		}
		u.Title = &t
	}
	if u.Lifecycle != nil {
		return nil, desk.Errorf(desk.EINVALID, "lifecycle changes through retire and recall, not update")
	}
	if u.Profile != nil || u.Model != nil || u.ReasoningEffort != nil {
		s.agentMu.Lock()
		defer s.agentMu.Unlock()
		if x, err = s.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
	}
	change, err := s.changeAgent(ctx, x, &u)
	if err != nil {
		return nil, err
	}
	x, err = s.store.UpdateSession(ctx, id, u)
	if err != nil {
		return nil, err
	}
	if change != nil {
		// The running turn keeps the agent it started with; the marker
		// says where the change takes effect, and no model ever reads it.
		m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, Role: desk.RoleMarker,
			Text: MarkerText(change), CreatedAt: change.At}
		m.SetMarker(change)
		if err := s.store.AppendMessage(ctx, m); err != nil {
			return nil, err
		}
	}
	return s.withGit(x), nil
}

func (s *Service) Delete(ctx context.Context, id string) error {
	x, err := visibleSession(ctx, s.store, id)
	if err != nil {
		return err
	}
	if err := s.store.MarkSessionDeleting(ctx, x.ID); err != nil {
		return err
	}
	if s.stopper != nil {
		if err := s.stopper.StopSession(ctx, x); err != nil {
			return err
		}
	}
	return s.finishDelete(ctx, x)
}

// finishDelete removes a session already marked deleting: its revision
// files, its artifact directory, then its rows. Each step is idempotent.
func (s *Service) finishDelete(ctx context.Context, x *desk.Session) error {
	arts, err := s.store.ListArtifacts(ctx, x.ID)
	if err != nil {
		return err
	}
	for _, a := range arts {
		if err := os.RemoveAll(s.home.Abs(x.WorkspaceID, layout.RevisionDirRel(a.ID))); err != nil {
			return fmt.Errorf("delete session %s: %w", x.ID, err)
		}
	}
	if err := os.RemoveAll(s.home.Abs(x.WorkspaceID, layout.SessionRel(x.Actor, x.ID))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete session %s: %w", x.ID, err)
	}
	// The runtime's state directory (its native conversations), whose
	// child the stopper has ended.
	if err := os.RemoveAll(s.home.Abs(x.WorkspaceID, layout.RuntimeStateRel(x.ID))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete session %s: %w", x.ID, err)
	}
	return s.store.PurgeSession(ctx, x.ID)
}

// Recover finishes session deletes that a crash interrupted.
func (s *Service) Recover(ctx context.Context) error {
	xs, err := s.store.ListDeletingSessions(ctx)
	if err != nil {
		return err
	}
	for _, x := range xs {
		if err := s.finishDelete(ctx, x); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) SetBindings(ctx context.Context, sessionID string, groupIDs []string) ([]*desk.Group, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, g := range groupIDs {
		if seen[g] {
			return nil, desk.Errorf(desk.EINVALID, "group %s is listed twice", g)
		}
		seen[g] = true
		grp, err := s.store.GetGroup(ctx, g)
		if err != nil || grp.WorkspaceID != x.WorkspaceID {
			return nil, desk.Errorf(desk.EINVALID, "group %s is not a group of workspace %s", g, x.WorkspaceID)
		}
	}
	if err := s.store.SetBindings(ctx, x.ID, groupIDs); err != nil {
		return nil, err
	}
	return s.store.ListBindings(ctx, x.ID)
}

func (s *Service) Bindings(ctx context.Context, sessionID string) ([]*desk.Group, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListBindings(ctx, x.ID)
}
