package app_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/session"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// fileList is the body of a listing.
type fileList struct {
	Entries []desk.FileEntry `json:"entries"`
	Actor   string           `json:"actor"`
	Path    string           `json:"path"`
	Depth   int              `json:"depth"`
	Count   int64            `json:"count"`
}

// deleteReport is the body of a delete.
type deleteReport struct {
	Deleted []desk.FileEntry `json:"deleted"`
	Actor   string           `json:"actor"`
	Files   int64            `json:"files"`
	Dirs    int64            `json:"dirs"`
	Bytes   int64            `json:"bytes"`
	Error   *struct{ Code, Message string }
}

// fq builds a file API URL: op is files, file, upload, delete-by-prefix,
// stats or gc; kv are query pairs. cells picks the Wesclaw spelling.
func fq(ws string, cells bool, op string, kv ...string) string {
	base := "/v1/workspaces/" + ws + "/" + op
	if cells {
		base = "/cells/" + ws + "/workspace/" + op
	}
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	if len(q) == 0 {
		return base
	}
	return base + "?" + q.Encode()
}

func (w *world) upload(token, p string, body []byte, kv ...string) *apptest.Response {
	w.T.Helper()
	return w.Req("POST", fq(w.ws.ID, false, "upload", append([]string{"path", p}, kv...)...), token, body)
}

func (w *world) mustUpload(p string, body []byte, kv ...string) desk.FileUpload {
	w.T.Helper()
	r := w.upload(w.Token, p, body, kv...)
	if r.Status != 200 {
		w.T.Fatalf("upload %s = %d %s", p, r.Status, r.Body)
	}
	var up desk.FileUpload
	r.Decode(w.T, &up)
	return up
}

func (w *world) listFiles(token string, kv ...string) (*apptest.Response, fileList) {
	w.T.Helper()
	r := w.Req("GET", fq(w.ws.ID, false, "files", kv...), token, nil)
	var l fileList
	if r.Status == 200 {
		r.Decode(w.T, &l)
	}
	return r, l
}

func paths(es []desk.FileEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Path
	}
	return out
}

// ownerArea is the owner's file area on disk.
func (w *world) ownerArea() string {
	return w.App.Home.Abs(w.ws.ID, layout.ActorRel(w.a.Actor))
}

