package transfer

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/gzip"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/checkout"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/internal/hostid"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/workspace"
)

// stagingDir is where imports unpack, beside workspaces/ on the same file
// system so the finished tree is renamed into place, never copied.
const stagingDir = ".import"

// pendingMarker sits in an imported tree from the moment it is renamed into
// place until its rows are committed; startup recovery removes a tree whose
// rows never arrived.
const pendingMarker = ".system/import-pending"

// maxChunk bounds one row file of an archive. Exports write chunks of at
// most chunkBytes (or one row, if a row is larger); the bound keeps a single
// hostile "row" from being decoded into memory whole.
const maxChunk = 64 << 20

var chunkRe = regexp.MustCompile(`^meta/([a-z0-9_]+)\.([0-9]{6})\.ndjson$`)

// Import recreates a workspace from an export (admin): same id, same rows,
// same files. It refuses (and keeps nothing of) an archive whose workspace
// id exists here (409), that is over the size limit (413), or that is not a
// clean desk export: absolute or ".." paths, entries outside the exported
// directories (such as .scratch/), links leading out, device files, rows
// of another workspace (400).
func (s *Service) Import(ctx context.Context, r io.Reader, opts desk.ImportOptions) (*desk.ImportResult, error) {
	p, ok := desk.PrincipalFrom(ctx)
	if err := requireAdmin(p, ok, "import a workspace"); err != nil {
		return nil, err
	}
	limit := s.opts.MaxImportBytes
	if opts.Size > limit {
		return nil, desk.Errorf(desk.ETOOLARGE, "the archive is %d bytes; imports are limited to %d bytes", opts.Size, limit)
	}
	staging, err := s.stage()
	if err != nil {
		return nil, diskerr.Discarded("create the import staging directory", err)
	}
	defer func() {
		os.RemoveAll(staging)
		// The staging parent goes too unless another import is using it.
		_ = os.Remove(filepath.Dir(staging))
	}()
	for _, d := range []string{"tree", metaDir} {
		if err := os.Mkdir(filepath.Join(staging, d), 0o755); err != nil {
			return nil, diskerr.Discarded("create the import staging directory", err)
		}
	}

	x := &extractor{s: s, ctx: ctx, limit: limit, body: &countReader{r: r, limit: limit}}
	if x.tree, err = os.OpenRoot(filepath.Join(staging, "tree")); err != nil {
		return nil, err
	}
	defer x.tree.Close()
	if x.meta, err = os.OpenRoot(filepath.Join(staging, metaDir)); err != nil {
		return nil, err
	}
	defer x.meta.Close()
	if err := x.extract(); err != nil {
		if x.body.over {
			return nil, desk.Errorf(desk.ETOOLARGE, "the archive is larger than the import limit of %d bytes", limit)
		}
		return nil, err
	}
	// The settings the archive declares are checked as PATCH checks them,
	// before anything is moved into place.
	if x.settings, err = x.checkSettings(); err != nil {
		return nil, err
	}
	if err := x.checkQuota(); err != nil {
		return nil, err
	}
	ws := x.manifest.WorkspaceID
	target := s.home.Workspace(ws)
	if err := x.relinkWorktrees(target); err != nil {
		return nil, err
	}
	if err := syncTree(x.tree); err != nil {
		return nil, diskerr.Discarded("import", err)
	}

	if err := os.MkdirAll(s.home.Workspaces(), 0o755); err != nil {
		return nil, diskerr.Discarded("import", err)
	}
	if err := x.tree.MkdirAll(path.Dir(pendingMarker), 0o755); err != nil {
		return nil, diskerr.Discarded("import", err)
	}
	marker, _ := json.Marshal(markerInfo{Host: hostname(), PID: os.Getpid(), At: time.Now().UTC()})
	if err := x.tree.WriteFile(pendingMarker, marker, 0o644); err != nil {
		return nil, diskerr.Discarded("import", err)
	}
	if err := os.Rename(filepath.Join(staging, "tree"), target); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			return nil, desk.Errorf(desk.ECONFLICT, "workspace %s already exists in this desk", ws)
		}
		return nil, diskerr.Discarded("import", err)
	}
	syncDir(s.home.Workspaces())

	res := &desk.ImportResult{Rows: map[string]int64{}, Files: x.files, Bytes: x.bytes}
	err = s.store.ImportRows(ctx, ws, x.rowSource(ws, opts.NewTokens, res))
	if err != nil {
		_ = os.RemoveAll(target)
		return nil, err
	}
	if err := os.Remove(filepath.Join(target, filepath.FromSlash(pendingMarker))); err != nil {
		return nil, fmt.Errorf("import %s: remove the pending marker: %w", ws, err)
	}
	if res.Workspace, err = s.store.GetWorkspace(ctx, ws); err != nil {
		return nil, err
	}
	return res, nil
}

