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
	"regexp"
	"strconv"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
	"github.com/desk-runtime/desk/blobs"
	"github.com/desk-runtime/desk/internal/diskerr"
	"github.com/desk-runtime/desk/layout"
)

// This file keeps artifact bytes in the blob store (ArtifactOptions.Blobs).
// The blob store is the truth: every revision's bytes are put there before
// the row naming them commits, and reads stream from it. The session's
// artifact directory on the node's disk is a working copy: what sandboxed
// commands and runtimes see as /artifacts, filled from the blob store
// before a command (Materialize) and written back after it (IndexNew).

// idPattern is the shape of every desk id (NewID): a lowercase prefix, an
// underscore and 26 Crockford base32 characters.
var idPattern = regexp.MustCompile(`^[a-z]{1,8}_[0-9A-HJKMNP-TV-Z]{26}$`)

var shaPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ArtifactKey is the blob key of one revision of an artifact:
//
//	ws/<workspace id>/artifacts/<artifact id>/<revision>-<sha256>
//
// The artifact's name never enters the key, so no name (with "..", "/",
// NUL, or any length) can move bytes out of the workspace's prefix or onto
// another artifact's. Every part is checked against its exact shape, so a
// row holding a hostile id cannot either. The revision makes the key
// unique per committed write: two nodes racing to update one artifact put
// different keys, and the one whose row loses the compare-and-set never
// overwrites the winner's bytes.
func ArtifactKey(workspaceID, artifactID string, revision int64, sha string) (string, error) {
	switch {
	case !idPattern.MatchString(workspaceID) || !strings.HasPrefix(workspaceID, desk.PrefixWorkspace+"_"):
		return "", fmt.Errorf("artifact blob key: %q is not a workspace id", workspaceID)
	case !idPattern.MatchString(artifactID) || !strings.HasPrefix(artifactID, desk.PrefixArtifact+"_"):
		return "", fmt.Errorf("artifact blob key: %q is not an artifact id", artifactID)
	case revision < 1:
		return "", fmt.Errorf("artifact blob key: revision %d", revision)
	case !shaPattern.MatchString(sha):
		return "", fmt.Errorf("artifact blob key: %q is not a SHA-256", sha)
	}
	return artifactPrefix(workspaceID, artifactID) + strconv.FormatInt(revision, 10) + "-" + sha, nil
}

func artifactPrefix(workspaceID, artifactID string) string {
	return "ws/" + workspaceID + "/artifacts/" + artifactID + "/"
}

// upload puts the bytes of a's current revision, read from f, under its
// key. It runs before the row commits: a failed upload leaves no row, and
// a retried one writes a new key. The digest the store computed must be
// the row's, so bytes changed under the writer are refused, not recorded.
func (s *Artifacts) upload(ctx context.Context, a *desk.Artifact, f *os.File) error {
	if s.opts.Blobs == nil {
		return nil
	}
	key, err := ArtifactKey(a.WorkspaceID, a.ID, a.Revision, a.SHA256)
	if err != nil {
		return err
	}
	info, err := s.opts.Blobs.Put(ctx, key, io.NewSectionReader(f, 0, a.Size))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return desk.Errorf(desk.BodyCode(cerr), "store the bytes of %s: %v", a.Name, cerr)
		}
		return fmt.Errorf("store the bytes of %s in %s: %w", a.Name, s.opts.Blobs, err)
	}
	if info.Size != a.Size || (info.SHA256 != "" && info.SHA256 != a.SHA256) {
		_ = s.opts.Blobs.Delete(context.WithoutCancel(ctx), key)
		return desk.Errorf(desk.ECONFLICT, "%s changed while it was being stored; retry", a.Name)
	}
	return nil
}

// openBlob opens the bytes of a's current revision from the blob store.
// The bytes of a local store come back as the *os.File itself, so
// http.ServeContent still hands them to sendfile. blobs.ErrNotFound means
// the blob store does not hold them (an artifact made before desk kept
// bytes there).
func (s *Artifacts) openBlob(ctx context.Context, a *desk.Artifact) (io.ReadSeekCloser, error) {
	key, err := ArtifactKey(a.WorkspaceID, a.ID, a.Revision, a.SHA256)
	if err != nil {
		return nil, err
	}
	r, err := s.opts.Blobs.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if f, ok := r.(interface{ OSFile() *os.File }); ok {
		return f.OSFile(), nil
	}
	return r, nil
}

