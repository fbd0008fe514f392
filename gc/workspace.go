package gc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/selection"
)

// maxReportedActions bounds the actions a report lists; its counts stay
// exact. A workspace with a hundred thousand unindexed files must not turn
// its GC report into a hundred-thousand-element response held in memory.
const maxReportedActions = 10000

// report collects a workspace GC's actions.
type report struct{ *desk.GCReport }

func (r report) add(a desk.GCAction) {
	r.Counts[a.Kind]++
	if a.Kind == desk.GCScratch || a.Kind == desk.GCTempFile || a.Kind == desk.GCItem || a.Kind == desk.GCRevision {
		r.ReclaimedBytes += a.Bytes
	}
	if len(r.Actions) < maxReportedActions {
		r.Actions = append(r.Actions, a)
	} else {
		r.Truncated = true
	}
}

// reclaimed adapts the pressure collector's steps to the workspace report.
func (r report) reclaimed(a desk.ReclaimAction) {
	r.add(desk.GCAction{Kind: a.Kind, Target: a.Target, Bytes: a.Bytes})
}

// Workspace collects what nothing owns in one workspace, and reports every
// action: scratch directories of executions that are not running,
// temporary files of abandoned writes (older than TempAge), web items no
// group holds, and kept revisions of artifacts that no longer exist. It
// also reconciles artifact rows with their files: a row whose file vanished
// is marked missing (and unmarked when the file is back), and a file in a
// session folder without a row is indexed as an artifact through index. It
// never deletes an artifact or a user file.
func (c *Collector) Workspace(ctx context.Context, ws string, index desk.ArtifactPaths) (*desk.GCReport, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok || !p.Admin {
		return nil, desk.Errorf(desk.EFORBIDDEN, "only the admin token may run a workspace's GC")
	}
	r := report{&desk.GCReport{WorkspaceID: ws, Counts: map[string]int64{}, Actions: []desk.GCAction{}}}
	age := c.TempAge
	if age == 0 {
		age = time.Hour
	}

	items, err := c.Store.ListUnreachableItems(ctx, ws)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		n, err := selection.Collect(ctx, c.Store, c.Home, it)
		if err != nil {
			return nil, err
		}
		r.add(desk.GCAction{Kind: desk.GCItem, Target: it.ID, Bytes: n})
	}
	if err := c.scratch(ctx, ws, r.reclaimed); err != nil {
		return nil, err
	}
	pending, err := c.pendingFiles(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.temps(ws, age, pending, r.reclaimed); err != nil {
		return nil, err
	}
	live, err := c.artifacts(ctx, ws, index, r)
	if err != nil {
		return nil, err
	}
	if err := c.revisions(ctx, ws, age, live, r); err != nil {
		return nil, err
	}
	return r.GCReport, nil
}

