package template

import (
	"context"
	"fmt"
	"os"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
)

// Recover finishes or undoes what a crash interrupted, before desk serves:
// an install is finished from its template version; an upgrade whose
// commit (or, without git, whose last file) was recorded is finished, and
// any other is undone, files and git index alike. A second Recover finds
// no journal and changes nothing.
func (s *Service) Recover(ctx context.Context) error {
	for _, op := range []string{opInstall, opUpgrade} {
		ids, err := checkout.Pending(s.home, op)
		if err != nil {
			return err
		}
		for _, ws := range ids {
			if err := s.recoverOne(ctx, op, ws); err != nil {
				return fmt.Errorf("recover the %s of workspace %s: %w", op, ws, err)
			}
		}
	}
	return nil
}

func (s *Service) recoverOne(ctx context.Context, op, ws string) error {
	root, err := os.OpenRoot(s.home.Workspace(ws))
	if err != nil {
		return err
	}
	defer root.Close()
	if op == opInstall {
		return s.recoverInstall(ctx, ws, root)
	}
	j, err := checkout.Load(root, opUpgrade)
	if err != nil || j == nil {
		return err
	}
	if j.Phase != checkout.PhaseCommitted {
		// The commit is the point of no return: if HEAD is the upgrade's
		// commit, only the journal's last write was lost.
		if repo := j.Repo(); repo != nil {
			commit, ok, err := repo.HeadHasTrailer(ctx, j.ID)
			if err != nil {
				return err
			}
			if ok {
				s.opt.Logger.Info("finishing an interrupted template upgrade", desk.LogWorkspaceID, ws, "commit", commit)
				return j.Finish()
			}
		}
		s.opt.Logger.Info("undoing an interrupted template upgrade", desk.LogWorkspaceID, ws, desk.LogJournalID, j.ID)
		if err := j.Rollback(ctx); err != nil {
			return err
		}
	}
	return j.Finish()
}
