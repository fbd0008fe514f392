package fsjail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testTree is the host layout shared by the unit tests and the fuzz target:
// one session's artifacts with planted links, another session's files, a
// secret outside every mount, a checkout, two context groups, a scratch
// directory and two declared host paths (guest path = host path).
type testTree struct {
	dir    string // real (link-free) temp directory holding everything
	marker string // text that only the secret files contain
	jail   *Jail
	hostRO string // declared read-only host path, also its guest path
	hostRW string // declared read-write host path, also its guest path
	secret string // host path of the secret outside every mount
}

// buildTree lays out the tree under dir and returns a jail over it.
func buildTree(tb testing.TB, dir, marker string) *testTree {
	tb.Helper()
	// Guest paths of declared host paths are the host paths themselves,
	// so the temp directory must be spelled without links (macOS /var).
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		tb.Fatal(err)
	}
	t := &testTree{
		dir:    dir,
		marker: marker,
		hostRO: filepath.Join(dir, "hostro"),
		hostRW: filepath.Join(dir, "hostrw"),
		secret: filepath.Join(dir, "outside", "secret.txt"),
	}
	arts := filepath.Join(dir, "home", "ses_A", "artifacts")
	files := map[string]string{
		"home/ses_A/artifacts/a.txt":              "alpha",
		"home/ses_A/artifacts/immutable/lock.txt": "locked",
		"home/ses_A/artifacts/sub/b.txt":          "bravo",
		"home/ses_B/artifacts/secret.txt":         marker + " of session B",
		"outside/secret.txt":                      marker + " outside",
		"checkout/README.md":                      "# readme",
		"context/grp_01/item.md":                  "item one",
		"context/grp_02/note.md":                  "note two",
		"scratch/exe_1/tmp.txt":                   "scratchy",
		"hostro/ro.txt":                           "read only host file",
		"hostrw/rw.txt":                           "read write host file",
	}
	for rel, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	links := map[string]string{
		filepath.Join(arts, "evil_abs"):    t.secret,
		filepath.Join(arts, "evil_rel"):    "../../ses_B/artifacts/secret.txt",
		filepath.Join(arts, "evil_dir"):    "../../../outside",
		filepath.Join(arts, "ok_link"):     "sub/b.txt",
		filepath.Join(arts, "ro_link"):     "immutable",
		filepath.Join(arts, "dangling"):    "no/such/file",
		filepath.Join(arts, "loop"):        "loop",
		filepath.Join(arts, "sub/up_ok"):   "../a.txt",
		filepath.Join(t.hostRW, "escape"):  "../outside/secret.txt",
		filepath.Join(t.hostRW, "to_root"): ".",
	}
	for name, target := range links {
		if err := os.Symlink(target, name); err != nil {
			tb.Fatal(err)
		}
	}
	j, err := New([]Mount{
		{Guest: "/artifacts", Host: arts, ReadOnlyDirs: []string{"immutable"}},
		{Guest: "/context/grp_01", Host: filepath.Join(dir, "context", "grp_01"), ReadOnly: true},
		{Guest: "/context/grp_02", Host: filepath.Join(dir, "context", "grp_02"), ReadOnly: true},
		{Guest: "/scratch", Host: filepath.Join(dir, "scratch", "exe_1")},
		{Guest: "/workspace", Host: filepath.Join(dir, "checkout")},
		{Guest: filepath.ToSlash(t.hostRO), Host: t.hostRO, ReadOnly: true},
		{Guest: filepath.ToSlash(t.hostRW), Host: t.hostRW},
	})
	if err != nil {
		tb.Fatal(err)
	}
	t.jail = j
	return t
}

// hostInside reports whether host path p, after resolving links, lies in the
// real form of dir. A path that does not exist yet is judged by its longest
// existing ancestor, which is where a write would land.
func hostInside(p, dir string) bool {
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	rest := ""
	for {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			real = filepath.Join(real, rest)
			return real == realDir || strings.HasPrefix(real, realDir+string(filepath.Separator))
		}
		up := filepath.Dir(p)
		if up == p {
			return false
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = up
	}
}
