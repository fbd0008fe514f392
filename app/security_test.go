package app_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/internal/testwait"
)

// editWorkspaceRow rewrites the workspaces row of an export, as someone
// holding the archive could.
func editWorkspaceRow(t *testing.T, archive []byte, edit func(row map[string]any)) []byte {
	t.Helper()
	es := tarEntries(t, archive)
	found := false
	for i, e := range es {
		if e.name != "meta/workspaces.000001.ndjson" {
			continue
		}
		var row map[string]any
		must(t, json.Unmarshal(e.body, &row))
		edit(row)
		b, err := json.Marshal(row)
		must(t, err)
		es[i].body = append(b, '\n')
		found = true
	}
	if !found {
		t.Fatal("the export has no workspaces row")
	}
	return makeArchive(t, es)
}

func hostPathsJSON(t *testing.T, hps ...desk.HostPath) string {
	b, err := json.Marshal(hps)
	must(t, err)
	return string(b)
}

// importLeftNothing checks that a refused import of ws left no row, no
// workspace directory and no staging directory on e.
func importLeftNothing(t *testing.T, e *apptest.Env, ws string) {
	t.Helper()
	if r := e.Admin("GET", "/v1/workspaces/"+ws, nil); r.Status != 404 {
		t.Fatalf("after a refused import GET workspace = %d %s", r.Status, r.Body)
	}
	for _, p := range []string{e.App.Home.Workspace(ws), filepath.Join(e.App.Home.Root, ".import")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("a refused import left %s behind (%v)", p, err)
		}
	}
}

// TestImportCannotExposeAdminToken is the first admin-token exposure of
// issue 16, black-box: an export whose host_paths was edited to name the
// importing desk's home. Before the fix the import was accepted and an
// actor's token read DESK_HOME/admin.token through the guest file route.
func TestImportCannotExposeAdminToken(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	e2 := apptest.Start(t, app.Config{})
	home := e2.App.Home.Root
	edited := editWorkspaceRow(t, exported, func(row map[string]any) {
		row["host_paths"] = hostPathsJSON(t, desk.HostPath{Path: home, Mode: desk.HostPathRO})
	})
	r := e2.Admin("POST", "/v1/workspaces/import?new_tokens=true", edited)
	if r.Status == 201 {
		var res desk.ImportResult
		r.Decode(t, &res)
		for _, tok := range res.Tokens {
			g := e2.Req("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path="+url.QueryEscape(home+"/admin.token"), tok.Token, nil)
			if g.Status == 200 && strings.Contains(string(g.Body), e2.Token) {
				t.Fatalf("actor %s read the admin token through an imported host path", tok.Actor.Name)
			}
		}
		t.Fatalf("an import declaring DESK_HOME as a host path was accepted: %s", r.Body)
	}
	// Refused exactly as PATCH refuses the same value.
	var other desk.Workspace
	e2.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	p := e2.Admin("PATCH", "/v1/workspaces/"+other.ID, map[string]any{"host_paths": []map[string]string{{"path": home, "mode": "ro"}}})
	if r.Status != p.Status || r.ErrorMessage() != p.ErrorMessage() || r.Status != 403 {
		t.Fatalf("import = %d %q; PATCH = %d %q", r.Status, r.ErrorMessage(), p.Status, p.ErrorMessage())
	}
	importLeftNothing(t, e2, w.ws.ID)
}

