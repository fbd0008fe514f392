package app_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/layout"
)

// TestClassificationTable uploads each kind of bytes, several under
// misleading names, and checks that the bytes decided.
func TestClassificationTable(t *testing.T) { testClassificationTable(t, app.Config{}) }

func testClassificationTable(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	cases := []struct {
		name  string
		body  []byte
		kind  string
		media string
	}{
		{"report.pdf", pdfBytes(), "pdf", "application/pdf"},
		{"notes.txt", pdfBytes(), "pdf", "application/pdf"}, // PDF under a text name
		{"book.xlsx", xlsxBytes(t), "xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
		{"letter.docx", docxBytes(t), "docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
		{"deck.pptx", pptxBytes(t), "pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
		{"data.csv", zipWith(t, "a.txt"), "zip", "application/zip"}, // ZIP under a CSV name
		{"bundle.zip", zipWith(t, "a.txt"), "zip", "application/zip"},
		{"readme.md", pngBytes(t), "png", "image/png"}, // PNG under a Markdown name
		{"photo.jpg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00rest"), "jpeg", "image/jpeg"},
		{"anim.gif", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), "gif", "image/gif"},
		{"pic.webp", []byte("RIFF\x1a\x00\x00\x00WEBPVP8 \x0e\x00\x00\x00"), "webp", "image/webp"},
		{"data.json", []byte(`{"rows":[1,2,3]}`), "json", "application/json"},
		{"x.txt", []byte(`[{"a":1}]`), "json", "application/json"},
		{"page.html", []byte("<!doctype html><html><body><p>hi</p></body></html>"), "html", "text/html; charset=utf-8"},
		{"icon.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>`), "svg", "image/svg+xml"},
		{"table.csv", []byte("a,b,c\n1,2,3\n4,5,6\n"), "csv", "text/csv; charset=utf-8"},
		{"table.tsv", []byte("a\tb\n1\t2\n"), "tsv", "text/tab-separated-values; charset=utf-8"},
		{"plan.md", []byte("# Plan\n\n- one\n"), "markdown", "text/markdown; charset=utf-8"},
		{"log.txt", []byte("plain words\n"), "text", "text/plain; charset=utf-8"},
		{"blob.bin", []byte{0, 1, 2, 3, 0xff, 0xfe}, "binary", "application/octet-stream"},
		{"empty.md", nil, "empty", ""},
	}
	for _, c := range cases {
		a := w.put(w.a.ID, c.name, c.body)
		if a.Kind != c.kind || (c.media != "" && a.MediaType != c.media) {
			t.Errorf("%s: kind %q media %q; want %q %q", c.name, a.Kind, a.MediaType, c.kind, c.media)
		}
		if a.Size != int64(len(c.body)) || a.SHA256 != sha(c.body) {
			t.Errorf("%s: size %d sha %s", c.name, a.Size, a.SHA256)
		}
		// The stored media type is what the content route serves.
		r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID+"/content", nil)
		if ct := r.Header.Get("Content-Type"); ct != a.MediaType && !(c.kind == "empty" && ct != "") {
			t.Errorf("%s: served as %q, stored %q", c.name, ct, a.MediaType)
		}
		if !bytes.Equal(r.Body, c.body) {
			t.Errorf("%s: bytes changed", c.name)
		}
	}
}

// TestFakeClaimsRefused: bytes that claim PNG, JPEG, PDF, XLSX or DOCX by
// name or media type but are something else are refused with 400, saying
// what the bytes really are, and nothing is kept.
func TestFakeClaimsRefused(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cases := []struct {
		name, media string
		body        []byte
		says        string
	}{
		{"fake.png", "", []byte("just text"), "plain text"},
		{"fake.pdf", "", pngBytes(t), "PNG"},
		{"fake.xlsx", "", zipWith(t, "a.txt"), "ZIP"},
		{"fake.xlsx", "", docxBytes(t), "DOCX"},
		{"fake.docx", "", []byte("<html></html>"), "HTML"},
		{"fake.jpg", "", pdfBytes(), "PDF"},
		{"upload.bin", "image/png", []byte("text again"), "plain text"},
		{"upload.bin", "application/pdf", xlsxBytes(t), "XLSX"},
	}
	for _, c := range cases {
		var h []string
		if c.media != "" {
			h = []string{"Content-Type", c.media}
		}
		r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name="+c.name, c.body, h...)
		if r.Status != 400 || r.ErrorCode() != desk.EINVALID || !strings.Contains(r.ErrorMessage(), c.says) {
			t.Errorf("%s (%s) = %d %s; want 400 naming %q", c.name, c.media, r.Status, r.Body, c.says)
		}
	}
	if got := w.list(w.a.ID); len(got) != 0 {
		t.Fatalf("refused uploads left %d artifacts", len(got))
	}
	assertNoFiles(t, w.sessionDir(w.a))
	// An update with fake bytes is refused and the artifact stays as it was.
	a := w.put(w.a.ID, "real.png", pngBytes(t))
	r := w.Admin("PUT", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID+"/content", []byte("not a png"))
	if r.Status != 400 {
		t.Fatalf("fake update = %d %s", r.Status, r.Body)
	}
	var got desk.Artifact
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID, nil, &got)
	if got.Revision != 1 || got.SHA256 != a.SHA256 || !bytes.Equal(w.content(w.a.ID, a.ID), pngBytes(t)) {
		t.Fatalf("refused update changed the artifact: %+v", got)
	}
}

