package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/desk-runtime/desk"
)

// Recover finishes or rolls back every operation a crash interrupted: for
// each journal it takes the workspace's lease (a lease of a dead owner is
// taken over; one a live process holds means that process is still at
// work, and the journal is left to it), then
//
//   - offboard: rolled back to active when it stopped before choosing the
//     sessions and work of the workspace still runs elsewhere, otherwise
//     carried on to departed;
//   - restore: carried on to active (the move is finished from wherever
//     it stopped, including a copy that finished with both directories
//     present);
//   - purge: carried on to purged;
//
// and a journal whose operation never changed the state, or already
// reached its end, is simply removed. A journal of any other operation is
// logged and left alone. Running Recover again changes nothing.
func (s *Service) Recover(ctx context.Context) error {
	js, err := s.store.ListLifecycleJournals(ctx)
	if err != nil {
		return fmt.Errorf("list lifecycle journals: %w", err)
	}
	for _, j := range js {
		if err := s.recoverJournal(ctx, j); err != nil {
			return fmt.Errorf("recover the interrupted %s of %s: %w", j.Op, j.WorkspaceID, err)
		}
	}
	return nil
}

func (s *Service) recoverJournal(ctx context.Context, j *desk.LifecycleJournal) error {
	switch j.Op {
	case desk.OpOffboard, desk.OpRestore, desk.OpPurge:
	default:
		s.log.Warn("a lifecycle journal of an operation this desk does not know is left alone",
			desk.LogJournalID, j.ID, "op", j.Op, desk.LogWorkspaceID, j.WorkspaceID)
		return nil
	}
	release, err := s.acquire(ctx, j.Op, j.WorkspaceID)
	if desk.IsCode(err, desk.ECONFLICT) {
		s.log.Info("an interrupted lifecycle operation is left to the live process holding its workspace",
			desk.LogJournalID, j.ID, "op", j.Op, desk.LogWorkspaceID, j.WorkspaceID, desk.LogErr, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	return s.recoverLocked(ctx, j)
}

// recoverLocked recovers one journal of this package; the caller holds
// the workspace's lease.
func (s *Service) recoverLocked(ctx context.Context, j *desk.LifecycleJournal) error {
	// Another recovery may have finished it while we waited for the lease.
	if cur, err := s.journalByID(ctx, j.ID); err != nil {
		return err
	} else if cur == nil {
		return nil
	} else {
		j = cur
	}
	w, err := s.store.GetWorkspace(ctx, j.WorkspaceID)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return s.settle(ctx, j)
	}
	if err != nil {
		return err
	}
	log := s.log.With(desk.LogJournalID, j.ID, "op", j.Op, desk.LogWorkspaceID, j.WorkspaceID, "step", j.Step, "state", w.State)
	switch j.Op {
	case desk.OpOffboard:
		var data offboardData
		if err := json.Unmarshal(j.Data, &data); err != nil {
			return fmt.Errorf("decode the offboarding journal: %w", err)
		}
		switch w.State {
		case desk.WorkspaceOffboarding:
			if !data.Chosen {
				blockers, err := s.blockers(ctx, w.ID)
				if err != nil {
					return err
				}
				if len(blockers) > 0 {
					log.Warn("rolled back an interrupted offboarding: work of the workspace still runs", "blockers", blockers)
					return s.rollbackOffboard(ctx, j, s.opts.Now())
				}
			}
			log.Warn("finishing an interrupted offboarding")
			return s.finishOffboard(ctx, j, &data)
		default:
			// It never left active, or it reached departed.
			return s.settle(ctx, j)
		}
	case desk.OpRestore:
		if w.State != desk.WorkspaceRestoring {
			return s.settle(ctx, j)
		}
		from, to := s.home.Departed(w.ID), s.home.Workspace(w.ID)
		fromOK, err := isDir(from)
		if err != nil {
			return err
		}
		toOK, err := isDir(to)
		if err != nil {
			return err
		}
		if !fromOK && !toOK {
			// Nothing to move back: leave the journal and the state for an
			// operator to see rather than invent a directory.
			log.Error("an interrupted restore cannot be finished: neither the departed copy nor the original directory exists",
				"departed", from, "original", to)
			return nil
		}
		log.Warn("finishing an interrupted restore")
		return s.finishRestore(ctx, j)
	case desk.OpPurge:
		if w.State != desk.WorkspacePurging {
			return s.settle(ctx, j)
		}
		log.Warn("finishing an interrupted purge")
		return s.finishPurge(ctx, j)
	}
	return nil
}

func (s *Service) journalByID(ctx context.Context, id string) (*desk.LifecycleJournal, error) {
	js, err := s.store.ListLifecycleJournals(ctx)
	if err != nil {
		return nil, err
	}
	for _, j := range js {
		if j.ID == id {
			return j, nil
		}
	}
	return nil, nil
}

// settled returns the workspace after finishing any interrupted operation
// of this package on it. The caller holds the workspace's lease, so no
// live process is running that operation.
func (s *Service) settled(ctx context.Context, ws string) (*desk.Workspace, error) {
	w, err := s.store.GetWorkspace(ctx, ws)
	if err != nil || !isIntermediate(w.State) {
		return w, err
	}
	js, err := s.store.ListLifecycleJournals(ctx)
	if err != nil {
		return nil, err
	}
	found := false
	for _, j := range js {
		if j.WorkspaceID != ws || (j.Op != desk.OpOffboard && j.Op != desk.OpRestore && j.Op != desk.OpPurge) {
			continue
		}
		found = true
		if err := s.recoverLocked(ctx, j); err != nil {
			return nil, err
		}
	}
	if w, err = s.store.GetWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	if !found && isIntermediate(w.State) {
		return nil, errInterrupted(w)
	}
	return w, nil
}
