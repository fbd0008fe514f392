package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/classify"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/layout"
)

// This file is the path-addressed door to artifacts: the file API names an
// artifact by where its bytes live in the session's artifact directory
// rather than by id. It reuses the artifact service's receive, revision and
// install steps, and takes the same per-path lock, so the artifact API, the
// file API and recovery see one set of rules.

var _ desk.ArtifactPaths = (*Artifacts)(nil)

// maxElemBytes is the common file-system limit on one path element.
const maxElemBytes = 255

// ValidRel checks a path relative to a session's artifact directory: slash
// separated, no empty, "." or ".." element, no NUL, backslash or control
// character, no element longer than 255 bytes, and no element that looks
// like desk's own temporary files. It returns rel without leading or
// trailing slashes. Refusals are EINVALID, escape attempts EFORBIDDEN.
func ValidRel(rel string) (string, error) {
	rel = strings.Trim(rel, "/")
	if rel == "" {
		return "", desk.Errorf(desk.EINVALID, "the path is empty")
	}
	if !utf8.ValidString(rel) {
		return "", desk.Errorf(desk.EINVALID, "path %q is not valid UTF-8", rel)
	}
	// Invisible and text-direction characters are refused and the rest is
	// put in normal form C, so two spellings of one name are one file.
	rel, err := fsjail.CheckPathNames(rel)
	if err != nil {
		return "", err
	}
	for elem := range strings.SplitSeq(rel, "/") {
		switch {
		case elem == "" || elem == ".":
			return "", desk.Errorf(desk.EINVALID, "path %q has an empty or \".\" element", rel)
		case elem == "..":
			return "", desk.Errorf(desk.EFORBIDDEN, "path %q contains a \"..\" element; paths may not climb out of a directory", rel)
		case strings.ContainsRune(elem, '\\'):
			return "", desk.Errorf(desk.EFORBIDDEN, "path %q contains a backslash; paths use /", rel)
		case len(elem) > maxElemBytes:
			return "", desk.Errorf(desk.EINVALID, "path element %.40q… is longer than %d bytes", elem, maxElemBytes)
		case atomicfile.IsTemp(elem):
			return "", desk.Errorf(desk.EINVALID, "path %q uses the prefix %s, which desk reserves for its temporary files", rel, atomicfile.TempPrefix)
		}
		for _, r := range elem {
			if r == 0 || unicode.IsControl(r) {
				return "", desk.Errorf(desk.EINVALID, "path %q contains a NUL or control character", rel)
			}
		}
	}
	return rel, nil
}

// isImmutableRel reports whether rel lies in the session's immutable area.
func isImmutableRel(rel string) bool { return strings.HasPrefix(rel, ImmutableDir+"/") }

// relArtifact validates rel for an artifact file; the immutable directory
// itself can never be one.
func relArtifact(rel string) (string, error) {
	rel, err := ValidRel(rel)
	if err != nil {
		return "", err
	}
	if rel == ImmutableDir {
		return "", desk.Errorf(desk.EINVALID, "%s is the folder of immutable artifacts, not a file", ImmutableDir)
	}
	return rel, nil
}

// noLinks refuses a path that goes through a symbolic link between the
// session folder and the file. os.Root keeps links inside the workspace,
// but a link planted in an artifact directory could still lead into another
// session's folder or the revision store, and a path must mean what it says.
func noLinks(root *os.Root, sessionDir, rel string) error {
	p := sessionDir
	for elem := range strings.SplitSeq(rel, "/") {
		p = path.Join(p, elem)
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return diskerr.Wrap("check path", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return desk.Errorf(desk.EFORBIDDEN, "%s goes through a symbolic link; the file API does not follow links", rel)
		}
	}
	return nil
}

