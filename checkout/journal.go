// Package checkout owns changing a workspace's files as one recoverable
// operation: a journal written before the first file changes (with a
// backup of every file it will replace), applying the changes atomically
// file by file, undoing them after a failure or a crash, and the git CLI
// for checkouts that are repositories. Template upgrades and absorbs are
// built on it.
//
// It never decides what to change: callers hand it a list of changes. It
// works inside an os.Root opened on the workspace directory and refuses to
// write through a symbolic link, so a link planted in a checkout cannot
// send a write anywhere else.
package checkout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/layout"
)

// OpsDir holds one directory per operation in progress, relative to the
// workspace directory.
const OpsDir = layout.SystemDir + "/ops"

// Journal phases. A journal in PhasePrepared may have changed any number of
// its files (recovery undoes them); what later phases mean is the
// operation's business.
const (
	PhasePrepared  = "prepared"
	PhaseCommitted = "committed"
)

const journalName = "journal.json"

// Change is one file an operation writes or deletes.
type Change struct {
	// Path is slash separated, relative to the workspace directory.
	Path   string `json:"path"`
	Delete bool   `json:"delete,omitempty"`
	// SHA256 is the new content's digest, checked while it is written, so
	// bytes that changed after they were planned are never installed.
	SHA256 string `json:"sha256,omitempty"`
	// Mode is the new file's permission bits; zero keeps those of the file
	// it replaces (0644 for a new file).
	Mode fs.FileMode `json:"mode,omitempty"`
	// Had records whether a file was there before; Backup is its copy in
	// the journal directory.
	Had     bool        `json:"had"`
	Backup  string      `json:"backup,omitempty"`
	OldMode fs.FileMode `json:"old_mode,omitempty"`
}

// Journal is the durable record of one operation on one workspace.
type Journal struct {
	Op        string    `json:"op"`
	ID        string    `json:"id"`
	Phase     string    `json:"phase"`
	CreatedAt time.Time `json:"created_at"`
	Changes   []Change  `json:"changes"`
	// Dirs are the directories applying the changes creates, parents
	// first; undoing removes those that are empty again.
	Dirs []string `json:"dirs,omitempty"`
	// GitDir is the workspace-relative work tree of a repository the
	// operation may commit to, and Head its commit before the operation
	// ("" for a repository without commits).
	GitDir string `json:"git_dir,omitempty"`
	Head   string `json:"head,omitempty"`
	// Data is the operation's own state.
	Data json.RawMessage `json:"data,omitempty"`

	root *os.Root
	dir  string
}

// ErrSimulatedCrash, returned by an operation's test hook, stops the
// operation where it is without undoing anything, as a dying process
// would, leaving its journal for Recover. Only tests return it.
var ErrSimulatedCrash = errors.New("simulated crash")

// Dir is the journal directory of op, relative to the workspace directory.
func Dir(op string) string { return OpsDir + "/" + op }

