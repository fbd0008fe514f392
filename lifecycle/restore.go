package lifecycle

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/desk-runtime/desk"
)

// Restore moves a departed workspace back to its exact original place,
// recalls the sessions its offboarding retired and marks it active. It is
// refused when the departed copy is missing or the original place is
// taken. Restoring an active workspace changes nothing.
func (s *Service) Restore(ctx context.Context, ws string) (*Result, error) {
	if err := desk.RequireAdmin(ctx, "restore a workspace"); err != nil {
		return nil, err
	}
	if _, err := s.store.GetWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	release, err := s.acquire(ctx, desk.OpRestore, ws)
	if err != nil {
		return nil, err
	}
	defer release()
	w, err := s.settled(ctx, ws)
	if err != nil {
		return nil, err
	}
	switch w.State {
	case desk.WorkspaceActive:
		return s.result(ctx, ws, false)
	case desk.WorkspaceDeparted:
	case desk.WorkspacePurged:
		return nil, desk.Errorf(desk.ECONFLICT, "workspace %s is purged; there is nothing left to restore", ws)
	default:
		return nil, NotActive(w)
	}
	from, to := s.home.Departed(ws), s.home.Workspace(ws)
	if ok, err := isDir(from); err != nil {
		return nil, err
	} else if !ok {
		return nil, desk.Errorf(desk.ECONFLICT, "cannot restore workspace %s: its departed copy %s is missing", ws, from)
	}
	if _, err := os.Lstat(to); err == nil {
		return nil, desk.Errorf(desk.ECONFLICT, "cannot restore workspace %s: its original place %s is taken; move that away first", ws, to)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	j := newJournal(desk.OpRestore, ws, s.owner())
	if err := s.journal(ctx, j, "begin", struct{}{}); err != nil {
		return nil, err
	}
	if err := s.fail(desk.OpRestore, "begin"); err != nil {
		return nil, err
	}
	if _, err := s.store.TransitionWorkspace(ctx, ws, desk.WorkspaceDeparted, desk.WorkspaceRestoring, desk.CatalogChange{}, s.opts.Now()); err != nil {
		_ = s.settle(ctx, j)
		return nil, err
	}
	if err := s.fail(desk.OpRestore, "restoring"); err != nil {
		return nil, err
	}
	if err := s.finishRestore(ctx, j); err != nil {
		return nil, err
	}
	return s.result(ctx, ws, true)
}

// finishRestore carries a restore from the restoring state to active;
// every step is idempotent. It does not wake the dispatcher: at startup,
// recovery runs before anything is dispatched.
func (s *Service) finishRestore(ctx context.Context, j *desk.LifecycleJournal) error {
	ws := j.WorkspaceID
	from, to := s.home.Departed(ws), s.home.Workspace(ws)
	if err := s.journal(ctx, j, "move", struct{}{}); err != nil {
		return err
	}
	if err := moveDir(from, to, func(step string) error { return s.fail(desk.OpRestore, "move-"+step) }); err != nil {
		return err
	}
	if err := s.fail(desk.OpRestore, "moved"); err != nil {
		return err
	}
	// The handoff files were the offboarding's; the directory goes back
	// exactly as it left. The handoff stays in the catalog.
	for _, f := range []string{HandoffFile, OffboardingFile} {
		if err := os.Remove(filepath.Join(to, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	syncDir(to)
	e, err := s.store.GetCatalogEntry(ctx, ws)
	if err != nil {
		return err
	}
	active := desk.SessionActive
	for _, id := range e.RetiredSessions {
		x, err := s.store.GetSession(ctx, id)
		if err != nil {
			if desk.IsCode(err, desk.ENOTFOUND) {
				continue
			}
			return err
		}
		if x.Lifecycle != desk.SessionActive {
			if _, err := s.store.UpdateSession(ctx, id, desk.SessionUpdate{Lifecycle: &active}); err != nil {
				return err
			}
		}
	}
	if err := s.fail(desk.OpRestore, "recalled"); err != nil {
		return err
	}
	now := s.opts.Now()
	if _, err := s.store.TransitionWorkspace(ctx, ws, desk.WorkspaceRestoring, desk.WorkspaceActive,
		desk.CatalogChange{RestoredAt: &now, RetiredSessions: []string{}}, now); err != nil {
		return err
	}
	s.log.Info("workspace restored", desk.LogWorkspaceID, ws, "recalled_sessions", len(e.RetiredSessions), desk.LogPath, to)
	return s.settle(ctx, j)
}
