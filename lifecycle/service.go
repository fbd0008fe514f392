// Package lifecycle owns the workspace lifecycle of the OpenAlice seed: the
// catalog every workspace ever created stays in, the operation guard that
// serializes checkout-changing operations (one lease per workspace, shared
// by every desk process on one database), offboarding with HANDOFF.md,
// restore, purge, the recovery journals that let startup finish or undo an
// interrupted operation, and the cross-workspace ask built on follow-up
// resolution.
//
// Every operation takes the workspace's lease, writes its journal, then
// writes the catalog state before it moves or deletes a file, and deletes
// the journal last. Recover, run at startup before queued work is
// dispatched, finds the journals a crash left and rolls each operation
// forward (or back, when it never passed its checks); running it twice
// changes nothing.
//
// Callers that already hold a workspace's lease (absorb, which holds both
// its workspaces' leases and then offboards the source) pass
// OffboardInput.HeldLease, so the offboarding does not ask for the lease it
// is running under.
//
// It must never delete a catalog row, reuse a workspace id, move a
// directory before the catalog says so, or touch a workspace whose lease
// another live process holds.
package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

// EBLOCKED is the error code of an offboarding refused while work of the
// workspace runs (HTTP 409).
const EBLOCKED = desk.EBLOCKED

// Archive is the part of the archive the lifecycle needs: open files of a
// workspace are closed before its directory moves.
type Archive interface {
	CloseWorkspace(ctx context.Context, ws string) error
}

// Options configure the service.
type Options struct {
	// Sessions resolves ask targets.
	Sessions desk.SessionService
	// Guard hands out the workspace leases every operation takes; nil
	// refuses every operation (a desk without an execution service has no
	// registered owner to name in a lease).
	Guard *Guard
	// Submit queues ask prompts (the execution service).
	Submit desk.Submitter
	// Archive, when set, has a workspace's files closed before it moves.
	Archive Archive
	// Children, when set, stops the processes kept for the workspace's
	// sessions (runtime children) before it is offboarded or purged.
	Children desk.RuntimeChildren
	Logger   *slog.Logger
	Now      func() time.Time
	// Fail, when set, is called at the named steps of every operation; an
	// error it returns stops the operation right there, as a crash would
	// (journal, state and files left as they are). Tests use it.
	Fail func(op, step string) error
}

// Service runs lifecycle operations.
type Service struct {
	store Store
	home  layout.Home
	opts  Options
	log   *slog.Logger

	guard *Guard

	sessionWS sync.Map // session id → workspace id; a session never moves
}

var _ desk.Recoverer = (*Service)(nil)

// New returns the service. Its guard needs this process's owner id, which
// the execution service chooses when it is built (and registers when it
// opens), so the execution service is built first.
func New(store Store, home layout.Home, opts Options) *Service {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = desk.Now
	}
	return &Service{store: store, home: home, opts: opts, log: opts.Logger, guard: opts.Guard}
}

// Guard returns the operation guard (nil when none was given).
func (s *Service) Guard() *Guard { return s.guard }

func (s *Service) acquire(ctx context.Context, op, ws string) (func(), error) {
	g := s.Guard()
	if g == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "this desk has no workspace lease guard")
	}
	return g.Acquire(ctx, op, ws)
}

func (s *Service) owner() string {
	if g := s.Guard(); g != nil {
		return g.Owner()
	}
	return ""
}

func (s *Service) fail(op, step string) error {
	if s.opts.Fail == nil {
		return nil
	}
	return s.opts.Fail(op, step)
}

// Result answers offboard, restore and purge (see desk.LifecycleResult).
type Result = desk.LifecycleResult

// OffboardResult answers Offboard.
type OffboardResult = desk.OffboardResult

// Catalog lists every workspace ever created (the admin), or the caller's
// own workspace (an actor token).
func (s *Service) Catalog(ctx context.Context) ([]*desk.CatalogEntry, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	listed, err := s.store.ListCatalog(ctx)
	if err != nil {
		return nil, err
	}
	// The workspace manager is listed apart (GET /v1/workspace-manager).
	var all []*desk.CatalogEntry
	for _, e := range listed {
		if e.WorkspaceID != desk.ManagerWorkspaceID {
			all = append(all, e)
		}
	}
	if p.Admin {
		return all, nil
	}
	var out []*desk.CatalogEntry
	for _, e := range all {
		if p.CanSeeWorkspace(e.WorkspaceID) {
			out = append(out, e)
		}
	}
	return out, nil
}

