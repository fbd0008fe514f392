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
// never touched (desk never collects in them). Another desk process
// writing in this home loses nothing: a temporary file its writer still
// holds (atomicfile's lock) is left, and one its row claims is kept.
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
	var temps []tempFile
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
				key := w.Name() + "/" + filepath.ToSlash(rel)
				if pending[key] {
					return nil
				}
				if atomicfile.IsTemp(name) {
					temps = append(temps, tempFile{path: p, key: key})
					return nil
				}
				return remove(p, false)
			})
			if err != nil {
				return d, err
			}
		}
	}
	// A temporary file may be another desk's upload under way (several
	// processes on one home): its writer holds its lock until the row
	// claims it. So each is locked first, and only then are the claims
	// read again: a writer that let go had committed its claim before,
	// and the fresh read sees it. Batches bound the descriptors held.
	for len(temps) > 0 {
		batch := temps[:min(len(temps), sweepBatch)]
		temps = temps[len(batch):]
		var held []tempFile
		for _, t := range batch {
			if unlock, ok := atomicfile.TryLock(t.path); ok {
				t.unlock = unlock
				held = append(held, t)
			}
		}
		pending, err := c.pendingFiles(ctx)
		for _, t := range held {
			if err == nil && !pending[t.key] {
				err = remove(t.path, false)
			}
			t.unlock()
		}
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// sweepBatch is how many temporary files a sweep holds locked at once.
const sweepBatch = 256

type tempFile struct {
	path, key string
	unlock    func()
}