// assertNoFiles fails if dir holds any regular file (temporary or not).
func assertNoFiles(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("file left behind: %s", p)
		}
		return nil
	})
}

func TestRoundTripsAreByteExact(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	big := make([]byte, 3<<20)
	rand.Read(big)
	for name, body := range map[string][]byte{"a.png": pngBytes(t), "b.pdf": pdfBytes(), "c.bin": big} {
		a := w.put(w.a.ID, name, body)
		if got := w.content(w.a.ID, a.ID); !bytes.Equal(got, body) {
			t.Fatalf("%s: round trip differs", name)
		}
		// The bytes on disk are the very bytes, at the documented place.
		disk, err := os.ReadFile(filepath.Join(w.sessionDir(w.a), name))
		if err != nil || !bytes.Equal(disk, body) {
			t.Fatalf("%s on disk: %v", name, err)
		}
		if a.Path != "/artifacts/"+name {
			t.Fatalf("guest path %q", a.Path)
		}
		// And the guest file system serves the same bytes.
		r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path="+a.Path, nil)
		if r.Status != 200 || !bytes.Equal(r.Body, body) {
			t.Fatalf("guest read of %s = %d", a.Path, r.Status)
		}
	}
}

func TestRangeAndConditionalRequests(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	body := []byte("0123456789abcdefghij")
	a := w.put(w.a.ID, "r.txt", body)
	u := "/v1/sessions/" + w.a.ID + "/artifacts/" + a.ID + "/content"
	r := w.Admin("GET", u, nil, "Range", "bytes=5-9")
	if r.Status != 206 || string(r.Body) != "56789" || r.Header.Get("Content-Range") != "bytes 5-9/20" {
		t.Fatalf("range = %d %q %q", r.Status, r.Body, r.Header.Get("Content-Range"))
	}
	etag := r.Header.Get("ETag")
	if etag != `"`+a.SHA256+`"` {
		t.Fatalf("etag %q", etag)
	}
	if r := w.Admin("GET", u, nil, "If-None-Match", etag); r.Status != 304 {
		t.Fatalf("If-None-Match = %d", r.Status)
	}
	if r := w.Admin("GET", u, nil); r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Content-Security-Policy") != "sandbox" {
		t.Fatalf("content served without safety headers: %v", r.Header)
	}
	// If-Match guards updates against lost writes.
	if r := w.Admin("PUT", u, []byte("new"), "If-Match", `"stale"`); r.Status != 409 {
		t.Fatalf("stale If-Match = %d", r.Status)
	}
	if r := w.Admin("PUT", u, []byte("new"), "If-Match", etag); r.Status != 200 {
		t.Fatalf("matching If-Match = %d %s", r.Status, r.Body)
	}
}

// TestUpdateRevertDelete walks an artifact through its revisions.
func TestUpdateRevertDelete(t *testing.T) { testUpdateRevertDelete(t, app.Config{}) }

