package gc

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/desk-runtime/desk/atomicfile"
)

// Debris is what a startup sweep removed.
type Debris struct {
	Files int64 // temporary files and staging directories removed
	Bytes int64 // their size
}

// Temporary names other than atomicfile's that desk's own writers use
// directly in DESK_HOME: the admin token (home root), offboarding handoff
// notes, template version staging. Each is renamed into place or removed by
// its writer, so one that still exists at startup was left by a crash.
const (
	adminTokenTemp  = ".admin.token-"
	handoffTemp     = ".desk-handoff-"
	templateStaging = ".staging-"
)

// Recover removes, before anything is served, the temporary files a crash
// left behind anywhere desk writes them under DESK_HOME: atomicfile's
// ".desk-tmp-*" files in every workspace and departed workspace (artifacts,
// the file API, checkouts, archive views, items), handoff and admin-token
// temporaries, and template staging directories. A temporary file that an
// artifact row still claims as its pending content is kept: it is that
// artifact's next bytes (artifact recovery, which runs first, normally has
// installed it already). Declared host paths are outside DESK_HOME and are
// never touched (desk never collects in them). Run it only while no other
// desk process writes in this home.
func (c *Collector) Recover(ctx context.Context) error {
	_, err := c.SweepDebris(ctx)
	return err
}

// SweepDebris is Recover with a report of what it removed.
func (c *Collector) SweepDebris(ctx context.Context) (Debris, error) {
	var d Debris
	pending, err := c.pendingFiles(ctx)
	if err != nil {
		return d, err
	}
	remove := func(p string, dir bool) error {
		n := du(p)
		var err error
		if dir {
			err = os.RemoveAll(p)
		} else {
			err = os.Remove(p)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		d.Files++
		d.Bytes += n
		return nil
	}
	// The admin token is written beside its final name in the home root.
	if ents, err := os.ReadDir(c.Home.Root); err == nil {
		for _, e := range ents {
			if !e.IsDir() && strings.HasPrefix(e.Name(), adminTokenTemp) {
				if err := remove(filepath.Join(c.Home.Root, e.Name()), false); err != nil {
					return d, err
				}
			}
		}
	}
	if ents, err := os.ReadDir(c.Home.Templates()); err == nil {
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), templateStaging) {
				if err := remove(filepath.Join(c.Home.Templates(), e.Name()), true); err != nil {
					return d, err
				}
			}
		}
	}
	for _, top := range []string{c.Home.Workspaces(), filepath.Dir(c.Home.Departed("x"))} {
		wss, err := os.ReadDir(top)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return d, err
		}
		for _, w := range wss {
			if !w.IsDir() {
				continue
			}
			ws := filepath.Join(top, w.Name())
			err := filepath.WalkDir(ws, func(p string, e fs.DirEntry, err error) error {
				if err != nil {
					if errors.Is(err, fs.ErrNotExist) {
						return nil
					}
					return err
				}
				if e.IsDir() {
					if e.Name() == ".git" {
						return filepath.SkipDir // git's own files; desk writes none there
					}
					return nil
				}
				if !e.Type().IsRegular() {
					return nil
				}
				name := e.Name()
				if !atomicfile.IsTemp(name) && !strings.HasPrefix(name, handoffTemp) {
					return nil
				}
				rel, _ := filepath.Rel(ws, p)
				if pending[w.Name()+"/"+filepath.ToSlash(rel)] {
					return nil
				}
				return remove(p, false)
			})
			if err != nil {
				return d, err
			}
		}
	}
	return d, nil
}
