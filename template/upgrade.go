package template

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
)

// maxPreview bounds the conflict preview a plan carries.
const maxPreview = 64 << 10

// planned is a plan with the bytes applying it writes.
type planned struct {
	plan     *desk.UpgradePlan
	tv       *desk.TemplateVersion
	incoming map[string][]byte
	// results holds the bytes a ready or add entry writes.
	results map[string][]byte
}

// Plan computes the upgrade of a workspace to a version of its template
// (to "" means the version registered last). It changes nothing.
func (s *Service) Plan(ctx context.Context, wsID, to string) (*desk.UpgradePlan, error) {
	if err := desk.RequireAdmin(ctx, "plan template upgrades"); err != nil {
		return nil, err
	}
	w, err := s.store.GetWorkspace(ctx, wsID)
	if err != nil {
		return nil, err
	}
	// A workspace that is not active has no checkout in its place.
	if err := lifecycle.NotActive(w); err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.home.Workspace(wsID))
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", wsID, err)
	}
	defer root.Close()
	p, err := s.plan(ctx, wsID, root, to)
	if err != nil {
		return nil, err
	}
	return p.plan, nil
}

func (s *Service) plan(ctx context.Context, wsID string, root *os.Root, to string) (*planned, error) {
	base, err := readBaseline(root)
	if err != nil {
		return nil, err
	}
	if base == nil {
		return nil, desk.Errorf(desk.ECONFLICT, "workspace %s was not created from a template; there is nothing to upgrade", wsID)
	}
	tv, err := s.Get(base.Template, to)
	if err != nil {
		return nil, err
	}
	var managed []string
	for _, f := range tv.Files {
		if f.Managed {
			managed = append(managed, f.Path)
		}
	}
	incoming, err := s.content(tv, managed)
	if err != nil {
		return nil, err
	}
	paths := map[string]bool{}
	for p := range base.Files {
		if Managed(p) {
			paths[p] = true
		}
	}
	for p := range incoming {
		paths[p] = true
	}
	var sorted []string
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)

	pl := &planned{tv: tv, incoming: incoming, results: map[string][]byte{}, plan: &desk.UpgradePlan{
		WorkspaceID: wsID, Template: base.Template, FromVersion: base.Version, ToVersion: tv.Version,
		Entries: []desk.UpgradeEntry{}, Summary: map[string]int{},
	}}
	for _, p := range sorted {
		b, hasB := base.Files[p]
		i, hasI := incoming[p]
		l, hasL, err := checkout.ReadFile(root, layout.CheckoutDir+"/"+p, maxManagedBytes)
		if err != nil {
			return nil, fmt.Errorf("managed file %s: %w", p, err)
		}
		e := desk.UpgradeEntry{Path: p, BaseSHA256: hashIf(b, hasB), WorkspaceSHA256: hashIf(l, hasL), TemplateSHA256: hashIf(i, hasI)}
		// Hashes compare presence too: "" is an absent file.
		switch {
		case e.WorkspaceSHA256 == e.TemplateSHA256:
			e.Status = desk.UpgradeUnchanged
		case e.WorkspaceSHA256 == e.BaseSHA256:
			// Only the template changed.
			switch {
			case !hasI:
				e.Status = desk.UpgradeRemove
			case !hasB:
				e.Status = desk.UpgradeAdd
				pl.results[p] = i
			default:
				e.Status = desk.UpgradeReady
				pl.results[p] = i
			}
		case e.TemplateSHA256 == e.BaseSHA256:
			e.Status = desk.UpgradePreserved
		case hasB && hasL && hasI:
			merged, clean, err := checkout.Merge3(ctx, l, b, i)
			if err != nil {
				return nil, fmt.Errorf("merge %s: %w", p, err)
			}
			if clean {
				e.Status, e.Merged = desk.UpgradeReady, true
				pl.results[p] = merged
			} else {
				e.Status = desk.UpgradeConflict
				if len(merged) > maxPreview {
					merged = append(merged[:maxPreview:maxPreview], []byte("\n[preview truncated]\n")...)
				}
				e.ConflictPreview = string(merged)
			}
		default:
			// Added on both sides with different bytes, or deleted on one
			// side and changed on the other: no merge can say which wins.
			e.Status = desk.UpgradeConflict
		}
		if r, ok := pl.results[p]; ok {
			e.ResultSHA256 = checkout.SHA256(r)
		}
		pl.plan.Summary[e.Status]++
		pl.plan.Entries = append(pl.plan.Entries, e)
	}
	pl.plan.Digest = upgradeDigest(pl.plan)
	return pl, nil
}

func hashIf(b []byte, ok bool) string {
	if !ok {
		return ""
	}
	return checkout.SHA256(b)
}