// BytesPresent reports whether a's current bytes are kept anywhere this
// node can read them: in the blob store or in its working copy. The
// collector asks it before marking an artifact missing, so a node that
// never held another node's file does not mark that artifact missing.
func (s *Artifacts) BytesPresent(ctx context.Context, a *desk.Artifact) (bool, error) {
	if s.opts.Blobs == nil {
		return false, nil
	}
	key, err := ArtifactKey(a.WorkspaceID, a.ID, a.Revision, a.SHA256)
	if err != nil {
		return false, nil
	}
	if _, err := s.opts.Blobs.Stat(ctx, key); err != nil {
		if errors.Is(err, blobs.ErrNotFound) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// deleteBlobs removes every kept revision of an artifact. A peer's
// upload racing the delete writes under the same prefix only for a row
// that is already marked deleting, whose commit then fails.
func (s *Artifacts) deleteBlobs(ctx context.Context, a *desk.Artifact) error {
	if s.opts.Blobs == nil {
		return nil
	}
	if !idPattern.MatchString(a.WorkspaceID) || !idPattern.MatchString(a.ID) {
		return fmt.Errorf("delete artifact %q: not an id", a.ID)
	}
	var keys []string
	if err := s.opts.Blobs.List(ctx, artifactPrefix(a.WorkspaceID, a.ID), func(i blobs.Info) error {
		keys = append(keys, i.Key)
		return nil
	}); err != nil {
		return fmt.Errorf("delete the bytes of %s: %w", a.ID, err)
	}
	for _, k := range keys {
		if err := s.opts.Blobs.Delete(ctx, k); err != nil {
			return fmt.Errorf("delete the bytes of %s: %w", a.ID, err)
		}
	}
	return nil
}

// dropBlob removes the bytes of one revision no row names any more.
func (s *Artifacts) dropBlob(ctx context.Context, ws, id string, r *desk.ArtifactRevision) {
	if s.opts.Blobs == nil || r == nil {
		return
	}
	if key, err := ArtifactKey(ws, id, r.Revision, r.SHA256); err == nil {
		_ = s.opts.Blobs.Delete(ctx, key)
	}
}

// fetchRevision copies the blob of revision r of a into a new temporary
// file in the session's directory, for a revert whose local revision copy
// is not on this node.
func (s *Artifacts) fetchRevision(ctx context.Context, root *os.Root, a *desk.Artifact, r *desk.ArtifactRevision) (*atomicfile.File, error) {
	if s.opts.Blobs == nil {
		return nil, fs.ErrNotExist
	}
	key, err := ArtifactKey(a.WorkspaceID, a.ID, r.Revision, r.SHA256)
	if err != nil {
		return nil, err
	}
	return s.fetch(ctx, root, key, fileOf(a))
}

// fetch streams key into a temporary file beside target; the caller
// Commits, Keeps or Aborts it.
func (s *Artifacts) fetch(ctx context.Context, root *os.Root, key, target string) (*atomicfile.File, error) {
	rd, err := s.opts.Blobs.Get(ctx, key)
	if err != nil {
		if errors.Is(err, blobs.ErrNotFound) {
			return nil, fs.ErrNotExist
		}
		return nil, err
	}
	defer rd.Close()
	f, err := atomicfile.Create(root, target)
	if err != nil {
		return nil, diskerr.Wrap("materialise artifact", err)
	}
	if _, err := f.Fill(rd, sha256.New()); err != nil {
		f.Abort()
		return nil, diskerr.Wrap("materialise artifact", err)
	}
	return f, nil
}

// Materialize fills the session's working copy with the bytes of every
// artifact whose file is not on this node's disk, from the blob store,
// before a command or a runtime turn reads /artifacts. A file that is
// there is left alone: it is this node's copy, possibly changed by a
// command, and IndexNew writes such changes back. Each file gets the
// row's update time as its modification time, so IndexNew sees it as
// unchanged.
func (s *Artifacts) Materialize(ctx context.Context, sessionID string) error {
	if s.opts.Blobs == nil {
		return nil
	}
	x, err := visibleSession(ctx, s.store, sessionID)
	if err != nil {
		return err
	}
	arts, err := s.store.ListArtifacts(ctx, x.ID)
	if err != nil {
		return err
	}
	root, err := s.openRoot(x.WorkspaceID)
	if err != nil {
		return err
	}
	defer root.Close()
	dir := layout.SessionRel(x.Actor, x.ID)
	// The session was made on another node: this node has no folder for
	// it yet, and the sandbox mounts it as /artifacts.
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return diskerr.Wrap("materialise artifacts", err)
	}
	for _, a := range arts {
		if a.Pending != "" || a.Deleting {
			continue
		}
		if err := s.materialize(ctx, root, dir, a); err != nil {
			return err
		}
	}
	return nil
}

func (s *Artifacts) materialize(ctx context.Context, root *os.Root, dir string, a *desk.Artifact) error {
	unlock := s.locks.Lock(a.SessionID + "/" + a.RelPath)
	defer unlock()
	target := path.Join(dir, a.RelPath)
	if _, err := root.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := noLinks(root, dir, a.RelPath); err != nil {
		return nil // never write through a link someone planted
	}
	key, err := ArtifactKey(a.WorkspaceID, a.ID, a.Revision, a.SHA256)
	if err != nil {
		return nil
	}
	f, err := s.fetch(ctx, root, key, target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nowhere to be had; the collector marks it missing
	}
	if err != nil {
		return fmt.Errorf("materialise %s: %w", a.RelPath, err)
	}
	_ = os.Chtimes(f.Name(), a.UpdatedAt, a.UpdatedAt)
	if err := f.Commit(); err != nil {
		return diskerr.Wrap("materialise artifact", err)
	}
	return nil
}

// writeBack records a change a command made to an artifact's file in the
// working copy as the artifact's next revision: the bytes go to the blob
// store, then the row. A file whose size and modification time still
// match the row is not read; one whose bytes hash to the row's is only
// touched back. The previous revision's bytes stay in the blob store for
// a revert.
func (s *Artifacts) writeBack(ctx context.Context, root *os.Root, x *desk.Session, a *desk.Artifact) error {
	unlock := s.locks.Lock(x.ID + "/" + a.RelPath)
	defer unlock()
	a, err := s.store.GetArtifact(ctx, a.ID)
	if err != nil || a.Pending != "" || a.Deleting || a.Immutable {
		return nil
	}
	target := fileOf(a)
	lfi, err := root.Lstat(target)
	if err != nil || !lfi.Mode().IsRegular() {
		return nil
	}
	if lfi.Size() == a.Size && !lfi.ModTime().After(a.UpdatedAt) {
		return nil
	}
	f, err := root.Open(target)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !os.SameFile(lfi, fi) {
		return nil
	}
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, fi.Size()))
	if err != nil {
		return fmt.Errorf("write back %s: %w", a.RelPath, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if sum == a.SHA256 && n == a.Size {
		_ = root.Chtimes(target, a.UpdatedAt, a.UpdatedAt)
		return nil
	}
	next := *a
	next.Revision++
	next.Size, next.SHA256, next.Missing = n, sum, false
	next.Prev = &desk.ArtifactRevision{Revision: a.Revision, Kind: a.Kind, MediaType: a.MediaType, Size: a.Size, SHA256: a.SHA256}
	next.Origin, next.UpdatedAt = originOf(ctx, x), desk.Now()
	if _, ok := desk.OriginFrom(ctx); !ok {
		next.Origin = foundOrigin(x)
	}
	if err := s.upload(ctx, &next, f); err != nil {
		return err
	}
	if err := s.store.UpdateArtifact(ctx, &next, a.Revision); err != nil {
		if desk.IsCode(err, desk.ECONFLICT) || desk.IsCode(err, desk.ENOTFOUND) {
			return nil // changed meanwhile: that change decides
		}
		return err
	}
	// The kept local revision (if any) is not the previous revision any
	// more; the blob store has it.
	_ = root.RemoveAll(layout.RevisionDirRel(a.ID))
	if a.Prev != nil {
		s.dropBlob(ctx, a.WorkspaceID, a.ID, a.Prev)
	}
	return nil
}
