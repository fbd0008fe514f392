package app_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
	"github.com/desk-runtime/desk/transfer"
	"github.com/desk-runtime/desk/workspace"
)

type tarEntry struct {
	name, link string
	typ        byte
	mode       int64
	body       []byte
}

// tarEntries reads a tar.gz into memory (tests only).
func tarEntries(t testing.TB, b []byte) []tarEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var out []tarEntry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not tar: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{name: h.Name, link: h.Linkname, typ: h.Typeflag, mode: h.Mode, body: body})
	}
	return out
}

// makeArchive writes entries as a tar.gz.
func makeArchive(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: e.mode, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		must(t, tw.WriteHeader(h))
		if h.Size > 0 {
			_, err := tw.Write(e.body)
			must(t, err)
		}
	}
	must(t, tw.Close())
	must(t, zw.Close())
	return buf.Bytes()
}

// richWorld fills a workspace with everything an export carries and
// everything it must leave behind. It returns an actor token.
func richWorld(t *testing.T, w *world) string {
	t.Helper()
	_, tok := w.newActor("alice")
	w.mustUpload("/reports/q1/summary.txt", []byte("summary"), "actor", "alice")
	w.mustUpload("/ünïcode/名前.txt", []byte("unicode"))
	w.mustUpload("/"+strings.Repeat("long-name-", 12)+"/file.txt", []byte("long"))
	a := w.put(w.a.ID, "report.md", []byte("# v1\n"))
	w.Must(200, "PUT", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID+"/content", []byte("# v2\n"), nil)
	var g desk.Group
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/groups", map[string]string{"name": "ctx"}, &g)
	w.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"text": "remember this"}, nil)
	w.Must(200, "PUT", "/v1/sessions/"+w.a.ID+"/bindings", map[string]any{"group_ids": []string{g.ID}}, nil)
	home := w.App.Home
	wsDir := home.Workspace(w.ws.ID)
	for rel, body := range map[string]string{
		"checkout/README.md":              "# project",
		"checkout/src/main.go":            "package main",
		"skills/s.md":                     "skill",
		"knowledge/k.md":                  "knowledge",
		".system/archive/2026/01/02/x.nd": `{"a":1}` + "\n",
		".scratch/exe_X/tmp.txt":          "scratch never leaves",
		"checkout/.desk-tmp-abandoned":    "temporary",
		".system/other/state":             "not exported",
		".system/template/baseline.json":  `{"template":"starter"}`,
	} {
		p := filepath.Join(wsDir, filepath.FromSlash(rel))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(body), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(wsDir, "checkout", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(t, os.MkdirAll(filepath.Join(wsDir, "checkout", "empty"), 0o755))
	must(t, os.Symlink("README.md", filepath.Join(wsDir, "checkout", "link.md")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(wsDir, "checkout", "out.md")))
	return tok
}

// TestExportContents: what an export carries, what it never does, and that
// it is deterministic and readable by GNU tar.
func TestExportContents(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	tok := richWorld(t, w)
	u := "/v1/workspaces/" + w.ws.ID + "/export"
	r := w.Must(200, "GET", u, nil, nil)
	if ct := r.Header.Get("Content-Type"); ct != "application/gzip" || !strings.Contains(r.Header.Get("Content-Disposition"), w.ws.ID+".tar.gz") {
		t.Fatalf("headers = %v", r.Header)
	}
	first := r.Body
	if again := w.Must(200, "GET", u, nil, nil).Body; !bytes.Equal(first, again) {
		t.Fatalf("two exports of an unchanged workspace differ")
	}
	es := tarEntries(t, first)
	if es[0].name != "meta/manifest.json" {
		t.Fatalf("first entry = %s", es[0].name)
	}
	var m transfer.Manifest
	must(t, json.Unmarshal(es[0].body, &m))
	if m.WorkspaceID != w.ws.ID || m.SkipWorkspace || m.Format != transfer.Format {
		t.Fatalf("manifest = %+v", m)
	}
	names := map[string]tarEntry{}
	var all bytes.Buffer
	for _, e := range es {
		names[e.name] = e
		all.Write(e.body)
		all.WriteString(e.name + e.link)
		switch {
		case strings.HasPrefix(e.name, ".scratch"), strings.Contains(e.name, ".desk-tmp-"), strings.HasPrefix(e.name, ".system/other"):
			t.Errorf("the export carries %s", e.name)
		}
	}
	for _, want := range []string{
		"meta/workspaces.000001.ndjson", "meta/actors.000001.ndjson", "meta/sessions.000001.ndjson", "meta/artifacts.000001.ndjson",
		"meta/selection_groups.000001.ndjson", "meta/items.000001.ndjson", "meta/group_items.000001.ndjson", "meta/session_bindings.000001.ndjson",
		"checkout/", "checkout/README.md", "checkout/empty/", "checkout/src/main.go", "skills/s.md", "knowledge/k.md",
		".system/archive/2026/01/02/x.nd", "workspace/", "workspace/" + w.a.Actor + "/sessions/" + w.a.ID + "/report.md",
	} {
		if _, ok := names[want]; !ok {
			t.Errorf("the export lacks %s", want)
		}
	}
	if e := names["checkout/run.sh"]; e.mode != 0o755 {
		t.Errorf("run.sh mode = %o", e.mode)
	}
	if e := names["checkout/link.md"]; e.typ != tar.TypeSymlink || e.link != "README.md" {
		t.Errorf("an inside link = %+v", e)
	}
	if _, ok := names["checkout/out.md"]; ok {
		t.Errorf("a link leading out was exported")
	}
	// Items and their group view, and revisions and their artifact, are
	// one file each: written once, then as hard links.
	links := 0
	for _, e := range es {
		if e.typ == tar.TypeLink {
			links++
		}
	}
	if links < 1 {
		t.Errorf("no hard links in the export")
	}
	// Token hashes never leave desk.
	if bytes.Contains(all.Bytes(), []byte(workspace.HashToken(tok))) || bytes.Contains(all.Bytes(), []byte(tok)) {
		t.Fatalf("the export carries a token")
	}
	// skip_workspace leaves the actors' areas out and keeps the rest.
	skip := w.Must(200, "GET", u+"?skip_workspace=true", nil, nil).Body
	for _, e := range tarEntries(t, skip) {
		if strings.HasPrefix(e.name, "workspace/") {
			t.Fatalf("skip_workspace exported %s", e.name)
		}
		if e.name == "meta/manifest.json" {
			must(t, json.Unmarshal(e.body, &m))
			if !m.SkipWorkspace {
				t.Fatalf("manifest = %+v", m)
			}
		}
	}
	// GNU tar reads it.
	if _, err := exec.LookPath("tar"); err == nil {
		f := filepath.Join(t.TempDir(), "x.tar.gz")
		must(t, os.WriteFile(f, first, 0o644))
		out, err := exec.Command("tar", "-tzf", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "checkout/README.md") {
			t.Fatalf("GNU tar: %v\n%s", err, out)
		}
		dir := t.TempDir()
		if out, err := exec.Command("tar", "-xzf", f, "-C", dir).CombinedOutput(); err != nil {
			t.Fatalf("GNU tar -x: %v\n%s", err, out)
		}
	}
	// Only the admin exports.
	if r := w.Req("GET", u, tok, nil); r.Status != 403 {
		t.Fatalf("an actor exports = %d", r.Status)
	}
	if r := w.Admin("GET", "/v1/workspaces/"+desk.NewID(desk.PrefixWorkspace)+"/export", nil); r.Status != 404 {
		t.Fatalf("unknown workspace = %d", r.Status)
	}
}

// TestExportImportRoundTrip: export → import on a second server → export
// gives the same bytes, and the workspace works there.
func TestExportImportRoundTrip(t *testing.T) { testExportImportRoundTrip(t, app.Config{}) }

func testExportImportRoundTrip(t *testing.T, cfg app.Config) {
	w := newWorldOn(t, cfg)
	richWorld(t, w)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body

	cfg2 := cfg
	cfg2.Home = ""
	if cfg.Postgres != "" {
		cfg2.Postgres = pgtest.DSN(t)
	}
	e2 := apptest.Start(t, cfg2)
	r := e2.Admin("POST", "/v1/workspaces/import?new_tokens=true", exported)
	if r.Status != 201 {
		t.Fatalf("import = %d %s", r.Status, r.Body)
	}
	var res desk.ImportResult
	r.Decode(t, &res)
	if res.Workspace.ID != w.ws.ID || res.Rows["actors"] != 2 || res.Rows["artifacts"] != 1 || len(res.Tokens) != 2 {
		t.Fatalf("import result = %+v", res)
	}
	again := e2.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	if !bytes.Equal(exported, again) {
		t.Fatalf("the round trip changed the export (%d vs %d bytes)", len(exported), len(again))
	}
	// The imported workspace works: files, artifacts with their kept
	// revision, and the minted tokens.
	var tok string
	for _, at := range res.Tokens {
		if at.Actor.Name == "alice" {
			tok = at.Token
		}
	}
	r = e2.Req("GET", fq(w.ws.ID, true, "file", "path", "/reports/q1/summary.txt"), tok, nil)
	if r.Status != 200 || string(r.Body) != "summary" {
		t.Fatalf("alice's file on the second server = %d %s", r.Status, r.Body)
	}
	var arts struct{ Artifacts []desk.Artifact }
	e2.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/artifacts", nil, &arts)
	if len(arts.Artifacts) != 1 {
		t.Fatalf("artifacts = %+v", arts)
	}
	a := arts.Artifacts[0]
	var reverted desk.Artifact
	e2.Must(200, "POST", "/v1/sessions/"+w.a.ID+"/artifacts/"+a.ID+"/revert", nil, &reverted)
	if reverted.SHA256 != sha([]byte("# v1\n")) {
		t.Fatalf("revert on the second server = %+v", reverted)
	}
	var gl struct{ Entries []desk.GuestEntry }
	e2.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/guest/list?path=/context", nil, &gl)
	if len(gl.Entries) != 1 {
		t.Fatalf("the bound group did not survive: %+v", gl)
	}
	// The same archive again is a conflict and changes nothing.
	before := snapshot(t, e2.App.Home.Root+"/workspaces")
	if r := e2.Admin("POST", "/v1/workspaces/import", exported); r.Status != 409 {
		t.Fatalf("second import = %d %s", r.Status, r.Body)
	}
	if after := snapshot(t, e2.App.Home.Root+"/workspaces"); !mapsEqual(before, after) {
		t.Fatalf("a refused import changed the workspaces")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestImportRefusesUnsafeArchives: tar-slip and friends are refused with
// nothing left behind.
func TestImportRefusesUnsafeArchives(t *testing.T) {
	apptest.Parallel(t)
	src := newWorld(t)
	good := src.Must(200, "GET", "/v1/workspaces/"+src.ws.ID+"/export", nil, nil).Body
	base := tarEntries(t, good)
	evilDir := t.TempDir()
	evilFile := filepath.Join(evilDir, "pwned")

	e := apptest.Start(t, app.Config{ImportMaxBytes: 1 << 20})
	with := func(extra ...tarEntry) []byte {
		return makeArchive(t, append(append([]tarEntry(nil), base...), extra...))
	}
	tamperRows := func(table string, edit func(map[string]any)) []byte {
		var es []tarEntry
		for _, x := range base {
			if x.name == "meta/"+table+".000001.ndjson" {
				// The first row is edited; the rest stay as they were.
				first, rest, _ := bytes.Cut(x.body, []byte("\n"))
				var row map[string]any
				must(t, json.Unmarshal(first, &row))
				edit(row)
				b, _ := json.Marshal(row)
				x.body = append(append(b, '\n'), rest...)
			}
			es = append(es, x)
		}
		return makeArchive(t, es)
	}
	reg := func(name, body string) tarEntry { return tarEntry{name: name, typ: tar.TypeReg, body: []byte(body)} }
	cases := []struct {
		name string
		body []byte
		code int
	}{
		{"absolute path", with(reg(evilFile, "x")), 400},
		{"dotdot", with(reg("checkout/../../../"+filepath.Base(evilDir)+"/pwned", "x")), 400},
		{"dotdot at the top", with(reg("../pwned", "x")), 400},
		{"symlink to an absolute path", with(tarEntry{name: "checkout/l", typ: tar.TypeSymlink, link: evilDir}), 400},
		{"symlink climbing out", with(tarEntry{name: "checkout/l", typ: tar.TypeSymlink, link: "../../../../.."}), 400},
		{"write through an inside link", with(tarEntry{name: "checkout/l", typ: tar.TypeSymlink, link: "../knowledge"}, reg("checkout/l/x", "x")), 400},
		{"hard link to an absolute path", with(tarEntry{name: "checkout/h", typ: tar.TypeLink, link: "/etc/passwd"}), 400},
		{"hard link climbing out", with(tarEntry{name: "checkout/h", typ: tar.TypeLink, link: "../../../etc/passwd"}), 400},
		{"hard link to nothing", with(tarEntry{name: "checkout/h", typ: tar.TypeLink, link: "checkout/none"}), 400},
		{"character device", with(tarEntry{name: "checkout/dev", typ: tar.TypeChar}), 400},
		{"block device", with(tarEntry{name: "checkout/blk", typ: tar.TypeBlock}), 400},
		{"fifo", with(tarEntry{name: "checkout/fifo", typ: tar.TypeFifo}), 400},
		{"scratch", with(reg(".scratch/exe_X/file", "x")), 400},
		{"unknown directory", with(reg("etc/passwd", "x")), 400},
		{"temporary file", with(reg("checkout/.desk-tmp-1", "x")), 400},
		{"duplicate file", with(reg("checkout/a", "1"), reg("checkout/a", "2")), 400},
		{"no manifest", makeArchive(t, base[1:]), 400},
		{"rows of another workspace", tamperRows("actors", func(r map[string]any) { r["workspace_id"] = desk.NewID(desk.PrefixWorkspace) }), 400},
		{"a path-forming id that is not an id", tamperRows("actors", func(r map[string]any) { r["id"] = "../../etc" }), 400},
		{"unknown row column", tamperRows("workspaces", func(r map[string]any) { r["owner_token"] = "x" }), 400},
		{"a session worktree that climbs out", tamperRows("sessions", func(r map[string]any) { r["worktree"] = "../../../etc" }), 400},
		{"a worktree directory with a bad name", with(reg("worktrees/x.lock/file", "x")), 400},
		{"not gzip", []byte("definitely not an archive"), 400},
		{"truncated", good[:len(good)-20], 400},
		{"over the size limit", with(reg("checkout/big", strings.Repeat("x", 2<<20))), 413},
	}
	for _, c := range cases {
		r := e.Admin("POST", "/v1/workspaces/import", c.body)
		if r.Status != c.code {
			t.Errorf("%s = %d %s; want %d", c.name, r.Status, r.Body, c.code)
		}
		if _, err := os.Stat(evilFile); err == nil {
			t.Fatalf("%s wrote outside desk", c.name)
		}
		if r := e.Admin("GET", "/v1/workspaces/"+src.ws.ID, nil); r.Status != 404 {
			t.Fatalf("%s left the workspace row behind", c.name)
		}
		for _, dir := range []string{e.App.Home.Workspace(src.ws.ID), filepath.Join(e.App.Home.Root, ".import")} {
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Fatalf("%s left %s behind", c.name, dir)
			}
		}
	}
	// The good archive still imports, and only the admin may import.
	var other desk.Workspace
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "tokens"}, &other)
	var actor struct{ Token string }
	e.Must(201, "POST", "/v1/workspaces/"+other.ID+"/actors", map[string]string{"name": "x", "kind": "agent"}, &actor)
	tok := actor.Token
	if r := e.Req("POST", "/v1/workspaces/import", tok, good); r.Status != 403 && r.Status != 401 {
		t.Fatalf("an actor imports = %d", r.Status)
	}
	if r := e.Admin("POST", "/v1/workspaces/import", good); r.Status != 201 {
		t.Fatalf("the good archive = %d %s", r.Status, r.Body)
	}
}

