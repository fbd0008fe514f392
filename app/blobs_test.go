package app_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/app"
)

// TestBadBlobsURLRefused: a --blobs URL that names an unknown scheme or
// does not parse stops startup, naming it, before the home is touched.
func TestBadBlobsURLRefused(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"gs://bucket":     `unknown scheme "gs"`,
		"not a url\x7f":   "does not parse",
		"file://rel/dir":  "file:///",
		"s3://?region=us": "names no bucket",
	} {
		home := filepath.Join(t.TempDir(), "home")
		a, err := app.Open(context.Background(), app.Config{Home: home, Blobs: raw})
		if err == nil {
			a.Close(context.Background())
			t.Errorf("Open with --blobs %q succeeded", raw)
			continue
		}
		if !strings.Contains(err.Error(), "--blobs") || !strings.Contains(err.Error(), want) {
			t.Errorf("Open with --blobs %q: %v; want it to name --blobs and say %q", raw, err, want)
		}
		if _, err := os.Stat(home); err == nil {
			t.Errorf("Open with --blobs %q created the home", raw)
		}
	}
}