// TestImportValidatesSettings: every setting an archive carries is checked
// as PATCH checks it; a refused value refuses the import with PATCH's
// message and leaves nothing behind. Accepted values arrive as PATCH
// would store them (host paths pinned to this host's directories).
func TestImportValidatesSettings(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	w.mustUpload("/big.bin", bytes.Repeat([]byte("x"), 4000))
	exported := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	e2 := apptest.Start(t, app.Config{ActorQuotaBytes: 1000})
	var other desk.Workspace
	e2.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	host := t.TempDir()
	dir := filepath.Join(host, "proj")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.Symlink(dir, filepath.Join(host, "link")))

	type tc struct {
		row   map[string]any // columns to set in the workspaces row
		patch string         // the PATCH route that refuses the same value ("" when none can say it)
		body  map[string]any // its body
		want  int
	}
	hp := func(p string) string { return hostPathsJSON(t, desk.HostPath{Path: p, Mode: desk.HostPathRO}) }
	hpBody := func(p string) map[string]any {
		return map[string]any{"host_paths": []map[string]string{{"path": p, "mode": "ro"}}}
	}
	wsRoute, agentRoute := "/v1/workspaces/"+other.ID, "/v1/workspaces/"+other.ID+"/agent"
	for name, c := range map[string]tc{
		"host path desk home":     {row: map[string]any{"host_paths": hp(e2.App.Home.Root)}, patch: wsRoute, body: hpBody(e2.App.Home.Root), want: 403},
		"host path inside home":   {row: map[string]any{"host_paths": hp(e2.App.Home.Workspaces())}, patch: wsRoute, body: hpBody(e2.App.Home.Workspaces()), want: 403},
		"host path root":          {row: map[string]any{"host_paths": hp("/")}, patch: wsRoute, body: hpBody("/"), want: 400},
		"host path proc":          {row: map[string]any{"host_paths": hp("/proc")}, patch: wsRoute, body: hpBody("/proc"), want: 403},
		"host path etc":           {row: map[string]any{"host_paths": hp("/etc")}, patch: wsRoute, body: hpBody("/etc"), want: 403},
		"host path missing":       {row: map[string]any{"host_paths": hp(filepath.Join(host, "none"))}, patch: wsRoute, body: hpBody(filepath.Join(host, "none")), want: 400},
		"host path is a link":     {row: map[string]any{"host_paths": hp(filepath.Join(host, "link"))}, patch: wsRoute, body: hpBody(filepath.Join(host, "link")), want: 400},
		"host path bad mode":      {row: map[string]any{"host_paths": hostPathsJSON(t, desk.HostPath{Path: dir, Mode: "all"})}, patch: wsRoute, body: map[string]any{"host_paths": []map[string]string{{"path": dir, "mode": "all"}}}, want: 400},
		"primary root outside":    {row: map[string]any{"primary_root": "/etc"}, patch: wsRoute, body: map[string]any{"primary_root": "/etc"}, want: 400},
		"approval mode unknown":   {row: map[string]any{"approval_mode": "yolo"}, patch: agentRoute, body: map[string]any{"approval_mode": "yolo"}, want: 400},
		"network not a boolean":   {row: map[string]any{"network": "yes"}, want: 400},
		"quota of an actor area":  {row: map[string]any{}, want: 413},
		"host paths not a list":   {row: map[string]any{"host_paths": `{"path":"/x"}`}, want: 400},
		"blocking input a number": {row: map[string]any{"blocking_input": 1}, want: 400},
		"token budget negative":   {row: map[string]any{"token_budget": -5}, patch: agentRoute, body: map[string]any{"token_budget": -5}, want: 400},
		"token budget a string":   {row: map[string]any{"token_budget": "lots"}, want: 400},
		"sandbox limit too small": {row: map[string]any{"sandbox_limits": `{"memory_bytes":1024}`}, patch: agentRoute, body: map[string]any{"sandbox": map[string]any{"memory_bytes": 1024}}, want: 400},
		"sandbox limits unknown":  {row: map[string]any{"sandbox_limits": `{"forks":1}`}, want: 400},
	} {
		t.Run(name, func(t *testing.T) {
			edited := editWorkspaceRow(t, exported, func(row map[string]any) {
				for k, v := range c.row {
					row[k] = v
				}
			})
			r := e2.Admin("POST", "/v1/workspaces/import", edited)
			if r.Status != c.want {
				t.Fatalf("import = %d %s; want %d", r.Status, r.Body, c.want)
			}
			if c.patch != "" {
				p := e2.Admin("PATCH", c.patch, c.body)
				if p.Status != r.Status || p.ErrorMessage() != r.ErrorMessage() {
					t.Fatalf("import = %d %q; PATCH = %d %q", r.Status, r.ErrorMessage(), p.Status, p.ErrorMessage())
				}
			}
			importLeftNothing(t, e2, w.ws.ID)
		})
	}

	// What PATCH accepts, an import accepts, and stores as PATCH would.
	e3 := apptest.Start(t, app.Config{})
	edited := editWorkspaceRow(t, exported, func(row map[string]any) {
		row["host_paths"] = hostPathsJSON(t, desk.HostPath{Path: dir, Mode: desk.HostPathRW, Dev: 1, Ino: 2})
		row["primary_root"] = dir
		row["approval_mode"] = desk.ApprovalModeFullAccess
		row["network"] = true
		row["sandbox_limits"] = `{"cpu_seconds":30}`
	})
	r := e3.Admin("POST", "/v1/workspaces/import", edited)
	if r.Status != 201 {
		t.Fatalf("a valid import = %d %s", r.Status, r.Body)
	}
	var ws desk.Workspace
	e3.Must(200, "GET", "/v1/workspaces/"+w.ws.ID, nil, &ws)
	fi, err := os.Stat(dir)
	must(t, err)
	if len(ws.HostPaths) != 1 || ws.HostPaths[0].Path != dir || ws.HostPaths[0].Ino == 2 || ws.PrimaryRoot != dir {
		t.Fatalf("imported workspace = %+v (the archive's identity must be replaced by this host's)", ws)
	}
	_ = fi
	var st desk.AgentSettings
	e3.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/agent", nil, &st)
	if st.ApprovalMode != desk.ApprovalModeFullAccess || !st.Network || st.Sandbox.CPUSeconds != 30 {
		t.Fatalf("imported agent settings = %+v", st)
	}
	// The imported host path works, and its export carries no identity.
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("host"), 0o644))
	if g := e3.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path="+url.QueryEscape(dir+"/a.txt"), nil); g.Status != 200 || string(g.Body) != "host" {
		t.Fatalf("guest reads the imported host path = %d %s", g.Status, g.Body)
	}
	again := e3.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body
	for _, e := range tarEntries(t, again) {
		if e.name == "meta/workspaces.000001.ndjson" && (strings.Contains(string(e.body), `\"ino\"`) || strings.Contains(string(e.body), `\"dev\"`)) {
			t.Fatalf("an export carries this host's directory identity: %s", e.body)
		}
	}
}

