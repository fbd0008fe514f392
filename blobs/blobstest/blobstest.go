// Package blobstest is the conformance suite every blobs.Blobs
// implementation passes: the local directory and an S3-compatible bucket
// (versitygw in the tests) must behave the same to the code above them.
package blobstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk/blobs"
)

// Run runs the suite against the store open returns, which must be opened
// and empty (for example under a fresh bucket prefix).
func Run(t *testing.T, open func(t *testing.T) blobs.Blobs) {
	t.Helper()
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		data := []byte("hello, blobs\n")
		info, err := b.Put(ctx, "ws/a/hello.txt", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if info.Size != int64(len(data)) || info.SHA256 != hex.EncodeToString(sum[:]) || info.Key != "ws/a/hello.txt" {
			t.Fatalf("Put info = %+v", info)
		}
		if got := read(t, b, "ws/a/hello.txt"); !bytes.Equal(got, data) {
			t.Fatalf("read %q, want %q", got, data)
		}
		st, err := b.Stat(ctx, "ws/a/hello.txt")
		if err != nil || st.Size != int64(len(data)) {
			t.Fatalf("Stat = %+v, %v", st, err)
		}
		// Empty objects are objects.
		if _, err := b.Put(ctx, "ws/empty", strings.NewReader("")); err != nil {
			t.Fatal(err)
		}
		if got := read(t, b, "ws/empty"); len(got) != 0 {
			t.Fatalf("empty object read %q", got)
		}
	})

	t.Run("Overwrite", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		put(t, b, "k", "first version, longer")
		put(t, b, "k", "second")
		if got := read(t, b, "k"); string(got) != "second" {
			t.Fatalf("read %q after overwrite", got)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		if _, err := b.Get(ctx, "nope"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Get absent: %v, want ErrNotFound", err)
		}
		if _, err := b.Stat(ctx, "nope/deeper"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Stat absent: %v, want ErrNotFound", err)
		}
		if _, err := b.GetRange(ctx, "nope", 0, 1); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("GetRange absent: %v, want ErrNotFound", err)
		}
		// A "directory" made by a longer key is not an object.
		put(t, b, "dir/file", "x")
		if _, err := b.Stat(ctx, "dir"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Stat of a key's parent: %v, want ErrNotFound", err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		put(t, b, "d/x", "bytes")
		if err := b.Delete(ctx, "d/x"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Stat(ctx, "d/x"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("Stat after delete: %v", err)
		}
		// Deleting again (a retry, or a peer's collector) succeeds.
		if err := b.Delete(ctx, "d/x"); err != nil {
			t.Fatalf("second delete: %v", err)
		}
		if err := b.Delete(ctx, "never/was"); err != nil {
			t.Fatalf("delete of absent key: %v", err)
		}
	})

	t.Run("Range", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		data := []byte("0123456789abcdefghij")
		put(t, b, "r", string(data))
		for _, c := range []struct{ off, n int64 }{{0, 5}, {5, 5}, {10, -1}, {19, 1}, {15, 100}, {0, 0}} {
			rc, err := b.GetRange(ctx, "r", c.off, c.n)
			if err != nil {
				t.Fatalf("GetRange(%d,%d): %v", c.off, c.n, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			end := int64(len(data))
			if c.n >= 0 && c.off+c.n < end {
				end = c.off + c.n
			}
			if want := data[c.off:end]; !bytes.Equal(got, want) {
				t.Fatalf("GetRange(%d,%d) = %q, want %q", c.off, c.n, got, want)
			}
		}
		// Seek on a full reader, as http.ServeContent does for ranges.
		r, err := b.Get(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.Size() != int64(len(data)) {
			t.Fatalf("Size = %d", r.Size())
		}
		if end, err := r.Seek(0, io.SeekEnd); err != nil || end != int64(len(data)) {
			t.Fatalf("Seek end = %d, %v", end, err)
		}
		if _, err := r.Seek(7, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 3)
		if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "789" {
			t.Fatalf("after Seek(7) read %q, %v", buf, err)
		}
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		for _, k := range []string{"ls/a/1", "ls/a/2", "ls/ab", "ls/b/deep/3", "other/4"} {
			put(t, b, k, k)
		}
		cases := map[string][]string{
			"ls/a/": {"ls/a/1", "ls/a/2"},
			"ls/a":  {"ls/a/1", "ls/a/2", "ls/ab"},
			"ls/":   {"ls/a/1", "ls/a/2", "ls/ab", "ls/b/deep/3"},
			"":      {"ls/a/1", "ls/a/2", "ls/ab", "ls/b/deep/3", "other/4"},
			"zz/":   nil,
		}
		for prefix, want := range cases {
			var got []string
			err := b.List(ctx, prefix, func(i blobs.Info) error {
				if i.Size != int64(len(i.Key)) {
					t.Errorf("List %s: size %d", i.Key, i.Size)
				}
				got = append(got, i.Key)
				return nil
			})
			if err != nil {
				t.Fatalf("List %q: %v", prefix, err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("List %q = %v, want %v", prefix, got, want)
			}
		}
		stop := errors.New("stop")
		if err := b.List(ctx, "", func(blobs.Info) error { return stop }); !errors.Is(err, stop) {
			t.Errorf("List returned %v, want fn's error", err)
		}
	})

	t.Run("BadKeys", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		put(t, b, "inside/secret", "s")
		bad := []string{"", "/abs", "a/../../etc/passwd", "..", ".", "a/./b", "a//b", "trailing/",
			"nul\x00byte", "back\\slash", "ctl\nline", strings.Repeat("k", blobs.MaxKeyLen+1), "\xff\xfe"}
		for _, k := range bad {
			if _, err := b.Put(ctx, k, strings.NewReader("evil")); err == nil {
				t.Errorf("Put(%q) accepted", k)
			}
			if _, err := b.Get(ctx, k); err == nil || errors.Is(err, blobs.ErrNotFound) {
				t.Errorf("Get(%q) = %v, want a refusal", k, err)
			}
			if _, err := b.GetRange(ctx, k, 0, 1); err == nil || errors.Is(err, blobs.ErrNotFound) {
				t.Errorf("GetRange(%q) = %v, want a refusal", k, err)
			}
			if _, err := b.Stat(ctx, k); err == nil || errors.Is(err, blobs.ErrNotFound) {
				t.Errorf("Stat(%q) = %v, want a refusal", k, err)
			}
			if err := b.Delete(ctx, k); err == nil {
				t.Errorf("Delete(%q) accepted", k)
			}
		}
		if err := b.List(ctx, "../", func(blobs.Info) error { return nil }); err == nil {
			t.Error("List(\"../\") accepted")
		}
		// Nothing the refused calls did is visible: only the one object.
		var keys []string
		_ = b.List(ctx, "", func(i blobs.Info) error { keys = append(keys, i.Key); return nil })
		if !slices.Equal(keys, []string{"inside/secret"}) {
			t.Errorf("after refused calls the store holds %v", keys)
		}
	})

	t.Run("FailedPutLeavesNothing", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		broken := errors.New("client went away")
		r := io.MultiReader(strings.NewReader(strings.Repeat("x", 1<<16)), errReader{broken})
		if _, err := b.Put(ctx, "fresh", r); !errors.Is(err, broken) {
			t.Fatalf("Put with a failing body: %v, want the body's error", err)
		}
		if _, err := b.Stat(ctx, "fresh"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("a failed Put left an object: %v", err)
		}
		put(t, b, "kept", "old bytes")
		r = io.MultiReader(strings.NewReader("new partial"), errReader{broken})
		if _, err := b.Put(ctx, "kept", r); err == nil {
			t.Fatal("Put with a failing body succeeded")
		}
		if got := read(t, b, "kept"); string(got) != "old bytes" {
			t.Fatalf("a failed overwrite left %q", got)
		}
		// A cancelled context aborts the same way.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := b.Put(cctx, "cancelled", strings.NewReader("x")); err == nil {
			t.Fatal("Put with a cancelled context succeeded")
		}
		if _, err := b.Stat(ctx, "cancelled"); !errors.Is(err, blobs.ErrNotFound) {
			t.Fatalf("a cancelled Put left an object: %v", err)
		}
	})

	t.Run("LargeStreamed", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		// 24 MiB, larger than S3's multipart part size, produced on the fly.
		const size = 24 << 20
		want := sha256.New()
		info, err := b.Put(ctx, "big/one", io.TeeReader(io.LimitReader(pattern{}, size), want))
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != size || info.SHA256 != hex.EncodeToString(want.Sum(nil)) {
			t.Fatalf("Put info %+v", info)
		}
		r, err := b.Get(ctx, "big/one")
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.New()
		n, err := io.Copy(got, r)
		r.Close()
		if err != nil || n != size || !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
			t.Fatalf("read back %d bytes (%v), digest match %v", n, err, bytes.Equal(got.Sum(nil), want.Sum(nil)))
		}
	})

	t.Run("ConcurrentPutsSameKey", func(t *testing.T) {
		t.Parallel()
		b := open(t)
		// Two nodes writing one content-addressed key, or a retry racing
		// the original: the key ends up whole, one writer's bytes.
		const writers = 4
		values := make([]string, writers)
		for i := range values {
			values[i] = strings.Repeat(fmt.Sprint(i), 300<<10)
		}
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() { _, errs[i] = b.Put(ctx, "race", strings.NewReader(values[i])) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got := string(read(t, b, "race"))
		if !slices.Contains(values, got) {
			t.Fatalf("concurrent puts left a mix of %d bytes", len(got))
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// pattern yields a non-repeating-per-block byte stream without memory.
type pattern struct{}

func (pattern) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return len(p), nil
}

func put(t *testing.T, b blobs.Blobs, key, data string) {
	t.Helper()
	if _, err := b.Put(context.Background(), key, strings.NewReader(data)); err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
}

func read(t *testing.T, b blobs.Blobs, key string) []byte {
	t.Helper()
	r, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return data
}
