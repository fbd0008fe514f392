package blobs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"time"
)

// Local keeps objects as files in a directory on the node's disk:
// DIR/objects/KEY, written as DIR/tmp/RANDOM.tmp, synced, and renamed into
// place, so an object is there whole or not at all after a crash. Every
// access goes through an os.Root on DIR, which refuses a path that would
// resolve outside it even through a symlink someone planted.
type Local struct {
	dir string

	mu   sync.Mutex
	root *os.Root
}

// staleTemp is how old an untouched temporary file must be before Open
// removes it. A writer in progress rewrites its file's mtime with every
// write, so only files abandoned by a crash get this old; the sweep never
// takes a file another process sharing the directory is still writing,
// which is the bug a sweep of "every temporary file at startup" had.
const staleTemp = 24 * time.Hour

// NewLocal returns a store over dir, unopened.
func NewLocal(dir string) *Local { return &Local{dir: dir} }

func (l *Local) String() string { return "file://" + l.dir }

// Open creates the directory if need be and removes abandoned temporary
// files.
func (l *Local) Open(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.root != nil {
		return nil
	}
	for _, d := range []string{l.dir, l.dir + "/objects", l.dir + "/tmp"} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("blobs: create %s: %w", d, err)
		}
	}
	root, err := os.OpenRoot(l.dir)
	if err != nil {
		return fmt.Errorf("blobs: open %s: %w", l.dir, err)
	}
	l.root = root
	l.sweepTemps()
	return nil
}

func (l *Local) sweepTemps() {
	ents, err := fs.ReadDir(l.root.FS(), "tmp")
	if err != nil {
		return
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleTemp {
			continue
		}
		_ = l.root.Remove("tmp/" + e.Name())
	}
}

// Close releases the directory; it is idempotent.
func (l *Local) Close(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.root == nil {
		return nil
	}
	err := l.root.Close()
	l.root = nil
	return err
}

func (l *Local) get() (*os.Root, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.root == nil {
		return nil, errors.New("blobs: local store is not open")
	}
	return l.root, nil
}

// ctxReader stops a copy when its context ends, so a cancelled Put
// returns promptly rather than when the client's body runs out.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func (l *Local) Put(ctx context.Context, key string, r io.Reader) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, err
	}
	root, err := l.get()
	if err != nil {
		return Info{}, err
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	tmp := "tmp/" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: %w", key, err)
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = root.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, r})
	if err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: after %d bytes: %w", key, n, err)
	}
	if err := f.Sync(); err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: sync: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: %w", key, err)
	}
	dst := "objects/" + key
	dir := path.Dir(dst)
	if err := root.MkdirAll(dir, 0o700); err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: %w", key, err)
	}
	if err := root.Rename(tmp, dst); err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: %w", key, err)
	}
	done = true
	// The rename is durable only once the directory is synced; Put's
	// caller commits a row naming the key right after.
	if d, err := root.Open(dir); err == nil {
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return Info{}, fmt.Errorf("blobs: put %s: sync directory: %w", key, err)
		}
	}
	st, err := root.Stat(dst)
	if err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: %w", key, err)
	}
	return Info{Key: key, Size: n, ModTime: st.ModTime(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

type localReader struct {
	*os.File
	size int64
	mod  time.Time
}

func (r localReader) Size() int64        { return r.size }
func (r localReader) ModTime() time.Time { return r.mod }

// OSFile returns the open file itself, so a caller serving it over HTTP
// keeps the kernel's sendfile path (which needs an *os.File).
func (r localReader) OSFile() *os.File { return r.File }

func (l *Local) open(key string) (*os.File, fs.FileInfo, error) {
	if err := ValidKey(key); err != nil {
		return nil, nil, err
	}
	root, err := l.get()
	if err != nil {
		return nil, nil, err
	}
	f, err := root.Open("objects/" + key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, notDirErr) {
			return nil, nil, fmt.Errorf("blobs: %s: %w", key, ErrNotFound)
		}
		return nil, nil, fmt.Errorf("blobs: %s: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("blobs: %s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		// A directory made for longer keys is not an object.
		_ = f.Close()
		return nil, nil, fmt.Errorf("blobs: %s: %w", key, ErrNotFound)
	}
	return f, st, nil
}

func (l *Local) Get(_ context.Context, key string) (Reader, error) {
	f, st, err := l.open(key)
	if err != nil {
		return nil, err
	}
	return localReader{f, st.Size(), st.ModTime()}, nil
}

type sectionCloser struct {
	io.Reader
	io.Closer
}

func (l *Local) GetRange(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("blobs: %s: negative offset %d", key, offset)
	}
	f, st, err := l.open(key)
	if err != nil {
		return nil, err
	}
	if length < 0 || offset+length > st.Size() {
		length = max(st.Size()-offset, 0)
	}
	return sectionCloser{io.NewSectionReader(f, offset, length), f}, nil
}

func (l *Local) Stat(_ context.Context, key string) (Info, error) {
	f, st, err := l.open(key)
	if err != nil {
		return Info{}, err
	}
	_ = f.Close()
	return Info{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

func (l *Local) Delete(_ context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	root, err := l.get()
	if err != nil {
		return err
	}
	st, err := root.Lstat("objects/" + key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, notDirErr) {
			return nil
		}
		return fmt.Errorf("blobs: delete %s: %w", key, err)
	}
	if st.IsDir() {
		return nil
	}
	if err := root.Remove("objects/" + key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobs: delete %s: %w", key, err)
	}
	return nil
}

func (l *Local) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if err := validPrefix(prefix); err != nil {
		return err
	}
	root, err := l.get()
	if err != nil {
		return err
	}
	// Walk the deepest directory the prefix names whole, filter the rest.
	start := "objects"
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start += "/" + prefix[:i]
	}
	err = fs.WalkDir(root.FS(), start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, notDirErr) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		key := strings.TrimPrefix(p, "objects/")
		if d.IsDir() {
			if p != start && !strings.HasPrefix(key+"/", prefix) && !strings.HasPrefix(prefix, key+"/") {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // removed while listing
		}
		return fn(Info{Key: key, Size: info.Size(), ModTime: info.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("blobs: list %q: %w", prefix, err)
	}
	return nil
}