// TestHostPathSwapRefused is the second admin-token exposure, black-box: a
// declared host path replaced after its declaration by a symbolic link to
// DESK_HOME (before the fix: 200 with the admin token), or by another
// directory, answers 403 and logs a warning; put back, it works again.
func TestHostPathSwapRefused(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	_, tok := w.newActor("alice")
	var ses desk.Session
	cr := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", tok, map[string]string{"title": "alice's"})
	if cr.Status != 201 {
		t.Fatalf("alice creates a session = %d %s", cr.Status, cr.Body)
	}
	cr.Decode(t, &ses)
	host := t.TempDir()
	dir := filepath.Join(host, "proj")
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("declared"), 0o644))
	w.Must(200, "PATCH", "/v1/workspaces/"+w.ws.ID, map[string]any{"host_paths": []map[string]string{{"path": dir, "mode": "ro"}}}, nil)
	get := func(p string) *apptest.Response {
		return w.Req("GET", "/v1/sessions/"+ses.ID+"/guest/file?path="+url.QueryEscape(p), tok, nil)
	}
	if r := get(dir + "/a.txt"); r.Status != 200 || string(r.Body) != "declared" {
		t.Fatalf("the declared host path = %d %s", r.Status, r.Body)
	}

	must(t, os.Rename(dir, dir+".old"))
	must(t, os.Symlink(w.App.Home.Root, dir))
	r := get(dir + "/admin.token")
	if r.Status == 200 && strings.Contains(string(r.Body), w.Token) {
		t.Fatal("an actor read the admin token through a host path swapped for a link to DESK_HOME")
	}
	if r.Status != 403 {
		t.Fatalf("a host path swapped for a link = %d %s; want 403", r.Status, r.Body)
	}
	if r := w.Req("GET", "/v1/sessions/"+ses.ID+"/guest/list?path="+url.QueryEscape(dir), tok, nil); r.Status != 403 {
		t.Fatalf("listing a swapped host path = %d %s; want 403", r.Status, r.Body)
	}

	must(t, os.Remove(dir))
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "a.txt"), []byte("impostor"), 0o644))
	if r := get(dir + "/a.txt"); r.Status != 403 {
		t.Fatalf("a host path swapped for another directory = %d %s; want 403", r.Status, r.Body)
	}

	must(t, os.RemoveAll(dir))
	must(t, os.Rename(dir+".old", dir))
	if r := get(dir + "/a.txt"); r.Status != 200 || string(r.Body) != "declared" {
		t.Fatalf("the declared directory put back = %d %s", r.Status, r.Body)
	}

	w.App.Logs.Flush(t.Context())
	var list struct{ Entries []desk.LogEntry }
	w.Must(200, "GET", "/v1/logs?level=warn&limit=100", nil, &list)
	warned := 0
	for _, e := range list.Entries {
		if strings.Contains(e.Message, "host path was replaced") {
			warned++
		}
	}
	if warned < 3 {
		t.Fatalf("%d warnings about the swapped host path in the app log; want 3: %+v", warned, list.Entries)
	}
}