// stage makes a private staging directory. Its parent is removed by the
// import that leaves it empty, so creating it is retried once.
func (s *Service) stage() (string, error) {
	parent := filepath.Join(s.home.Root, stagingDir)
	var err error
	for range 2 {
		if err = os.MkdirAll(parent, 0o700); err != nil {
			return "", err
		}
		var dir string
		if dir, err = os.MkdirTemp(parent, "import-"); err == nil {
			return dir, nil
		}
	}
	return "", err
}

// countReader counts the compressed bytes read and fails past the limit.
type countReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
}

var errTooLarge = errors.New("archive over the size limit")

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		c.over = true
		return n, errTooLarge
	}
	return n, err
}

type extractor struct {
	s        *Service
	ctx      context.Context
	limit    int64
	body     *countReader
	tree     *os.Root // the workspace tree being unpacked
	meta     *os.Root // the row chunks
	manifest Manifest
	settings *settings        // the workspace's checked settings
	areas    map[string]int64 // bytes unpacked per actor area (workspace/<actor>/)
	chunks   map[string]int   // table → chunks seen
	links    map[string]bool
	files    int64
	bytes    int64 // unpacked bytes, bounded by limit
}

// extract reads the whole archive, checking every entry before it touches
// the disk, then checks the gzip trailer.
func (x *extractor) extract() error {
	zr, err := gzip.NewReader(bufio.NewReaderSize(x.body, 1<<20))
	if err != nil {
		return desk.Errorf(desk.EINVALID, "the body is not a gzip stream: %v", err)
	}
	tr := tar.NewReader(zr)
	x.chunks, x.links, x.areas = map[string]int{}, map[string]bool{}, map[string]int64{}
	first := true
	for {
		if err := x.ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.readErr(err)
		}
		if first {
			if h.Name != manifestName || h.Typeflag != tar.TypeReg {
				return desk.Errorf(desk.EINVALID, "not a desk workspace export: its first entry is %q, not %s", h.Name, manifestName)
			}
			if err := x.readManifest(tr, h); err != nil {
				return err
			}
			first = false
			continue
		}
		if err := x.entry(tr, h); err != nil {
			return err
		}
	}
	if first {
		return desk.Errorf(desk.EINVALID, "not a desk workspace export: the archive is empty")
	}
	// Reading to the end checks the gzip trailer (CRC and length).
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return x.readErr(err)
	}
	return nil
}

func (x *extractor) readErr(err error) error {
	if x.body.over {
		return errTooLarge
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return desk.Errorf(desk.EINVALID, "the archive ends early (truncated upload?)")
	}
	return desk.Errorf(desk.EINVALID, "the archive is damaged: %v", err)
}

