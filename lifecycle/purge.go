package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/desk-runtime/desk"
)

// Purge deletes a departed workspace for good: its directory, transcripts,
// artifacts and queue rows. The catalog tombstone, the retired session
// identities and the provenance (executions, artifact tombstones) stay, so
// follow-ups aimed into it resolve to purged-workspace rather than
// unknown. confirm must repeat the workspace id. Purging a purged
// workspace changes nothing.
func (s *Service) Purge(ctx context.Context, ws, confirm string) (*Result, error) {
	if err := desk.RequireAdmin(ctx, "purge a workspace"); err != nil {
		return nil, err
	}
	if err := desk.RefuseManager(ws, "purged"); err != nil {
		return nil, err
	}
	if _, err := s.store.GetWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	if confirm != ws {
		return nil, desk.Errorf(desk.EINVALID, "purging is irreversible: confirm must repeat the workspace id %s", ws)
	}
	release, err := s.acquire(ctx, desk.OpPurge, ws)
	if err != nil {
		return nil, err
	}
	defer release()
	w, err := s.settled(ctx, ws)
	if err != nil {
		return nil, err
	}
	switch w.State {
	case desk.WorkspacePurged:
		return s.result(ctx, ws, false)
	case desk.WorkspaceDeparted:
	case desk.WorkspaceActive:
		return nil, desk.Errorf(desk.ECONFLICT, "workspace %s is active; only a departed workspace can be purged: offboard it first", ws)
	default:
		return nil, NotActive(w)
	}
	// A departed workspace runs nothing; a child left over anyway goes
	// before its files do.
	if err := s.stopChildren(ctx, ws); err != nil {
		return nil, err
	}
	j := newJournal(desk.OpPurge, ws, s.owner())
	if err := s.journal(ctx, j, "begin", struct{}{}); err != nil {
		return nil, err
	}
	if err := s.fail(desk.OpPurge, "begin"); err != nil {
		return nil, err
	}
	if _, err := s.store.TransitionWorkspace(ctx, ws, desk.WorkspaceDeparted, desk.WorkspacePurging, desk.CatalogChange{}, s.opts.Now()); err != nil {
		_ = s.settle(ctx, j)
		return nil, err
	}
	if err := s.fail(desk.OpPurge, "purging"); err != nil {
		return nil, err
	}
	if err := s.finishPurge(ctx, j); err != nil {
		return nil, err
	}
	return s.result(ctx, ws, true)
}

// finishPurge carries a purge from purging to purged; every step is
// idempotent.
func (s *Service) finishPurge(ctx context.Context, j *desk.LifecycleJournal) error {
	ws := j.WorkspaceID
	now := s.opts.Now()
	if err := s.store.PurgeWorkspaceRows(ctx, ws, now); err != nil {
		return err
	}
	if err := s.fail(desk.OpPurge, "rows"); err != nil {
		return err
	}
	dir := s.home.Departed(ws)
	for _, d := range []string{dir, partialOf(dir)} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("delete %s: %w", d, err)
		}
	}
	syncDir(filepath.Dir(dir))
	if err := s.fail(desk.OpPurge, "deleted"); err != nil {
		return err
	}
	if _, err := s.store.TransitionWorkspace(ctx, ws, desk.WorkspacePurging, desk.WorkspacePurged,
		desk.CatalogChange{PurgedAt: &now}, now); err != nil {
		return err
	}
	s.log.Info("workspace purged", desk.LogWorkspaceID, ws)
	return s.settle(ctx, j)
}