// snapshot describes everything under dir: each file's digest, each
// folder, each link's target. Refusals must leave it unchanged.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.IsDir():
			m[rel] = "dir"
		case d.Type()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			m[rel] = "link:" + tgt
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = sha(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// state is what a refused request must not change: the workspace's files
// and its artifact rows.
func (w *world) state() string {
	w.T.Helper()
	var b strings.Builder
	snap := snapshot(w.T, w.App.Home.Workspace(w.ws.ID))
	keys := make([]string, 0, len(snap))
	for k := range snap {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %s\n", k, snap[k])
	}
	for _, x := range []desk.Session{w.a, w.b} {
		for _, a := range w.list(x.ID) {
			fmt.Fprintf(&b, "%s %s %d %s %d %v\n", a.ID, a.Path, a.Size, a.SHA256, a.Revision, a.Missing)
		}
	}
	return b.String()
}

func (w *world) newActor(name string) (desk.Actor, string) {
	w.T.Helper()
	var out struct {
		Actor desk.Actor
		Token string
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": name, "kind": "agent"}, &out)
	return out.Actor, out.Token
}

// TestFilesBothSpellings: the Wesclaw routes and the /v1 routes are the
// same handlers over the same files.
func TestFilesBothSpellings(t *testing.T) { testFilesBothSpellings(t, app.Config{}) }

func testFilesBothSpellings(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	for _, cells := range []bool{true, false} {
		p := fmt.Sprintf("/reports/%v/summary.txt", cells)
		r := w.Admin("POST", fq(w.ws.ID, cells, "upload", "path", p), []byte("hello "+p))
		if r.Status != 200 {
			t.Fatalf("upload %s = %d %s", p, r.Status, r.Body)
		}
		var up desk.FileUpload
		r.Decode(t, &up)
		if up.Path != p || up.Size != int64(len("hello "+p)) || !up.Created || up.Type != "file" {
			t.Fatalf("upload answered %+v", up)
		}
		for _, read := range []bool{true, false} {
			r = w.Admin("GET", fq(w.ws.ID, read, "file", "path", p), nil)
			if r.Status != 200 || string(r.Body) != "hello "+p {
				t.Fatalf("download %s (cells=%v) = %d %q", p, read, r.Status, r.Body)
			}
		}
		// Paths without the leading slash mean the same file.
		r = w.Admin("GET", fq(w.ws.ID, cells, "file", "path", strings.TrimPrefix(p, "/")), nil)
		if r.Status != 200 {
			t.Fatalf("download without a leading slash = %d", r.Status)
		}
	}
	for _, cells := range []bool{true, false} {
		r := w.Admin("GET", fq(w.ws.ID, cells, "files", "depth", "0"), nil)
		var l fileList
		r.Decode(t, &l)
		want := []string{"/reports", "/reports/false", "/reports/false/summary.txt", "/reports/true", "/reports/true/summary.txt",
			"/sessions", "/sessions/" + w.a.ID, "/sessions/" + w.b.ID}
		if !reflect.DeepEqual(paths(l.Entries), want) {
			t.Fatalf("cells=%v listing = %v\nwant %v", cells, paths(l.Entries), want)
		}
		if l.Actor != w.a.Actor || l.Count != int64(len(want)) || l.Depth != 0 {
			t.Fatalf("listing summary = %+v", l)
		}
		r = w.Admin("GET", fq(w.ws.ID, cells, "stats"), nil)
		var st desk.FileStats
		r.Decode(t, &st)
		if r.Status != 200 || st.Files != 2 {
			t.Fatalf("stats = %d %s", r.Status, r.Body)
		}
	}
	r := w.Admin("DELETE", fq(w.ws.ID, true, "file", "path", "/reports/true/summary.txt"), nil)
	var d deleteReport
	r.Decode(t, &d)
	if r.Status != 200 || d.Files != 1 || len(d.Deleted) != 1 || d.Deleted[0].Path != "/reports/true/summary.txt" {
		t.Fatalf("delete = %d %s", r.Status, r.Body)
	}
	r = w.Admin("DELETE", fq(w.ws.ID, false, "delete-by-prefix", "prefix", "/reports/"), nil)
	r.Decode(t, &d)
	if r.Status != 200 || d.Files != 1 || d.Dirs != 2 {
		t.Fatalf("delete-by-prefix = %d %s", r.Status, r.Body)
	}
	if _, err := os.Stat(filepath.Join(w.ownerArea(), "reports")); err != nil {
		t.Fatalf("a folder prefix must keep the folder itself: %v", err)
	}
}

// TestFilesActorParameter: actor= is honoured only for the admin token; an
// actor token naming anyone but itself is refused and serves nothing.
func TestFilesActorParameter(t *testing.T) { testFilesActorParameter(t, app.Config{}) }

func testFilesActorParameter(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	alice, aliceTok := w.newActor("alice")
	bob, bobTok := w.newActor("bob")
	w.mustUpload("/secret.txt", []byte("alice's secret"), "actor", "alice")
	w.mustUpload("/bob.txt", []byte("bob's"), "actor", bob.ID)
	w.mustUpload("/owner.txt", []byte("owner's"))

	// The admin names actors by name or id; without one it is the owner.
	for _, who := range []string{"alice", alice.ID} {
		r := w.Admin("GET", fq(w.ws.ID, true, "file", "path", "/secret.txt", "actor", who), nil)
		if r.Status != 200 || string(r.Body) != "alice's secret" {
			t.Fatalf("admin actor=%s = %d %s", who, r.Status, r.Body)
		}
	}
	_, l := w.listFiles(w.Token)
	if l.Actor != w.a.Actor || !slicesContain(paths(l.Entries), "/owner.txt") || slicesContain(paths(l.Entries), "/secret.txt") {
		t.Fatalf("admin default listing = %+v", l)
	}
	if r := w.Admin("GET", fq(w.ws.ID, false, "files", "actor", "nobody"), nil); r.Status != 404 {
		t.Fatalf("admin names an unknown actor = %d", r.Status)
	}

	// An actor token works on its own area, with or without naming itself.
	for _, who := range []string{"", "alice", alice.ID} {
		r := w.Req("GET", fq(w.ws.ID, false, "file", "path", "/secret.txt", "actor", who), aliceTok, nil)
		if r.Status != 200 || string(r.Body) != "alice's secret" {
			t.Fatalf("alice actor=%q = %d %s", who, r.Status, r.Body)
		}
	}
	if r := w.Req("GET", fq(w.ws.ID, false, "file", "path", "/bob.txt"), aliceTok, nil); r.Status != 404 {
		t.Fatalf("alice reads bob's path in her own area = %d", r.Status)
	}

	// Naming another actor, existing or not, is forbidden for every
	// operation, and nothing is served or changed.
	before := w.state()
	for _, who := range []string{"bob", bob.ID, "owner", "nobody"} {
		for _, c := range []struct {
			method, op string
			kv         []string
			body       []byte
		}{
			{"GET", "files", nil, nil},
			{"GET", "file", []string{"path", "/bob.txt"}, nil},
			{"POST", "upload", []string{"path", "/bob.txt"}, []byte("overwritten")},
			{"DELETE", "file", []string{"path", "/bob.txt"}, nil},
			{"DELETE", "delete-by-prefix", []string{"prefix", "/b"}, nil},
			{"GET", "stats", nil, nil},
		} {
			for _, cells := range []bool{true, false} {
				r := w.Req(c.method, fq(w.ws.ID, cells, c.op, append(c.kv, "actor", who)...), aliceTok, c.body)
				if r.Status != 403 || bytes.Contains(r.Body, []byte("bob's")) {
					t.Fatalf("alice %s %s actor=%s = %d %s; want 403", c.method, c.op, who, r.Status, r.Body)
				}
			}
		}
	}
	if after := w.state(); after != before {
		t.Fatalf("refused requests changed the workspace:\n%s\n---\n%s", before, after)
	}
	// GC is the admin's; another workspace is invisible.
	if r := w.Req("POST", fq(w.ws.ID, true, "gc"), bobTok, nil); r.Status != 403 {
		t.Fatalf("actor runs GC = %d", r.Status)
	}
	var other desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	if r := w.Req("GET", fq(other.ID, true, "files"), aliceTok, nil); r.Status != 404 {
		t.Fatalf("alice lists another workspace = %d", r.Status)
	}
}

func slicesContain(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestFilesPathRules: traversal, NUL, backslashes, desk's temporary names
// and symbolic links are refused before the disk is touched, and leave
// everything as it was.
func TestFilesPathRules(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	w.mustUpload("/docs/keep.txt", []byte("keep"))
	area := w.ownerArea()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "host-secret"), []byte("host secret"), 0o644)
	must(t, os.Symlink(outside, filepath.Join(area, "out")))
	must(t, os.Symlink("docs", filepath.Join(area, "inside")))
	must(t, os.Symlink("keep.txt", filepath.Join(area, "docs", "alias.txt")))
	// A link planted in a session folder that leads into another one.
	must(t, os.Symlink("../"+w.b.ID, filepath.Join(area, "sessions", w.a.ID, "sneak")))
	before := w.state()
	cases := []struct {
		p    string
		code int
	}{
		{"/docs/../docs/keep.txt", 403},
		{"/../../etc/passwd", 403},
		{"/docs/./keep.txt", 400},
		{"/docs/keep.txt\x00.png", 400},
		{`/docs\keep.txt`, 403},
		{"/docs/.desk-tmp-0123", 400},
		{"/out/host-secret", 403},
		{"/inside/keep.txt", 403},
		{"/docs/alias.txt", 403},
		{"/sessions/" + w.a.ID + "/sneak/x.md", 403},
		{"/" + strings.Repeat("a", 300), 400},
	}
	for _, c := range cases {
		for _, op := range []struct {
			method, op string
			body       []byte
		}{{"GET", "file", nil}, {"POST", "upload", []byte("evil")}, {"DELETE", "file", nil}} {
			if op.method == "DELETE" && c.p == "/docs/alias.txt" {
				// Deleting a link removes the link itself, never its target;
				// that is checked below.
				continue
			}
			r := w.Admin(op.method, fq(w.ws.ID, true, op.op, "path", c.p), op.body)
			if r.Status != c.code {
				t.Errorf("%s %s %q = %d %s; want %d", op.method, op.op, c.p, r.Status, r.Body, c.code)
			}
			if bytes.Contains(r.Body, []byte("host secret")) {
				t.Fatalf("%q leaked a host file", c.p)
			}
		}
		r := w.Admin("GET", fq(w.ws.ID, false, "files", "path", c.p), nil)
		if r.Status != c.code {
			t.Errorf("list %q = %d; want %d", c.p, r.Status, c.code)
		}
	}
	if after := w.state(); after != before {
		t.Fatalf("refused requests changed the workspace:\n%s\n---\n%s", before, after)
	}
	// Listings never show links, so nothing leads a client through one.
	_, l := w.listFiles(w.Token, "depth", "0")
	for _, e := range l.Entries {
		if strings.Contains(e.Path, "out") || strings.Contains(e.Path, "inside") || strings.Contains(e.Path, "alias") || strings.Contains(e.Path, "sneak") {
			t.Fatalf("listing shows a link: %v", paths(l.Entries))
		}
	}
	// Deleting a link removes the link and never what it points at.
	r := w.Admin("DELETE", fq(w.ws.ID, false, "file", "path", "/docs/alias.txt"), nil)
	var d deleteReport
	r.Decode(t, &d)
	if r.Status != 200 || d.Deleted[0].Type != "link" {
		t.Fatalf("delete a link = %d %s", r.Status, r.Body)
	}
	if b, _ := os.ReadFile(filepath.Join(area, "docs", "keep.txt")); string(b) != "keep" {
		t.Fatalf("deleting a link touched its target")
	}
}

// TestFilesListing: path order, depth 1 by default, n levels, 0 = all,
// a file path lists one file, temporary files never show.
func TestFilesListing(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for _, p := range []string{"/a/b/c.txt", "/a-b.txt", "/a/z.txt", "/b.txt", "/a/b/d/e.txt"} {
		w.mustUpload(p, []byte(p))
	}
	os.WriteFile(filepath.Join(w.ownerArea(), "a", ".desk-tmp-abandoned"), []byte("x"), 0o644)
	_, l := w.listFiles(w.Token)
	if got, want := paths(l.Entries), []string{"/a", "/a-b.txt", "/b.txt", "/sessions"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("depth 1 = %v, want %v", got, want)
	}
	_, l = w.listFiles(w.Token, "path", "/a", "depth", "2")
	if got, want := paths(l.Entries), []string{"/a/b", "/a/b/c.txt", "/a/b/d", "/a/z.txt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("/a depth 2 = %v, want %v", got, want)
	}
	_, l = w.listFiles(w.Token, "depth", "0")
	want := []string{"/a", "/a/b", "/a/b/c.txt", "/a/b/d", "/a/b/d/e.txt", "/a/z.txt", "/a-b.txt", "/b.txt",
		"/sessions", "/sessions/" + w.a.ID, "/sessions/" + w.b.ID}
	if got := paths(l.Entries); !reflect.DeepEqual(got, want) {
		t.Fatalf("depth 0 = %v\nwant %v", got, want)
	}
	for _, e := range l.Entries {
		if e.Path == "/a/b/d/e.txt" && (e.Type != "file" || e.Size != int64(len("/a/b/d/e.txt")) || e.Modified.IsZero()) {
			t.Fatalf("entry = %+v", e)
		}
		if e.Path == "/a" && e.Type != "dir" {
			t.Fatalf("entry = %+v", e)
		}
	}
	_, l = w.listFiles(w.Token, "path", "/a/z.txt")
	if len(l.Entries) != 1 || l.Entries[0].Path != "/a/z.txt" {
		t.Fatalf("a file path lists %v", l.Entries)
	}
	if r, _ := w.listFiles(w.Token, "path", "/nope"); r.Status != 404 {
		t.Fatalf("missing folder = %d", r.Status)
	}
	if r, _ := w.listFiles(w.Token, "depth", "-1"); r.Status != 400 {
		t.Fatalf("negative depth = %d", r.Status)
	}
	if r, _ := w.listFiles(w.Token, "depth", "two"); r.Status != 400 {
		t.Fatalf("bad depth = %d", r.Status)
	}
	// An actor whose area was never written lists as empty.
	_, tok := w.newActor("fresh")
	os.RemoveAll(w.App.Home.Abs(w.ws.ID, layout.ActorsDir+"/"+actorIDOf(t, w, "fresh")))
	if r, l := w.listFiles(tok); r.Status != 200 || len(l.Entries) != 0 {
		t.Fatalf("empty area = %d %s", r.Status, r.Body)
	}
}

func actorIDOf(t *testing.T, w *world, name string) string {
	var out struct{ Actors []desk.Actor }
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/actors", nil, &out)
	for _, a := range out.Actors {
		if a.Name == name {
			return a.ID
		}
	}
	t.Fatalf("no actor %s", name)
	return ""
}

// TestFilesDownload: raw bytes, Range, ETag and Last-Modified with
// conditional requests, never compressed, inert in a browser.
func TestFilesDownload(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	body := []byte(strings.Repeat("0123456789", 1000))
	w.mustUpload("/data/big.txt", body)
	u := fq(w.ws.ID, true, "file", "path", "/data/big.txt")
	r := w.Admin("GET", u, nil, "Accept-Encoding", "gzip")
	if r.Status != 200 || !bytes.Equal(r.Body, body) {
		t.Fatalf("download = %d (%d bytes)", r.Status, len(r.Body))
	}
	h := r.Header
	if h.Get("Content-Encoding") != "" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != "sandbox" {
		t.Fatalf("headers = %v", h)
	}
	etag, lm := h.Get("ETag"), h.Get("Last-Modified")
	if etag == "" || lm == "" || h.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("no validators: %v", h)
	}
	r = w.Admin("GET", u, nil, "Range", "bytes=10-19")
	if r.Status != 206 || string(r.Body) != "0123456789" || r.Header.Get("Content-Range") != "bytes 10-19/10000" {
		t.Fatalf("range = %d %q %v", r.Status, r.Body, r.Header)
	}
	if r = w.Admin("GET", u, nil, "If-None-Match", etag); r.Status != 304 {
		t.Fatalf("If-None-Match = %d", r.Status)
	}
	if r = w.Admin("GET", u, nil, "If-Modified-Since", lm); r.Status != 304 {
		t.Fatalf("If-Modified-Since = %d", r.Status)
	}
	// A new upload is a new version; the pause puts its modification time
	// after the first's, on purpose.
	time.Sleep(5 * time.Millisecond)
	w.mustUpload("/data/big.txt", []byte("new"))
	r = w.Admin("GET", u, nil, "If-None-Match", etag)
	if r.Status != 200 || string(r.Body) != "new" || r.Header.Get("ETag") == etag {
		t.Fatalf("after a new upload = %d %q etag %s", r.Status, r.Body, r.Header.Get("ETag"))
	}
	for _, c := range []struct {
		p    string
		code int
	}{{"/data", 400}, {"/", 400}, {"/data/none.txt", 404}, {"/data/big.txt/x", 404}} {
		if r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", c.p), nil); r.Status != c.code {
			t.Errorf("download %q = %d %s; want %d", c.p, r.Status, r.Body, c.code)
		}
	}
	if r := w.Admin("GET", fq(w.ws.ID, false, "file"), nil); r.Status != 400 {
		t.Fatalf("no path = %d", r.Status)
	}
}

// TestFilesSessionFolders: a session folder is that session's artifact
// directory. Uploading creates or updates the artifact (classified,
// validated, origin from the token, revision kept); deleting removes row,
// bytes and revisions; listings show the artifact.
func TestFilesSessionFolders(t *testing.T) { testFilesSessionFolders(t, app.Config{}) }

func testFilesSessionFolders(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	alice, aliceTok := w.newActor("alice")
	var as desk.Session
	r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", aliceTok, map[string]string{"title": "alice"})
	r.Decode(t, &as)
	p := "/sessions/" + as.ID + "/report.md"
	r = w.Req("POST", fq(w.ws.ID, true, "upload", "path", p), aliceTok, []byte("# v1\n"))
	if r.Status != 200 {
		t.Fatalf("upload into a session folder = %d %s", r.Status, r.Body)
	}
	var up desk.FileUpload
	r.Decode(t, &up)
	if up.ArtifactID == "" || up.Kind != "markdown" || up.SHA256 != sha([]byte("# v1\n")) || !up.Created {
		t.Fatalf("upload = %+v", up)
	}
	var art desk.Artifact
	if r := w.Req("GET", "/v1/sessions/"+as.ID+"/artifacts/"+up.ArtifactID, aliceTok, nil); r.Status != 200 {
		t.Fatalf("the upload is not an artifact: %d %s", r.Status, r.Body)
	} else {
		r.Decode(t, &art)
	}
	if art.Path != "/artifacts/report.md" || art.Revision != 1 || art.Origin.Actor != alice.ID || art.Origin.Kind != desk.OriginUser {
		t.Fatalf("artifact = %+v", art)
	}
	// The same file seen from the guest, the artifact API and the listing.
	if r := w.Req("GET", "/v1/sessions/"+as.ID+"/guest/file?path=/artifacts/report.md", aliceTok, nil); string(r.Body) != "# v1\n" {
		t.Fatalf("guest reads %q", r.Body)
	}
	_, l := w.listFiles(aliceTok, "path", "/sessions/"+as.ID)
	if len(l.Entries) != 1 || l.Entries[0].ArtifactID != art.ID || l.Entries[0].Kind != "markdown" || l.Entries[0].SHA256 != art.SHA256 {
		t.Fatalf("listing = %+v", l.Entries)
	}
	// Updating keeps the previous revision for revert.
	r = w.Req("POST", fq(w.ws.ID, false, "upload", "path", p), aliceTok, []byte("# v2\n"))
	r.Decode(t, &up)
	if r.Status != 200 || up.Created || up.ArtifactID != art.ID {
		t.Fatalf("update = %d %s", r.Status, r.Body)
	}
	r = w.Req("POST", "/v1/sessions/"+as.ID+"/artifacts/"+art.ID+"/revert", aliceTok, nil)
	r.Decode(t, &art)
	if r.Status != 200 || art.Revision != 3 || art.SHA256 != sha([]byte("# v1\n")) {
		t.Fatalf("revert after a file API update = %d %s", r.Status, r.Body)
	}
	// Bytes that lie about their kind are refused as by the artifact API.
	before := w.state()
	if r := w.Req("POST", fq(w.ws.ID, false, "upload", "path", "/sessions/"+as.ID+"/fake.png"), aliceTok, []byte("not a png")); r.Status != 400 {
		t.Fatalf("fake PNG = %d %s", r.Status, r.Body)
	}
	// Session folders of other actors and unknown sessions.
	if r := w.Req("POST", fq(w.ws.ID, false, "upload", "path", "/sessions/"+w.a.ID+"/x.md"), aliceTok, []byte("x")); r.Status != 404 {
		t.Fatalf("alice uploads into the owner's session = %d", r.Status)
	}
	if r := w.Admin("POST", fq(w.ws.ID, false, "upload", "path", "/sessions/"+w.a.ID+"/x.md", "actor", "alice"), []byte("x")); r.Status != 403 {
		t.Fatalf("admin uploads into the owner's session through alice's area = %d %s", r.Status, r.Body)
	}
	for _, c := range []struct {
		p    string
		code int
	}{
		{"/sessions/" + desk.NewID(desk.PrefixSession) + "/x.md", 404},
		{"/sessions/notes.txt", 409},
		{"/sessions/notes/x.txt", 400},
		{"/sessions/" + as.ID, 409},
		{"/sessions", 409},
		{"/sessions/" + as.ID + "/immutable", 400},
	} {
		if r := w.Req("POST", fq(w.ws.ID, false, "upload", "path", c.p), aliceTok, []byte("x")); r.Status != c.code {
			t.Errorf("upload %s = %d %s; want %d", c.p, r.Status, r.Body, c.code)
		}
	}
	if r := w.Req("DELETE", fq(w.ws.ID, false, "file", "path", "/sessions/"+as.ID), aliceTok, nil); r.Status != 409 {
		t.Fatalf("delete a session folder = %d", r.Status)
	}
	if after := w.state(); after != before {
		t.Fatalf("refused uploads changed the workspace:\n%s\n---\n%s", before, after)
	}
	// The immutable area: created once, never replaced.
	ip := "/sessions/" + as.ID + "/immutable/final.md"
	r = w.Req("POST", fq(w.ws.ID, false, "upload", "path", ip), aliceTok, []byte("final"))
	r.Decode(t, &up)
	if r.Status != 200 {
		t.Fatalf("immutable upload = %d %s", r.Status, r.Body)
	}
	var imm desk.Artifact
	w.Must(200, "GET", "/v1/sessions/"+as.ID+"/artifacts/"+up.ArtifactID, nil, &imm)
	if !imm.Immutable || imm.Path != "/artifacts/immutable/final.md" {
		t.Fatalf("immutable artifact = %+v", imm)
	}
	if r := w.Req("POST", fq(w.ws.ID, false, "upload", "path", ip), aliceTok, []byte("changed")); r.Status != 409 {
		t.Fatalf("replace an immutable artifact = %d", r.Status)
	}
	if r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", ip, "actor", "alice"), nil); string(r.Body) != "final" {
		t.Fatalf("immutable bytes = %q", r.Body)
	}
	// A file an agent wrote without a row is kept as the previous revision
	// when an upload replaces it.
	dir := w.App.Home.Abs(w.ws.ID, layout.SessionRel(alice.ID, as.ID))
	must(t, os.WriteFile(filepath.Join(dir, "agent.md"), []byte("agent wrote this"), 0o644))
	r = w.Req("POST", fq(w.ws.ID, false, "upload", "path", "/sessions/"+as.ID+"/agent.md"), aliceTok, []byte("user wrote this"))
	r.Decode(t, &up)
	var adopted desk.Artifact
	w.Must(200, "GET", "/v1/sessions/"+as.ID+"/artifacts/"+up.ArtifactID, nil, &adopted)
	if adopted.Revision != 2 || up.Created {
		t.Fatalf("adopted = %+v, upload %+v", adopted, up)
	}
	w.Must(200, "POST", "/v1/sessions/"+as.ID+"/artifacts/"+adopted.ID+"/revert", nil, &adopted)
	if b := w.content(as.ID, adopted.ID); string(b) != "agent wrote this" {
		t.Fatalf("the agent's bytes were lost: %q", b)
	}
	// Deleting through the file API deletes the artifact: row, bytes,
	// revisions.
	r = w.Req("DELETE", fq(w.ws.ID, true, "file", "path", p), aliceTok, nil)
	var d deleteReport
	r.Decode(t, &d)
	if r.Status != 200 || d.Files != 1 || d.Deleted[0].ArtifactID != art.ID {
		t.Fatalf("delete = %d %s", r.Status, r.Body)
	}
	if r := w.Admin("GET", "/v1/sessions/"+as.ID+"/artifacts/"+art.ID, nil); r.Status != 404 {
		t.Fatalf("the row survived a file API delete: %d", r.Status)
	}
	if _, err := os.Stat(w.App.Home.Abs(w.ws.ID, layout.RevisionDirRel(art.ID))); !os.IsNotExist(err) {
		t.Fatalf("revisions survived: %v", err)
	}
	// Deleting the artifact through the artifact API removes the file.
	w.Must(204, "DELETE", "/v1/sessions/"+as.ID+"/artifacts/"+adopted.ID, nil, nil)
	if r := w.Req("GET", fq(w.ws.ID, false, "file", "path", "/sessions/"+as.ID+"/agent.md"), aliceTok, nil); r.Status != 404 {
		t.Fatalf("file after an artifact delete = %d", r.Status)
	}
	// delete-by-prefix takes the artifacts with it and keeps the folders.
	w.Req("POST", fq(w.ws.ID, false, "upload", "path", "/sessions/"+as.ID+"/sub/one.md"), aliceTok, []byte("1"))
	r = w.Req("DELETE", fq(w.ws.ID, false, "delete-by-prefix", "prefix", "/sessions/"), aliceTok, nil)
	r.Decode(t, &d)
	if r.Status != 200 || d.Files != 2 {
		t.Fatalf("delete-by-prefix /sessions/ = %d %s", r.Status, r.Body)
	}
	var arts struct{ Artifacts []desk.Artifact }
	w.Must(200, "GET", "/v1/sessions/"+as.ID+"/artifacts", nil, &arts)
	if len(arts.Artifacts) != 0 {
		t.Fatalf("artifacts left: %v", arts.Artifacts)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the session folder went: %v", err)
	}
}