func testUpdateRevertDelete(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	a := w.put(w.a.ID, "plan.md", []byte("# v1\n"))
	base := "/v1/sessions/" + w.a.ID + "/artifacts/" + a.ID
	if r := w.Admin("POST", base+"/revert", nil); r.Status != 409 {
		t.Fatalf("revert with no previous revision = %d", r.Status)
	}
	var v2 desk.Artifact
	w.Must(200, "PUT", base+"/content", []byte("# v2\n"), &v2)
	if v2.ID != a.ID || v2.Revision != 2 || v2.SHA256 == a.SHA256 || v2.Path != a.Path || !v2.CreatedAt.Equal(a.CreatedAt) {
		t.Fatalf("update: %+v", v2)
	}
	if string(w.content(w.a.ID, a.ID)) != "# v2\n" {
		t.Fatal("update not visible")
	}
	var v3 desk.Artifact
	w.Must(200, "PUT", base+"/content", []byte("# v3\n"), &v3)
	var back desk.Artifact
	w.Must(200, "POST", base+"/revert", nil, &back)
	if back.Revision != 4 || back.SHA256 != v2.SHA256 || string(w.content(w.a.ID, a.ID)) != "# v2\n" {
		t.Fatalf("revert: %+v %q", back, w.content(w.a.ID, a.ID))
	}
	// Only one step is kept.
	if r := w.Admin("POST", base+"/revert", nil); r.Status != 409 {
		t.Fatalf("second revert = %d", r.Status)
	}
	revs, _ := os.ReadDir(w.App.Home.Abs(w.ws.ID, layout.RevisionDirRel(a.ID)))
	if len(revs) != 0 {
		t.Fatalf("revision files left after revert: %d", len(revs))
	}
	w.Must(204, "DELETE", base, nil, nil)
	if r := w.Admin("GET", base, nil); r.Status != 404 {
		t.Fatalf("deleted artifact = %d", r.Status)
	}
	if _, err := os.Stat(filepath.Join(w.sessionDir(w.a), "plan.md")); !os.IsNotExist(err) {
		t.Fatalf("bytes survive delete: %v", err)
	}
	// The name is free again.
	w.put(w.a.ID, "plan.md", []byte("again"))
	// A name already in use is a conflict that changes nothing.
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name=plan.md", []byte("other")); r.Status != 409 {
		t.Fatalf("duplicate name = %d", r.Status)
	}
}

func TestImmutableArtifacts(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	var a desk.Artifact
	w.Must(201, "POST", "/v1/sessions/"+w.a.ID+"/artifacts?name=evidence.png&immutable=true", pngBytes(t), &a)
	if !a.Immutable || a.Path != "/artifacts/immutable/evidence.png" {
		t.Fatalf("immutable artifact: %+v", a)
	}
	base := "/v1/sessions/" + w.a.ID + "/artifacts/" + a.ID
	if r := w.Admin("PUT", base+"/content", pngBytes(t)); r.Status != 409 {
		t.Fatalf("update of immutable = %d", r.Status)
	}
	var ls struct{ Entries []desk.GuestEntry }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/guest/list?path=/artifacts/immutable", nil, &ls)
	if len(ls.Entries) != 1 || !ls.Entries[0].ReadOnly {
		t.Fatalf("guest view of immutable dir: %+v", ls.Entries)
	}
	w.Must(204, "DELETE", base, nil, nil) // a person may still delete it
}

// TestNamesAreSanitized: separators and leading dots never reach the file
// system; control characters are refused (TestNamesRefuseInvisibleAndAreNFC
// has the rest of that rule).
func TestNamesAreSanitized(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	if r := w.Admin("POST", "/v1/sessions/"+w.a.ID+"/artifacts?name=a%09b.csv", []byte("x,y\n")); r.Status != 400 {
		t.Fatalf("a name with a tab = %d %s; want 400", r.Status, r.Body)
	}
	for in, want := range map[string]string{
		"..%2F..%2Fescape.md": "-..-escape.md",
		".hidden.txt":         "hidden.txt",
		"report":              "report.md",
	} {
		var a desk.Artifact
		w.Must(201, "POST", "/v1/sessions/"+w.a.ID+"/artifacts?name="+in, []byte("x,y\n"), &a)
		if a.Name != want || a.Path != "/artifacts/"+want {
			t.Errorf("name %q stored as %q (%s), want %q", in, a.Name, a.Path, want)
		}
		if _, err := os.Stat(filepath.Join(w.sessionDir(w.a), want)); err != nil {
			t.Errorf("%q not stored inside the session directory: %v", want, err)
		}
	}
}