// TestHostPathSystemTrees: /proc, /sys, /dev and /etc (and below) are
// never host paths.
func TestHostPathSystemTrees(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for _, p := range []string{"/proc", "/sys", "/dev", "/etc", "/proc/self", "/etc/ssl"} {
		if _, err := os.Stat(p); err != nil {
			continue
		}
		r := w.Admin("PATCH", "/v1/workspaces/"+w.ws.ID, map[string]any{"host_paths": []map[string]string{{"path": p}}})
		if r.Status != 403 || !strings.Contains(r.ErrorMessage(), "never a host path") {
			t.Errorf("host path %s = %d %s; want 403", p, r.Status, r.Body)
		}
	}
}

// TestBlockReleaseIsUserSide: an agent actor's token cannot release an
// admission block, not even in its own session, and another actor's token
// cannot reach one at all; the admin token and the session's own human
// actor can.
func TestBlockReleaseIsUserSide(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t, func(c *app.Config) { c.Execution.TakeoverIdle = time.Hour })
	var bot struct {
		Actor desk.Actor
		Token string
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bot", "kind": "agent"}, &bot)
	var human struct {
		Actor desk.Actor
		Token string
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &human)
	alice, aliceTok := human.Actor, human.Token
	session := func(tok string) desk.Session {
		var x desk.Session
		r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", tok, map[string]string{})
		if r.Status != 201 {
			t.Fatalf("create session = %d %s", r.Status, r.Body)
		}
		r.Decode(t, &x)
		return x
	}
	bs, as := session(bot.Token), session(aliceTok)
	block := func(ses string) desk.Block {
		for range 3 {
			res := w.submit(ses, "fail boom")
			w.waitPhase(res.ExecutionID, desk.PhaseFailed)
		}
		var bl struct{ Blocks []desk.Block }
		w.Must(200, "GET", "/v1/sessions/"+ses+"/blocks", nil, &bl)
		if len(bl.Blocks) != 1 || !bl.Blocks[0].Active {
			t.Fatalf("blocks of %s: %+v", ses, bl.Blocks)
		}
		return bl.Blocks[0]
	}
	active := func(ses, id string) bool {
		var bl struct{ Blocks []desk.Block }
		w.Must(200, "GET", "/v1/sessions/"+ses+"/blocks", nil, &bl)
		for _, b := range bl.Blocks {
			if b.ID == id {
				return b.Active
			}
		}
		return false
	}
	release := func(ses, id, tok string) *apptest.Response {
		return w.Req("POST", "/v1/sessions/"+ses+"/blocks/"+id+"/release", tok, nil)
	}
	bb, ab := block(bs.ID), block(as.ID)

	if r := release(bs.ID, bb.ID, bot.Token); r.Status != 403 || !strings.Contains(r.ErrorMessage(), "agent") {
		t.Fatalf("the agent releases its own session's block = %d %s; want 403", r.Status, r.Body)
	}
	if r := release(bs.ID, bb.ID, aliceTok); r.Status != 404 {
		t.Fatalf("another actor releases the block = %d %s; want 404", r.Status, r.Body)
	}
	if r := release(as.ID, ab.ID, bot.Token); r.Status != 404 {
		t.Fatalf("the agent releases another actor's block = %d %s; want 404", r.Status, r.Body)
	}
	if !active(bs.ID, bb.ID) || !active(as.ID, ab.ID) {
		t.Fatal("a refused release released a block")
	}
	r := release(as.ID, ab.ID, aliceTok)
	var got desk.Block
	r.Decode(t, &got)
	if r.Status != 200 || got.Active || got.ReleasedBy != alice.ID {
		t.Fatalf("the session's own human releases = %d %s", r.Status, r.Body)
	}
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/blocks/"+bb.ID+"/release", nil, nil)
}