// CatalogEntry returns one workspace's catalog row.
func (s *Service) CatalogEntry(ctx context.Context, ws string) (*desk.CatalogEntry, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok {
		return nil, desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if !p.CanSeeWorkspace(ws) {
		return nil, desk.Errorf(desk.ENOTFOUND, "workspace %s not found", ws)
	}
	return s.store.GetCatalogEntry(ctx, ws)
}

// Ref names what a request is about (see desk.LifecycleRef).
type Ref = desk.LifecycleRef

// Admit answers a clear 409 when the workspace a request is about is not
// active (offboarding, departed, restoring, purging or purged): such a
// workspace takes no work, and its directory is not where writers would
// put files. Unknown ids pass, so the request answers its own 404.
func (s *Service) Admit(ctx context.Context, ref Ref) error {
	ws := ref.Workspace
	if ws == "" && ref.Session != "" {
		ws = s.workspaceOfSession(ctx, ref.Session)
	}
	if ws == "" && ref.Group != "" {
		if g, err := s.store.GetGroup(ctx, ref.Group); err == nil {
			ws = g.WorkspaceID
		}
	}
	if ws == "" && ref.Execution != "" {
		if x, err := s.store.GetExecution(ctx, ref.Execution); err == nil {
			ws = x.WorkspaceID
		}
	}
	if ws == "" {
		return nil
	}
	w, err := s.store.GetWorkspace(ctx, ws)
	if err != nil {
		if desk.IsCode(err, desk.ENOTFOUND) {
			return nil
		}
		return err
	}
	return NotActive(w)
}

// NotActive is nil for an active workspace and otherwise the 409 that
// says what state it is in and what to do.
func NotActive(w *desk.Workspace) error {
	switch w.State {
	case desk.WorkspaceActive:
		return nil
	case desk.WorkspaceDeparted:
		return desk.Errorf(desk.ECONFLICT, "workspace %s is departed (offboarded); restore it before using it", w.ID)
	case desk.WorkspaceOffboarding:
		return desk.Errorf(desk.ECONFLICT, "workspace %s is departed: it is being offboarded", w.ID)
	case desk.WorkspaceRestoring:
		return desk.Errorf(desk.ECONFLICT, "workspace %s is departed: it is being restored; try again when it is active", w.ID)
	case desk.WorkspacePurging, desk.WorkspacePurged:
		return desk.Errorf(desk.ECONFLICT, "workspace %s is purged: its data is gone for good", w.ID)
	}
	return desk.Errorf(desk.ECONFLICT, "workspace %s is %s, not active", w.ID, w.State)
}

func (s *Service) workspaceOfSession(ctx context.Context, id string) string {
	if v, ok := s.sessionWS.Load(id); ok {
		return v.(string)
	}
	x, err := s.store.GetSession(ctx, id)
	if err != nil {
		return ""
	}
	s.sessionWS.Store(id, x.WorkspaceID)
	return x.WorkspaceID
}

// journal writes j (step and data) before the change it announces.
func (s *Service) journal(ctx context.Context, j *desk.LifecycleJournal, step string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	j.Step, j.Data, j.UpdatedAt = step, b, s.opts.Now()
	if j.CreatedAt.IsZero() {
		j.CreatedAt = j.UpdatedAt
	}
	if err := s.store.PutLifecycleJournal(ctx, j); err != nil {
		return fmt.Errorf("write the %s journal of %s: %w", j.Op, j.WorkspaceID, err)
	}
	return nil
}

func newJournal(op, ws, owner string) *desk.LifecycleJournal {
	return &desk.LifecycleJournal{ID: desk.NewID("jrn"), Op: op, WorkspaceID: ws, Owner: owner}
}

// settle is how an operation ends: the journal goes last, after the final
// state is written.
func (s *Service) settle(ctx context.Context, j *desk.LifecycleJournal) error {
	return s.store.DeleteLifecycleJournal(ctx, j.ID)
}

// errInterrupted marks an intermediate state with no journal to finish it.
func errInterrupted(w *desk.Workspace) error {
	return desk.Errorf(desk.ECONFLICT, "workspace %s is %s and no interrupted operation was found to finish it", w.ID, w.State)
}

// isIntermediate reports states an operation passes through.
func isIntermediate(state string) bool {
	return state == desk.WorkspaceOffboarding || state == desk.WorkspaceRestoring || state == desk.WorkspacePurging
}

var _ desk.LifecycleService = (*Service)(nil)