func (x *extractor) readManifest(tr io.Reader, h *tar.Header) error {
	if h.Size > 1<<20 {
		return desk.Errorf(desk.EINVALID, "%s is %d bytes; that is not a manifest", manifestName, h.Size)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return x.readErr(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x.manifest); err != nil {
		return desk.Errorf(desk.EINVALID, "%s is not valid: %v", manifestName, err)
	}
	m := x.manifest
	if m.Format != Format || m.Version != Version {
		return desk.Errorf(desk.EINVALID, "the archive is %s version %d; this desk reads %s version %d", m.Format, m.Version, Format, Version)
	}
	if !desk.HasPrefix(m.WorkspaceID, desk.PrefixWorkspace) {
		return desk.Errorf(desk.EINVALID, "the manifest names workspace %q, which is not a workspace id", m.WorkspaceID)
	}
	known := x.s.store.TransferTables()
	for _, t := range m.Tables {
		if !slices.Contains(known, t) {
			return desk.Errorf(desk.EINVALID, "the archive has table %q, which this desk does not know (exported by a newer desk?)", t)
		}
	}
	for _, t := range m.Trees {
		if !slices.ContainsFunc(trees, func(tr tree) bool { return tr.rel == t }) {
			return desk.Errorf(desk.EINVALID, "the archive has directory %q, which is not part of a workspace export", t)
		}
	}
	// Refuse a taken id now, before gigabytes are unpacked for nothing.
	// The catalog keeps every workspace ever created, departed and purged
	// ones too, so a used id is refused whatever became of it.
	if w, err := x.s.store.GetWorkspace(x.ctx, m.WorkspaceID); err == nil {
		return desk.Errorf(desk.ECONFLICT, "workspace id %s is permanently reserved: this desk's catalog has it (%s); an import never replaces or reuses a workspace", m.WorkspaceID, w.State)
	} else if !desk.IsCode(err, desk.ENOTFOUND) {
		return err
	}
	if _, err := os.Lstat(x.s.home.Workspace(m.WorkspaceID)); err == nil {
		return desk.Errorf(desk.ECONFLICT, "a directory for workspace %s already exists in this desk's home; an import never replaces one", m.WorkspaceID)
	}
	return nil
}

// entryName checks an archive path: relative, clean, valid UTF-8, no NUL,
// no "." or ".." element, nothing named like desk's temporary files, and
// inside one of the exported directories or meta/.
func (x *extractor) entryName(name string, dir bool) (string, error) {
	orig := name
	if dir {
		name = strings.TrimSuffix(name, "/")
	}
	switch {
	case name == "" || !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return "", desk.Errorf(desk.EINVALID, "archive entry %q has an empty or invalid name", orig)
	case strings.HasPrefix(name, "/"):
		return "", desk.Errorf(desk.EINVALID, "archive entry %q is an absolute path; an import writes only inside the workspace", orig)
	}
	// The names desk writes are free of invisible and text-direction
	// characters and in normal form C (fsjail.CheckName); so are the ones
	// an import writes. Two spellings of one name in an archive meet as
	// one file, which O_EXCL then refuses as a duplicate.
	name, err := fsjail.CheckPathNames(name)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "archive entry %q: %s", orig, desk.ErrorMessage(err))
	}
	for _, e := range strings.Split(name, "/") {
		switch {
		case e == "..":
			return "", desk.Errorf(desk.EINVALID, "archive entry %q climbs out with \"..\"; refused", orig)
		case e == "" || e == ".":
			return "", desk.Errorf(desk.EINVALID, "archive entry %q is not a clean path", orig)
		case atomicfile.IsTemp(e):
			return "", desk.Errorf(desk.EINVALID, "archive entry %q is one of desk's temporary files, which exports never carry", orig)
		}
	}
	if name == metaDir || strings.HasPrefix(name, metaDir+"/") {
		return name, nil
	}
	for _, t := range x.manifest.Trees {
		if name == t || strings.HasPrefix(name, t+"/") {
			return name, nil
		}
	}
	return "", desk.Errorf(desk.EINVALID, "archive entry %q is outside the exported directories (%s); refused", orig, strings.Join(x.manifest.Trees, ", "))
}

// underLink reports whether name lies below a symbolic link the archive
// created: writing through it would put the entry somewhere else.
func (x *extractor) underLink(name string) bool {
	if len(x.links) == 0 {
		return false
	}
	for p := path.Dir(name); p != "."; p = path.Dir(p) {
		if x.links[p] {
			return true
		}
	}
	return false
}

func (x *extractor) entry(tr io.Reader, h *tar.Header) error {
	switch h.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil // metadata for the archive as a whole; nothing to unpack
	case tar.TypeReg, tar.TypeDir, tar.TypeLink, tar.TypeSymlink:
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return desk.Errorf(desk.EINVALID, "archive entry %q is a device or FIFO; exports carry only files, folders and links", h.Name)
	default:
		return desk.Errorf(desk.EINVALID, "archive entry %q has tar type %q, which exports never use", h.Name, string(h.Typeflag))
	}
	name, err := x.entryName(h.Name, h.Typeflag == tar.TypeDir)
	if err != nil {
		return err
	}
	if x.underLink(name) {
		return desk.Errorf(desk.EINVALID, "archive entry %q lies below a symbolic link of the archive; refused", h.Name)
	}
	if name == metaDir || strings.HasPrefix(name, metaDir+"/") {
		return x.metaEntry(tr, h, name)
	}
	if err := x.tree.MkdirAll(path.Dir(name), 0o755); err != nil && path.Dir(name) != "." {
		return x.diskErr(name, err)
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if err := x.tree.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return x.diskErr(name, err)
		}
		return nil
	case tar.TypeSymlink:
		if !linkInside(name, h.Linkname) {
			return desk.Errorf(desk.EINVALID, "archive entry %q is a symbolic link to %q, which leads out of the workspace; refused", h.Name, h.Linkname)
		}
		if err := x.tree.Symlink(h.Linkname, name); err != nil {
			return x.diskErr(name, err)
		}
		x.links[name] = true
		return nil
	case tar.TypeLink:
		target, err := x.entryName(h.Linkname, false)
		if err != nil || target == metaDir || strings.HasPrefix(target, metaDir+"/") || x.underLink(target) {
			return desk.Errorf(desk.EINVALID, "archive entry %q is a hard link to %q, which is not a file of the workspace; refused", h.Name, h.Linkname)
		}
		fi, err := x.tree.Lstat(target)
		if err != nil || !fi.Mode().IsRegular() {
			return desk.Errorf(desk.EINVALID, "archive entry %q is a hard link to %q, which is not a file unpacked before it; refused", h.Name, h.Linkname)
		}
		if err := x.tree.Link(target, name); err != nil {
			return x.diskErr(name, err)
		}
		x.files++
		return nil
	}
	return x.regular(tr, h, x.tree, name)
}