// PutPath creates or replaces the artifact whose bytes live at rel in the
// session's artifact directory. The bytes are received and validated
// before the per-path lock is taken, so a slow upload does not hold up the
// artifact's other users; the row is read again under the lock.
func (s *Artifacts) PutPath(ctx context.Context, sessionID, rel string, in desk.ArtifactPathPut) (*desk.Artifact, bool, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, false, err
	}
	if rel, err = relArtifact(rel); err != nil {
		return nil, false, err
	}
	root, err := s.openRoot(x.WorkspaceID)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	dir := layout.SessionRel(x.Actor, x.ID)
	target := path.Join(dir, rel)
	if err := noLinks(root, dir, rel); err != nil {
		return nil, false, err
	}
	// Refuse what will certainly be refused before any byte is received.
	if err := s.precheck(ctx, root, x, rel, target); err != nil {
		return nil, false, err
	}
	f, got, err := s.receive(root, target, path.Base(rel), desk.ArtifactPut{MediaType: in.MediaType, Body: in.Body, Size: in.Size})
	if err != nil {
		return nil, false, err
	}
	defer f.Abort()

	unlock := s.locks.Lock(x.ID + "/" + rel)
	defer unlock()
	old, err := s.store.ArtifactByPath(ctx, x.ID, rel)
	switch {
	case desk.IsCode(err, desk.ENOTFOUND):
		old = nil
		if _, lerr := root.Lstat(target); lerr == nil {
			// A file without a row is someone's work: index it first, so
			// the upload keeps it as the previous revision instead of
			// destroying it.
			if old, err = s.indexLocked(ctx, root, x, rel, foundOrigin(x)); err != nil {
				return nil, false, err
			}
		}
	case err != nil:
		return nil, false, err
	}
	if old != nil && old.Immutable {
		return nil, false, immutableErr(old)
	}
	// The file API brings its own quota step; every other door (the
	// agent's file tools) is held to the actor quota here.
	admit := in.Admit
	if admit == nil {
		admit = func(replaced, size int64) (func(), error) { return s.admit(ctx, x, replaced, size) }
	}
	replaced := int64(-1)
	if old != nil {
		replaced = old.Size
	}
	undo, err := admit(replaced, got.size)
	if err != nil {
		return nil, false, err
	}

	if old == nil {
		now := desk.Now()
		a := &desk.Artifact{
			ID: desk.NewID(desk.PrefixArtifact), SessionID: x.ID, WorkspaceID: x.WorkspaceID, ActorID: x.Actor,
			Name: path.Base(rel), RelPath: rel, Kind: got.class.Kind, MediaType: got.class.MediaType, Size: got.size,
			SHA256: got.sha256, Immutable: isImmutableRel(rel), Revision: 1, Origin: originOf(ctx, x),
			CreatedAt: now, UpdatedAt: now,
		}
		if err := s.create(ctx, root, a, f, undo); err != nil {
			return nil, false, err
		}
		return a, true, nil
	}

	if err := f.Close(); err != nil {
		undo()
		return nil, false, diskerr.Wrap("store artifact", err)
	}
	prev, err := s.keepRevision(root, old)
	if err != nil {
		undo()
		return nil, false, err
	}
	next := *old
	next.Revision++
	next.Kind, next.MediaType, next.Size, next.SHA256 = got.class.Kind, got.class.MediaType, got.size, got.sha256
	next.Prev, next.Pending, next.Missing = prev, f.Temp, false
	next.Origin, next.UpdatedAt = originOf(ctx, x), desk.Now()
	out, err := s.install(ctx, root, old, &next, f, nil)
	if err != nil {
		if cur, gerr := s.store.GetArtifact(ctx, old.ID); gerr != nil || cur.Revision == old.Revision {
			// The row never took the new bytes.
			undo()
		}
		return nil, false, err
	}
	return out, false, nil
}

// precheck refuses an upload that the current state already rules out: an
// immutable artifact (or a file in the immutable area), or a directory at
// the target.
func (s *Artifacts) precheck(ctx context.Context, root *os.Root, x *desk.Session, rel, target string) error {
	old, err := s.store.ArtifactByPath(ctx, x.ID, rel)
	if err == nil {
		if old.Immutable {
			return immutableErr(old)
		}
		return nil
	}
	if !desk.IsCode(err, desk.ENOTFOUND) {
		return err
	}
	fi, err := root.Lstat(target)
	if err != nil {
		return nil
	}
	if fi.IsDir() {
		return desk.Errorf(desk.ECONFLICT, "/sessions/%s/%s is a directory; upload to a file path inside it", x.ID, rel)
	}
	if isImmutableRel(rel) {
		return desk.Errorf(desk.ECONFLICT, "/sessions/%s/%s is in the immutable area and already exists; immutable files are never replaced", x.ID, rel)
	}
	return nil
}

func immutableErr(a *desk.Artifact) error {
	return desk.Errorf(desk.ECONFLICT, "artifact %s at /sessions/%s/%s is immutable; create a new artifact instead", a.ID, a.SessionID, a.RelPath)
}

// DeleteByPath deletes the artifact whose bytes live at rel: row, bytes and
// kept revisions, in the same order as Delete.
func (s *Artifacts) DeleteByPath(ctx context.Context, sessionID, rel string) (*desk.Artifact, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	if rel, err = relArtifact(rel); err != nil {
		return nil, err
	}
	unlock := s.locks.Lock(x.ID + "/" + rel)
	defer unlock()
	a, err := s.store.ArtifactByPath(ctx, x.ID, rel)
	if err != nil {
		return nil, err
	}
	if err := s.store.MarkArtifactDeleting(ctx, a.ID); err != nil {
		return nil, err
	}
	return a, s.finishDelete(ctx, a)
}