// Busy answers ECONFLICT when an operation of kind op left a journal in the
// workspace: it must be recovered before another one starts.
func Busy(root *os.Root, op string) error {
	if _, err := root.Lstat(Dir(op) + "/" + journalName); err == nil {
		return desk.Errorf(desk.ECONFLICT, "an interrupted %s of this workspace awaits recovery; restart desk to finish or undo it", op)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Begin records changes before any of them is made: it checks every path,
// copies each file that will be replaced or deleted into the journal
// directory, and writes the journal durably. gitDir names the workspace-
// relative work tree of a repository the operation will commit to ("" for
// none). data is the operation's own state.
func Begin(ctx context.Context, root *os.Root, op string, changes []Change, gitDir string, data any) (*Journal, error) {
	if err := Busy(root, op); err != nil {
		return nil, err
	}
	j := &Journal{Op: op, ID: desk.NewID("op"), Phase: PhasePrepared, CreatedAt: desk.Now(), root: root, dir: Dir(op)}
	// A directory without a journal is a Begin that never finished; nothing
	// it names was changed.
	if err := root.RemoveAll(j.dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", j.dir, err)
	}
	if err := setData(j, data); err != nil {
		return nil, err
	}
	if err := root.MkdirAll(j.dir+"/old", 0o700); err != nil {
		return nil, fmt.Errorf("create journal: %w", err)
	}
	fail := func(err error) (*Journal, error) {
		_ = root.RemoveAll(j.dir)
		return nil, err
	}
	seenDir, seenPath := map[string]bool{}, map[string]bool{}
	for i, c := range changes {
		if err := validPath(c.Path); err != nil {
			return fail(err)
		}
		if seenPath[c.Path] {
			return fail(desk.Errorf(desk.EINVALID, "%s is changed twice in one operation", c.Path))
		}
		seenPath[c.Path] = true
		missing, err := checkPath(root, c.Path)
		if err != nil {
			return fail(err)
		}
		for _, d := range missing {
			if !seenDir[d] {
				seenDir[d] = true
				j.Dirs = append(j.Dirs, d)
			}
		}
		fi, err := root.Lstat(c.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fail(err)
		case !fi.Mode().IsRegular():
			return fail(desk.Errorf(desk.ECONFLICT, "%s is not a regular file; move it aside first", c.Path))
		default:
			c.Had, c.OldMode = true, fi.Mode().Perm()
			c.Backup = "old/" + strconv.Itoa(i)
			if _, err := copyFile(root, c.Path, j.dir+"/"+c.Backup, 0o600); err != nil {
				return fail(fmt.Errorf("back up %s: %w", c.Path, err))
			}
		}
		j.Changes = append(j.Changes, c)
	}
	sort.Slice(j.Dirs, func(a, b int) bool { return strings.Count(j.Dirs[a], "/") < strings.Count(j.Dirs[b], "/") })
	if gitDir != "" {
		repo := OpenRepo(filepath.Join(root.Name(), filepath.FromSlash(gitDir)))
		if repo != nil {
			head, err := repo.Head(ctx)
			if err != nil {
				return fail(err)
			}
			j.GitDir, j.Head = gitDir, head
		}
	}
	if err := atomicfile.SyncDir(root, j.dir+"/old"); err != nil {
		return fail(err)
	}
	if err := j.save(); err != nil {
		return fail(err)
	}
	return j, nil
}

// Load returns the journal op left in the workspace, or nil.
func Load(root *os.Root, op string) (*Journal, error) {
	dir := Dir(op)
	b, err := readAll(root, dir+"/"+journalName)
	if errors.Is(err, fs.ErrNotExist) {
		// A Begin that never wrote its journal changed nothing.
		if err := root.RemoveAll(dir); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	j := &Journal{root: root, dir: dir}
	if err := json.Unmarshal(b, j); err != nil {
		return nil, fmt.Errorf("read %s journal: %w", op, err)
	}
	for _, c := range j.Changes {
		if validPath(c.Path) != nil || (c.Backup != "" && !strings.HasPrefix(c.Backup, "old/")) {
			return nil, fmt.Errorf("%s journal names a bad path %q", op, c.Path)
		}
	}
	return j, nil
}

// Decode reads the operation's own state.
func (j *Journal) Decode(v any) error { return json.Unmarshal(j.Data, v) }

// Repo is the repository the journal recorded, or nil.
func (j *Journal) Repo() *Repo {
	if j.GitDir == "" {
		return nil
	}
	return OpenRepo(filepath.Join(j.root.Name(), filepath.FromSlash(j.GitDir)))
}

// SetPhase records progress durably, with new operation state when data
// is not nil.
func (j *Journal) SetPhase(phase string, data any) error {
	if data != nil {
		if err := setData(j, data); err != nil {
			return err
		}
	}
	j.Phase = phase
	return j.save()
}

// Opener supplies the new content of change i.
type Opener func(i int, c Change) (io.ReadCloser, error)

// Apply makes every change, each atomically, calling after (when not nil)
// once each change is durable. Applying twice is harmless.
func (j *Journal) Apply(open Opener, after func(i int) error) error {
	for i, c := range j.Changes {
		if c.Delete {
			if err := j.root.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("delete %s: %w", c.Path, err)
			}
			if err := atomicfile.SyncDir(j.root, path.Dir(c.Path)); err != nil {
				return err
			}
		} else {
			// Links may have appeared since Begin checked.
			if _, err := checkPath(j.root, c.Path); err != nil {
				return err
			}
			rc, err := open(i, c)
			if err != nil {
				return err
			}
			mode := c.Mode
			if mode == 0 {
				mode = c.OldMode
			}
			if mode == 0 {
				mode = 0o644
			}
			sum, err := writeFile(j.root, c.Path, rc, mode)
			rc.Close()
			if err != nil {
				return fmt.Errorf("write %s: %w", c.Path, err)
			}
			if c.SHA256 != "" && sum != c.SHA256 {
				return desk.Errorf(desk.ECONFLICT, "%s changed since the plan was made; make a new plan", c.Path)
			}
		}
		if after != nil {
			if err := after(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// Rollback undoes every change: files replaced get their backup back,
// files created are removed, directories created are removed when empty,
// and a repository's branch and index return to the recorded commit.
// Undoing twice is harmless.
func (j *Journal) Rollback(ctx context.Context) error {
	for i := len(j.Changes) - 1; i >= 0; i-- {
		c := j.Changes[i]
		if c.Had {
			if _, err := j.root.Lstat(j.dir + "/" + c.Backup); err != nil {
				return fmt.Errorf("%s journal: backup of %s: %w", j.Op, c.Path, err)
			}
			if _, err := checkPath(j.root, c.Path); err != nil {
				return err
			}
			if fi, err := j.root.Lstat(c.Path); err == nil && fi.IsDir() {
				return fmt.Errorf("%s journal: %s became a directory; restore it by hand from %s", j.Op, c.Path, j.dir+"/"+c.Backup)
			}
			if _, err := copyFile(j.root, j.dir+"/"+c.Backup, c.Path, c.OldMode); err != nil {
				return fmt.Errorf("restore %s: %w", c.Path, err)
			}
			continue
		}
		if err := j.root.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", c.Path, err)
		}
	}
	for i := len(j.Dirs) - 1; i >= 0; i-- {
		// Only empty directories go; one that gained other files stays.
		_ = j.root.Remove(j.Dirs[i])
	}
	if repo := j.Repo(); repo != nil {
		if err := repo.ResetTo(ctx, j.Head); err != nil {
			return fmt.Errorf("reset git to %s: %w", orUnborn(j.Head), err)
		}
	}
	return nil
}

func orUnborn(h string) string {
	if h == "" {
		return "an unborn branch"
	}
	return h
}

// Finish removes the journal: the operation is over.
func (j *Journal) Finish() error {
	if err := j.root.RemoveAll(j.dir); err != nil {
		return fmt.Errorf("remove %s journal: %w", j.Op, err)
	}
	// Only desk's operations use OpsDir; once empty it goes too, so a
	// finished or undone operation leaves no trace. Another operation
	// starting at this moment would hold a lease of this workspace.
	if err := j.root.Remove(OpsDir); err == nil {
		return atomicfile.SyncDir(j.root, layout.SystemDir)
	}
	return atomicfile.SyncDir(j.root, OpsDir)
}

// GitPaths returns the changed paths inside the journal's repository,
// relative to its work tree.
func (j *Journal) GitPaths() []string {
	if j.GitDir == "" {
		return nil
	}
	var out []string
	for _, c := range j.Changes {
		if rest, ok := strings.CutPrefix(c.Path, j.GitDir+"/"); ok {
			out = append(out, rest)
		}
	}
	return out
}

func (j *Journal) save() error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	f, err := atomicfile.Create(j.root, j.dir+"/"+journalName)
	if err != nil {
		return fmt.Errorf("write %s journal: %w", j.Op, err)
	}
	defer f.Abort()
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("write %s journal: %w", j.Op, err)
	}
	if err := f.Commit(); err != nil {
		return fmt.Errorf("write %s journal: %w", j.Op, err)
	}
	return nil
}

func setData(j *Journal, data any) error {
	if data == nil {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	j.Data = b
	return nil
}

// validPath accepts clean, relative, slash-separated paths.
func validPath(p string) error {
	if p == "" || p == "." || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "\\") || strings.ContainsRune(p, 0) {
		return desk.Errorf(desk.EINVALID, "path %q must be clean, relative and slash separated", p)
	}
	return nil
}

// checkPath refuses a path with a symbolic link or a file among its
// parents, and returns the parents that do not exist yet, parents first.
func checkPath(root *os.Root, p string) ([]string, error) {
	var missing []string
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if len(missing) > 0 {
			missing = append(missing, dir)
			continue
		}
		fi, err := root.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			missing = append(missing, dir)
		case err != nil:
			return nil, err
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, desk.Errorf(desk.ECONFLICT, "%s is reached through the symbolic link %s; desk does not write through links", p, dir)
		case !fi.IsDir():
			return nil, desk.Errorf(desk.ECONFLICT, "%s cannot be written: %s is a file", p, dir)
		}
	}
	if fi, err := root.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, desk.Errorf(desk.ECONFLICT, "%s is a symbolic link; desk does not write through links", p)
	}
	return missing, nil
}

