package blobs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/blobs"
	"github.com/desk-runtime/desk/blobs/blobstest"
)

func TestLocalConformance(t *testing.T) {
	t.Parallel()
	blobstest.Run(t, func(t *testing.T) blobs.Blobs {
		b := blobs.NewLocal(t.TempDir())
		open(t, b)
		return b
	})
}

// S3URL is the test bucket's URL from DESK_TEST_S3 (set by .ci/run, which
// starts versitygw on loopback) with a fresh prefix, so parallel tests and
// earlier runs never see each other's objects.
func S3URL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("DESK_TEST_S3")
	if u == "" {
		t.Skip("DESK_TEST_S3 is not set: no S3 server to test against (.ci/run starts versitygw and sets it)")
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "prefix=test-" + hex.EncodeToString(rnd[:]) + "/"
}

func TestS3Conformance(t *testing.T) {
	t.Parallel()
	S3URL(t)
	blobstest.Run(t, func(t *testing.T) blobs.Blobs {
		b, err := blobs.New(S3URL(t), "")
		if err != nil {
			t.Fatal(err)
		}
		open(t, b)
		return b
	})
}

func open(t *testing.T, b blobs.Blobs) {
	t.Helper()
	if err := b.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(context.Background()); err != nil {
			t.Error(err)
		}
		if err := b.Close(context.Background()); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

func TestNewRefusesBadURLs(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"gs://bucket":                `unknown scheme "gs"`,
		"azblob://c":                 `unknown scheme "azblob"`,
		"s3://":                      "names no bucket",
		"s3://AKIA:secret@bucket":    "REDACTED",
		"file://relative/dir":        "not host",
		"file:///tmp/x?create_dir=1": "no query parameters",
		"/just/a/path":               "no scheme",
		"s3://b?prefix=../escape/":   "prefix",
		"s3://b?prefix=no-slash":     "prefix",
		"://broken":                  "does not parse",
		"s3://bucket%zz?endpoint=x":  "does not parse",
		"file:///tmp/%00nul":         "", // any error
	} {
		_, err := blobs.New(raw, "/default")
		if err == nil {
			t.Errorf("New(%q) accepted", raw)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q) = %v, want it to say %q", raw, err, want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("New(%q) error echoes the secret: %v", raw, err)
		}
	}
	b, err := blobs.New("", "/var/lib/desk/blobs")
	if err != nil || b.String() != "file:///var/lib/desk/blobs" {
		t.Errorf("default = %v, %v", b, err)
	}
}

// TestS3OpenFailsOnMissingBucket: a wrong bucket fails Open (startup),
// naming it, not the first upload.
func TestS3OpenFailsOnMissingBucket(t *testing.T) {
	t.Parallel()
	u := S3URL(t)
	u = strings.Replace(u, "s3://", "s3://no-such-bucket-", 1)
	b, err := blobs.New(u, "")
	if err != nil {
		t.Fatal(err)
	}
	err = b.Open(context.Background())
	if err == nil {
		b.Close(context.Background())
		t.Fatal("Open of a missing bucket succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-bucket-") {
		t.Errorf("Open error does not name the bucket: %v", err)
	}
}

// TestLocalSymlinkEscape: a symlink planted in the store's directory does
// not lead a read or write outside it.
func TestLocalSymlinkEscape(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := blobs.NewLocal(dir)
	open(t, b)
	if err := os.Symlink(outside, filepath.Join(dir, "objects", "link")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := b.Get(ctx, "link/secret"); err == nil {
		t.Error("Get through a symlink out of the store succeeded")
	}
	if _, err := b.Put(ctx, "link/planted", strings.NewReader("x")); err == nil {
		t.Error("Put through a symlink out of the store succeeded")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); err == nil {
		t.Error("a file appeared outside the store")
	}
}

// TestLocalSweepKeepsFreshTemps: reopening a store (a peer restarting on
// a shared directory) leaves another writer's in-flight temporary file.
func TestLocalSweepKeepsFreshTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := blobs.NewLocal(dir)
	open(t, b)
	inflight := filepath.Join(dir, "tmp", "inflight.tmp")
	if err := os.WriteFile(inflight, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	peer := blobs.NewLocal(dir)
	open(t, peer)
	if _, err := os.Stat(inflight); err != nil {
		t.Fatalf("a peer's Open swept an in-flight temporary file: %v", err)
	}
}