// TestFilesQuota: uploads over the actor's quota are refused with 413
// before anything is kept, whether the length is declared or not.
func TestFilesQuota(t *testing.T) { testFilesQuota(t, app.Config{ActorQuotaBytes: 1000}) }

func testFilesQuota(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	w.mustUpload("/a.bin", bytes.Repeat([]byte{1}, 600))
	before := w.state()
	if r := w.upload(w.Token, "/b.bin", bytes.Repeat([]byte{2}, 500)); r.Status != 413 {
		t.Fatalf("over quota with Content-Length = %d %s", r.Status, r.Body)
	}
	// A body of unknown length is stopped while it streams.
	req, _ := http.NewRequest("POST", w.Server.URL+fq(w.ws.ID, false, "upload", "path", "/b.bin"), io.MultiReader(bytes.NewReader(bytes.Repeat([]byte{3}, 300)), bytes.NewReader(bytes.Repeat([]byte{3}, 300))))
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+w.Token)
	resp, err := w.Server.Client().Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("over quota, chunked = %d", resp.StatusCode)
	}
	if after := w.state(); after != before {
		t.Fatalf("refused uploads changed the workspace:\n%s\n---\n%s", before, after)
	}
	if r := w.upload(w.Token, "/sessions/"+w.a.ID+"/big.md", bytes.Repeat([]byte("x"), 500)); r.Status != 413 {
		t.Fatalf("over quota into a session folder = %d %s", r.Status, r.Body)
	}
	// The artifact API writes into the same area, under the same quota:
	// a new artifact and an update that would grow past it are refused.
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name=big.md", bytes.Repeat([]byte("x"), 500)); r.Status != 413 {
		t.Fatalf("over quota through the artifact API = %d %s", r.Status, r.Body)
	}
	if after := w.state(); after != before {
		t.Fatalf("refused uploads changed the workspace:\n%s\n---\n%s", before, after)
	}
	small := w.put(w.a.ID, "small.md", []byte("x"))
	if r := w.Admin("PUT", "/v1/sessions/"+w.a.ID+"/artifacts/"+small.ID+"/content", bytes.Repeat([]byte("y"), 450)); r.Status != 413 {
		t.Fatalf("artifact update over quota = %d %s", r.Status, r.Body)
	}
	if got := w.content(w.a.ID, small.ID); string(got) != "x" {
		t.Fatalf("a refused update changed the artifact to %q", got)
	}
	w.Must(204, "DELETE", "/v1/sessions/"+w.a.ID+"/artifacts/"+small.ID, nil, nil)
	if after := w.state(); after != before {
		t.Fatalf("refused uploads changed the workspace:\n%s\n---\n%s", before, after)
	}
	// Replacing a file frees its bytes.
	w.mustUpload("/a.bin", bytes.Repeat([]byte{4}, 950))
	var st desk.FileStats
	w.Must(200, "GET", fq(w.ws.ID, true, "stats"), nil, &st)
	if st.QuotaBytes != 1000 || st.UsedBytes != 950 || st.AvailableBytes != 50 {
		t.Fatalf("stats = %+v", st)
	}
	// Deleting frees them too.
	w.Admin("DELETE", fq(w.ws.ID, false, "file", "path", "/a.bin"), nil)
	w.mustUpload("/c.bin", bytes.Repeat([]byte{5}, 999))
	w.Must(200, "GET", fq(w.ws.ID, true, "stats"), nil, &st)
	if st.UsedBytes != 999 || st.Files != 1 {
		t.Fatalf("stats after delete and upload = %+v", st)
	}
}