func (x *extractor) metaEntry(tr io.Reader, h *tar.Header, name string) error {
	if h.Typeflag == tar.TypeDir && name == metaDir {
		return nil
	}
	m := chunkRe.FindStringSubmatch(name)
	if h.Typeflag != tar.TypeReg || m == nil {
		return desk.Errorf(desk.EINVALID, "archive entry %q is not a row file of the form meta/<table>.<000001>.ndjson", h.Name)
	}
	if !slices.Contains(x.manifest.Tables, m[1]) {
		return desk.Errorf(desk.EINVALID, "archive entry %q has rows of table %q, which the manifest does not list", h.Name, m[1])
	}
	if h.Size > maxChunk {
		return desk.Errorf(desk.EINVALID, "archive entry %q is %d bytes; row files are at most %d bytes", h.Name, h.Size, maxChunk)
	}
	seq, _ := strconv.Atoi(m[2])
	if seq != x.chunks[m[1]]+1 {
		return desk.Errorf(desk.EINVALID, "archive entry %q is out of order: row files of a table are numbered from 000001 without gaps", h.Name)
	}
	x.chunks[m[1]] = seq
	return x.regular(tr, h, x.meta, path.Base(name))
}

// regular unpacks a file. O_EXCL refuses an archive that names a file
// twice rather than letting the second copy silently win.
func (x *extractor) regular(tr io.Reader, h *tar.Header, root *os.Root, name string) error {
	if h.Size < 0 {
		return desk.Errorf(desk.EINVALID, "archive entry %q has a negative size", h.Name)
	}
	if x.bytes+h.Size > x.limit {
		return desk.Errorf(desk.ETOOLARGE, "the archive unpacks to more than the import limit of %d bytes", x.limit)
	}
	mode := fs.FileMode(0o644)
	if h.Mode&0o111 != 0 {
		mode = 0o755
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return desk.Errorf(desk.EINVALID, "archive entry %q appears twice; refused", h.Name)
	}
	if err != nil {
		return x.diskErr(name, err)
	}
	n, err := x.copy(f, tr, h.Size)
	x.bytes += n
	if root == x.tree {
		if rest, ok := strings.CutPrefix(name, layout.ActorsDir+"/"); ok {
			if actor, _, ok := strings.Cut(rest, "/"); ok {
				x.areas[actor] += n
			}
		}
	}
	if err != nil {
		f.Close()
		var de *desk.Error
		if desk.NoSpace(err) {
			return diskerr.Discarded("import", err)
		} else if errors.As(err, &de) {
			return err
		}
		return x.readErr(err)
	}
	if err := f.Close(); err != nil {
		return x.diskErr(name, err)
	}
	x.files++
	return nil
}

// checkQuota holds imported actor areas to the file quota an upload is held
// to: an archive cannot bring in an area larger than the actor could have
// stored here.
func (x *extractor) checkQuota() error {
	q := x.s.opts.ActorQuotaBytes
	if q <= 0 {
		return nil
	}
	actors := slices.Sorted(maps.Keys(x.areas))
	for _, a := range actors {
		if x.areas[a] > q {
			return desk.Errorf(desk.ETOOLARGE, "the import would exceed the file quota of actor %s (%d bytes; its area in the archive holds %d bytes)", a, q, x.areas[a])
		}
	}
	return nil
}

