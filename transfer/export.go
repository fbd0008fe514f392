package transfer

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/klauspost/pgzip"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/atomicfile"
)

// pgzip splits the stream into blocks of this size and compresses them in
// parallel, each primed with the tail of the one before. The block size,
// not the number of CPUs, decides where blocks end, so the output is the
// same on every machine.
const gzipBlock = 1 << 20

// Export writes the workspace as a tar.gz to w (admin). Refusals (no such
// workspace, not admin) happen before the first byte is written; a failure
// after that is returned and the stream is incomplete, which a reader sees
// as a truncated gzip.
func (s *Service) Export(ctx context.Context, wsID string, opts desk.ExportOptions, w io.Writer) error {
	p, ok := desk.PrincipalFrom(ctx)
	if err := requireAdmin(p, ok, "export a workspace"); err != nil {
		return err
	}
	if err := desk.RefuseManager(wsID, "exported"); err != nil {
		return err
	}
	if !desk.HasPrefix(wsID, desk.PrefixWorkspace) {
		return desk.Errorf(desk.ENOTFOUND, "workspace %q not found", wsID)
	}
	ws, err := s.workspaces.GetWorkspace(ctx, wsID)
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(s.home.Workspace(ws.ID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open workspace %s: %w", ws.ID, err)
	}
	if root != nil {
		defer root.Close()
	}

	zw, err := pgzip.NewWriterLevel(w, s.opts.Level)
	if err != nil {
		return err
	}
	if err := zw.SetConcurrency(gzipBlock, max(runtime.GOMAXPROCS(0), 2)); err != nil {
		return err
	}
	// A fixed header: no name, no time, "unknown" OS.
	zw.Name, zw.Comment, zw.ModTime, zw.OS = "", "", time.Unix(0, 0), 255
	finished := false
	defer func() {
		if !finished {
			// Reset stops the compressor's goroutines, which a failed
			// Close would leave waiting.
			zw.Reset(io.Discard)
		}
	}()
	e := &exporter{ctx: ctx, tw: tar.NewWriter(zw), mtime: ws.CreatedAt.Truncate(time.Second), links: map[fileID]string{}}

	m := Manifest{Format: Format, Version: Version, WorkspaceID: ws.ID, SkipWorkspace: opts.SkipWorkspace, Tables: s.store.TransferTables()}
	for _, t := range trees {
		if !(t.actors && opts.SkipWorkspace) {
			m.Trees = append(m.Trees, t.rel)
		}
	}
	mb, _ := json.MarshalIndent(m, "", "  ")
	if err := e.bytes(manifestName, append(mb, '\n')); err != nil {
		return err
	}
	for _, table := range m.Tables {
		if err := e.rows(s.store, ws.ID, table); err != nil {
			return err
		}
	}
	if root != nil {
		for _, t := range m.Trees {
			if err := e.tree(root, t); err != nil {
				return err
			}
		}
	}
	if err := e.tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	finished = true
	return nil
}

// fileID identifies a file across its hard links.
type fileID struct{ dev, ino uint64 }

type exporter struct {
	ctx   context.Context
	tw    *tar.Writer
	mtime time.Time
	links map[fileID]string // first name of each multiply-linked file written
	// skipped counts what an export leaves out because it cannot carry
	// it: special files and links that lead out of the workspace.
	skipped int
}

// header returns a normalized header: no owner, one time for everything,
// and only the execute bit of the mode kept.
func (e *exporter) header(name string, typ byte, mode fs.FileMode) *tar.Header {
	h := &tar.Header{Name: name, Typeflag: typ, ModTime: e.mtime, Mode: 0o644}
	switch {
	case typ == tar.TypeDir:
		h.Mode = 0o755
	case typ == tar.TypeSymlink:
		h.Mode = 0o777
	case mode&0o111 != 0:
		h.Mode = 0o755
	}
	return h
}

func (e *exporter) bytes(name string, b []byte) error {
	h := e.header(name, tar.TypeReg, 0)
	h.Size = int64(len(b))
	if err := e.tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := e.tw.Write(b)
	return err
}

// rows writes one table as NDJSON chunks meta/<table>.<n>.ndjson, each at
// most chunkBytes (a single larger row gets a chunk of its own). Keys are
// sorted (encoding/json sorts map keys), so equal rows encode equally.
func (e *exporter) rows(store desk.TransferStore, ws, table string) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	n := 0
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		n++
		err := e.bytes(chunkName(table, n), buf.Bytes())
		buf.Reset()
		return err
	}
	err := store.ExportRows(e.ctx, ws, table, func(r desk.Row) error {
		r, err := exportRow(table, r)
		if err != nil {
			return err
		}
		mark := buf.Len()
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("encode a row of %s: %w", table, err)
		}
		if buf.Len() > chunkBytes && mark > 0 {
			// The row that overflowed starts the next chunk.
			row := slices.Clone(buf.Bytes()[mark:])
			buf.Truncate(mark)
			if err := flush(); err != nil {
				return err
			}
			buf.Write(row)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

func chunkName(table string, n int) string {
	return fmt.Sprintf("%s/%s.%06d.ndjson", metaDir, table, n)
}

// tree writes one exported directory, if the workspace has it.
func (e *exporter) tree(root *os.Root, rel string) error {
	fi, err := root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		e.skipped++
		return nil
	}
	sub, err := root.OpenRoot(rel)
	if err != nil {
		return err
	}
	defer sub.Close()
	if err := e.tw.WriteHeader(e.header(rel+"/", tar.TypeDir, 0)); err != nil {
		return err
	}
	return e.dir(sub, rel)
}

// dir writes a directory's entries in path order, each subdirectory
// immediately followed by its own entries. Each directory is opened as an
// os.Root relative to its parent's, so nothing is resolved twice and no
// link is followed.
func (e *exporter) dir(r *os.Root, rel string) error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	f, err := r.Open(".")
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for i, de := range ents {
		ents[i] = nil
		name := de.Name()
		if atomicfile.IsTemp(name) {
			continue
		}
		fi, err := de.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		full := rel + "/" + name
		switch {
		case fi.IsDir():
			if err := e.tw.WriteHeader(e.header(full+"/", tar.TypeDir, 0)); err != nil {
				return err
			}
			child, err := r.OpenRoot(name)
			if err != nil {
				return err
			}
			err = e.dir(child, full)
			child.Close()
			if err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if err := e.file(r, name, full, fi); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := r.Readlink(name)
			if err != nil || !linkInside(full, target) {
				e.skipped++
				continue
			}
			h := e.header(full, tar.TypeSymlink, 0)
			h.Linkname = target
			if err := e.tw.WriteHeader(h); err != nil {
				return err
			}
		default:
			e.skipped++
		}
	}
	return nil
}