// TestActorIsolation: an actor token sees only its own actor's sessions and
// files; others answer 404 so their existence does not leak.
func TestActorIsolation(t *testing.T) { testActorIsolation(t, app.Config{}) }

func testActorIsolation(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	var alice, bob struct {
		Actor desk.Actor
		Token string
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &alice)
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bob", "kind": "agent"}, &bob)
	if !strings.HasPrefix(alice.Token, "desk_") || alice.Token == bob.Token {
		t.Fatalf("tokens %q %q", alice.Token, bob.Token)
	}
	var as desk.Session
	if r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", alice.Token, map[string]string{}); r.Status != 201 {
		t.Fatalf("alice creates a session = %d %s", r.Status, r.Body)
	} else {
		r.Decode(t, &as)
	}
	if as.Actor != alice.Actor.ID {
		t.Fatalf("alice's session belongs to %s", as.Actor)
	}
	// Alice cannot create sessions for Bob.
	if r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", alice.Token, map[string]string{"actor": "bob"}); r.Status != 403 {
		t.Fatalf("alice creates for bob = %d", r.Status)
	}
	var art desk.Artifact
	r := w.Req("POST", "/v1/sessions/"+as.ID+"/artifacts?name=mine.md", alice.Token, []byte("alice only"))
	if r.Status != 201 {
		t.Fatalf("alice puts = %d %s", r.Status, r.Body)
	}
	r.Decode(t, &art)
	if art.Origin.Actor != alice.Actor.ID || art.Origin.Kind != desk.OriginUser || art.Origin.SessionID != as.ID {
		t.Fatalf("origin not stamped from the token: %+v", art.Origin)
	}
	for _, p := range []string{
		"/v1/sessions/" + as.ID,
		"/v1/sessions/" + as.ID + "/artifacts",
		"/v1/sessions/" + as.ID + "/artifacts/" + art.ID,
		"/v1/sessions/" + as.ID + "/artifacts/" + art.ID + "/content",
		"/v1/sessions/" + as.ID + "/guest/file?path=/artifacts/mine.md",
		"/v1/sessions/" + w.a.ID, // the owner's session
	} {
		r := w.Req("GET", p, bob.Token, nil)
		if r.Status != 404 || bytes.Contains(r.Body, []byte("alice only")) {
			t.Errorf("bob GET %s = %d %s; want 404", p, r.Status, r.Body)
		}
	}
	if r := w.Req("DELETE", "/v1/sessions/"+as.ID, bob.Token, nil); r.Status != 404 {
		t.Fatalf("bob deletes alice's session = %d", r.Status)
	}
	var list struct{ Sessions []desk.Session }
	r = w.Req("GET", "/v1/workspaces/"+w.ws.ID+"/sessions", bob.Token, nil)
	r.Decode(t, &list)
	if r.Status != 200 || len(list.Sessions) != 0 {
		t.Fatalf("bob lists %d sessions", len(list.Sessions))
	}
	r = w.Req("GET", "/v1/workspaces/"+w.ws.ID+"/sessions", alice.Token, nil)
	r.Decode(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != as.ID {
		t.Fatalf("alice lists %v", list.Sessions)
	}
	// Actor tokens cannot create workspaces or actors, and see only their own workspace.
	if r := w.Req("POST", "/v1/workspaces", alice.Token, map[string]string{"name": "x"}); r.Status != 403 {
		t.Fatalf("actor creates workspace = %d", r.Status)
	}
	var other desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	if r := w.Req("GET", "/v1/workspaces/"+other.ID, alice.Token, nil); r.Status != 404 {
		t.Fatalf("alice sees another workspace = %d", r.Status)
	}
	if r := w.Req("POST", "/v1/admin/storage-pressure", alice.Token, map[string]string{"level": "soft"}); r.Status != 403 {
		t.Fatalf("actor reclaims storage = %d", r.Status)
	}
}

