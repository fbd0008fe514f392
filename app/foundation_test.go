package app_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/layout"
)

// world is a workspace with two sessions of its owner, ready for tests.
type world struct {
	*apptest.Env
	ws   desk.Workspace
	a, b desk.Session
}

func newWorld(t *testing.T) *world { return newWorldOn(t, app.Config{}) }

func newWorldOn(t *testing.T, cfg app.Config) *world {
	e := apptest.Start(t, cfg)
	w := &world{Env: e}
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "acme"}, &w.ws)
	e.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "A"}, &w.a)
	e.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "B"}, &w.b)
	return w
}

func (w *world) put(ses, name string, body []byte) desk.Artifact {
	w.T.Helper()
	var a desk.Artifact
	w.Must(201, "POST", "/v1/sessions/"+ses+"/artifacts?name="+name, body, &a)
	return a
}

func (w *world) content(ses, art string) []byte {
	w.T.Helper()
	r := w.Admin("GET", "/v1/sessions/"+ses+"/artifacts/"+art+"/content", nil)
	if r.Status != 200 {
		w.T.Fatalf("content = %d %s", r.Status, r.Body)
	}
	return r.Body
}

func (w *world) list(ses string) []desk.Artifact {
	w.T.Helper()
	var out struct{ Artifacts []desk.Artifact }
	w.Must(200, "GET", "/v1/sessions/"+ses+"/artifacts", nil, &out)
	return out.Artifacts
}

// sessionDir is the host directory holding a session's artifacts.
func (w *world) sessionDir(x desk.Session) string {
	return w.App.Home.Abs(x.WorkspaceID, layout.SessionRel(x.Actor, x.ID))
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestS_F_NewSessionIsolatedWorkspace: a new session starts with an empty,
// isolated artifact area, whatever its siblings hold.
func TestS_F_NewSessionIsolatedWorkspace(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	w.put(w.a.ID, "notes.md", []byte("# A's notes\n"))
	if got := w.list(w.b.ID); len(got) != 0 {
		t.Fatalf("session B sees %d artifacts of A", len(got))
	}
	var g struct{ Entries []desk.GuestEntry }
	w.Must(200, "GET", "/v1/sessions/"+w.b.ID+"/guest/list?path=/artifacts", nil, &g)
	if len(g.Entries) != 0 {
		t.Fatalf("B's /artifacts lists %v", g.Entries)
	}
	var c desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{}, &c)
	if got := w.list(c.ID); len(got) != 0 {
		t.Fatalf("a brand-new session starts with %d artifacts", len(got))
	}
	if c.Signature == w.a.Signature || !strings.HasPrefix(c.Signature, "@") {
		t.Fatalf("signature %q not fresh and readable", c.Signature)
	}
}

// TestS_G_CrossSessionReadDenied: no door leads from one session's guest
// file system into another's files.
func TestS_G_CrossSessionReadDenied(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	secret := w.put(w.b.ID, "secret.md", []byte("B's secret"))

	// An artifact id of B through A's route is unknown to A.
	if r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/artifacts/"+secret.ID+"/content", nil); r.Status != 404 {
		t.Fatalf("B's artifact through A = %d %s", r.Status, r.Body)
	}
	// A symlink planted in A's directory that points at B's file.
	if err := os.Symlink(filepath.Join(w.sessionDir(w.b), "secret.md"), filepath.Join(w.sessionDir(w.a), "link.md")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(w.sessionDir(w.a), filepath.Join(w.sessionDir(w.b), "secret.md"))
	if err := os.Symlink(rel, filepath.Join(w.sessionDir(w.a), "rel.md")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/artifacts/link.md",
		"/artifacts/rel.md",
		"/artifacts/../../" + w.b.ID + "/secret.md",
		filepath.Join(w.sessionDir(w.b), "secret.md"), // a host path
		"/etc/passwd",
	} {
		r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path="+strings.ReplaceAll(p, "%", "%25"), nil)
		if r.Status != 403 || r.ErrorCode() != desk.EFORBIDDEN {
			t.Errorf("read %q from A = %d %s; want 403 forbidden", p, r.Status, r.Body)
		}
		if bytes.Contains(r.Body, []byte("B's secret")) {
			t.Fatalf("read %q leaked B's bytes", p)
		}
	}
	// The links that lead out are not even listed.
	var g struct{ Entries []desk.GuestEntry }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/guest/list?path=/artifacts", nil, &g)
	for _, e := range g.Entries {
		if e.Name == "link.md" || e.Name == "rel.md" {
			t.Fatalf("escaping link listed: %+v", e)
		}
	}
	// A NUL byte never reaches the disk.
	if r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path=/artifacts/a%00b", nil); r.Status != 400 {
		t.Fatalf("NUL path = %d %s", r.Status, r.Body)
	}
}

