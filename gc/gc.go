// Package gc owns reclaiming space that nothing owns: scratch directories of
// executions that are not running, temporary files of abandoned writes, and
// web items that no group references. It must never delete an artifact, a
// kept revision that an artifact row points at, or a user file: the runtime
// never auto-deletes artifacts for age, size or pressure (PawWork §4, S-P).
package gc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/selection"
)

var _ desk.Recoverer = (*Collector)(nil)

// Collector reclaims unowned space.
type Collector struct {
	Store Store
	Home  layout.Home
	// Running reports whether an execution is still running; its scratch is
	// kept. Nil means no execution is running.
	Running func(ctx context.Context, executionID string) (bool, error)
	// Present reports whether an artifact's bytes are kept elsewhere (the
	// blob store) when this node's working copy lacks its file: such an
	// artifact is not missing. Nil means the working copy is all there is.
	Present func(ctx context.Context, a *desk.Artifact) (bool, error)
	// TempAge is how old an unreferenced temporary file must be before it is
	// considered abandoned under soft pressure (default 1h); critical pressure
	// uses a tenth of it. A young temporary file may belong to an upload that
	// is still streaming.
	TempAge time.Duration
	now     func() time.Time
}

// Pressure reclaims space at the given level and reports every action.
func (c *Collector) Pressure(ctx context.Context, level string) (*desk.ReclaimReport, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if !ok || !p.Admin {
		return nil, desk.Errorf(desk.EFORBIDDEN, "only the admin token may reclaim storage")
	}
	if level != desk.PressureSoft && level != desk.PressureCritical {
		return nil, desk.Errorf(desk.EINVALID, "level %q must be %q or %q", level, desk.PressureSoft, desk.PressureCritical)
	}
	age := c.TempAge
	if age == 0 {
		age = time.Hour
	}
	if level == desk.PressureCritical {
		age /= 10
	}
	rep := &desk.ReclaimReport{Level: level, Actions: []desk.ReclaimAction{}}
	add := func(a desk.ReclaimAction) {
		rep.Actions = append(rep.Actions, a)
		rep.ReclaimedBytes += a.Bytes
	}

	items, err := c.Store.ListUnreachableItems(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		n, err := selection.Collect(ctx, c.Store, c.Home, it)
		if err != nil {
			return nil, err
		}
		add(desk.ReclaimAction{Kind: "item", WorkspaceID: it.WorkspaceID, Target: it.ID, Bytes: n})
	}

	pending, err := c.pendingFiles(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := c.Store.ListWorkspaces(ctx)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if err := c.scratch(ctx, w.ID, add); err != nil {
			return nil, err
		}
		if err := c.temps(w.ID, age, pending, add); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// pendingFiles are temporary files that artifact rows claim: they are the
// next content of an artifact and must survive until recovery installs them.
func (c *Collector) pendingFiles(ctx context.Context) (map[string]bool, error) {
	as, err := c.Store.ListPendingArtifacts(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]bool{}
	for _, a := range as {
		m[a.WorkspaceID+"/"+a.Pending] = true
	}
	return m, nil
}

func (c *Collector) scratch(ctx context.Context, ws string, add func(desk.ReclaimAction)) error {
	dir := c.Home.Abs(ws, layout.ScratchDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if c.Running != nil {
			running, err := c.Running(ctx, e.Name())
			if err != nil {
				return err
			}
			if running {
				continue
			}
		}
		p := filepath.Join(dir, e.Name())
		n := du(p)
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		add(desk.ReclaimAction{Kind: "scratch", WorkspaceID: ws, Target: path.Join(layout.ScratchDir, e.Name()), Bytes: n})
	}
	return nil
}

// temps removes abandoned temporary files anywhere in the workspace.
func (c *Collector) temps(ws string, age time.Duration, pending map[string]bool, add func(desk.ReclaimAction)) error {
	root := c.Home.Workspace(ws)
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || !atomicfile.IsTemp(d.Name()) {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if pending[ws+"/"+rel] {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if now.Sub(info.ModTime()) < age {
			return nil
		}
		// An upload slower than age is still its writer's.
		unlock, ok := atomicfile.TryLock(p)
		if !ok {
			return nil
		}
		defer unlock()
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		add(desk.ReclaimAction{Kind: "temp_file", WorkspaceID: ws, Target: rel, Bytes: info.Size()})
		return nil
	})
}

// du is the total size of the regular files below p.
func du(p string) int64 {
	var n int64
	_ = filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
