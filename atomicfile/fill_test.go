package atomicfile

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestFillCopiesAndHashes(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for _, size := range []int{0, 1, fillChunk - 1, fillChunk, 3*fillChunk + 17, 20 << 20} {
		src := make([]byte, size)
		rand.Read(src)
		f, err := Create(root, "f.bin")
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		// A reader that returns odd-sized pieces, like a network.
		n, err := f.Fill(io.LimitReader(&oddReader{r: bytes.NewReader(src)}, int64(size)), h)
		if err != nil || n != int64(size) {
			t.Fatalf("size %d: n=%d err=%v", size, n, err)
		}
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "f.bin"))
		want := sha256.Sum256(src)
		if !bytes.Equal(got, src) || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("size %d: content or hash differs", size)
		}
	}
}

type oddReader struct {
	r *bytes.Reader
	i int
}

func (o *oddReader) Read(p []byte) (int, error) {
	o.i++
	if n := 1 + (o.i*7919)%70000; len(p) > n {
		p = p[:n]
	}
	return o.r.Read(p)
}

func TestFillReportsReadAndWriteErrorsApart(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	boom := errors.New("client went away")
	f, _ := Create(root, "r.bin")
	_, err := f.Fill(io.MultiReader(bytes.NewReader(make([]byte, 3<<20)), errReader{boom}), nil)
	var we *WriteError
	if !errors.Is(err, boom) || errors.As(err, &we) {
		t.Fatalf("read error = %v", err)
	}
	f.Abort()

	g, _ := Create(root, "w.bin")
	g.File.Close() // every write now fails
	_, err = g.Fill(bytes.NewReader(make([]byte, 2<<20)), nil)
	if !errors.As(err, &we) {
		t.Fatalf("write error = %v, want *WriteError", err)
	}
	g.Abort()
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