// TestS_I_ArtifactSurvivesSettle: reclaiming an execution's scratch (what
// settling does) leaves every artifact byte-identical.
func TestS_I_ArtifactSurvivesSettle(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	body := pngBytes(t)
	a := w.put(w.a.ID, "chart.png", body)
	scratch := w.App.Home.Abs(w.ws.ID, layout.ScratchRel("exe_01TESTSCRATCH00000000000000"))
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(scratch, "tmp.csv"), []byte("a,b\n1,2\n"), 0o644)
	var rep desk.ReclaimReport
	w.Must(200, "POST", "/v1/admin/storage-pressure", map[string]string{"level": "soft"}, &rep)
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("scratch survived: %v", err)
	}
	if got := w.content(w.a.ID, a.ID); !bytes.Equal(got, body) {
		t.Fatal("artifact bytes changed after scratch was reclaimed")
	}
}

// TestS_J_ArtifactSurvivesRestart restarts the server on the same home:
// sessions, their flags and every artifact come back exactly.
func TestS_J_ArtifactSurvivesRestart(t *testing.T) { testS_J_ArtifactSurvivesRestart(t, app.Config{}) }

func testS_J_ArtifactSurvivesRestart(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	p, d := pngBytes(t), pdfBytes()
	ap := w.put(w.a.ID, "image.png", p)
	ad := w.put(w.a.ID, "paper.pdf", d)
	w.Must(200, "PATCH", "/v1/sessions/"+w.a.ID, map[string]any{"pinned": true, "title": "kept"}, nil)
	before := w.list(w.a.ID)

	w.Restart()

	var x desk.Session
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID, nil, &x)
	if !x.Pinned || x.Title != "kept" || x.Signature != w.a.Signature {
		t.Fatalf("session after restart: %+v", x)
	}
	after := w.list(w.a.ID)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("artifact rows changed across restart:\n%v\n%v", before, after)
	}
	if !bytes.Equal(w.content(w.a.ID, ap.ID), p) || !bytes.Equal(w.content(w.a.ID, ad.ID), d) {
		t.Fatal("artifact bytes changed across restart")
	}
}

// TestS_K_DeleteSessionDeletesArtifacts: delete cascades to artifacts (rows
// and bytes), kept revisions and bindings.
func TestS_K_DeleteSessionDeletesArtifacts(t *testing.T) {
	apptest.Parallel(t)
	testS_K_DeleteSessionDeletesArtifacts(t, app.Config{})
}

func testS_K_DeleteSessionDeletesArtifacts(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	a := w.put(w.a.ID, "r.md", []byte("one"))
	w.Must(200, "PUT", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID+"/content", []byte("two"), nil)
	keep := w.put(w.b.ID, "r.md", []byte("B keeps this"))
	dir := w.sessionDir(w.a)
	revs := w.App.Home.Abs(w.ws.ID, layout.RevisionDirRel(a.ID))
	if _, err := os.Stat(revs); err != nil {
		t.Fatalf("revision not kept before delete: %v", err)
	}

	w.Must(204, "DELETE", "/v1/sessions/"+w.a.ID, nil, nil)

	if r := w.Admin("GET", "/v1/sessions/"+w.a.ID, nil); r.Status != 404 {
		t.Fatalf("deleted session = %d", r.Status)
	}
	if r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID, nil); r.Status != 404 {
		t.Fatalf("artifact of deleted session = %d", r.Status)
	}
	for _, p := range []string{dir, revs} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("%s survives its session: %v", p, err)
		}
	}
	if n, _ := w.App.Store.CountArtifacts(t.Context(), w.a.ID); n != 0 {
		t.Fatalf("%d artifact rows survive", n)
	}
	if got := w.content(w.b.ID, keep.ID); string(got) != "B keeps this" {
		t.Fatalf("sibling artifact = %q", got)
	}
	if r := w.Admin("DELETE", "/v1/sessions/"+w.a.ID, nil); r.Status != 404 {
		t.Fatalf("second delete = %d", r.Status)
	}
}

// TestS_L_DeleteSessionKeepsGroups: groups belong to the workspace; deleting
// a session that binds one leaves it and its items.
func TestS_L_DeleteSessionKeepsGroups(t *testing.T) {
	apptest.Parallel(t)
	testS_L_DeleteSessionKeepsGroups(t, app.Config{})
}