// TestOriginIsServerStamped: a client-supplied origin is ignored.
func TestOriginIsServerStamped(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	forged := map[string]any{"title": "x", "origin": map[string]string{"actor": "act_forged", "kind": "agent", "workspace_id": "ws_other"}}
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", forged, &x)
	if x.Origin.Actor != desk.AdminActor || x.Origin.Kind != desk.OriginUser || x.Origin.WorkspaceID != w.ws.ID {
		t.Fatalf("forged origin accepted: %+v", x.Origin)
	}
	var g desk.Group
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/groups", map[string]any{"name": "g", "origin": forged["origin"]}, &g)
	if g.Origin.Actor != desk.AdminActor {
		t.Fatalf("forged group origin: %+v", g.Origin)
	}
}

// TestCrashRecovery simulates desk stopping between the steps of an update
// and of a delete; the next start finishes both.
func TestCrashRecovery(t *testing.T) { testCrashRecovery(t, app.Config{}) }

func testCrashRecovery(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	ctx := context.Background()
	a := w.put(w.a.ID, "doc.md", []byte("old"))
	doomed := w.put(w.a.ID, "doomed.md", []byte("bye"))

	// An update whose row was committed but whose rename never happened.
	dir := layout.SessionRel(w.a.Actor, w.a.ID)
	tmp := path.Join(dir, ".desk-tmp-crashed")
	if err := os.WriteFile(w.App.Home.Abs(w.ws.ID, tmp), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	row, _ := w.App.Store.GetArtifact(ctx, a.ID)
	next := *row
	next.Revision, next.SHA256, next.Size, next.Pending = 2, sha([]byte("new")), 3, tmp
	if err := w.App.Store.UpdateArtifact(ctx, &next, 1); err != nil {
		t.Fatal(err)
	}
	// Readers already see the new bytes the row describes.
	if got := w.content(w.a.ID, a.ID); string(got) != "new" {
		t.Fatalf("before recovery the content is %q", got)
	}
	// A delete that was marked but never finished, and a session delete
	// that stopped after hiding the session.
	if err := w.App.Store.MarkArtifactDeleting(ctx, doomed.ID); err != nil {
		t.Fatal(err)
	}
	if err := w.App.Store.MarkSessionDeleting(ctx, w.b.ID); err != nil {
		t.Fatal(err)
	}
	w.put(w.a.ID, "other.md", []byte("x"))

	w.Restart()

	got, _ := w.App.Store.GetArtifact(ctx, a.ID)
	if got.Pending != "" || string(w.content(w.a.ID, a.ID)) != "new" {
		t.Fatalf("pending install not finished: %+v", got)
	}
	if _, err := os.Stat(w.App.Home.Abs(w.ws.ID, tmp)); !os.IsNotExist(err) {
		t.Fatal("temporary file left after recovery")
	}
	if _, err := os.Stat(filepath.Join(w.sessionDir(w.a), "doomed.md")); !os.IsNotExist(err) {
		t.Fatal("marked delete not finished")
	}
	if del, _ := w.App.Store.ListDeletingArtifacts(ctx); len(del) != 0 {
		t.Fatalf("rows still deleting: %d", len(del))
	}
	if _, err := os.Stat(w.sessionDir(w.b)); !os.IsNotExist(err) {
		t.Fatal("session delete not finished")
	}
	// Recovery is idempotent.
	w.Restart()
	if got := w.list(w.a.ID); len(got) != 2 {
		t.Fatalf("after second recovery: %d artifacts", len(got))
	}
}

func TestInterruptedUploadKeepsNothing(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	a := w.put(w.a.ID, "keep.bin", []byte{1, 2, 3})
	// A body shorter than its declared length never becomes an artifact,
	// and an update cut short leaves the previous bytes.
	for _, p := range []string{
		"/v1/sessions/" + w.a.ID + "/artifacts?name=cut.bin",
		"/v1/sessions/" + w.a.ID + "/artifacts/" + a.ID + "/content",
	} {
		method := "POST"
		if strings.HasSuffix(p, "/content") {
			method = "PUT"
		}
		status := shortBody(t, w.Server.URL+p, method, w.Token)
		if status < 400 && status != 0 {
			t.Fatalf("%s short body = %d", p, status)
		}
	}
	if got := w.list(w.a.ID); len(got) != 1 {
		t.Fatalf("cut upload stored: %d artifacts", len(got))
	}
	if b := w.content(w.a.ID, a.ID); !bytes.Equal(b, []byte{1, 2, 3}) {
		t.Fatalf("cut update changed the bytes: %v", b)
	}
	ents, _ := os.ReadDir(w.sessionDir(w.a))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".desk-tmp-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }
