package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/internal/diskerr"
)

// entryOf describes a walked or stat-ed file or directory.
func entryOf(rel string, fi fs.FileInfo) desk.FileEntry {
	e := desk.FileEntry{Path: "/" + rel, Type: desk.FileTypeFile, Size: fi.Size(), Modified: fi.ModTime().UTC()}
	if rel == "." {
		e.Path = "/"
	}
	if fi.IsDir() {
		e.Type, e.Size = desk.FileTypeDir, 0
	}
	return e
}

// annotator adds artifact rows to the entries of session folders. Listings
// visit one session folder's files together, so only the rows of the
// session being listed are held.
type annotator struct {
	s    *Service
	ctx  context.Context
	a    *area
	ses  string
	rows map[string]*desk.Artifact
}

func (an *annotator) annotate(e *desk.FileEntry, rel string) error {
	ses, rest, ok := splitSession(rel)
	if !ok || ses == "" || rest == "" {
		return nil
	}
	if ses != an.ses {
		an.ses, an.rows = ses, map[string]*desk.Artifact{}
		if desk.HasPrefix(ses, desk.PrefixSession) {
			arts, err := an.s.store.ListArtifacts(an.ctx, ses)
			if err != nil {
				return err
			}
			for _, x := range arts {
				if x.ActorID == an.a.actor.ID && x.WorkspaceID == an.a.ws.ID {
					an.rows[x.RelPath] = x
				}
			}
		}
	}
	if x := an.rows[rest]; x != nil {
		e.Kind, e.ArtifactID = x.Kind, x.ID
		// The row's digest is shown only while it can still describe these
		// bytes; a file changed behind desk's back has no known digest.
		if x.Size == e.Size {
			e.SHA256 = x.SHA256
		}
	}
	return nil
}

// List walks a directory of the area in path order (see walk) and calls fn
// for each entry; a path naming a file lists that one file. Symbolic links,
// special files and desk's temporary files are never listed.
func (s *Service) List(ctx context.Context, scope desk.FileScope, opts desk.FileListOptions, fn func(desk.FileEntry) error) (*desk.FileListing, error) {
	a, err := s.area(ctx, scope)
	if err != nil {
		return nil, err
	}
	if opts.Depth < 0 {
		return nil, desk.Errorf(desk.EINVALID, "depth=%d: depth is 1 or more, or 0 for no limit", opts.Depth)
	}
	p, err := CleanPath(opts.Path)
	if err != nil {
		return nil, err
	}
	out := &desk.FileListing{ActorID: a.actor.ID, Path: p, Depth: opts.Depth}
	root, err := s.openArea(a, false)
	if errors.Is(err, errNoArea) {
		if p == "/" {
			return out, nil
		}
		return nil, desk.Errorf(desk.ENOTFOUND, "%s: no such file or folder", p)
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel := relOf(p)
	if err := noLinks(root, rel, true); err != nil {
		return nil, err
	}
	an := &annotator{s: s, ctx: ctx, a: a}
	if rel != "." {
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return nil, desk.Errorf(desk.ENOTFOUND, "%s: no such file or folder", p)
		}
		if err != nil {
			return nil, diskerr.Discarded("list", err)
		}
		switch {
		case fi.IsDir():
		case fi.Mode().IsRegular():
			e := entryOf(rel, fi)
			if err := an.annotate(&e, rel); err != nil {
				return nil, err
			}
			out.Count = 1
			return out, fn(e)
		default:
			return nil, desk.Errorf(desk.EINVALID, "%s is not a regular file or a folder", p)
		}
	}
	err = walk(root, rel, opts.Depth, func(n node) (bool, error) {
		if hidden(path.Base(n.rel)) || isLink(n.info) {
			return false, nil
		}
		if !n.info.IsDir() && !n.info.Mode().IsRegular() {
			return false, nil
		}
		e := entryOf(n.rel, n.info)
		if e.Type == desk.FileTypeFile {
			if err := an.annotate(&e, n.rel); err != nil {
				return false, err
			}
		}
		out.Count++
		return true, fn(e)
	}, nil)
	if err != nil {
		return out, err
	}
	return out, nil
}

// Open returns a file of the area for reading, with its entry. The caller
// closes the file.
func (s *Service) Open(ctx context.Context, scope desk.FileScope, p string) (*os.File, desk.FileEntry, error) {
	var none desk.FileEntry
	a, err := s.area(ctx, scope)
	if err != nil {
		return nil, none, err
	}
	if p, err = CleanPath(p); err != nil {
		return nil, none, err
	}
	if p == "/" {
		return nil, none, desk.Errorf(desk.EINVALID, "/ is the area's root folder; name a file (list folders with the files route)")
	}
	root, err := s.openArea(a, false)
	if errors.Is(err, errNoArea) {
		return nil, none, desk.Errorf(desk.ENOTFOUND, "%s: no such file", p)
	}
	if err != nil {
		return nil, none, err
	}
	defer root.Close()
	rel := relOf(p)
	if err := noLinks(root, rel, true); err != nil {
		return nil, none, err
	}
	lfi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
		return nil, none, desk.Errorf(desk.ENOTFOUND, "%s: no such file", p)
	}
	if err != nil {
		return nil, none, diskerr.Discarded("open", err)
	}
	if lfi.IsDir() {
		return nil, none, desk.Errorf(desk.EINVALID, "%s is a folder; list it with the files route", p)
	}
	if !lfi.Mode().IsRegular() {
		return nil, none, desk.Errorf(desk.EINVALID, "%s is not a regular file", p)
	}
	f, err := root.Open(rel)
	if err != nil {
		return nil, none, diskerr.Discarded("open", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, none, fmt.Errorf("open %s: %w", p, err)
	}
	// The name may have been replaced by something else (a link, a FIFO)
	// between the check and the open.
	if !os.SameFile(lfi, fi) && !fi.Mode().IsRegular() {
		f.Close()
		return nil, none, desk.Errorf(desk.ECONFLICT, "%s changed while it was being opened; retry", p)
	}
	e := entryOf(rel, fi)
	an := &annotator{s: s, ctx: ctx, a: a}
	if err := an.annotate(&e, rel); err != nil {
		f.Close()
		return nil, none, err
	}
	return f, e, nil
}

// capReader passes at most limit bytes and remembers whether the source
// had more, so an over-quota body is told apart from a broken one.
type capReader struct {
	r     io.Reader
	left  int64
	limit int64
	hit   bool
}

var errOverQuota = errors.New("body exceeds the quota")

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.hit = true
			return 0, errOverQuota
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (s *Service) quotaErr(a *area, limit int64) error { return s.quota.quotaErr(a, limit) }

