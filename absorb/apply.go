package absorb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
	"github.com/desk-runtime/desk/template"
)

// Journal phases past checkout.PhaseCommitted: the source is offboarded
// and only the catalog's absorbed_into is left to record.
const phaseOffboarded = "offboarded"

// absorbData is the journal state of an absorb, kept in the target.
type absorbData struct {
	Source     string `json:"source"`
	SourceName string `json:"source_name"`
	Target     string `json:"target"`
	TargetName string `json:"target_name"`
	Commit     string `json:"commit,omitempty"`
	// At is when the import was committed, the absorbed_at of the catalog.
	At time.Time `json:"at"`
}

// Apply absorbs source into target exactly as the plan whose digest the
// caller saw says, with a resolution (target, source or both) for each
// conflict. It takes both workspaces' absorb leases all-or-nothing,
// refuses (409) a stale digest, an unresolved conflict, running sessions
// in either workspace and a staged git index, writes a journal in the
// target before the first file, commits the import in the target's git
// repository, offboards the source intact and records the absorb in the
// catalog. A failure before the source is offboarded leaves both
// workspaces as they were.
func (s *Service) Apply(ctx context.Context, target, source string, in desk.AbsorbApply) (*desk.AbsorbResult, error) {
	if err := desk.RequireAdmin(ctx, "absorb workspaces"); err != nil {
		return nil, err
	}
	if err := errors.Join(desk.RefuseManager(target, "absorbed into"), desk.RefuseManager(source, "absorbed")); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Digest) == "" {
		return nil, desk.Errorf(desk.EINVALID, "digest is required: get the plan first (GET /v1/workspaces/%s/absorb?source=%s) and send its digest", target, source)
	}
	for p, r := range in.Resolutions {
		if r != desk.AbsorbKeepTarget && r != desk.AbsorbUseSource && r != desk.AbsorbKeepBoth {
			return nil, desk.Errorf(desk.EINVALID, "resolution %q for %s must be %q, %q or %q", r, p, desk.AbsorbKeepTarget, desk.AbsorbUseSource, desk.AbsorbKeepBoth)
		}
	}
	if _, _, err := s.pair(ctx, target, source); err != nil {
		return nil, err
	}
	g := s.life.Guard()
	if g == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "workspace operations are not available yet: desk is still starting")
	}
	release, err := g.Acquire(ctx, op, target, source)
	if err != nil {
		return nil, err
	}
	defer release()
	// Under the leases, the workspaces are as the checks find them.
	tw, sw, err := s.pair(ctx, target, source)
	if err != nil {
		return nil, err
	}
	troot, sroot, err := s.roots(target, source)
	if err != nil {
		return nil, err
	}
	defer troot.Close()
	defer sroot.Close()
	for _, root := range []*os.Root{troot, sroot} {
		for _, o := range []string{op, desk.OpTemplateUpgrade, "template-install"} {
			if err := checkout.Busy(root, o); err != nil {
				return nil, err
			}
		}
	}
	pl, err := s.plan(ctx, tw, sw, troot, sroot)
	if err != nil {
		return nil, err
	}
	if pl.plan.Digest != strings.TrimSpace(in.Digest) {
		return nil, desk.Errorf(desk.ESTALEPLAN, "the plan changed since its digest was computed (files of %s or %s changed); get a new plan and review it", target, source)
	}
	writes, err := s.writes(pl, troot, in.Resolutions)
	if err != nil {
		return nil, err
	}
	for _, ws := range []string{target, source} {
		if err := template.RefuseRunning(ctx, s.store, ws); err != nil {
			return nil, err
		}
		if repo := checkout.OpenRepo(s.home.Abs(ws, layout.CheckoutDir)); repo != nil {
			if err := repo.RefuseStaged(ctx, "the checkout of "+ws); err != nil {
				return nil, unreadableGit(err, ws)
			}
		}
	}

	// No execution of either runs; the source's runtime children, kept
	// between turns, stop before its files are copied.
	if s.opt.Children != nil {
		if err := s.opt.Children.StopWorkspace(ctx, source); err != nil {
			return nil, fmt.Errorf("stop the runtime processes of workspace %s: %w", source, err)
		}
	}

	changes := make([]checkout.Change, len(writes))
	res := &desk.AbsorbResult{Plan: pl.plan, Written: []string{}}
	for i, w := range writes {
		changes[i] = checkout.Change{Path: w.dest, SHA256: w.file.sha, Mode: w.file.mode}
		res.Written = append(res.Written, w.dest)
	}
	d := absorbData{Source: source, SourceName: sw.Name, Target: target, TargetName: tw.Name}
	j, err := checkout.Begin(ctx, troot, op, changes, layout.CheckoutDir, d)
	if err != nil {
		return nil, unreadableGit(err, target)
	}
	undo := func(err error) (*desk.AbsorbResult, error) {
		if errors.Is(err, checkout.ErrSimulatedCrash) {
			return nil, err
		}
		if rerr := j.Rollback(ctx); rerr != nil {
			s.opt.Logger.Error("absorb failed and could not be undone; restart desk to recover it", desk.LogWorkspaceID, target, desk.LogSourceWorkspaceID, source, desk.LogErr, err, desk.LogRollbackErr, rerr)
			return nil, fmt.Errorf("absorb failed (%w) and undoing it failed too (%v); desk finishes undoing it at its next start", err, rerr)
		}
		if ferr := j.Finish(); ferr != nil {
			s.opt.Logger.Warn("absorb undone; its journal stays until the next start", desk.LogWorkspaceID, target, desk.LogErr, ferr)
		}
		return nil, err
	}
	err = j.Apply(func(i int, _ checkout.Change) (io.ReadCloser, error) {
		return sroot.Open(writes[i].from)
	}, func(int) error { return s.hook("copy") })
	if err == nil {
		err = s.hook("copied")
	}
	if err == nil && j.Repo() != nil {
		msg := fmt.Sprintf("desk: absorb workspace %s (%s)\n\n%s: %s\nDesk-Absorbed-From: %s\n", sw.Name, source, checkout.OperationTrailer, j.ID, source)
		res.ImportCommit, err = j.Repo().Commit(ctx, j.GitPaths(), msg)
		err = checkout.Refused(err, "the target's checkout", "nothing was absorbed")
	}
	if err == nil {
		err = s.hook("committed")
	}
	if err == nil {
		d.Commit, d.At = res.ImportCommit, desk.Now()
		err = j.SetPhase(checkout.PhaseCommitted, d)
	}
	if err == nil {
		err = s.hook("offboard")
	}
	if err == nil {
		_, err = s.life.Offboard(ctx, source, offboardInput(d))
	}
	if err != nil {
		return undo(err)
	}
	// The source is departed: from here the absorb only goes forward.
	if err := s.finish(ctx, j, d); err != nil {
		return nil, fmt.Errorf("the source is offboarded but recording the absorb failed (desk records it at its next start): %w", err)
	}
	res.Source, err = s.store.GetCatalogEntry(ctx, source)
	if err != nil {
		return nil, err
	}
	s.opt.Logger.Info("workspace absorbed", desk.LogWorkspaceID, target, desk.LogSourceWorkspaceID, source, "written", len(res.Written), "import_commit", res.ImportCommit)
	return res, nil
}