// artifacts reconciles each session's rows with its artifact directory and
// returns the ids of every artifact row of the workspace.
func (c *Collector) artifacts(ctx context.Context, ws string, index desk.ArtifactPaths, r report) (map[string]bool, error) {
	live := map[string]bool{}
	root, err := os.OpenRoot(c.Home.Workspace(ws))
	if errors.Is(err, fs.ErrNotExist) {
		return live, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	sessions, err := c.Store.ListSessions(ctx, desk.SessionFilter{WorkspaceID: ws})
	if err != nil {
		return nil, err
	}
	known := map[string]bool{} // "actor/session" of every visible session
	for _, x := range sessions {
		known[x.Actor+"/"+x.ID] = true
		arts, err := c.Store.ListArtifacts(ctx, x.ID)
		if err != nil {
			return nil, err
		}
		rows := make(map[string]*desk.Artifact, len(arts))
		dir := layout.SessionRel(x.Actor, x.ID)
		for _, a := range arts {
			live[a.ID] = true
			rows[a.RelPath] = a
			if a.Pending != "" {
				continue // being installed; recovery owns it
			}
			_, err := root.Lstat(path.Join(dir, a.RelPath))
			gone := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
			if err != nil && !gone {
				continue // unreadable rather than gone: nothing to conclude
			}
			if gone && c.Present != nil {
				// Another node's artifact, or one this node's disk lost:
				// the blob store decides.
				ok, perr := c.Present(ctx, a)
				if perr != nil {
					continue
				}
				gone = !ok
			}
			if gone != a.Missing {
				next := *a
				next.Missing = gone
				if err := c.Store.UpdateArtifact(ctx, &next, a.Revision); err != nil {
					if desk.IsCode(err, desk.ECONFLICT) || desk.IsCode(err, desk.ENOTFOUND) {
						continue // changed meanwhile: the change decides
					}
					return nil, err
				}
				kind, detail := desk.GCFound, "the file is back; the missing mark was cleared"
				if gone {
					kind, detail = desk.GCMissing, "the artifact's file is gone; the row is kept and marked missing"
				}
				r.add(desk.GCAction{Kind: kind, Target: path.Join(dir, a.RelPath), ArtifactID: a.ID, Detail: detail})
			}
		}
		err = walkFiles(root, dir, func(rel string, fi fs.FileInfo) error {
			if rows[rel] != nil {
				return nil
			}
			target := path.Join(dir, rel)
			a, err := index.IndexPath(ctx, x.ID, rel)
			if err != nil {
				if desk.ErrorCode(err) == desk.EINTERNAL {
					return err
				}
				r.add(desk.GCAction{Kind: desk.GCUnindexed, Target: target, Bytes: fi.Size(), Detail: desk.ErrorMessage(err)})
				return nil
			}
			live[a.ID] = true
			r.add(desk.GCAction{Kind: desk.GCIndexed, Target: target, Bytes: a.Size, ArtifactID: a.ID,
				Detail: "a file without a row became an artifact (" + a.Kind + ")"})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// Session folders that belong to no visible session of their actor are
	// reported, never touched: they may hold someone's work.
	actors, err := os.ReadDir(c.Home.Abs(ws, layout.ActorsDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, act := range actors {
		sdir := path.Join(layout.ActorsDir, act.Name(), "sessions")
		ents, err := os.ReadDir(c.Home.Abs(ws, sdir))
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !known[act.Name()+"/"+e.Name()] && !atomicfile.IsTemp(e.Name()) {
				r.add(desk.GCAction{Kind: desk.GCUnindexed, Target: path.Join(sdir, e.Name()),
					Detail: "no session of this actor has this folder; it was left alone"})
			}
		}
	}
	deleting, err := c.Store.ListDeletingArtifacts(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range deleting {
		live[a.ID] = true
	}
	return live, nil
}

// walkFiles calls fn for every regular file below dir (relative to root),
// with its path relative to dir, in sorted order; links, special files and
// desk's temporary files are skipped.
func walkFiles(root *os.Root, dir string, fn func(rel string, fi fs.FileInfo) error) error {
	var rec func(rel string) error
	rec = func(rel string) error {
		f, err := root.Open(path.Join(dir, rel))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		ents, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return err
		}
		slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, e := range ents {
			if atomicfile.IsTemp(e.Name()) {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				continue
			}
			child := path.Join(rel, e.Name())
			switch {
			case fi.IsDir():
				if err := rec(child); err != nil {
					return err
				}
			case fi.Mode().IsRegular():
				if err := fn(child, fi); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return rec("")
}

// revisions removes the kept revisions of artifacts that have no row at
// all (neither visible nor being deleted). Young ones stay: an update links
// the revision a moment before its row commits.
func (c *Collector) revisions(ctx context.Context, ws string, age time.Duration, live map[string]bool, r report) error {
	dir := c.Home.Abs(ws, layout.RevisionsDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	for _, e := range ents {
		if live[e.Name()] || !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < age {
			continue
		}
		// The row may have been created since the list was read.
		if _, err := c.Store.GetArtifact(ctx, e.Name()); err == nil {
			continue
		}
		p := path.Join(dir, e.Name())
		n := du(p)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		r.add(desk.GCAction{Kind: desk.GCRevision, Target: path.Join(layout.RevisionsDir, e.Name()), Bytes: n,
			Detail: "kept revisions of an artifact that no longer exists"})
	}
	return nil
}