// Upload stores the body at in.Path: streamed into a temporary file beside
// the target, made durable, and renamed over it, so readers see the old
// file or the new one and never a torn one; with concurrent uploads to one
// path the last to finish wins whole. In a session folder the file becomes
// (or updates) that session's artifact. Nothing is kept when the body is
// short or long, the client goes away, the quota is exceeded or the disk
// fills up.
func (s *Service) Upload(ctx context.Context, scope desk.FileScope, in desk.FilePut) (_ *desk.FileUpload, err error) {
	a, err := s.area(ctx, scope)
	if err != nil {
		return nil, err
	}
	if a.ws.State != desk.WorkspaceActive {
		return nil, desk.Errorf(desk.ECONFLICT, "workspace %s is %s; files can only be uploaded to an active workspace", a.ws.ID, a.ws.State)
	}
	p, err := CleanPath(in.Path)
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, desk.Errorf(desk.EINVALID, "an upload needs a file path, e.g. path=/reports/summary.pdf")
	}
	rel := relOf(p)
	root, err := s.openArea(a, true)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := noLinks(root, rel, false); err != nil {
		return nil, err
	}
	room, err := s.quota.room(ctx, a)
	if err != nil {
		return nil, err
	}
	// Folders made for an upload that is then refused go with it.
	made := missingDirs(root, path.Dir(rel))
	defer func() {
		if err != nil {
			removeDirs(root, made)
		}
	}()
	if ses, rest, ok := splitSession(rel); ok {
		return s.uploadArtifact(ctx, a, p, ses, rest, room, in)
	}

	fi, err := root.Lstat(rel)
	replaced := int64(-1)
	switch {
	case err == nil && fi.IsDir():
		return nil, desk.Errorf(desk.ECONFLICT, "%s is a folder; upload to a file path inside it", p)
	case err == nil && isLink(fi):
		return nil, desk.Errorf(desk.EFORBIDDEN, "%s is a symbolic link; the file API never writes through links", p)
	case err == nil && !fi.Mode().IsRegular():
		return nil, desk.Errorf(desk.ECONFLICT, "%s is a special file and cannot be replaced", p)
	case err == nil:
		replaced = fi.Size()
	case isNotDir(err):
		return nil, desk.Errorf(desk.ECONFLICT, "a parent of %s is a file, not a folder", p)
	}
	limit := int64(-1)
	if room >= 0 {
		limit = room + max(replaced, 0)
		if in.Size > limit {
			return nil, s.quotaErr(a, limit)
		}
	}
	body := in.Body
	if body == nil {
		body = emptyBody{}
	}
	var capped *capReader
	if limit >= 0 {
		capped = &capReader{r: body, left: limit, limit: limit}
		body = capped
	}
	f, err := atomicfile.Create(root, rel)
	if err != nil {
		if isNotDir(err) {
			return nil, desk.Errorf(desk.ECONFLICT, "a parent of %s is a file, not a folder", p)
		}
		return nil, diskerr.Discarded("create "+p, err)
	}
	defer f.Abort()
	n, err := fill(f, body, in.Size)
	if err != nil {
		var werr *atomicfile.WriteError
		switch {
		case capped != nil && capped.hit:
			return nil, s.quotaErr(a, limit)
		case errors.As(err, &werr) || desk.NoSpace(err):
			return nil, diskerr.Discarded("write "+p, err)
		}
		return nil, desk.Errorf(desk.BodyCode(err), "upload of %s interrupted after %d bytes: %v", p, n, err)
	}
	if in.Size >= 0 && n != in.Size {
		return nil, desk.Errorf(desk.EINVALID, "body of %s has %d bytes but its length was given as %d; nothing was kept", p, n, in.Size)
	}
	// Make the bytes durable before taking the path lock, so a slow fsync
	// never holds up another upload to the same path.
	if err := f.Sync(); err != nil {
		return nil, diskerr.Discarded("write "+p, err)
	}

	unlock := s.paths.Lock(a.actor.ID + "/" + rel)
	defer unlock()
	replaced = -1
	if fi, err := root.Lstat(rel); err == nil {
		if fi.IsDir() {
			return nil, desk.Errorf(desk.ECONFLICT, "%s is a folder; upload to a file path inside it", p)
		}
		replaced = fi.Size()
	}
	undo, err := s.quota.admit(ctx, a)(replaced, n)
	if err != nil {
		return nil, err
	}
	if err := f.Commit(); err != nil {
		undo()
		return nil, diskerr.Discarded("store "+p, err)
	}
	fi, err = root.Lstat(rel)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	return &desk.FileUpload{FileEntry: entryOf(rel, fi), Created: replaced < 0}, nil
}

// fill copies an upload's body into its temporary file, hinting the kernel
// to write large uploads back as they arrive. Tests replace it to make the
// disk look full, which no portable test can do for real.
var fill = func(f *atomicfile.File, body io.Reader, size int64) (int64, error) {
	if size >= 0 && size < writebackMin {
		return f.Fill(body, nil)
	}
	wb := startWriteback(f.File)
	defer wb.stop()
	if wt, ok := body.(io.WriterTo); ok {
		// A body that can move itself into the file (the HTTP layer's
		// raw socket, which the kernel splices into the page cache)
		// skips the copy through user space.
		return wt.WriteTo(&fileSink{f: f.File, wb: wb})
	}
	return f.Fill(&progressReader{r: body, wb: wb}, nil)
}

// missingDirs lists the folders of dir (a root name) that do not exist yet,
// outermost first.
func missingDirs(root *os.Root, dir string) []string {
	var out []string
	for d := dir; d != "." && d != "/"; d = path.Dir(d) {
		if _, err := root.Lstat(d); err == nil {
			break
		}
		out = append([]string{d}, out...)
	}
	return out
}

// removeDirs removes the folders an upload made, innermost first, leaving
// any that something else has filled meanwhile.
func removeDirs(root *os.Root, dirs []string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		if root.Remove(dirs[i]) != nil {
			return
		}
	}
}

// emptyBody stands in for a missing body.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }

// uploadArtifact stores an upload into a session folder through the
// artifact service, so it is classified, validated and recorded like any
// artifact, with its origin stamped from the caller.
func (s *Service) uploadArtifact(ctx context.Context, a *area, p, ses, rest string, room int64, in desk.FilePut) (*desk.FileUpload, error) {
	if ses == "" || rest == "" {
		return nil, desk.Errorf(desk.ECONFLICT, "%s is a folder that desk manages; upload files inside a session folder (/%s/<ses>/name)", p, SessionsDir)
	}
	x, err := s.sessionOf(ctx, a, ses)
	if err != nil {
		return nil, err
	}
	body := in.Body
	var capped *capReader
	if room >= 0 {
		// What the file replaces is known only under the artifact's lock;
		// the final word is Admit's, this only stops a runaway body early.
		limit := room
		if old, err := s.store.ArtifactByPath(ctx, x.ID, rest); err == nil {
			limit += old.Size
		}
		if in.Size > limit {
			return nil, s.quotaErr(a, limit)
		}
		if body == nil {
			body = emptyBody{}
		}
		capped = &capReader{r: body, left: limit, limit: limit}
		body = capped
	}
	art, created, err := s.artifacts.PutPath(ctx, x.ID, rest, desk.ArtifactPathPut{
		MediaType: in.MediaType, Body: body, Size: in.Size, Admit: s.quota.admit(ctx, a),
	})
	if err != nil {
		if capped != nil && capped.hit {
			return nil, s.quotaErr(a, capped.limit)
		}
		return nil, err
	}
	e := desk.FileEntry{Path: p, Type: desk.FileTypeFile, Size: art.Size, Modified: art.UpdatedAt,
		Kind: art.Kind, SHA256: art.SHA256, ArtifactID: art.ID}
	if root, err := s.openArea(a, false); err == nil {
		if fi, err := root.Lstat(relOf(p)); err == nil {
			e.Modified = fi.ModTime().UTC()
		}
		root.Close()
	}
	return &desk.FileUpload{FileEntry: e, Created: created}, nil
}

// Delete removes one file, or one empty folder. A file in a session folder
// is that session's artifact: row, bytes and kept revisions go together.
// The sessions folder and the session folders themselves belong to their
// sessions and are never removed here.
func (s *Service) Delete(ctx context.Context, scope desk.FileScope, p string, fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
	a, err := s.area(ctx, scope)
	if err != nil {
		return nil, err
	}
	if p, err = CleanPath(p); err != nil {
		return nil, err
	}
	if p == "/" {
		return nil, desk.Errorf(desk.EINVALID, "/ is the area itself and cannot be deleted; use delete-by-prefix for a folder's contents")
	}
	root, err := s.openArea(a, false)
	if errors.Is(err, errNoArea) {
		return nil, desk.Errorf(desk.ENOTFOUND, "%s: no such file", p)
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	rel := relOf(p)
	if err := noLinks(root, rel, false); err != nil {
		return nil, err
	}
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
		return nil, desk.Errorf(desk.ENOTFOUND, "%s: no such file", p)
	}
	if err != nil {
		return nil, diskerr.Discarded("delete "+p, err)
	}
	if ses, rest, ok := splitSession(rel); ok && (ses == "" || rest == "") {
		return nil, desk.Errorf(desk.ECONFLICT, "%s belongs to its sessions; delete a session with DELETE /v1/sessions/{ses}", p)
	}
	if fi.IsDir() {
		empty, err := isEmptyDir(root, rel)
		if err != nil {
			return nil, diskerr.Discarded("delete "+p, err)
		}
		if !empty {
			return nil, desk.Errorf(desk.ECONFLICT, "%s is a folder that is not empty; delete its contents with delete-by-prefix?prefix=%s/", p, p)
		}
	}
	d := &deleter{s: s, ctx: ctx, a: a, root: root, fn: fn, sum: &desk.DeleteSummary{ActorID: a.actor.ID}}
	if err := d.remove(node{rel: rel, info: fi}); err != nil {
		return d.sum, err
	}
	return d.sum, d.flush()
}

