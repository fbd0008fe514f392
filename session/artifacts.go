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

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/blobs"
	"github.com/desk-runtime/desk/classify"
	"github.com/desk-runtime/desk/fsjail"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/internal/keyedmutex"
	"github.com/desk-runtime/desk/layout"
)

// ImmutableDir is the subdirectory of a session's artifact directory that
// executions may not write (svvy: "<artifactDir>/<session>/immutable/").
const ImmutableDir = "immutable"

// ArtifactOptions configures the artifact service.
type ArtifactOptions struct {
	// MaxBytes refuses artifacts larger than this with too_large; 0 means
	// no limit.
	MaxBytes int64
	// Admit, when set, is the actor quota: called with the size of the
	// bytes about to be kept (replaced: the size they replace, -1 for a new
	// artifact), it refuses with too_large or reserves them; undo gives a
	// reservation back when the write fails after all.
	Admit func(ctx context.Context, workspaceID, actorID string, replaced, size int64) (undo func(), err error)
	// Blobs, when set, is where artifact bytes are kept (artifact_blobs.go):
	// each revision is put there before its row commits and reads stream
	// from it; the session's artifact directory is then this node's
	// working copy. Nil keeps bytes in the artifact directory only.
	Blobs blobs.Blobs
}

// Artifacts is the artifact service: the artifact API, its path-addressed
// door for the file API and the agent's tools (artifact_paths.go), and its
// startup recovery.
type Artifacts struct {
	store Store
	home  layout.Home
	opts  ArtifactOptions
	locks keyedmutex.Map // one writer per artifact or path at a time
}

var (
	_ desk.ArtifactService = (*Artifacts)(nil)
	_ desk.Recoverer       = (*Artifacts)(nil)
)

// NewArtifacts returns the artifact service. Bytes live in each session's
// artifact directory; rows in the store. Every change writes the bytes
// durably before the row that points at them, so a crash leaves either the
// old artifact or the new one.
func NewArtifacts(store Store, home layout.Home, opts ArtifactOptions) *Artifacts {
	return &Artifacts{store: store, home: home, opts: opts}
}

// received is what receive learned about the bytes it wrote.
type received struct {
	size   int64
	sha256 string
	class  classify.Result
}