// copy unpacks one entry's bytes, checking the ratio of unpacked to
// compressed bytes as it goes, so a decompression bomb is stopped within a
// few megabytes of crossing it rather than after filling the disk.
func (x *extractor) copy(f io.Writer, tr io.Reader, size int64) (int64, error) {
	var done int64
	for done < size {
		n, err := io.CopyN(f, tr, min(size-done, 1<<20))
		done += n
		if err != nil {
			return done, err
		}
		if err := x.checkRatio(x.bytes + done); err != nil {
			return done, err
		}
	}
	return done, nil
}

// checkRatio refuses an archive whose unpacked bytes exceed the ratio
// limit times the compressed bytes read so far. The count read includes
// what the reader buffered ahead, so the ratio is never overstated.
func (x *extractor) checkRatio(unpacked int64) error {
	ratio := x.s.opts.MaxImportRatio
	if unpacked <= ratioFloor || unpacked <= ratio*x.body.n {
		return nil
	}
	return desk.Errorf(desk.ETOOLARGE, "the archive unpacks to more than %d times its compressed size (%d bytes from %d); a decompression bomb is refused (the operator can raise DESK_IMPORT_MAX_RATIO)", ratio, unpacked, x.body.n)
}

func (x *extractor) diskErr(name string, err error) error {
	if desk.NoSpace(err) {
		return diskerr.Discarded("import", err)
	}
	if err.Error() == "path escapes from parent" || errors.Is(err, syscall.ELOOP) {
		return desk.Errorf(desk.EINVALID, "archive entry %q leads out of the workspace; refused", name)
	}
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
		return desk.Errorf(desk.EINVALID, "archive entry %q conflicts with an earlier entry; refused", name)
	}
	return fmt.Errorf("import %s: %w", name, err)
}

// pathColumns are the columns whose values desk turns into paths under
// DESK_HOME (layout derives directories from ids). Any value they hold must
// be a well-formed id, so no row can steer a later file operation out of its
// workspace. A table that adds such a column adds it here.
var pathColumns = map[string]bool{
	"id": true, "workspace_id": true, "actor_id": true, "session_id": true,
	"execution_id": true, "group_id": true, "item_id": true, "surface_id": true,
}

var idShape = regexp.MustCompile(`^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$`)

// checkRow refuses values that would be unsafe as paths, and rows that name
// another workspace. Deeper rules (every row belongs to the workspace, keys
// are unique, references resolve) are the store's, inside the transaction.
func checkRow(table string, row desk.Row, ws string, n int) error {
	for k, v := range row {
		s, isStr := v.(string)
		switch {
		case k == "workspace_id" || (table == "workspaces" && k == "id"):
			if s != ws {
				return desk.Errorf(desk.EINVALID, "row %d of %s belongs to workspace %v, not %s", n, table, v, ws)
			}
		case pathColumns[k] && isStr && s != "" && table != "actor_tokens":
			if !idShape.MatchString(s) {
				return desk.Errorf(desk.EINVALID, "row %d of %s: %s=%q is not a desk id", n, table, k, s)
			}
		case k == "worktree" && isStr && s != "":
			// A session's worktree names a directory under worktrees/ that
			// becomes its /workspace, so it is held to the name rules a
			// PATCH is.
			if err := checkout.ValidWorktreeName(s); err != nil {
				return desk.Errorf(desk.EINVALID, "row %d of %s: %s", n, table, desk.ErrorMessage(err))
			}
		case (k == "rel_path" || k == "pending") && isStr && s != "":
			if !safeRel(s) {
				return desk.Errorf(desk.EINVALID, "row %d of %s: %s=%q is not a clean relative path", n, table, k, s)
			}
			// The files were unpacked under their normalized names; the
			// rows follow them.
			c, err := fsjail.CheckPathNames(s)
			if err != nil {
				return desk.Errorf(desk.EINVALID, "row %d of %s: %s: %s", n, table, k, desk.ErrorMessage(err))
			}
			row[k] = c
		}
	}
	return nil
}

func safeRel(p string) bool {
	if path.IsAbs(p) || strings.IndexByte(p, 0) >= 0 || strings.ContainsRune(p, '\\') {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return false
		}
	}
	return true
}