func isEmptyDir(root *os.Root, rel string) (bool, error) {
	f, err := root.Open(rel)
	if err != nil {
		return false, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// DeleteByPrefix removes every path of the area that starts with prefix. A
// prefix ending in "/" is a folder: its whole subtree goes and the folder
// stays. Any other prefix is a string prefix of the path ("/temp" matches
// "/temp", "/temp/x" and "/temp-old.txt"), so a matching folder goes with
// its subtree. Files go first and each folder after its contents. Files in
// session folders are artifacts and go with their rows; the sessions folder
// and the session folders stay, as do desk's temporary files (an upload in
// flight) and the folders that still hold them.
func (s *Service) DeleteByPrefix(ctx context.Context, scope desk.FileScope, prefix string, fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
	a, err := s.area(ctx, scope)
	if err != nil {
		return nil, err
	}
	prefix, err = cleanPrefix(prefix)
	if err != nil {
		return nil, err
	}
	sum := &desk.DeleteSummary{ActorID: a.actor.ID}
	root, err := s.openArea(a, false)
	if errors.Is(err, errNoArea) {
		return sum, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	folder := prefix[len(prefix)-1] == '/'
	dir, stem := path.Dir(prefix), path.Base(prefix)
	if folder {
		dir, stem = prefix[:len(prefix)-1], ""
	}
	dirRel := relOf(dir)
	if err := noLinks(root, dirRel, true); err != nil {
		return nil, err
	}
	if dirRel != "." {
		fi, err := root.Lstat(dirRel)
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) || (err == nil && !fi.IsDir()) {
			return sum, nil
		}
		if err != nil {
			return nil, diskerr.Discarded("delete "+prefix, err)
		}
	}
	d := &deleter{s: s, ctx: ctx, a: a, root: root, fn: fn, sum: sum}
	err = walk(root, dirRel, 0, func(n node) (bool, error) {
		if n.level == 1 && !hasPrefix(path.Base(n.rel), stem) {
			return false, nil
		}
		if hidden(path.Base(n.rel)) {
			return false, nil
		}
		if n.info.IsDir() {
			return true, nil // removed after its contents, in post
		}
		return false, d.remove(n)
	}, func(n node) error {
		if ses, rest, ok := splitSession(n.rel); ok && (ses == "" || rest == "") {
			return nil
		}
		return d.remove(n)
	})
	if err != nil {
		return sum, err
	}
	return sum, d.flush()
}

func hasPrefix(name, stem string) bool { return len(name) >= len(stem) && name[:len(stem)] == stem }

// deleter removes entries one by one, reporting each, and keeps the usage
// total in step.
type deleter struct {
	s      *Service
	ctx    context.Context
	a      *area
	root   *os.Root
	fn     func(desk.FileEntry) error
	sum    *desk.DeleteSummary
	bytes  int64
	nfiles int64
	ses    *desk.Session // the session of the folder being deleted from
}

func (d *deleter) remove(n node) error {
	e := entryOf(n.rel, n.info)
	switch {
	case n.info.IsDir():
		err := d.root.Remove(n.rel)
		if err != nil {
			// A folder that still holds something desk keeps (a
			// temporary file of an upload in flight) stays.
			if errors.Is(err, fs.ErrNotExist) || isNotEmpty(err) {
				return nil
			}
			return diskerr.Discarded("delete /"+n.rel, err)
		}
		d.sum.Dirs++
		return d.fn(e)
	case isLink(n.info):
		e.Type, e.Size = desk.FileTypeLink, 0
	}
	if ses, rest, ok := splitSession(n.rel); ok && ses != "" && rest != "" && e.Type == desk.FileTypeFile {
		if x, err := d.session(ses); err == nil {
			art, err := d.s.artifacts.DeleteByPath(d.ctx, x.ID, rest)
			if err == nil {
				e.Kind, e.ArtifactID, e.SHA256 = art.Kind, art.ID, art.SHA256
				return d.done(e, n.info)
			}
			if !desk.IsCode(err, desk.ENOTFOUND) {
				return err
			}
			// No row: a plain file in the session folder.
		}
	}
	if err := d.root.Remove(n.rel); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return diskerr.Discarded("delete /"+n.rel, err)
	}
	return d.done(e, n.info)
}

// session looks the session of a session folder up once per folder: a
// prefix delete meets the files of one folder together.
func (d *deleter) session(ses string) (*desk.Session, error) {
	if d.ses == nil || d.ses.ID != ses {
		x, err := d.s.sessionOf(d.ctx, d.a, ses)
		if err != nil {
			return nil, err
		}
		d.ses = x
	}
	return d.ses, nil
}

func (d *deleter) done(e desk.FileEntry, fi fs.FileInfo) error {
	d.sum.Files++
	if fi.Mode().IsRegular() {
		d.sum.Bytes += fi.Size()
		d.bytes += fi.Size()
		d.nfiles++
	}
	// Usage is written in batches: one row update per thousand deletes
	// keeps a large delete from being a database benchmark.
	if d.nfiles >= 1000 {
		if err := d.flush(); err != nil {
			return err
		}
	}
	return d.fn(e)
}

func (d *deleter) flush() error {
	if d.nfiles == 0 && d.bytes == 0 {
		return nil
	}
	err := d.s.store.AddActorUsage(context.WithoutCancel(d.ctx), d.a.actor.ID, -d.bytes, -d.nfiles)
	d.bytes, d.nfiles = 0, 0
	return err
}

func isNotEmpty(err error) bool {
	return errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST)
}