// TestExportAcrossStores: an export from SQLite imports into Postgres and
// exports again to the same bytes.
func TestExportAcrossStores(t *testing.T) {
	apptest.Parallel(t)
	dsn := pgtest.DSN(t)
	w := newWorld(t)
	richWorld(t, w)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	e := apptest.Start(t, app.Config{Postgres: dsn})
	e.Must(201, "POST", "/v1/workspaces/import", exported, nil)
	if again := e.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body; !bytes.Equal(exported, again) {
		t.Fatalf("SQLite → Postgres changed the export (%d vs %d bytes)", len(exported), len(again))
	}
}

// TestImportRecovery: a tree renamed into place whose rows never arrived
// is removed at startup; one whose rows arrived keeps its files.
func TestImportRecovery(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ex := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	e := apptest.Start(t, app.Config{})
	e.Must(201, "POST", "/v1/workspaces/import", ex, nil)
	// Simulate a crash after the rename: a pending tree without rows, and
	// a pending marker left in an imported workspace.
	ghost := desk.NewID(desk.PrefixWorkspace)
	must(t, os.MkdirAll(filepath.Join(e.App.Home.Workspace(ghost), ".system"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.App.Home.Workspace(ghost), ".system", "import-pending"), []byte(`{"host":"`+hostname()+`","pid":1999999999}`), 0o644))
	must(t, os.WriteFile(filepath.Join(e.App.Home.Workspace(w.ws.ID), ".system", "import-pending"), []byte(`{"host":"`+hostname()+`","pid":1999999999}`), 0o644))
	must(t, os.MkdirAll(filepath.Join(e.App.Home.Root, ".import", "import-123", "tree"), 0o755))
	e.Restart()
	if _, err := os.Stat(e.App.Home.Workspace(ghost)); !os.IsNotExist(err) {
		t.Fatalf("a tree without rows survived recovery")
	}
	if _, err := os.Stat(filepath.Join(e.App.Home.Workspace(w.ws.ID), ".system", "import-pending")); !os.IsNotExist(err) {
		t.Fatalf("the marker of a committed import survived recovery")
	}
	if _, err := os.Stat(e.App.Home.Abs(w.ws.ID, layout.CheckoutDir)); err != nil {
		t.Fatalf("a committed import lost its files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.App.Home.Root, ".import")); !os.IsNotExist(err) {
		t.Fatalf("staging survived recovery")
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// TestImportCarriesConversations: the queue, executions, transcript and
// the ledger travel with a workspace. The importing desk already has
// events of its own, so the imported ledger gets fresh seqs above them,
// in the exported order.
func TestImportCarriesConversations(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	var c desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": "chat", "model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "hello back"}}}}, &c)
	w.Must(202, "POST", "/v1/sessions/"+c.ID+"/messages", map[string]string{"text": "hello"}, nil)
	var exes struct{ Executions []desk.Execution }
	waitFor(t, "the scripted turn to finish", func() bool {
		w.Must(200, "GET", "/v1/sessions/"+c.ID+"/executions", nil, &exes)
		return len(exes.Executions) == 1 && exes.Executions[0].Phase == desk.PhaseEnded
	})
	var before desk.Execution
	w.Must(200, "GET", "/v1/executions/"+exes.Executions[0].ID, nil, &before)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body

	e2 := apptest.Start(t, app.Config{})
	// Events of the second desk's own, so seqs from the archive would
	// collide if they were kept.
	var other desk.Workspace
	e2.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	var os2 desk.Session
	e2.Must(201, "POST", "/v1/workspaces/"+other.ID+"/sessions", map[string]any{"title": "x", "model": "script",
		"script": map[string]any{"steps": []map[string]any{{"text": "hi"}}}}, &os2)
	for range 3 {
		e2.Must(202, "POST", "/v1/sessions/"+os2.ID+"/messages", map[string]string{"text": "hi"}, nil)
	}
	r := e2.Admin("POST", "/v1/workspaces/import", exported)
	if r.Status != 201 {
		t.Fatalf("import = %d %s", r.Status, r.Body)
	}
	var res desk.ImportResult
	r.Decode(t, &res)
	for _, table := range []string{"surfaces", "queue_items", "executions", "messages", "events"} {
		if res.Rows[table] == 0 {
			t.Errorf("the import carried no %s: %v", table, res.Rows)
		}
	}
	var after desk.Execution
	e2.Must(200, "GET", "/v1/executions/"+before.ID, nil, &after)
	if after.Phase != desk.PhaseEnded || len(after.Events) != len(before.Events) || len(after.Events) == 0 {
		t.Fatalf("execution after import = %s with %d events, before %s with %d", after.Phase, len(after.Events), before.Phase, len(before.Events))
	}
	for i := range after.Events {
		if after.Events[i].Type != before.Events[i].Type || string(after.Events[i].Data) != string(before.Events[i].Data) {
			t.Fatalf("event %d after import = %s %s, before %s %s", i, after.Events[i].Type, after.Events[i].Data, before.Events[i].Type, before.Events[i].Data)
		}
		if i > 0 && after.Events[i].Seq <= after.Events[i-1].Seq {
			t.Fatalf("imported events out of order: %d then %d", after.Events[i-1].Seq, after.Events[i].Seq)
		}
	}
	if after.Events[0].Seq == before.Events[0].Seq {
		t.Fatalf("imported event kept its seq %d although the desk had events of its own", after.Events[0].Seq)
	}
	var ms struct{ Messages []desk.Message }
	e2.Must(200, "GET", "/v1/sessions/"+c.ID+"/messages", nil, &ms)
	if len(ms.Messages) != 2 || ms.Messages[0].Text != "hello" || ms.Messages[1].Text != "hello back" {
		t.Fatalf("transcript after import = %+v", ms.Messages)
	}
}