// IndexPath gives the file at rel an artifact row, or returns the row that
// already describes it.
func (s *Artifacts) IndexPath(ctx context.Context, sessionID, rel string) (*desk.Artifact, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	if rel, err = relArtifact(rel); err != nil {
		return nil, err
	}
	root, err := s.openRoot(x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if err := noLinks(root, layout.SessionRel(x.Actor, x.ID), rel); err != nil {
		return nil, err
	}
	unlock := s.locks.Lock(x.ID + "/" + rel)
	defer unlock()
	if a, err := s.store.ArtifactByPath(ctx, x.ID, rel); err == nil {
		return a, nil
	} else if !desk.IsCode(err, desk.ENOTFOUND) {
		return nil, err
	}
	// A file a running command left (the agent's context carries its
	// origin) is that command's work; anything else desk merely found.
	o := foundOrigin(x)
	if _, ok := desk.OriginFrom(ctx); ok {
		o = originOf(ctx, x)
	}
	return s.indexLocked(ctx, root, x, rel, o)
}

// IndexNew indexes the files of the session's artifact directory that
// have no row, walking it through the workspace's os.Root (no link is
// followed) in path order; desk's own temporary files are skipped.
func (s *Artifacts) IndexNew(ctx context.Context, sessionID string) ([]*desk.Artifact, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	root, err := s.openRoot(x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	dir := layout.SessionRel(x.Actor, x.ID)
	var rels []string
	err = fs.WalkDir(root.FS(), dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() && !atomicfile.IsTemp(d.Name()) {
			rels = append(rels, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	root.Close()
	if err != nil {
		return nil, err
	}
	// One query for the rows the session has, not one per file: a
	// session may hold thousands of artifacts and this runs after every
	// command.
	have, err := s.store.ListArtifacts(ctx, x.ID)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(have))
	for _, a := range have {
		known[a.RelPath] = true
	}
	if s.opts.Blobs != nil {
		// Changes commands made to artifacts' files go to the blob
		// store as their next revisions, or readers would not see them.
		wroot, err := s.openRoot(x.WorkspaceID)
		if err != nil {
			return nil, err
		}
		defer wroot.Close()
		for _, a := range have {
			if err := s.writeBack(ctx, wroot, x, a); err != nil {
				return nil, err
			}
		}
	}
	var made []*desk.Artifact
	for _, rel := range rels {
		if known[rel] {
			continue
		}
		a, err := s.IndexPath(ctx, x.ID, rel)
		if err != nil {
			if desk.ErrorCode(err) == desk.EINTERNAL {
				return nil, err
			}
			continue // a file the classifier refuses stays a plain file
		}
		made = append(made, a)
	}
	return made, nil
}

// foundOrigin is the origin of a file desk found without a row.
func foundOrigin(x *desk.Session) desk.Origin {
	return desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: x.Actor, Kind: desk.OriginSystem}
}

// indexLocked hashes and classifies an existing file and records it as
// revision 1 of a new artifact with the given origin. The caller holds the
// path lock.
func (s *Artifacts) indexLocked(ctx context.Context, root *os.Root, x *desk.Session, rel string, origin desk.Origin) (*desk.Artifact, error) {
	target := path.Join(layout.SessionRel(x.Actor, x.ID), rel)
	lfi, err := root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, desk.Errorf(desk.ENOTFOUND, "/sessions/%s/%s: no such file", x.ID, rel)
	}
	if err != nil {
		return nil, diskerr.Wrap("index artifact", err)
	}
	if !lfi.Mode().IsRegular() {
		return nil, desk.Errorf(desk.EINVALID, "/sessions/%s/%s is not a regular file (links and special files are never indexed)", x.ID, rel)
	}
	f, err := root.Open(target)
	if err != nil {
		return nil, diskerr.Wrap("index artifact", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", rel, err)
	}
	// The name may have been swapped between the Lstat and the open.
	if !os.SameFile(lfi, fi) {
		return nil, desk.Errorf(desk.ECONFLICT, "/sessions/%s/%s changed while it was being indexed; retry", x.ID, rel)
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", rel, err)
	}
	class, err := classify.Classify(path.Base(rel), "", f, n)
	if err != nil {
		return nil, fmt.Errorf("classify %s: %w", rel, err)
	}
	now := desk.Now()
	a := &desk.Artifact{
		ID: desk.NewID(desk.PrefixArtifact), SessionID: x.ID, WorkspaceID: x.WorkspaceID, ActorID: x.Actor,
		Name: path.Base(rel), RelPath: rel, Kind: class.Kind, MediaType: class.MediaType, Size: n,
		SHA256: hex.EncodeToString(h.Sum(nil)), Immutable: isImmutableRel(rel), Revision: 1,
		Origin:    origin,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := s.upload(ctx, a, f); err != nil {
		return nil, err
	}
	if err := s.store.CreateArtifact(ctx, a); err != nil {
		if desk.IsCode(err, desk.ECONFLICT) {
			return s.store.ArtifactByPath(ctx, x.ID, rel)
		}
		return nil, err
	}
	return a, nil
}