// receive streams in.Body into a temporary file beside target, hashing it on
// the way, then classifies and validates it. On success the caller owns the
// returned file and must Commit, Keep or Abort it.
func (s *Artifacts) receive(root *os.Root, target, name string, in desk.ArtifactPut) (*atomicfile.File, received, error) {
	var r received
	if s.opts.MaxBytes > 0 && in.Size > s.opts.MaxBytes {
		return nil, r, desk.Errorf(desk.ETOOLARGE, "%s is %d bytes; artifacts are limited to %d bytes", name, in.Size, s.opts.MaxBytes)
	}
	if in.Body == nil {
		in.Body = eofReader{}
	}
	f, err := atomicfile.Create(root, target)
	if err != nil {
		return nil, r, diskerr.Wrap("create artifact file", err)
	}
	body := in.Body
	if s.opts.MaxBytes > 0 {
		body = io.LimitReader(body, s.opts.MaxBytes+1)
	}
	h := sha256.New()
	n, err := f.Fill(body, h)
	if err != nil {
		f.Abort()
		var werr *atomicfile.WriteError
		if errors.As(err, &werr) || desk.NoSpace(err) {
			return nil, r, diskerr.Wrap("write artifact", err)
		}
		return nil, r, desk.Errorf(desk.BodyCode(err), "upload of %s interrupted after %d bytes: %v", name, n, err)
	}
	if s.opts.MaxBytes > 0 && n > s.opts.MaxBytes {
		f.Abort()
		return nil, r, desk.Errorf(desk.ETOOLARGE, "%s exceeds the artifact limit of %d bytes", name, s.opts.MaxBytes)
	}
	if in.Size >= 0 && n != in.Size {
		f.Abort()
		return nil, r, desk.Errorf(desk.EINVALID, "body of %s has %d bytes but its length was given as %d", name, n, in.Size)
	}
	class, err := classify.Classify(name, in.MediaType, f.File, n)
	if err != nil {
		f.Abort()
		return nil, r, fmt.Errorf("classify %s: %w", name, err)
	}
	if err := classify.Check(name, in.MediaType, class); err != nil {
		f.Abort()
		return nil, r, err
	}
	r.size, r.sha256, r.class = n, hex.EncodeToString(h.Sum(nil)), class
	return f, r, nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (s *Artifacts) openRoot(ws string) (*os.Root, error) {
	dir := s.home.Workspace(ws)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.OpenRoot(dir)
}

func fileOf(a *desk.Artifact) string {
	return path.Join(layout.SessionRel(a.ActorID, a.SessionID), a.RelPath)
}

func (s *Artifacts) Create(ctx context.Context, sessionID string, in desk.ArtifactPut) (*desk.Artifact, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	// Invisible and text-direction characters are refused, not replaced:
	// a name that misleads is the caller's error (fsjail.CheckName).
	name, err := fsjail.CheckName(in.Name)
	if err != nil {
		return nil, err
	}
	if name, err = SanitizeName(name); err != nil {
		return nil, err
	}
	rel := name
	if in.Immutable {
		rel = ImmutableDir + "/" + name
	}
	unlock := s.locks.Lock(x.ID + "/" + rel)
	defer unlock()
	root, err := s.openRoot(x.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if old, err := s.store.ArtifactByPath(ctx, x.ID, rel); err == nil {
		return s.repeated(old, in)
	} else if !desk.IsCode(err, desk.ENOTFOUND) {
		return nil, err
	}
	target := path.Join(layout.SessionRel(x.Actor, x.ID), rel)
	// A file without a row (left by a command) is never silently
	// overwritten: it may be someone's work.
	if _, err := root.Lstat(target); err == nil {
		return nil, desk.Errorf(desk.ECONFLICT, "a file that is not an artifact yet already exists at /artifacts/%s; choose another name", rel)
	}
	f, got, err := s.receive(root, target, name, in)
	if err != nil {
		return nil, err
	}
	defer f.Abort()
	undo, err := s.admit(ctx, x, -1, got.size)
	if err != nil {
		return nil, err
	}
	now := desk.Now()
	a := &desk.Artifact{
		ID: desk.NewID(desk.PrefixArtifact), SessionID: x.ID, WorkspaceID: x.WorkspaceID, ActorID: x.Actor,
		Name: name, RelPath: rel, Kind: got.class.Kind, MediaType: got.class.MediaType, Size: got.size,
		SHA256: got.sha256, Immutable: in.Immutable, Revision: 1, Origin: originOf(ctx, x),
		CreatedAt: now, UpdatedAt: now,
	}
	if err := s.create(ctx, root, a, f, undo); err != nil {
		return nil, err
	}
	return a, nil
}

// repeated answers a create at a path that already has an artifact. A
// repeat of the same create (the same bytes at the same name: a client
// retrying after a lost answer or a crash) gets the artifact it made;
// anything else is a conflict. Only as many bytes as the artifact has are
// read to tell.
func (s *Artifacts) repeated(old *desk.Artifact, in desk.ArtifactPut) (*desk.Artifact, error) {
	conflict := desk.Errorf(desk.ECONFLICT, "artifact %s already exists at %s; update it with PUT /v1/sessions/%s/artifacts/%s/content", old.ID, old.Path, old.SessionID, old.ID)
	if old.Missing || old.Immutable != in.Immutable || (in.Size >= 0 && in.Size != old.Size) {
		return nil, conflict
	}
	body := in.Body
	if body == nil {
		body = eofReader{}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(body, old.Size+1))
	if err != nil {
		return nil, desk.Errorf(desk.BodyCode(err), "upload of %s interrupted after %d bytes: %v", old.Name, n, err)
	}
	if n != old.Size || hex.EncodeToString(h.Sum(nil)) != old.SHA256 {
		return nil, conflict
	}
	return old, nil
}

// create makes a new artifact row and installs its bytes, in the order
// that leaves no file without a row whenever desk stops: the bytes are
// made durable under their temporary name, the row is committed claiming
// that name as pending, and only then is the file renamed into place. A
// crash before the commit leaves a temporary file the startup sweep
// removes (and a retried create succeeds); after it, Recover finishes the
// rename. undo gives the quota reservation back if the row was never
// committed; after the commit the bytes are the artifact's.
func (s *Artifacts) create(ctx context.Context, root *os.Root, a *desk.Artifact, f *atomicfile.File, undo func()) error {
	if err := s.upload(ctx, a, f.File); err != nil {
		undo()
		return err
	}
	if err := f.Close(); err != nil {
		undo()
		return diskerr.Wrap("store artifact", err)
	}
	a.Pending = f.Temp
	if err := s.store.CreateArtifact(ctx, a); err != nil {
		a.Pending = ""
		undo()
		return err
	}
	f.Keep()
	// The row is committed: finishing is no longer optional, whatever
	// happens to the request.
	return s.settlePending(context.WithoutCancel(ctx), root, a)
}

// settlePending renames a committed row's pending file into place and
// clears the claim. If desk stops in between, Recover does the same.
func (s *Artifacts) settlePending(ctx context.Context, root *os.Root, a *desk.Artifact) error {
	if err := atomicfile.Install(root, a.Pending, fileOf(a)); err != nil {
		// With a blob store the bytes are kept already: a working copy
		// that could not be installed (its temporary file swept by a peer
		// sharing this disk) is fetched again when a command needs it.
		if s.opts.Blobs == nil || !errors.Is(err, fs.ErrNotExist) {
			return diskerr.Wrap("install artifact", err)
		}
	}
	if err := s.store.SetArtifactPending(ctx, a.ID, ""); err != nil {
		return err
	}
	a.Pending = ""
	return nil
}

// admit applies the actor quota to bytes about to be kept.
func (s *Artifacts) admit(ctx context.Context, x *desk.Session, replaced, size int64) (func(), error) {
	if s.opts.Admit == nil {
		return func() {}, nil
	}
	return s.opts.Admit(ctx, x.WorkspaceID, x.Actor, replaced, size)
}

// artifact returns the visible artifact id of session sessionID.
func (s *Artifacts) artifact(ctx context.Context, sessionID, id string) (*desk.Session, *desk.Artifact, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, nil, err
	}
	a, err := s.store.GetArtifact(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if a.SessionID != x.ID {
		return nil, nil, desk.Errorf(desk.ENOTFOUND, "artifact %s not found", id)
	}
	return x, a, nil
}

func (s *Artifacts) Get(ctx context.Context, sessionID, id string) (*desk.Artifact, error) {
	_, a, err := s.artifact(ctx, sessionID, id)
	return a, err
}

func (s *Artifacts) List(ctx context.Context, sessionID string) ([]*desk.Artifact, error) {
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return nil, err
	}
	return s.store.ListArtifacts(ctx, x.ID)
}

func (s *Artifacts) Open(ctx context.Context, sessionID, id string) (*desk.Artifact, io.ReadSeekCloser, error) {
	_, a, err := s.artifact(ctx, sessionID, id)
	if err != nil {
		return nil, nil, err
	}
	if s.opts.Blobs != nil {
		r, err := s.openBlob(ctx, a)
		if err == nil {
			return a, r, nil
		}
		if !errors.Is(err, blobs.ErrNotFound) {
			return nil, nil, fmt.Errorf("open the bytes of artifact %s: %w", a.ID, err)
		}
		// Not in the blob store: an artifact made before desk kept
		// bytes there has them only in its working copy.
	}
	root, err := s.openRoot(a.WorkspaceID)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	name := fileOf(a)
	if a.Pending != "" {
		// The row already describes the new bytes, which are still under
		// their temporary name for the instant before the rename.
		if f, err := root.Open(a.Pending); err == nil {
			return a, f, nil
		}
	}
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, desk.Errorf(desk.ENOTFOUND, "the bytes of artifact %s are missing", a.ID)
	}
	if err != nil {
		return nil, nil, err
	}
	return a, f, nil
}