func testS_L_DeleteSessionKeepsGroups(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	var g desk.Group
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/groups", map[string]string{"name": "research"}, &g)
	w.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"text": "a captured paragraph"}, nil)
	w.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"url": "https://example.com/a", "title": "A"}, nil)
	w.Must(200, "PUT", "/v1/sessions/"+w.a.ID+"/bindings", map[string]any{"group_ids": []string{g.ID}}, nil)
	w.Must(200, "PUT", "/v1/sessions/"+w.b.ID+"/bindings", map[string]any{"group_ids": []string{g.ID}}, nil)

	w.Must(204, "DELETE", "/v1/sessions/"+w.a.ID, nil, nil)

	var got struct {
		desk.Group
		Items []desk.Item
	}
	w.Must(200, "GET", "/v1/groups/"+g.ID, nil, &got)
	if got.ItemCount != 2 || len(got.Items) != 2 {
		t.Fatalf("group after session delete: %+v", got)
	}
	var bs struct{ Groups []desk.Group }
	w.Must(200, "GET", "/v1/sessions/"+w.b.ID+"/bindings", nil, &bs)
	if len(bs.Groups) != 1 || bs.Groups[0].ID != g.ID {
		t.Fatalf("sibling's binding lost: %+v", bs)
	}
	// The bound group's items are visible in the sibling's /context.
	var ls struct{ Entries []desk.GuestEntry }
	w.Must(200, "GET", "/v1/sessions/"+w.b.ID+"/guest/list?path=/context/"+g.ID, nil, &ls)
	if len(ls.Entries) != 2 {
		t.Fatalf("/context/%s lists %v", g.ID, ls.Entries)
	}
}

// TestS_P_StoragePressureKeepsArtifacts: pressure reclaims only what nothing
// owns and never an artifact.
func TestS_P_StoragePressureKeepsArtifacts(t *testing.T) {
	apptest.Parallel(t)
	testS_P_StoragePressureKeepsArtifacts(t, app.Config{})
}

func testS_P_StoragePressureKeepsArtifacts(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	var arts []desk.Artifact
	for i := range 5 {
		arts = append(arts, w.put(w.a.ID, fmt.Sprintf("a%d.md", i), bytes.Repeat([]byte("x"), 1000*(i+1))))
	}
	var g desk.Group
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/groups", map[string]string{"name": "g"}, &g)
	var it desk.Item
	w.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"text": "gone soon"}, &it)
	// An item that a crash left unreachable (membership removed in the
	// store only), a stale temporary file and an orphaned scratch folder.
	if err := w.App.Store.RemoveGroupItem(t.Context(), g.ID, it.ID); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(w.sessionDir(w.a), ".desk-tmp-abandoned")
	os.WriteFile(stale, make([]byte, 4096), 0o644)
	old := mustOld(t, stale)
	_ = old
	scratch := w.App.Home.Abs(w.ws.ID, layout.ScratchRel("exe_01ORPHAN000000000000000000"))
	os.MkdirAll(scratch, 0o755)
	os.WriteFile(filepath.Join(scratch, "big.bin"), make([]byte, 8192), 0o644)

	for _, level := range []string{"soft", "critical"} {
		var rep desk.ReclaimReport
		w.Must(200, "POST", "/v1/admin/storage-pressure", map[string]string{"level": level}, &rep)
		for _, a := range rep.Actions {
			if strings.Contains(a.Target, "art_") || strings.HasSuffix(a.Target, ".md") {
				t.Fatalf("%s pressure touched an artifact: %+v", level, a)
			}
		}
		if level == "soft" {
			kinds := map[string]bool{}
			for _, a := range rep.Actions {
				kinds[a.Kind] = true
			}
			if !kinds["item"] || !kinds["scratch"] || !kinds["temp_file"] || rep.ReclaimedBytes < 8192+4096 {
				t.Fatalf("soft pressure report: %+v", rep)
			}
		}
	}
	got := w.list(w.a.ID)
	if len(got) != len(arts) {
		t.Fatalf("%d artifacts after pressure, want %d", len(got), len(arts))
	}
	for _, a := range arts {
		if b := w.content(w.a.ID, a.ID); sha(b) != a.SHA256 {
			t.Fatalf("artifact %s changed under pressure", a.Name)
		}
	}
	if r := w.Admin("POST", "/v1/admin/storage-pressure", map[string]string{"level": "extreme"}); r.Status != 400 {
		t.Fatalf("bad level = %d", r.Status)
	}
}