// TestTakeoverApprovalIsUserSide: with a composer attached, an agent's row
// waits for the user side's approval; the agent's own token cannot give
// it, another actor's cannot reach it, the admin token can.
func TestTakeoverApprovalIsUserSide(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t, func(c *app.Config) { c.Execution.TakeoverIdle = time.Hour })
	var bot, human struct {
		Actor desk.Actor
		Token string
	}
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bot", "kind": "agent"}, &bot)
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "alice", "kind": "human"}, &human)
	aliceTok := human.Token
	var bs desk.Session
	r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", bot.Token, map[string]string{})
	if r.Status != 201 {
		t.Fatalf("create session = %d %s", r.Status, r.Body)
	}
	r.Decode(t, &bs)
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/surfaces/"+bs.SurfaceID+"/attach", nil, nil)
	w.submit(bs.ID, "reply keep busy")
	var held desk.SubmitResult
	w.Req("POST", "/v1/sessions/"+bs.ID+"/messages", bot.Token, map[string]string{"text": "reply held"}).Decode(t, &held)
	approve := func(tok string) *apptest.Response {
		return w.Req("POST", "/v1/sessions/"+bs.ID+"/queue/"+held.Item.ID+"/approve", tok, nil)
	}
	if r := approve(bot.Token); r.Status != 403 {
		t.Fatalf("the agent approves its own held row = %d %s; want 403", r.Status, r.Body)
	}
	if r := approve(aliceTok); r.Status != 404 {
		t.Fatalf("another actor approves the held row = %d %s; want 404", r.Status, r.Body)
	}
	testwait.Never(t, 200*time.Millisecond, func() bool {
		it := w.item(bs.ID, held.Item.ID)
		return it.Status != desk.QueueStatusQueued || it.Approved
	}, "a refused approval to let the row go")
	w.Must(200, "POST", "/v1/sessions/"+bs.ID+"/queue/"+held.Item.ID+"/approve", nil, nil)
	waitFor(t, "the approved row", func() bool { return w.item(bs.ID, held.Item.ID).Status == desk.QueueStatusDelivered })
}