// file writes a regular file, or a hard link to the name it was first
// written under.
func (e *exporter) file(r *os.Root, name, full string, lfi fs.FileInfo) error {
	id, multi := identity(lfi)
	if multi {
		if first, ok := e.links[id]; ok {
			h := e.header(full, tar.TypeLink, 0)
			h.Linkname = first
			return e.tw.WriteHeader(h)
		}
	}
	f, err := r.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		e.skipped++
		return nil
	}
	if multi {
		e.links[id] = full
	}
	h := e.header(full, tar.TypeReg, fi.Mode())
	h.Size = fi.Size()
	if err := e.tw.WriteHeader(h); err != nil {
		return err
	}
	// The header promised Size bytes: a file that shrank meanwhile makes
	// the export fail rather than carry made-up bytes.
	if _, err := io.CopyN(e.tw, f, h.Size); err != nil {
		return fmt.Errorf("export %s: %w (the file changed while it was exported)", full, err)
	}
	return nil
}

// linkInside reports whether a symbolic link at name (relative to the
// workspace directory) with the given target stays inside the workspace.
func linkInside(name, target string) bool {
	if target == "" || path.IsAbs(target) || strings.ContainsRune(target, 0) {
		return false
	}
	p := path.Clean(path.Join(path.Dir(name), target))
	return p != ".." && !strings.HasPrefix(p, "../")
}
