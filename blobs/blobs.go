// Package blobs owns where file bytes live: a Blobs is a flat store of
// immutable-once-written objects under string keys, either a directory on
// the node's own disk (the default) or any S3-compatible bucket, chosen by
// a URL (--blobs / DESK_BLOBS). Rows in the database name keys; the bytes
// are written first and the row commits after, so no row ever names bytes
// that are not there and nothing a peer could sweep is left half written.
package blobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrNotFound is returned (wrapped) when a key holds no object.
var ErrNotFound = errors.New("blob not found")

// Info describes a stored object.
type Info struct {
	Key     string
	Size    int64
	ModTime time.Time
	// SHA256 is the hex digest of the bytes, filled in by Put (which
	// hashes what it streams); Stat and List leave it empty because S3
	// does not keep it for multipart objects.
	SHA256 string
}

// Reader reads one object; Seek lets http.ServeContent answer ranges and
// conditional requests without reading the whole object.
type Reader interface {
	io.ReadSeekCloser
	Size() int64
	ModTime() time.Time
}

// Blobs stores bytes under keys. Keys are desk-made paths of "/"-separated
// segments (see ValidKey); every method refuses any other key before it
// touches storage, so a key can never leave the store's directory or
// bucket prefix.
type Blobs interface {
	// Open connects to the store (creating a local directory, checking a
	// bucket is reachable); Close releases it and is idempotent.
	Open(ctx context.Context) error
	Close(ctx context.Context) error

	// Put streams r into key. The object becomes visible only whole: a
	// failed or cancelled Put leaves the key as it was (absent, or its
	// previous bytes). Put never holds the whole object in memory.
	Put(ctx context.Context, key string, r io.Reader) (Info, error)
	// Get opens key for reading.
	Get(ctx context.Context, key string) (Reader, error)
	// GetRange reads length bytes from offset (length < 0: to the end).
	GetRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Stat describes key.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes key; deleting an absent key succeeds, so a retried
	// or repeated delete (two nodes' collectors) is harmless.
	Delete(ctx context.Context, key string) error
	// List calls fn for each object whose key starts with prefix, in key
	// order; prefix "" lists everything.
	List(ctx context.Context, prefix string, fn func(Info) error) error

	// String names the store for logs, without credentials.
	String() string
}

// MaxKeyLen is S3's limit on key length in bytes.
const MaxKeyLen = 1024

// ValidKey reports why key is not a key desk may use, or nil. A key is
// 1 to MaxKeyLen bytes of UTF-8 without control characters or
// backslashes, made of "/"-separated segments none of which is empty,
// "." or "..". That keeps a key a plain relative path under the local
// directory and the same object name on every S3 implementation (some
// normalise "a//b" or "a/../b").
func ValidKey(key string) error {
	switch {
	case key == "":
		return errors.New("blob key is empty")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("blob key is %d bytes, over the %d-byte limit", len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("blob key %q is not valid UTF-8", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("blob key %q holds a control character or backslash", key)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("blob key %q has an empty segment (leading, trailing or doubled /)", key)
		case ".", "..":
			return fmt.Errorf("blob key %q has a %q segment", key, seg)
		}
	}
	return nil
}

// validPrefix accepts "" or a prefix that is a valid key or ends in "/"
// after a valid key.
func validPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("blob prefix: %w", err)
	}
	return nil
}

// New returns the store a --blobs URL names, unopened. An empty raw URL
// means the default, the directory dflt on local disk. Accepted forms:
//
//	file:///abs/dir   a local directory
//	s3://BUCKET?endpoint=http://127.0.0.1:9000&use_path_style=true&region=us-east-1
//	                  any S3-compatible bucket, in the Go CDK URL form
//	                  (optionally &prefix=some/prefix/); credentials come
//	                  from the AWS SDK's standard environment variables
//
// A URL that does not parse, names another scheme, or lacks its bucket or
// directory is refused with an error that names it.
func New(raw, dflt string) (Blobs, error) {
	if raw == "" {
		if dflt == "" {
			return nil, errors.New("blobs: no URL and no default directory")
		}
		return NewLocal(dflt), nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("blobs URL %q does not parse: %v", redact(raw), err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, fmt.Errorf("blobs URL %q: a file URL names a local directory (file:///abs/dir), not host %q", raw, u.Host)
		}
		if strings.ContainsRune(u.Path, 0) {
			return nil, fmt.Errorf("blobs URL %q: the directory holds a NUL byte", raw)
		}
		if u.Path == "" || !filepath.IsAbs(u.Path) {
			return nil, fmt.Errorf("blobs URL %q: want an absolute directory, as in file:///var/lib/desk/blobs", raw)
		}
		if len(u.Query()) > 0 {
			return nil, fmt.Errorf("blobs URL %q: a file URL takes no query parameters", raw)
		}
		return NewLocal(filepath.Clean(u.Path)), nil
	case "s3":
		if u.Host == "" {
			return nil, fmt.Errorf("blobs URL %q names no bucket (want s3://BUCKET?...)", redact(raw))
		}
		if u.User != nil {
			return nil, fmt.Errorf("blobs URL %q: put credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, not in the URL", redact(raw))
		}
		if p := u.Query().Get("prefix"); p != "" {
			if err := validPrefix(p); err != nil || !strings.HasSuffix(p, "/") {
				return nil, fmt.Errorf("blobs URL %q: prefix %q must be key segments ending in /", raw, p)
			}
		}
		return newS3(u), nil
	case "":
		return nil, fmt.Errorf("blobs URL %q has no scheme (want file:///dir or s3://bucket?...)", redact(raw))
	default:
		return nil, fmt.Errorf("blobs URL %q: unknown scheme %q (want file or s3)", redact(raw), u.Scheme)
	}
}

// redact drops a userinfo part so an error never echoes a secret.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if i := strings.Index(raw, "@"); i >= 0 && strings.Contains(raw[:i], "://") {
			return raw[:strings.Index(raw, "://")+3] + "REDACTED@" + raw[i+1:]
		}
		return raw
	}
	u.User = url.User("REDACTED")
	return u.String()
}