func offboardInput(d absorbData) lifecycle.OffboardInput {
	return lifecycle.OffboardInput{
		Reason: fmt.Sprintf("absorbed into workspace %s (%s)", d.TargetName, d.Target),
		Notes: fmt.Sprintf("Its user files were copied into %s%s; this workspace's sessions, artifacts and records stay here unchanged.",
			d.Target, commitNote(d.Commit)),
		HeldLease: true,
	}
}

func commitNote(c string) string {
	if c == "" {
		return ""
	}
	return " by commit " + c
}

// finish records the absorb in the catalog once the source is offboarded
// and removes the journal.
func (s *Service) finish(ctx context.Context, j *checkout.Journal, d absorbData) error {
	if err := j.SetPhase(phaseOffboarded, nil); err != nil {
		return err
	}
	if err := s.hook("offboarded"); err != nil {
		return err
	}
	at := d.At
	if at.IsZero() {
		at = desk.Now()
	}
	if err := s.store.MarkAbsorbed(ctx, d.Source, d.Target, d.Commit, at); err != nil {
		return err
	}
	return j.Finish()
}

// Recover finishes or undoes every absorb a crash interrupted, after the
// lifecycle's own recovery: one that never committed its import is undone
// (target files and git alike, the source untouched); one that did is
// carried on: the source is offboarded if it is not yet, and the catalog
// records the absorb. A second Recover finds no journal and changes
// nothing.
func (s *Service) Recover(ctx context.Context) error {
	ids, err := checkout.Pending(s.home, op)
	if err != nil {
		return err
	}
	// Recovery acts for desk itself, with the rights of the admin.
	ctx = desk.WithPrincipal(ctx, desk.Principal{Admin: true})
	for _, ws := range ids {
		if err := s.recoverOne(ctx, ws); err != nil {
			return fmt.Errorf("recover the absorb into workspace %s: %w", ws, err)
		}
	}
	return nil
}