// TestFilesInterruptedUpload: a body shorter than its Content-Length (the
// client went away) leaves the previous file and no temporary file.
func TestFilesInterruptedUpload(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	w.mustUpload("/keep.bin", []byte{1, 2, 3})
	w.mustUpload("/sessions/"+w.a.ID+"/keep.md", []byte("kept"))
	before := w.state()
	for _, p := range []string{"/keep.bin", "/new.bin", "/new/deep/x.bin", "/sessions/" + w.a.ID + "/keep.md", "/sessions/" + w.a.ID + "/new.md", "/sessions/" + w.a.ID + "/sub/new.md"} {
		status := shortBody(t, w.Server.URL+fq(w.ws.ID, true, "upload", "path", p), "POST", w.Token)
		if status < 400 && status != 0 {
			t.Fatalf("%s short body = %d", p, status)
		}
	}
	if after := w.state(); after != before {
		t.Fatalf("interrupted uploads changed the workspace:\n%s\n---\n%s", before, after)
	}
}

// TestFilesConcurrentUploads: several uploads to one path; the last one
// to finish wins whole, and no reader ever sees a mixture.
func TestFilesConcurrentUploads(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	const n, size = 6, 2 << 20
	bodies := map[string]bool{}
	var all [][]byte
	for i := range n {
		b := bytes.Repeat([]byte{byte('a' + i)}, size)
		all = append(all, b)
		bodies[sha(b)] = true
	}
	w.mustUpload("/hot.bin", all[0])
	stop := make(chan struct{})
	var readers sync.WaitGroup
	var torn []string
	var mu sync.Mutex
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", w.Server.URL+fq(w.ws.ID, false, "file", "path", "/hot.bin"), nil)
				req.Header.Set("Authorization", "Bearer "+w.Token)
				resp, err := w.Server.Client().Do(req)
				if err != nil {
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode == 200 && !bodies[sha(b)] {
					mu.Lock()
					torn = append(torn, fmt.Sprintf("%d bytes", len(b)))
					mu.Unlock()
				}
			}
		})
	}
	var writers sync.WaitGroup
	for i := range n {
		writers.Go(func() {
			if r := w.upload(w.Token, "/hot.bin", all[i]); r.Status != 200 {
				t.Errorf("upload %d = %d %s", i, r.Status, r.Body)
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	if len(torn) > 0 {
		t.Fatalf("readers saw torn files: %v", torn)
	}
	r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", "/hot.bin"), nil)
	if !bodies[sha(r.Body)] {
		t.Fatalf("the final file is a mixture")
	}
	ents, _ := os.ReadDir(w.ownerArea())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".desk-tmp-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
	var st desk.FileStats
	w.Must(200, "GET", fq(w.ws.ID, false, "stats"), nil, &st)
	if st.Files != 1 || st.Bytes != size {
		t.Fatalf("stats = %+v", st)
	}
}

// TestFilesDeleteByPrefix: a trailing / is a folder's subtree, anything
// else a string prefix; the whole area is never one request away.
func TestFilesDeleteByPrefix(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for _, p := range []string{"/temp/a.txt", "/temp/sub/b.txt", "/temp-old.txt", "/tempest/c.txt", "/keep/temp.txt"} {
		w.mustUpload(p, []byte(p))
	}
	os.WriteFile(filepath.Join(w.ownerArea(), "temp", "sub", ".desk-tmp-inflight"), []byte("x"), 0o644)
	before := w.state()
	for _, p := range []string{"/", "", "//"} {
		if r := w.Admin("DELETE", fq(w.ws.ID, false, "delete-by-prefix", "prefix", p), nil); r.Status != 400 {
			t.Fatalf("prefix %q = %d", p, r.Status)
		}
	}
	if r := w.Admin("DELETE", fq(w.ws.ID, false, "delete-by-prefix"), nil); r.Status != 400 {
		t.Fatalf("no prefix = %d", r.Status)
	}
	if r := w.Admin("DELETE", fq(w.ws.ID, false, "delete-by-prefix", "prefix", "/../"), nil); r.Status != 403 {
		t.Fatalf("prefix /../ = %d", r.Status)
	}
	if after := w.state(); after != before {
		t.Fatalf("refused deletes changed the workspace")
	}
	var d deleteReport
	r := w.Admin("DELETE", fq(w.ws.ID, true, "delete-by-prefix", "prefix", "/temp/"), nil)
	r.Decode(t, &d)
	// The in-flight temporary file keeps /temp/sub.
	if got, want := paths(d.Deleted), []string{"/temp/a.txt", "/temp/sub/b.txt"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("/temp/ deleted %v, want %v", got, want)
	}
	_, l := w.listFiles(w.Token, "depth", "0")
	if got := paths(l.Entries); !slicesContain(got, "/temp") || !slicesContain(got, "/temp-old.txt") || slicesContain(got, "/temp/a.txt") {
		t.Fatalf("after /temp/: %v", got)
	}
	r = w.Admin("DELETE", fq(w.ws.ID, false, "delete-by-prefix", "prefix", "/temp"), nil)
	r.Decode(t, &d)
	if got, want := paths(d.Deleted), []string{"/temp-old.txt", "/tempest/c.txt", "/tempest"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("/temp deleted %v, want %v", got, want)
	}
	if d.Files != 2 || d.Bytes != int64(len("/temp-old.txt")+len("/tempest/c.txt")) {
		t.Fatalf("summary = %+v", d)
	}
	if r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", "/keep/temp.txt"), nil); r.Status != 200 {
		t.Fatalf("an unrelated file went: %d", r.Status)
	}
	r = w.Admin("DELETE", fq(w.ws.ID, false, "delete-by-prefix", "prefix", "/nothing/"), nil)
	r.Decode(t, &d)
	if r.Status != 200 || len(d.Deleted) != 0 {
		t.Fatalf("nothing to delete = %d %s", r.Status, r.Body)
	}
}

// TestFilesStats: counts, totals per top-level folder, artifacts.
func TestFilesStats(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	w.mustUpload("/r1.txt", []byte("12345"))
	w.mustUpload("/reports/a.txt", []byte("123"))
	w.mustUpload("/reports/q/b.txt", []byte("12"))
	w.put(w.a.ID, "n.md", []byte("# n"))
	var st desk.FileStats
	w.Must(200, "GET", fq(w.ws.ID, false, "stats"), nil, &st)
	want := []desk.FolderUsage{{Path: "/", Files: 1, Bytes: 5}, {Path: "/reports", Files: 2, Bytes: 5}, {Path: "/sessions", Files: 1, Bytes: 3}}
	if st.Files != 4 || st.Bytes != 13 || st.Artifacts != 1 || st.QuotaBytes != 0 || !reflect.DeepEqual(st.Folders, want) {
		t.Fatalf("stats = %+v", st)
	}
	if st.Dirs != 5 { // reports, reports/q, sessions, and the two session folders
		t.Fatalf("dirs = %d", st.Dirs)
	}
}

// TestFilesGC: GC collects only what nothing owns and reports every action;
// it never deletes an artifact or a user file.
func TestFilesGC(t *testing.T) { testFilesGC(t, app.Config{}) }

func testFilesGC(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	w.mustUpload("/user/notes.txt", []byte("mine"))
	kept := w.put(w.a.ID, "kept.md", []byte("# kept"))
	vanished := w.put(w.a.ID, "vanished.md", []byte("# gone"))
	home := w.App.Home
	must(t, os.Remove(filepath.Join(w.sessionDir(w.a), "vanished.md")))
	// The working copy is not where the bytes are kept: an artifact is
	// missing only once the blob store lacks them too.
	key, err := session.ArtifactKey(vanished.WorkspaceID, vanished.ID, vanished.Revision, vanished.SHA256)
	must(t, err)
	must(t, w.App.Blobs.Delete(t.Context(), key))
	// A file an agent left without a row, and one in the immutable area.
	must(t, os.WriteFile(filepath.Join(w.sessionDir(w.a), "found.csv"), []byte("a,b\n1,2\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(w.sessionDir(w.b), "immutable"), 0o755))
	must(t, os.WriteFile(filepath.Join(w.sessionDir(w.b), "immutable", "sealed.md"), []byte("# sealed"), 0o644))
	// Scratch of an execution that is not running, an abandoned temporary
	// file, a young one, and revisions of an artifact that is gone.
	scratch := home.Abs(w.ws.ID, layout.ScratchRel(desk.NewID(desk.PrefixExecution)))
	must(t, os.MkdirAll(scratch, 0o755))
	must(t, os.WriteFile(filepath.Join(scratch, "t.txt"), []byte("scratch"), 0o644))
	old := filepath.Join(w.ownerArea(), "user", ".desk-tmp-old")
	young := filepath.Join(w.ownerArea(), "user", ".desk-tmp-young")
	must(t, os.WriteFile(old, []byte("abandoned"), 0o644))
	must(t, os.WriteFile(young, []byte("in flight"), 0o644))
	past := time.Now().Add(-2 * time.Hour)
	must(t, os.Chtimes(old, past, past))
	orphan := home.Abs(w.ws.ID, layout.RevisionDirRel(desk.NewID(desk.PrefixArtifact)))
	must(t, os.MkdirAll(orphan, 0o755))
	must(t, os.WriteFile(filepath.Join(orphan, "1"), []byte("old revision"), 0o644))
	must(t, os.Chtimes(orphan, past, past))

	var rep desk.GCReport
	w.Must(200, "POST", fq(w.ws.ID, true, "gc"), nil, &rep)
	byKind := map[string][]desk.GCAction{}
	for _, a := range rep.Actions {
		byKind[a.Kind] = append(byKind[a.Kind], a)
	}
	if len(byKind["scratch"]) != 1 || len(byKind["temp_file"]) != 1 || len(byKind["revision"]) != 1 ||
		len(byKind["missing"]) != 1 || len(byKind["indexed"]) != 2 {
		t.Fatalf("report = %+v", rep)
	}
	if byKind["missing"][0].ArtifactID != vanished.ID || rep.Counts["indexed"] != 2 || rep.ReclaimedBytes != int64(len("scratch")+len("abandoned")+len("old revision")) {
		t.Fatalf("report = %+v", rep)
	}
	for _, p := range []string{scratch, old, orphan} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s survived GC", p)
		}
	}
	if _, err := os.Stat(young); err != nil {
		t.Fatalf("a young temporary file was collected: %v", err)
	}
	var got desk.Artifact
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/artifacts/"+vanished.ID, nil, &got)
	if !got.Missing {
		t.Fatalf("the row of a vanished file is not marked missing: %+v", got)
	}
	if b := w.content(w.a.ID, kept.ID); string(b) != "# kept" {
		t.Fatalf("GC touched an artifact")
	}
	if r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", "/user/notes.txt"), nil); string(r.Body) != "mine" {
		t.Fatalf("GC touched a user file")
	}
	var idx struct{ Artifacts []desk.Artifact }
	w.Must(200, "GET", "/v1/sessions/"+w.b.ID+"/artifacts", nil, &idx)
	if len(idx.Artifacts) != 1 || !idx.Artifacts[0].Immutable || idx.Artifacts[0].Origin.Kind != desk.OriginSystem || idx.Artifacts[0].Kind != "markdown" {
		t.Fatalf("indexed = %+v", idx.Artifacts)
	}
	// A second run finds nothing more to do; the file coming back clears
	// the missing mark.
	must(t, os.WriteFile(filepath.Join(w.sessionDir(w.a), "vanished.md"), []byte("# gone"), 0o644))
	w.Must(200, "POST", fq(w.ws.ID, false, "gc"), nil, &rep)
	if len(rep.Actions) != 1 || rep.Actions[0].Kind != "found" {
		t.Fatalf("second GC = %+v", rep)
	}
}

// TestFilesHostPaths: declaring host paths and the primary root checks
// boundaries only, refuses what would break them, and the guest sees the
// declared directories.
func TestFilesHostPaths(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	_, tok := w.newActor("alice")
	host := t.TempDir()
	ro := filepath.Join(host, "ro")
	rw := filepath.Join(host, "rw")
	must(t, os.MkdirAll(ro, 0o755))
	must(t, os.MkdirAll(rw, 0o755))
	must(t, os.WriteFile(filepath.Join(ro, "readme.txt"), []byte("host file"), 0o644))
	patch := func(token string, body any) *apptest.Response {
		return w.Req("PATCH", "/v1/workspaces/"+w.ws.ID, token, body)
	}
	r := patch(w.Token, map[string]any{"host_paths": []map[string]string{{"path": ro, "mode": "ro"}, {"path": rw, "mode": "rw"}}, "primary_root": rw})
	var ws desk.Workspace
	r.Decode(t, &ws)
	if r.Status != 200 || len(ws.HostPaths) != 2 || ws.PrimaryRoot != rw {
		t.Fatalf("patch = %d %s", r.Status, r.Body)
	}
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID, nil, &ws)
	if len(ws.HostPaths) != 2 || ws.HostPaths[1].Mode != "rw" {
		t.Fatalf("stored = %+v", ws)
	}
	before := ws
	for name, body := range map[string]any{
		"relative":       map[string]any{"host_paths": []map[string]string{{"path": "rel/dir"}}},
		"root":           map[string]any{"host_paths": []map[string]string{{"path": "/"}}},
		"unclean":        map[string]any{"host_paths": []map[string]string{{"path": host + "/../x"}}},
		"missing":        map[string]any{"host_paths": []map[string]string{{"path": filepath.Join(host, "none")}}},
		"a file":         map[string]any{"host_paths": []map[string]string{{"path": filepath.Join(ro, "readme.txt")}}},
		"bad mode":       map[string]any{"host_paths": []map[string]string{{"path": ro, "mode": "write"}}},
		"nested":         map[string]any{"host_paths": []map[string]string{{"path": host}, {"path": ro}}},
		"shadows guest":  map[string]any{"host_paths": []map[string]string{{"path": "/workspace"}}},
		"desk home":      map[string]any{"host_paths": []map[string]string{{"path": w.App.Home.Root}}},
		"inside home":    map[string]any{"host_paths": []map[string]string{{"path": w.App.Home.Workspace(w.ws.ID)}}},
		"root outside":   map[string]any{"primary_root": "/etc"},
		"root traversal": map[string]any{"primary_root": rw + "/../../etc"},
		"unknown field":  map[string]any{"hostpaths": []string{}},
	} {
		r := patch(w.Token, body)
		if r.Status != 400 && r.Status != 403 {
			t.Errorf("%s = %d %s; want 400 or 403", name, r.Status, r.Body)
		}
		var now desk.Workspace
		w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID, nil, &now)
		if !reflect.DeepEqual(now.HostPaths, before.HostPaths) || now.PrimaryRoot != before.PrimaryRoot {
			t.Fatalf("%s changed the workspace: %+v", name, now)
		}
	}
	// A link to desk's home is caught by where it leads.
	link := filepath.Join(host, "sneaky")
	must(t, os.Symlink(w.App.Home.Root, link))
	if r := patch(w.Token, map[string]any{"host_paths": []map[string]string{{"path": link}}}); r.Status != 403 {
		t.Fatalf("a link to DESK_HOME = %d %s", r.Status, r.Body)
	}
	if r := patch(tok, map[string]any{"primary_root": ""}); r.Status != 403 {
		t.Fatalf("an actor patches = %d", r.Status)
	}
	// The guest sees the declared directories at their own paths.
	r = w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path="+url.QueryEscape(ro+"/readme.txt"), nil)
	if r.Status != 200 || string(r.Body) != "host file" {
		t.Fatalf("guest reads a host path = %d %s", r.Status, r.Body)
	}
	var gl struct{ Entries []desk.GuestEntry }
	r = w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/list?path="+url.QueryEscape(ro), nil)
	r.Decode(t, &gl)
	if r.Status != 200 || len(gl.Entries) != 1 || !gl.Entries[0].ReadOnly {
		t.Fatalf("guest lists a read-only host path = %d %s", r.Status, r.Body)
	}
	// Exports never carry host paths.
	ex := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil)
	for _, e := range tarEntries(t, ex.Body) {
		if strings.Contains(e.name, "readme.txt") {
			t.Fatalf("the export carries a host file: %s", e.name)
		}
	}
	// Clearing.
	r = patch(w.Token, map[string]any{"host_paths": []any{}, "primary_root": ""})
	ws = desk.Workspace{}
	r.Decode(t, &ws)
	if r.Status != 200 || len(ws.HostPaths) != 0 || ws.PrimaryRoot != "" {
		t.Fatalf("clear = %d %s", r.Status, r.Body)
	}
	if r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path="+url.QueryEscape(ro+"/readme.txt"), nil); r.Status != 403 {
		t.Fatalf("an undeclared host path = %d", r.Status)
	}
}