func (s *Artifacts) Update(ctx context.Context, sessionID, id string, in desk.ArtifactPut) (*desk.Artifact, error) {
	x, a, err := s.artifact(ctx, sessionID, id)
	if err != nil {
		return nil, err
	}
	unlock := s.locks.Lock(x.ID + "/" + a.RelPath)
	defer unlock()
	if a, err = s.store.GetArtifact(ctx, id); err != nil {
		return nil, err
	}
	if a.Immutable {
		return nil, desk.Errorf(desk.ECONFLICT, "artifact %s is immutable; create a new artifact instead", a.ID)
	}
	root, err := s.openRoot(a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	target := fileOf(a)
	f, got, err := s.receive(root, target, a.Name, in)
	if err != nil {
		return nil, err
	}
	defer f.Abort()
	if err := f.Close(); err != nil {
		return nil, diskerr.Wrap("store artifact", err)
	}
	undo, err := s.admit(ctx, x, a.Size, got.size)
	if err != nil {
		return nil, err
	}
	prev, err := s.keepRevision(root, a)
	if err != nil {
		undo()
		return nil, err
	}
	next := *a
	next.Revision++
	next.Kind, next.MediaType, next.Size, next.SHA256 = got.class.Kind, got.class.MediaType, got.size, got.sha256
	next.Prev, next.Pending, next.Missing = prev, f.Temp, false
	next.Origin, next.UpdatedAt = originOf(ctx, x), desk.Now()
	return s.install(ctx, root, a, &next, f, undo)
}

// keepRevision hard-links the current bytes into the revision store so a
// revert can bring them back; a link costs no copy and the current file
// stays in place until the new one replaces it. Missing bytes keep nothing.
func (s *Artifacts) keepRevision(root *os.Root, a *desk.Artifact) (*desk.ArtifactRevision, error) {
	rev := layout.RevisionRel(a.ID, a.Revision)
	if err := root.MkdirAll(layout.RevisionDirRel(a.ID), 0o755); err != nil {
		return nil, diskerr.Wrap("keep revision", err)
	}
	_ = root.Remove(rev) // debris of an earlier attempt that crashed
	if err := root.Link(fileOf(a), rev); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, diskerr.Wrap("keep revision", err)
	}
	return &desk.ArtifactRevision{Revision: a.Revision, Kind: a.Kind, MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256}, nil
}

// install commits next (whose Pending names a durable temporary file) and
// renames the file into place. After the commit the temporary file belongs
// to the row: if desk stops before the rename, Recover finishes it.
//
// undo (if not nil) gives back a quota reservation: only when the row was
// not committed, since after the commit the bytes are the artifact's.
func (s *Artifacts) install(ctx context.Context, root *os.Root, old, next *desk.Artifact, f *atomicfile.File, undo func()) (*desk.Artifact, error) {
	if f != nil {
		if err := s.upload(ctx, next, f.File); err != nil {
			if undo != nil {
				undo()
			}
			if next.Prev != nil && (old.Prev == nil || old.Prev.Revision != next.Prev.Revision) {
				_ = root.Remove(layout.RevisionRel(old.ID, next.Prev.Revision))
			}
			return nil, err
		}
	}
	if err := s.store.UpdateArtifact(ctx, next, old.Revision); err != nil {
		if undo != nil {
			undo()
		}
		if next.Prev != nil && (old.Prev == nil || old.Prev.Revision != next.Prev.Revision) {
			_ = root.Remove(layout.RevisionRel(old.ID, next.Prev.Revision))
		}
		return nil, err
	}
	if f != nil {
		f.Keep()
	}
	if err := s.settlePending(context.WithoutCancel(ctx), root, next); err != nil {
		return nil, err
	}
	// Only one earlier revision is kept; drop the one the update displaced.
	if old.Prev != nil && (next.Prev == nil || next.Prev.Revision != old.Prev.Revision) {
		_ = root.Remove(layout.RevisionRel(old.ID, old.Prev.Revision))
		s.dropBlob(context.WithoutCancel(ctx), old.WorkspaceID, old.ID, old.Prev)
	}
	return next, nil
}