// mustOld backdates a file so collection treats it as abandoned.
func mustOld(t *testing.T, p string) error {
	t.Helper()
	old := mustTime(t)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	return nil
}

func TestHealthAndAuth(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	r := w.Req("GET", "/healthz", "", nil)
	if r.Status != 200 || !bytes.Contains(r.Body, []byte(`"ok"`)) {
		t.Fatalf("healthz = %d %s", r.Status, r.Body)
	}
	for _, tok := range []string{"", "wrong", "desk_notarealtoken"} {
		r := w.Req("GET", "/v1/workspaces", tok, nil)
		if r.Status != 401 || r.ErrorCode() != desk.EUNAUTHORIZED || r.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("token %q = %d %s", tok, r.Status, r.Body)
		}
	}
	if r := w.Admin("GET", "/v1/nope", nil); r.Status != 404 || r.ErrorCode() != desk.ENOTFOUND {
		t.Fatalf("unknown route = %d %s", r.Status, r.Body)
	}
	// The generated admin token is kept in the home with mode 0600 and
	// reused by the next start.
	info, err := os.Stat(w.App.Home.AdminToken())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token: %v %v", info, err)
	}
	tok := w.Token
	w.Restart()
	if w.Token != tok {
		t.Fatal("admin token changed across restart")
	}
}

func TestBadInputIsRefusedCleanly(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	before := w.list(w.a.ID)
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", "/v1/workspaces", "{", 400, desk.EINVALID},
		{"POST", "/v1/workspaces", `{"name":"x","nmae":"typo"}`, 400, desk.EINVALID},
		{"POST", "/v1/workspaces", `{"name":""}`, 400, desk.EINVALID},
		{"POST", "/v1/workspaces", "", 400, desk.EINVALID},
		{"POST", "/v1/workspaces/" + w.ws.ID + "/actors", `{"name":"../x","kind":"human"}`, 400, desk.EINVALID},
		{"POST", "/v1/workspaces/" + w.ws.ID + "/actors", `{"name":"bob","kind":"robot"}`, 400, desk.EINVALID},
		{"POST", "/v1/workspaces/" + w.ws.ID + "/actors", `{"name":"owner","kind":"human"}`, 409, desk.ECONFLICT},
		{"GET", "/v1/workspaces/ws_nope", nil, 404, desk.ENOTFOUND},
		{"GET", "/v1/sessions/garbage", nil, 404, desk.ENOTFOUND},
		{"GET", "/v1/workspaces/" + w.ws.ID + "/sessions?pinned=maybe", nil, 400, desk.EINVALID},
		{"PATCH", "/v1/sessions/" + w.a.ID, `{"title":"a\u0007b"}`, 400, desk.EINVALID},
		{"POST", "/v1/sessions/" + w.a.ID + "/artifacts", []byte("no name"), 400, desk.EINVALID},
		{"POST", "/v1/sessions/" + w.a.ID + "/artifacts?name=..", []byte("x"), 400, desk.EINVALID},
		{"POST", "/v1/sessions/" + w.a.ID + "/artifacts?name=x.md&immutable=perhaps", []byte("x"), 400, desk.EINVALID},
		{"PUT", "/v1/sessions/" + w.a.ID + "/bindings", `{"group_ids":["grp_nope"]}`, 400, desk.EINVALID},
		{"POST", "/v1/workspaces/" + w.ws.ID + "/sessions", `{"actor":"nobody"}`, 404, desk.ENOTFOUND},
		{"POST", "/v1/groups/grp_01ARZ3NDEKTSV4RRFFQ69G5FAV/items", `{"text":"x"}`, 404, desk.ENOTFOUND},
	} {
		r := w.Admin(c.method, c.path, c.body)
		if r.Status != c.status || r.ErrorCode() != c.code || r.ErrorMessage() == "" {
			t.Errorf("%s %s %v = %d %s; want %d %s", c.method, c.path, c.body, r.Status, r.Body, c.status, c.code)
		}
	}
	if after := w.list(w.a.ID); len(after) != len(before) {
		t.Fatalf("refusals stored something: %v", after)
	}
	var x desk.Session
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID, nil, &x)
	if x.Title != "A" {
		t.Fatalf("refused patch changed the title to %q", x.Title)
	}
	// A JSON body over the limit is too_large.
	big := `{"name":"` + strings.Repeat("x", 5<<20) + `"}`
	if r := w.Admin("POST", "/v1/workspaces", big); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("huge JSON = %d", r.Status)
	}
}