func (s *Service) recoverOne(ctx context.Context, target string) error {
	root, err := os.OpenRoot(s.home.Workspace(target))
	if err != nil {
		return err
	}
	defer root.Close()
	j, err := checkout.Load(root, op)
	if err != nil || j == nil {
		return err
	}
	var d absorbData
	if err := j.Decode(&d); err != nil {
		return fmt.Errorf("read absorb journal: %w", err)
	}
	if j.Phase == checkout.PhasePrepared {
		commit, ok := "", false
		if repo := j.Repo(); repo != nil {
			if commit, ok, err = repo.HeadHasTrailer(ctx, j.ID); err != nil {
				return err
			}
		}
		if !ok {
			s.opt.Logger.Info("undoing an interrupted absorb", desk.LogWorkspaceID, target, desk.LogSourceWorkspaceID, d.Source)
			if err := j.Rollback(ctx); err != nil {
				return err
			}
			return j.Finish()
		}
		// The import was committed; only the journal's note of it was lost.
		d.Commit, d.At = commit, desk.Now()
		if err := j.SetPhase(checkout.PhaseCommitted, d); err != nil {
			return err
		}
	}
	if j.Phase == checkout.PhaseCommitted {
		g := s.life.Guard()
		if g == nil {
			return errors.New("absorb recovery runs only once the operation guard exists")
		}
		release, err := g.Acquire(ctx, op, target, d.Source)
		if desk.IsCode(err, desk.ECONFLICT) {
			s.opt.Logger.Info("an interrupted absorb is left to the live process holding its workspaces", desk.LogWorkspaceID, target, desk.LogSourceWorkspaceID, d.Source, desk.LogErr, err)
			return nil
		}
		if err != nil {
			return err
		}
		defer release()
		w, err := s.store.GetWorkspace(ctx, d.Source)
		if err != nil {
			return err
		}
		if w.State == desk.WorkspaceActive {
			s.opt.Logger.Info("finishing an interrupted absorb: offboarding its source", desk.LogWorkspaceID, target, desk.LogSourceWorkspaceID, d.Source)
			if _, err := s.life.Offboard(ctx, d.Source, offboardInput(d)); err != nil {
				if desk.ErrorCode(err) == desk.EINTERNAL {
					return err
				}
				// The source cannot go (work of it runs elsewhere): the
				// absorb is undone instead, so nothing is half-done.
				s.opt.Logger.Warn("an interrupted absorb could not offboard its source and is undone", desk.LogWorkspaceID, target, desk.LogSourceWorkspaceID, d.Source, desk.LogErr, err)
				if err := j.Rollback(ctx); err != nil {
					return err
				}
				return j.Finish()
			}
		} else if w.State != desk.WorkspaceDeparted {
			s.opt.Logger.Warn("the source of an interrupted absorb is neither active nor departed; the absorb is recorded as it stands", desk.LogSourceWorkspaceID, d.Source, "state", w.State)
		}
	}
	return s.finish(ctx, j, d)
}