func (s *Artifacts) Revert(ctx context.Context, sessionID, id string) (*desk.Artifact, error) {
	x, a, err := s.artifact(ctx, sessionID, id)
	if err != nil {
		return nil, err
	}
	unlock := s.locks.Lock(x.ID + "/" + a.RelPath)
	defer unlock()
	if a, err = s.store.GetArtifact(ctx, id); err != nil {
		return nil, err
	}
	if a.Prev == nil {
		return nil, desk.Errorf(desk.ECONFLICT, "artifact %s has no previous revision to revert to", a.ID)
	}
	root, err := s.openRoot(a.WorkspaceID)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// A locked link, like an upload's temporary file: a sweep leaves it
	// alone until the row claims it; install keeps it once the row does,
	// and the deferred Abort removes it when the row never did.
	f, err := atomicfile.LinkTemp(root, layout.RevisionRel(a.ID, a.Prev.Revision), path.Dir(fileOf(a)))
	if errors.Is(err, fs.ErrNotExist) {
		// This node keeps no copy of the revision: the blob store does.
		f, err = s.fetchRevision(ctx, root, a, a.Prev)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, desk.Errorf(desk.ECONFLICT, "the bytes of revision %d of artifact %s are missing; it cannot be reverted", a.Prev.Revision, a.ID)
		}
		return nil, diskerr.Wrap("revert artifact", err)
	}
	defer f.Abort()
	next := *a
	next.Revision++
	next.Kind, next.MediaType, next.Size, next.SHA256 = a.Prev.Kind, a.Prev.MediaType, a.Prev.Size, a.Prev.SHA256
	next.Prev, next.Pending, next.Missing = nil, f.Temp, false
	next.Origin, next.UpdatedAt = originOf(ctx, x), desk.Now()
	return s.install(ctx, root, a, &next, f, nil)
}

func (s *Artifacts) Delete(ctx context.Context, sessionID, id string) error {
	x, a, err := s.artifact(ctx, sessionID, id)
	if err != nil {
		return err
	}
	unlock := s.locks.Lock(x.ID + "/" + a.RelPath)
	defer unlock()
	// Hide the row first, then remove bytes, then the row: a crash in
	// between leaves a row marked deleting that Recover finishes, never a
	// file without a row that could be mistaken for new work.
	if err := s.store.MarkArtifactDeleting(ctx, a.ID); err != nil {
		return err
	}
	return s.finishDelete(ctx, a)
}

func (s *Artifacts) finishDelete(ctx context.Context, a *desk.Artifact) error {
	root, err := s.openRoot(a.WorkspaceID)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Remove(fileOf(a)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete artifact %s: %w", a.ID, err)
	}
	if a.Pending != "" {
		_ = root.Remove(a.Pending)
	}
	if err := root.RemoveAll(layout.RevisionDirRel(a.ID)); err != nil {
		return fmt.Errorf("delete revisions of %s: %w", a.ID, err)
	}
	if err := s.deleteBlobs(ctx, a); err != nil {
		return err
	}
	if err := s.store.DeleteArtifact(ctx, a.ID); err != nil && !desk.IsCode(err, desk.ENOTFOUND) {
		return err
	}
	return nil
}

// Recover finishes what a crash interrupted: pending installs are renamed
// into place and deletes marked in the store are completed. It is
// idempotent, and runs at startup before any request is served.
func (s *Artifacts) Recover(ctx context.Context) error {
	pending, err := s.store.ListPendingArtifacts(ctx)
	if err != nil {
		return err
	}
	for _, a := range pending {
		if err := s.finishPending(ctx, a); err != nil {
			return err
		}
	}
	deleting, err := s.store.ListDeletingArtifacts(ctx)
	if err != nil {
		return err
	}
	for _, a := range deleting {
		if err := s.finishDelete(ctx, a); err != nil {
			return err
		}
	}
	return nil
}

func (s *Artifacts) finishPending(ctx context.Context, a *desk.Artifact) error {
	root, err := s.openRoot(a.WorkspaceID)
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.Lstat(a.Pending); err == nil {
		if err := atomicfile.Install(root, a.Pending, fileOf(a)); err != nil {
			return fmt.Errorf("recover artifact %s: %w", a.ID, err)
		}
	}
	return s.store.SetArtifactPending(ctx, a.ID, "")
}
