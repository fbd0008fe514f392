package blobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
)

// S3 keeps objects in an S3-compatible bucket through the Go CDK
// (gocloud.dev/blob over the AWS SDK for Go v2), which streams a Put as a
// multipart upload and aborts it when the Put fails, so a key never holds
// part of an object.
type S3 struct {
	u *url.URL

	mu sync.Mutex
	b  *blob.Bucket
}

func newS3(u *url.URL) *S3 { return &S3{u: u} }

func (s *S3) String() string {
	u := *s.u
	u.User = nil
	return u.String()
}

// Open opens the bucket and checks it answers, so a wrong endpoint,
// bucket or credential fails startup rather than the first upload.
func (s *S3) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b != nil {
		return nil
	}
	// A mux of our own with s3 only: a URL never reaches another
	// driver some dependency registered on the default mux.
	mux := new(blob.URLMux)
	mux.RegisterBucket(s3blob.Scheme, new(s3blob.URLOpener))
	b, err := mux.OpenBucket(ctx, s.u.String())
	if err != nil {
		return fmt.Errorf("blobs: open %s: %w", s, err)
	}
	ok, err := b.IsAccessible(ctx)
	if err != nil || !ok {
		_ = b.Close()
		if err == nil {
			err = errors.New("bucket does not exist")
		}
		return fmt.Errorf("blobs: bucket %s is not reachable: %w", s, err)
	}
	s.b = b
	return nil
}

func (s *S3) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b == nil {
		return nil
	}
	err := s.b.Close()
	s.b = nil
	return err
}

func (s *S3) bucket() (*blob.Bucket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b == nil {
		return nil, errors.New("blobs: s3 store is not open")
	}
	return s.b, nil
}

func notFound(key string, err error) error {
	if gcerrors.Code(err) == gcerrors.NotFound {
		return fmt.Errorf("blobs: %s: %w", key, ErrNotFound)
	}
	return fmt.Errorf("blobs: %s: %w", key, err)
}

func (s *S3) Put(ctx context.Context, key string, r io.Reader) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, err
	}
	b, err := s.bucket()
	if err != nil {
		return Info{}, err
	}
	// Cancelling the writer's context before Close is how the Go CDK
	// aborts an upload; any failure below does that.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return Info{}, notFound(key, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), ctxReader{ctx, r})
	if err != nil {
		cancel()
		_ = w.Close()
		return Info{}, fmt.Errorf("blobs: put %s: after %d bytes: %w", key, n, err)
	}
	if err := w.Close(); err != nil {
		return Info{}, fmt.Errorf("blobs: put %s: %w", key, err)
	}
	return Info{Key: key, Size: n, ModTime: time.Now(), SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

func (s *S3) Get(ctx context.Context, key string) (Reader, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	b, err := s.bucket()
	if err != nil {
		return nil, err
	}
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, notFound(key, err)
	}
	return r, nil
}

func (s *S3) GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := ValidKey(key); err != nil {
		return nil, err
	}
	if offset < 0 {
		return nil, fmt.Errorf("blobs: %s: negative offset %d", key, offset)
	}
	b, err := s.bucket()
	if err != nil {
		return nil, err
	}
	r, err := b.NewRangeReader(ctx, key, offset, length, nil)
	if err != nil {
		return nil, notFound(key, err)
	}
	return r, nil
}

func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	if err := ValidKey(key); err != nil {
		return Info{}, err
	}
	b, err := s.bucket()
	if err != nil {
		return Info{}, err
	}
	a, err := b.Attributes(ctx, key)
	if err != nil {
		return Info{}, notFound(key, err)
	}
	return Info{Key: key, Size: a.Size, ModTime: a.ModTime}, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	b, err := s.bucket()
	if err != nil {
		return err
	}
	if err := b.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return fmt.Errorf("blobs: delete %s: %w", key, err)
	}
	return nil
}

func (s *S3) List(ctx context.Context, prefix string, fn func(Info) error) error {
	if err := validPrefix(prefix); err != nil {
		return err
	}
	b, err := s.bucket()
	if err != nil {
		return err
	}
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("blobs: list %q: %w", prefix, err)
		}
		if obj.IsDir {
			continue
		}
		if err := fn(Info{Key: obj.Key, Size: obj.Size, ModTime: obj.ModTime}); err != nil {
			return err
		}
	}
}