// upgradeDigest is the SHA-256 of the plan's canonical form: the
// workspace, the template and both versions, and per path its status and
// the hashes of base, workspace, template and result. Any change to an
// input or to what applying would write changes it.
func upgradeDigest(p *desk.UpgradePlan) string {
	h := sha256.New()
	fmt.Fprintf(h, "desk template-upgrade plan v1\x00%s\x00%s\x00%s\x00%s\n", p.WorkspaceID, p.Template, p.FromVersion, p.ToVersion)
	for _, e := range p.Entries {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\n", e.Path, e.Status, e.BaseSHA256, e.WorkspaceSHA256, e.TemplateSHA256, e.ResultSHA256)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// upgradeData is the journal state of an upgrade.
type upgradeData struct {
	Template string `json:"template"`
	From     string `json:"from"`
	To       string `json:"to"`
	Commit   string `json:"commit,omitempty"`
}

// Apply applies exactly the plan whose digest the caller saw, with a
// resolution for each conflict. It refuses (409) a stale digest, an
// unresolved conflict, running sessions and a staged git index; it holds
// the workspace's template-upgrade lease throughout, writes a journal
// before the first file changes, changes only managed paths, advances the
// baseline and commits in git when the checkout is a repository.
func (s *Service) Apply(ctx context.Context, wsID, to string, in desk.UpgradeApply) (*desk.UpgradeResult, error) {
	if err := desk.RequireAdmin(ctx, "apply template upgrades"); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Digest) == "" {
		return nil, desk.Errorf(desk.EINVALID, "digest is required: get the plan first (GET /v1/workspaces/%s/template-upgrade) and send its digest", wsID)
	}
	for p, r := range in.Resolutions {
		if r != desk.ResolveWorkspace && r != desk.ResolveTemplate {
			return nil, desk.Errorf(desk.EINVALID, "resolution %q for %s must be %q or %q", r, p, desk.ResolveWorkspace, desk.ResolveTemplate)
		}
	}
	w, err := s.store.GetWorkspace(ctx, wsID)
	if err != nil {
		return nil, err
	}
	if err := lifecycle.NotActive(w); err != nil {
		return nil, err
	}
	release, err := acquire(ctx, s.leases, opUpgrade, wsID)
	if err != nil {
		return nil, err
	}
	defer release()
	// Under the lease the workspace stays where the check finds it.
	if w, err = s.store.GetWorkspace(ctx, wsID); err != nil {
		return nil, err
	}
	if err := lifecycle.NotActive(w); err != nil {
		return nil, err
	}

	root, err := os.OpenRoot(s.home.Workspace(wsID))
	if err != nil {
		return nil, fmt.Errorf("open workspace %s: %w", wsID, err)
	}
	defer root.Close()
	for _, op := range []string{opInstall, opUpgrade} {
		if err := checkout.Busy(root, op); err != nil {
			return nil, err
		}
	}
	pl, err := s.plan(ctx, wsID, root, to)
	if err != nil {
		return nil, err
	}
	if pl.plan.Digest != strings.TrimSpace(in.Digest) {
		return nil, desk.Errorf(desk.ESTALEPLAN, "the plan changed since digest %s was computed (the workspace, its baseline or the template moved on); get a new plan and review it", short(in.Digest))
	}
	status := map[string]string{}
	var unresolved []string
	for _, e := range pl.plan.Entries {
		status[e.Path] = e.Status
		if e.Status == desk.UpgradeConflict && in.Resolutions[e.Path] == "" {
			unresolved = append(unresolved, e.Path)
		}
	}
	for p := range in.Resolutions {
		if st, ok := status[p]; !ok {
			return nil, desk.Errorf(desk.EINVALID, "resolution for %s: the plan has no such path", p)
		} else if st != desk.UpgradeConflict {
			return nil, desk.Errorf(desk.EINVALID, "resolution for %s: it is %s, not a conflict; only conflicts take a resolution", p, st)
		}
	}
	if len(unresolved) > 0 {
		return nil, desk.Errorf(desk.ECONFLICT, "unresolved conflicts: %s; resolve each with %q or %q", strings.Join(unresolved, ", "), desk.ResolveWorkspace, desk.ResolveTemplate)
	}
	if err := RefuseRunning(ctx, s.store, wsID); err != nil {
		return nil, err
	}
	repo := checkout.OpenRepo(s.home.Abs(wsID, layout.CheckoutDir))
	if repo != nil {
		if err := repo.RefuseStaged(ctx, "the checkout of "+wsID); err != nil {
			return nil, err
		}
	}

	// What changes: every ready or add entry, every removal, and each
	// conflict resolved for the template; then the baseline.
	res := &desk.UpgradeResult{Plan: pl.plan, Written: []string{}, Deleted: []string{}}
	var changes []checkout.Change
	var contents [][]byte
	for _, e := range pl.plan.Entries {
		var write []byte
		del := false
		switch e.Status {
		case desk.UpgradeReady, desk.UpgradeAdd:
			write = pl.results[e.Path]
		case desk.UpgradeRemove:
			del = true
		case desk.UpgradeConflict:
			if in.Resolutions[e.Path] != desk.ResolveTemplate {
				continue
			}
			if b, ok := pl.incoming[e.Path]; ok {
				write = b
			} else {
				del = true
			}
		default:
			continue
		}
		c := checkout.Change{Path: layout.CheckoutDir + "/" + e.Path, Delete: del}
		if del {
			res.Deleted = append(res.Deleted, e.Path)
		} else {
			c.SHA256 = checkout.SHA256(write)
			res.Written = append(res.Written, e.Path)
		}
		changes = append(changes, c)
		contents = append(contents, write)
	}
	nb := desk.TemplateBaseline{Template: pl.plan.Template, Version: pl.tv.Version, InstalledAt: desk.Now(), Files: pl.incoming}
	bb, err := json.MarshalIndent(nb, "", "  ")
	if err != nil {
		return nil, err
	}
	changes = append(changes, checkout.Change{Path: layout.TemplateBaseline, SHA256: checkout.SHA256(bb)})
	contents = append(contents, bb)

	d := upgradeData{Template: pl.plan.Template, From: pl.plan.FromVersion, To: pl.plan.ToVersion}
	j, err := checkout.Begin(ctx, root, opUpgrade, changes, layout.CheckoutDir, d)
	if err != nil {
		return nil, err
	}
	err = j.Apply(func(i int, _ checkout.Change) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(contents[i])), nil
	}, func(int) error { return s.hook("apply") })
	if err == nil {
		err = s.hook("applied")
	}
	if err == nil && j.Repo() != nil {
		msg := fmt.Sprintf("desk: upgrade template %s from %s to %s\n\n%s: %s\n", d.Template, d.From, d.To, checkout.OperationTrailer, j.ID)
		res.Commit, err = j.Repo().Commit(ctx, j.GitPaths(), msg)
		err = checkout.Refused(err, "the checkout", "nothing was changed")
	}
	if err == nil {
		err = s.hook("committed")
	}
	if err == nil {
		d.Commit = res.Commit
		err = j.SetPhase(checkout.PhaseCommitted, d)
	}
	if err != nil {
		if errors.Is(err, checkout.ErrSimulatedCrash) {
			return nil, err
		}
		if rerr := j.Rollback(ctx); rerr != nil {
			s.opt.Logger.Error("template upgrade failed and could not be undone; restart desk to recover it", desk.LogWorkspaceID, wsID, desk.LogErr, err, desk.LogRollbackErr, rerr)
			return nil, fmt.Errorf("template upgrade failed (%w) and undoing it failed too (%v); desk finishes undoing it at its next start", err, rerr)
		}
		if ferr := j.Finish(); ferr != nil {
			s.opt.Logger.Warn("template upgrade undone; its journal stays until the next start", desk.LogWorkspaceID, wsID, desk.LogErr, ferr)
		}
		return nil, err
	}
	if err := j.Finish(); err != nil {
		// Everything is applied; the next start removes the journal.
		s.opt.Logger.Warn("template upgrade applied; its journal stays until the next start", desk.LogWorkspaceID, wsID, desk.LogErr, err)
	}
	s.opt.Logger.Info("template upgraded", desk.LogWorkspaceID, wsID, desk.LogTemplate, d.Template, "from", d.From, "to", d.To,
		"written", len(res.Written), "deleted", len(res.Deleted), "commit", res.Commit)
	return res, nil
}

func short(d string) string {
	d = strings.TrimSpace(d)
	if len(d) > 12 {
		return d[:12] + "…"
	}
	return d
}

// RefuseRunning answers EBLOCKED while any execution of the workspace is
// active: an agent mid-turn may be reading or writing the very files an
// operation would change.
func RefuseRunning(ctx context.Context, store RunningStore, wsID string) error {
	active, err := store.ListActiveExecutions(ctx)
	if err != nil {
		return err
	}
	var running []string
	for _, x := range active {
		if x.WorkspaceID == wsID {
			running = append(running, x.SessionID+" ("+x.ID+", "+x.Phase+")")
		}
	}
	if len(running) > 0 {
		sort.Strings(running)
		return desk.Errorf(desk.EBLOCKED, "workspace %s has running sessions: %s; wait for them to finish or interrupt them", wsID, strings.Join(running, ", "))
	}
	return nil
}