func readAll(root *os.Root, p string) ([]byte, error) {
	f, err := root.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// writeFile installs the bytes of r at p atomically with the given
// permission bits, returning their SHA-256.
func writeFile(root *os.Root, p string, r io.Reader, mode fs.FileMode) (string, error) {
	f, err := atomicfile.Create(root, p)
	if err != nil {
		return "", err
	}
	defer f.Abort()
	if err := f.Chmod(mode.Perm()); err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), r); err != nil {
		return "", err
	}
	if err := f.Commit(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copyFile copies src to dst inside root, atomically.
func copyFile(root *os.Root, src, dst string, mode fs.FileMode) (string, error) {
	in, err := root.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	return writeFile(root, dst, in, mode)
}

// WriteFile installs b at the workspace-relative path p atomically,
// refusing to write through a symbolic link. It is for desk's own state
// files, which need no journal of their own.
func WriteFile(root *os.Root, p string, b []byte) error {
	if err := validPath(p); err != nil {
		return err
	}
	if _, err := checkPath(root, p); err != nil {
		return err
	}
	_, err := writeFile(root, p, bytes.NewReader(b), 0o644)
	return err
}

// ReadFile reads the workspace-relative regular file p; a missing file is
// (nil, false, nil) and a symbolic link or directory is refused.
func ReadFile(root *os.Root, p string, max int64) ([]byte, bool, error) {
	fi, err := root.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, desk.Errorf(desk.ECONFLICT, "%s is not a regular file", p)
	}
	if max > 0 && fi.Size() > max {
		return nil, false, desk.Errorf(desk.ETOOLARGE, "%s is larger than %d bytes", p, max)
	}
	if _, err := checkPath(root, p); err != nil {
		return nil, false, err
	}
	b, err := readAll(root, p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// SHA256 is the hex digest of b.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Pending lists the workspaces (by id) whose directory holds a journal of
// op, for startup recovery.
func Pending(home layout.Home, op string) ([]string, error) {
	matches, err := filepath.Glob(filepath.Join(home.Workspaces(), "*", filepath.FromSlash(Dir(op))))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, m := range matches {
		rel, err := filepath.Rel(home.Workspaces(), m)
		if err != nil {
			continue
		}
		ids = append(ids, strings.Split(filepath.ToSlash(rel), "/")[0])
	}
	sort.Strings(ids)
	return ids, nil
}
