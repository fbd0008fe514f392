package atomicfile

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk/internal/testwait"
)

func TestFillCopiesAndHashes(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for _, size := range []int{0, 1, smallFill - 1, smallFill, smallFill + 1, fillChunk - 1, fillChunk, 3*fillChunk + 17, 20 << 20} {
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

// TestFillBoundsRings: while every ring is taken, a large body waits for
// one, and a small body (which needs none) is written at once.
func TestFillBoundsRings(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	for range maxRings {
		rings <- struct{}{}
	}
	released := false
	defer func() {
		if !released {
			for range maxRings {
				<-rings
			}
		}
	}()
	small, err := Create(root, "small")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := small.Fill(bytes.NewReader(make([]byte, 4096)), nil); n != 4096 || err != nil {
		t.Fatalf("a small fill with every ring taken: %d, %v", n, err)
	}
	big, err := Create(root, "big")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := big.Fill(bytes.NewReader(make([]byte, 2*smallFill)), nil)
		done <- err
	}()
	testwait.Never(t, 50*time.Millisecond, func() bool { return len(done) > 0 }, "a large fill finished while every ring was taken")
	<-rings
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range maxRings - 1 {
		<-rings
	}
	released = true
}

// TestFillSmallReadError: a read error within the first buffer is
// returned with what was read before it, which was written.
func TestFillSmallReadError(t *testing.T) {
	dir := t.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	f, err := Create(root, "f")
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("connection reset")
	n, err := f.Fill(io.MultiReader(bytes.NewReader([]byte("abc")), iotestErr{boom}), nil)
	if n != 3 || !errors.Is(err, boom) {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// BenchmarkFillConcurrentSmall: 32 concurrent 4 KiB fills, the shape of
// many small uploads; allocations per fill show that none takes a 1 MiB
// ring.
func BenchmarkFillConcurrentSmall(b *testing.B) {
	dir := b.TempDir()
	root, _ := os.OpenRoot(dir)
	defer root.Close()
	body := make([]byte, 4096)
	b.ReportAllocs()
	b.SetParallelism(16) // 32 goroutines on 2 cores
	var i atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f, err := Create(root, fmt.Sprintf("f%d", i.Add(1)))
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := f.Fill(bytes.NewReader(body), nil); err != nil {
				b.Error(err)
			}
			f.Abort()
		}
	})
}