// rowSource yields the archive's rows in this desk's table order, then a
// fresh token for every actor when asked.
func (x *extractor) rowSource(ws string, newTokens bool, res *desk.ImportResult) func() (string, desk.Row, error) {
	tables := x.s.store.TransferTables()
	ti, chunk := 0, 0
	var f *os.File
	var dec *json.Decoder
	var actors []*desk.Actor
	var tokens []desk.Row
	n := 0
	return func() (string, desk.Row, error) {
		for {
			if dec != nil {
				var row desk.Row
				err := dec.Decode(&row)
				if err == nil {
					table := tables[ti]
					n++
					if err := checkRow(table, row, ws, n); err != nil {
						return "", nil, err
					}
					if table == "workspaces" {
						x.settings.apply(row)
					}
					res.Rows[table]++
					if table == "actors" && newTokens {
						actors = append(actors, actorOf(row))
					}
					return table, row, nil
				}
				f.Close()
				f, dec = nil, nil
				if !errors.Is(err, io.EOF) {
					return "", nil, desk.Errorf(desk.EINVALID, "rows of %s are not valid NDJSON: %v", tables[ti], err)
				}
			}
			if ti >= len(tables) {
				break
			}
			chunk++
			if chunk > x.chunks[tables[ti]] {
				ti, chunk, n = ti+1, 0, 0
				continue
			}
			var err error
			if f, err = x.meta.Open(path.Base(chunkName(tables[ti], chunk))); err != nil {
				return "", nil, err
			}
			dec = json.NewDecoder(bufio.NewReaderSize(f, 64<<10))
			dec.UseNumber()
		}
		if tokens == nil && newTokens {
			tokens = []desk.Row{}
			for _, a := range actors {
				tok := newToken()
				res.Tokens = append(res.Tokens, desk.ActorToken{Actor: a, Token: tok})
				tokens = append(tokens, desk.Row{"hash": workspace.HashToken(tok), "actor_id": a.ID, "created_at": json.Number(strconv.FormatInt(desk.Now().UnixMicro(), 10))})
			}
		}
		if len(tokens) > 0 {
			t := tokens[0]
			tokens = tokens[1:]
			return "actor_tokens", t, nil
		}
		return "", nil, io.EOF
	}
}

func actorOf(row desk.Row) *desk.Actor {
	a := &desk.Actor{}
	a.ID, _ = row["id"].(string)
	a.WorkspaceID, _ = row["workspace_id"].(string)
	a.Name, _ = row["name"].(string)
	a.Kind, _ = row["kind"].(string)
	if n, ok := row["created_at"].(json.Number); ok {
		if v, err := n.Int64(); err == nil {
			a.CreatedAt = time.UnixMicro(v).UTC()
		}
	}
	return a
}

// newToken mints an actor token in the workspace package's format (its
// prefix and hash), so imported actors authenticate like any other.
func newToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("transfer: crypto/rand failed: " + err.Error())
	}
	return workspace.TokenPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

type markerInfo struct {
	Host string    `json:"host"`
	PID  int       `json:"pid"`
	At   time.Time `json:"at"`
}

// hostname names this process space in a pending import's marker:
// hostname, boot and PID namespace (hostid), so that a marker's pid is
// judged dead only by a process that can see it. Two desks with one
// hostname in separate PID namespaces (containers sharing a home) each
// see the other's pid as gone; with the namespace in the name, each
// leaves the other's import alone until it is a day old.
func hostname() string { return hostid.Identity() }

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Recover finishes what a crash interrupted: staging directories are
// removed, and an imported tree still marked pending is kept (its rows
// committed) or removed (they never did). A marker written by another
// process that may still be importing is left alone unless it is a day old.
func (s *Service) Recover(ctx context.Context) error {
	_ = os.RemoveAll(filepath.Join(s.home.Root, stagingDir))
	ents, err := os.ReadDir(s.home.Workspaces())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !desk.HasPrefix(e.Name(), desk.PrefixWorkspace) {
			continue
		}
		mp := filepath.Join(s.home.Workspace(e.Name()), filepath.FromSlash(pendingMarker))
		b, err := os.ReadFile(mp)
		if err != nil {
			continue
		}
		var m markerInfo
		_ = json.Unmarshal(b, &m)
		mine := m.Host == hostname() && (m.PID == os.Getpid() || !alive(m.PID))
		if !mine && time.Since(m.At) < 24*time.Hour {
			continue
		}
		if _, err := s.store.GetWorkspace(ctx, e.Name()); err == nil {
			if err := os.Remove(mp); err != nil {
				return err
			}
		} else if desk.IsCode(err, desk.ENOTFOUND) {
			if err := os.RemoveAll(s.home.Workspace(e.Name())); err != nil {
				return err
			}
		} else {
			return err
		}
	}
	return nil
}