// TestFilesOnPostgres runs the file API scenarios on the Postgres store.
func TestFilesOnPostgres(t *testing.T) {
	apptest.Parallel(t)
	for name, fn := range map[string]func(*testing.T, app.Config){
		"BothSpellings":  testFilesBothSpellings,
		"ActorParameter": testFilesActorParameter,
		"SessionFolders": testFilesSessionFolders,
		"GC":             testFilesGC,
		"RoundTrip":      testExportImportRoundTrip,
	} {
		t.Run(name, func(t *testing.T) {
			fn(t, app.Config{Postgres: pgtest.DSN(t)})
		})
	}
	t.Run("Quota", func(t *testing.T) {
		testFilesQuota(t, app.Config{Postgres: pgtest.DSN(t), ActorQuotaBytes: 1000})
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestFilesLargeUploads: uploads of 32 MiB and more with a declared length
// take the raw-socket path (the server splices the body into the file);
// they keep every rule of the normal path.
func TestFilesLargeUploads(t *testing.T) {
	apptest.Parallel(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<20/16)
	big[12345] = 'X'
	// Without a quota the body is spliced from the socket into the file.
	free := newWorld(t)
	free.mustUpload("/big/spliced.bin", big)
	if b, _ := os.ReadFile(filepath.Join(free.ownerArea(), "big", "spliced.bin")); !bytes.Equal(b, big) {
		t.Fatalf("a spliced upload changed the bytes (%d bytes)", len(b))
	}
	w := newWorldOn(t, app.Config{ActorQuotaBytes: 100 << 20})
	w.mustUpload("/big/plain.bin", big)
	if r := w.Admin("GET", fq(w.ws.ID, false, "file", "path", "/big/plain.bin"), nil); !bytes.Equal(r.Body, big) {
		t.Fatalf("a large upload changed the bytes (%d bytes back)", len(r.Body))
	}
	// With Expect: 100-continue the body is sent once the server asks.
	tr := w.Server.Client().Transport.(*http.Transport).Clone()
	tr.ExpectContinueTimeout = 10 * time.Second
	req, _ := http.NewRequest("POST", w.Server.URL+fq(w.ws.ID, true, "upload", "path", "/sessions/"+w.a.ID+"/big.bin"), bytes.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+w.Token)
	req.Header.Set("Expect", "100-continue")
	resp, err := (&http.Client{Transport: tr}).Do(req)
	must(t, err)
	var up desk.FileUpload
	must(t, decodeJSONBody(resp, &up))
	if resp.StatusCode != 200 || up.ArtifactID == "" || up.SHA256 != sha(big) {
		t.Fatalf("large upload into a session folder = %d %+v", resp.StatusCode, up)
	}
	// A refusal is answered, not reset, even while the body is on its way.
	before := w.state()
	req, _ = http.NewRequest("POST", w.Server.URL+fq(w.ws.ID, true, "upload", "path", "/big/over.bin"), bytes.NewReader(big))
	req.Header.Set("Authorization", "Bearer "+w.Token)
	resp, err = w.Server.Client().Do(req)
	if err != nil {
		t.Fatalf("over-quota large upload: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("over-quota large upload = %d", resp.StatusCode)
	}
	// A large body cut short keeps nothing.
	status := shortBodySized(t, w.Server.URL+fq(w.ws.ID, true, "upload", "path", "/big/plain.bin"), w.Token, 64<<20, 1<<20)
	if status < 400 && status != 0 {
		t.Fatalf("cut large upload = %d", status)
	}
	if after := w.state(); after != before {
		t.Fatalf("refused large uploads changed the workspace:\n%s\n---\n%s", before, after)
	}
}

func decodeJSONBody(resp *http.Response, v any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return decodeJSON(b, v)
}

// shortBodySized declares size bytes, sends sent of them, and hangs up.
func shortBodySized(t testing.TB, rawURL, token string, size, sent int) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	must(t, err)
	c, err := net.Dial("tcp", u.Host)
	must(t, err)
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		u.RequestURI(), u.Host, token, size)
	c.Write(bytes.Repeat([]byte("z"), sent))
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
