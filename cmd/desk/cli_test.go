package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// cli runs desk commands in-process against a real server.
type cli struct {
	t     *testing.T
	url   string
	token string
	app   *app.App
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	a, err := app.Open(context.Background(), app.Config{Home: t.TempDir(), Version: "test"})
	if err != nil {
		t.Fatalf("app.Open: %v", err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close(context.Background())
	})
	return &cli{t: t, url: srv.URL, token: a.AdminToken, app: a}
}

type result struct {
	out, err string
	e        error
}

func (r result) code() int {
	if r.e == nil {
		return exitOK
	}
	return exitCode(r.e)
}

// runIn runs one command with stdin and returns its output and error.
func (c *cli) runIn(stdin io.Reader, args ...string) result {
	c.t.Helper()
	root := newRoot()
	var o, e bytes.Buffer
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetIn(stdin)
	root.SetArgs(append([]string{"--server", c.url, "--token", c.token}, args...))
	err := root.ExecuteContext(context.Background())
	return result{out: o.String(), err: e.String(), e: err}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runIn(strings.NewReader(""), args...)
}

// ok runs a command that must succeed.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.e != nil {
		c.t.Fatalf("desk %s: %v\nstderr: %s", strings.Join(args, " "), r.e, r.err)
	}
	return r.out
}

// json runs a command with --json and decodes its output into v.
func (c *cli) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("desk --json %s: output is not the expected JSON (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

func (c *cli) fail(wantCode int, args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code() != wantCode {
		c.t.Fatalf("desk %s: exit code %d (%v), want %d", strings.Join(args, " "), r.code(), r.e, wantCode)
	}
	return r
}

func TestCLIWorkspacesActorsSessions(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "team")
	if !desk.HasPrefix(ws.ID, desk.PrefixWorkspace) || ws.Name != "team" {
		t.Fatalf("workspace create --json = %+v", ws)
	}
	if out := c.ok("workspace", "create", "other"); !strings.Contains(out, "ws_") {
		t.Errorf("workspace create output %q has no id", out)
	}
	if out := c.ok("workspace", "list"); !strings.Contains(out, ws.ID) || !strings.Contains(out, "team") {
		t.Errorf("workspace list = %q, want %s", out, ws.ID)
	}
	var wss []*desk.Workspace
	c.json(&wss, "workspace", "ls")
	if len(wss) != 2 {
		t.Errorf("workspace ls --json = %d workspaces, want 2", len(wss))
	}
	if out := c.ok("workspace", "show", ws.ID); !strings.Contains(out, ws.ID) || !strings.Contains(out, "active") {
		t.Errorf("workspace show = %q", out)
	}

	var created struct {
		Actor *desk.Actor `json:"actor"`
		Token string      `json:"token"`
	}
	c.json(&created, "actor", "create", ws.ID, "bot", "--kind", "agent")
	if created.Actor == nil || created.Actor.Name != "bot" || created.Actor.Kind != desk.ActorAgent || created.Token == "" {
		t.Fatalf("actor create --json = %+v", created)
	}
	out := c.ok("actor", "create", ws.ID, "alice", "--kind", "human")
	if !strings.Contains(out, "act_") || !strings.Contains(out, "token: ") {
		t.Errorf("actor create output %q lacks the id or the labelled token", out)
	}
	c.fail(exitUsage, "actor", "create", ws.ID, "carol", "--kind", "robot")
	var actors []*desk.Actor
	c.json(&actors, "actor", "list", ws.ID)
	if len(actors) != 3 {
		t.Fatalf("actor list = %+v, want owner, bot and alice", actors)
	}
	// The actor's token works and sees only itself.
	botCLI := &cli{t: t, url: c.url, token: created.Token}
	var mine []*desk.Actor
	botCLI.json(&mine, "actor", "list", ws.ID)
	if len(mine) != 1 || mine[0].ID != created.Actor.ID {
		t.Fatalf("actor list with the bot's token = %+v", mine)
	}
	botCLI.fail(exitAuth, "workspace", "create", "nope")

	var s1, s2, s3 desk.Session
	c.json(&s1, "session", "create", ws.ID, "--title", "first")
	c.json(&s2, "session", "create", ws.ID, "--actor", "bot", "--title", "second")
	c.json(&s3, "session", "create", ws.ID)
	if s1.Title != "first" || s2.Actor != created.Actor.ID || !desk.HasPrefix(s3.ID, desk.PrefixSession) {
		t.Fatalf("session create: %+v / %+v / %+v", s1, s2, s3)
	}
	if out := c.ok("session", "show", s1.ID); !strings.Contains(out, s1.ID) || !strings.Contains(out, s1.Signature) || !strings.Contains(out, "model ") {
		t.Errorf("session show = %q", out)
	}

	var s desk.Session
	c.json(&s, "session", "rename", s1.ID, "renamed title")
	if s.Title != "renamed title" {
		t.Errorf("session rename = %+v", s)
	}
	c.json(&s, "session", "pin", s1.ID)
	if !s.Pinned {
		t.Errorf("session pin = %+v", s)
	}
	c.json(&s, "session", "archive", s2.ID)
	if !s.Archived {
		t.Errorf("session archive = %+v", s)
	}
	if out := c.ok("session", "unpin", s3.ID); !strings.Contains(out, s3.ID) {
		t.Errorf("session unpin output %q has no id", out)
	}

	ids := func(args ...string) []string {
		var xs []*desk.Session
		c.json(&xs, append([]string{"session", "list"}, args...)...)
		var out []string
		for _, x := range xs {
			out = append(out, x.ID)
		}
		return out
	}
	has := func(list []string, id string) bool {
		for _, x := range list {
			if x == id {
				return true
			}
		}
		return false
	}
	def := ids(ws.ID)
	if len(def) != 2 || has(def, s2.ID) {
		t.Errorf("session list (default) = %v: want the two unarchived sessions", def)
	}
	if got := ids(ws.ID, "--archived"); len(got) != 1 || got[0] != s2.ID {
		t.Errorf("session list --archived = %v, want [%s]", got, s2.ID)
	}
	if got := ids(ws.ID, "--all"); len(got) != 3 {
		t.Errorf("session list --all = %v, want 3 sessions", got)
	}
	if got := ids(ws.ID, "--pinned"); len(got) != 1 || got[0] != s1.ID {
		t.Errorf("session list --pinned = %v, want [%s]", got, s1.ID)
	}
	if out := c.ok("session", "list", ws.ID); !strings.Contains(out, s1.ID) || !strings.Contains(out, "renamed title") || strings.Contains(out, s2.ID) {
		t.Errorf("session list = %q", out)
	}
	c.fail(exitUsage, "session", "list", ws.ID, "--all", "--archived")

	c.json(&s, "session", "unarchive", s2.ID)
	if s.Archived {
		t.Errorf("session unarchive = %+v", s)
	}
	if out := c.ok("session", "delete", s3.ID); !strings.Contains(out, s3.ID) {
		t.Errorf("session delete output %q has no id", out)
	}
	r := c.fail(exitNotFound, "session", "show", s3.ID)
	if desk.ErrorCode(r.e) != desk.ENOTFOUND {
		t.Errorf("session show of a deleted session: %v", r.e)
	}
}

func TestCLIExitCodes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "w")
	var s desk.Session
	c.json(&s, "session", "create", ws.ID)

	for _, args := range [][]string{
		{"session", "show"},
		{"session", "show", "a", "b"},
		{"workspace", "create"},
		{"workspace", "bogus"},
		{"artifact", "put", s.ID},
		{"artifact", "get", s.ID},
		{"artifact", "put", s.ID, "-"}, // stdin needs --name
		{"artifact", "put", s.ID, "x", "--progress", "--no-progress"},
		{"session", "list", ws.ID, "--no-such-flag"},
		{"group", "add", "grp_x"}, // no --text, --url or --file
		{"group", "add", "grp_x", "--text", "a", "--url", "b"},
		{"guest", "ls", s.ID, "/", "extra"},
		{"admin", "storage-pressure", "--level", "extreme"},
	} {
		r := c.run(args...)
		if r.code() != exitUsage {
			t.Errorf("desk %s: exit code %d (%v), want %d", strings.Join(args, " "), r.code(), r.e, exitUsage)
		}
	}

	// desk usage with nothing named says what to name, not "not both".
	if r := c.run("usage"); r.code() != exitUsage || r.e == nil || !strings.Contains(r.e.Error(), "name a session") || strings.Contains(r.e.Error(), "not both") {
		t.Errorf("desk usage: %d %v", r.code(), r.e)
	}

	missing := "ses_00000000000000000000000000"
	c.fail(exitNotFound, "session", "show", missing)
	c.fail(exitNotFound, "artifact", "ls", missing)
	c.fail(exitNotFound, "workspace", "show", "ws_00000000000000000000000000")
	c.fail(exitNotFound, "artifact", "put", s.ID, filepath.Join(t.TempDir(), "no-such-file"))

	bad := &cli{t: t, url: c.url, token: "wrong"}
	bad.fail(exitAuth, "workspace", "list")

	down := &cli{t: t, url: "127.0.0.1:1", token: "x"}
	down.fail(exitUnavailable, "workspace", "list")
}

func randomFile(t *testing.T, dir, name string, size int) []byte {
	t.Helper()
	b := make([]byte, size)
	rand.NewChaCha8([32]byte{byte(size)}).Read(b)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// Not parallel: it changes the working directory (t.Chdir).
func TestCLIArtifactRoundTrip(t *testing.T) {
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "w")
	var s desk.Session
	c.json(&s, "session", "create", ws.ID)

	src := t.TempDir()
	data := randomFile(t, src, "blob.bin", 5<<20+123)

	var a desk.Artifact
	c.json(&a, "artifact", "put", s.ID, filepath.Join(src, "blob.bin"))
	if a.Name != "blob.bin" || a.Size != int64(len(data)) || a.SessionID != s.ID {
		t.Fatalf("artifact put --json = %+v", a)
	}

	dst := t.TempDir()
	target := filepath.Join(dst, "copy.bin")
	r := c.run("artifact", "get", s.ID, a.ID, "-o", target, "--progress")
	if r.e != nil {
		t.Fatalf("artifact get: %v", r.e)
	}
	if !strings.Contains(r.out, a.ID) || !strings.Contains(r.out, target) {
		t.Errorf("artifact get output %q names neither the artifact nor the file", r.out)
	}
	if !strings.Contains(r.err, "100%") {
		t.Errorf("--progress drew no finished bar on stderr: %q", r.err)
	}
	got, err := os.ReadFile(target)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file differs from the upload (%d vs %d bytes, %v)", len(got), len(data), err)
	}

	// No overwrite without --force, and the existing file is untouched.
	if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = c.fail(exitConflict, "artifact", "get", s.ID, a.ID, "-o", target)
	if !strings.Contains(r.e.Error(), "--force") {
		t.Errorf("refusal %q does not mention --force", r.e)
	}
	if b, _ := os.ReadFile(target); string(b) != "precious" {
		t.Fatalf("a refused get changed the file: %q", b)
	}
	c.ok("artifact", "get", s.ID, a.ID, "-o", target, "--force", "--no-progress")
	if b, _ := os.ReadFile(target); !bytes.Equal(b, data) {
		t.Fatal("get --force did not replace the file with the artifact")
	}

	// Default target: the artifact's name in the current directory; a
	// directory target gets the name inside it.
	t.Chdir(dst)
	var res struct {
		ID, Name, Path, SHA256 string
		Size                   int64
	}
	c.json(&res, "artifact", "get", s.ID, a.ID)
	if res.Path != "blob.bin" || res.Size != int64(len(data)) || res.SHA256 != a.SHA256 || res.ID != a.ID {
		t.Errorf("artifact get --json = %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "blob.bin")); !bytes.Equal(b, data) {
		t.Fatal("default-named download differs")
	}
	c.fail(exitConflict, "artifact", "get", s.ID, a.ID)
	sub := filepath.Join(dst, "sub")
	os.Mkdir(sub, 0o755)
	c.ok("artifact", "get", s.ID, a.ID, "-o", sub)
	if b, _ := os.ReadFile(filepath.Join(sub, "blob.bin")); !bytes.Equal(b, data) {
		t.Fatal("download into a directory differs")
	}

	// -o - writes the bytes to stdout and nothing else.
	r = c.run("artifact", "get", s.ID, a.ID, "-o", "-")
	if r.e != nil || r.out != string(data) {
		t.Fatalf("artifact get -o -: %d bytes, %v", len(r.out), r.e)
	}

	// A failed get leaves no file and no temporary file behind.
	c.fail(exitNotFound, "artifact", "get", s.ID, "art_00000000000000000000000000", "-o", filepath.Join(dst, "never"))
	ents, _ := os.ReadDir(dst)
	for _, e := range ents {
		if e.Name() == "never" || strings.HasPrefix(e.Name(), ".desk-get-") {
			t.Errorf("left behind %s", e.Name())
		}
	}

	// update from stdin, then revert.
	v2 := "second revision\n"
	r = c.runIn(strings.NewReader(v2), "--json", "artifact", "update", s.ID, a.ID, "-")
	if r.e != nil {
		t.Fatalf("artifact update: %v", r.e)
	}
	var up desk.Artifact
	if err := json.Unmarshal([]byte(r.out), &up); err != nil || up.ID != a.ID || up.Revision != 2 || up.Size != int64(len(v2)) {
		t.Fatalf("artifact update --json = %+v, %v", up, err)
	}
	if r = c.run("artifact", "get", s.ID, a.ID, "-o", "-"); r.out != v2 {
		t.Fatalf("after update, content = %q", r.out)
	}
	var rv desk.Artifact
	c.json(&rv, "artifact", "revert", s.ID, a.ID)
	if rv.SHA256 != a.SHA256 || rv.Revision != 3 {
		t.Fatalf("artifact revert = %+v", rv)
	}

	// put from stdin needs --name.
	r = c.runIn(strings.NewReader("# notes\n"), "artifact", "put", s.ID, "-", "--name", "notes.md", "--immutable")
	if r.e != nil || !strings.Contains(r.out, "art_") || !strings.Contains(r.out, "immutable") {
		t.Fatalf("artifact put - = %q, %v", r.out, r.e)
	}

	var list []*desk.Artifact
	c.json(&list, "artifact", "ls", s.ID)
	if len(list) != 2 {
		t.Fatalf("artifact ls = %+v", list)
	}
	if out := c.ok("artifact", "ls", s.ID); !strings.Contains(out, a.ID) || !strings.Contains(out, "notes.md") {
		t.Errorf("artifact ls = %q", out)
	}
	if out := c.ok("artifact", "show", s.ID, a.ID); !strings.Contains(out, a.ID) || !strings.Contains(out, a.SHA256) {
		t.Errorf("artifact show = %q", out)
	}
	c.ok("artifact", "rm", s.ID, list[1].ID)
	c.fail(exitNotFound, "artifact", "show", s.ID, list[1].ID)
}

func TestCLIGroupsGuestAdmin(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "w")
	var s desk.Session
	c.json(&s, "session", "create", ws.ID)

	var g desk.Group
	c.json(&g, "group", "create", ws.ID, "refs")
	if g.Name != "refs" || !desk.HasPrefix(g.ID, desk.PrefixGroup) {
		t.Fatalf("group create = %+v", g)
	}
	var txt, link, file desk.Item
	c.json(&txt, "group", "add", g.ID, "--text", "remember", "--name", "memo")
	c.json(&link, "group", "add", g.ID, "--url", "https://example.com", "--title", "Example")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "data.csv"), []byte("a,b\n1,2\n"), 0o644)
	c.json(&file, "group", "add", g.ID, "--file", filepath.Join(dir, "data.csv"))
	if txt.Kind != desk.ItemText || link.Kind != desk.ItemURL || link.URL != "https://example.com" || file.Kind != desk.ItemFile || file.Size != 8 {
		t.Fatalf("group add: %+v / %+v / %+v", txt, link, file)
	}

	var shown struct {
		desk.Group
		Items []*desk.Item `json:"items"`
	}
	c.json(&shown, "group", "show", g.ID)
	if shown.ID != g.ID || len(shown.Items) != 3 {
		t.Fatalf("group show --json = %+v", shown)
	}
	if out := c.ok("group", "show", g.ID); !strings.Contains(out, g.ID) || !strings.Contains(out, link.ID) {
		t.Errorf("group show = %q", out)
	}
	c.ok("group", "rm-item", g.ID, link.ID)
	var gs []*desk.Group
	c.json(&gs, "group", "list", ws.ID)
	if len(gs) != 1 || gs[0].ItemCount != 2 {
		t.Fatalf("group list after rm-item = %+v", gs)
	}

	var bound []*desk.Group
	c.json(&bound, "session", "bind", s.ID, g.ID)
	if len(bound) != 1 || bound[0].ID != g.ID {
		t.Fatalf("session bind = %+v", bound)
	}
	c.json(&bound, "session", "bindings", s.ID)
	if len(bound) != 1 {
		t.Fatalf("session bindings = %+v", bound)
	}

	r := c.runIn(strings.NewReader("guest bytes\n"), "artifact", "put", s.ID, "-", "--name", "g.txt")
	if r.e != nil {
		t.Fatal(r.e)
	}
	var ents []desk.GuestEntry
	c.json(&ents, "guest", "ls", s.ID, "/artifacts")
	if len(ents) != 1 || ents[0].Path != "/artifacts/g.txt" {
		t.Fatalf("guest ls /artifacts = %+v", ents)
	}
	if out := c.ok("guest", "ls", s.ID); !strings.Contains(out, "/artifacts") || !strings.Contains(out, "/context") {
		t.Errorf("guest ls / = %q", out)
	}
	if out := c.ok("guest", "cat", s.ID, "/artifacts/g.txt"); out != "guest bytes\n" {
		t.Errorf("guest cat = %q", out)
	}
	c.fail(exitNotFound, "guest", "cat", s.ID, "/artifacts/nothing")

	c.json(&bound, "session", "bind", s.ID)
	if len(bound) != 0 {
		t.Fatalf("session bind with no groups = %+v, want none", bound)
	}
	c.ok("group", "delete", g.ID)
	c.fail(exitNotFound, "group", "show", g.ID)

	var rep desk.ReclaimReport
	c.json(&rep, "admin", "storage-pressure", "--level", "critical")
	if rep.Level != desk.PressureCritical {
		t.Fatalf("storage-pressure = %+v", rep)
	}
	if out := c.ok("admin", "storage-pressure"); !strings.Contains(out, "level soft") {
		t.Errorf("storage-pressure = %q", out)
	}
}

func TestPrintJSON(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := printJSON(&b, map[string]string{"a": "<b>"}); err != nil {
		t.Fatal(err)
	}
	if b.String() != "{\n  \"a\": \"<b>\"\n}\n" {
		t.Fatalf("printJSON = %q", b.String())
	}
}

func TestProgressDecision(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer // not a terminal
	big, small := int64(progressThreshold+1), int64(progressThreshold)
	for _, tc := range []struct {
		p    progressFlags
		size int64
		want bool
	}{
		{progressFlags{}, big, false}, // not a terminal
		{progressFlags{}, small, false},
		{progressFlags{on: true}, small, true},
		{progressFlags{on: true}, -1, true},
		{progressFlags{off: true}, big, false},
	} {
		if got := tc.p.show(&buf, tc.size); got != tc.want {
			t.Errorf("%+v.show(size %d) = %v, want %v", tc.p, tc.size, got, tc.want)
		}
	}
	// A bar of unknown size still counts and finishes.
	p := progressFlags{on: true}
	bar := p.start(&buf, -1, "x")
	n, err := io.Copy(io.Discard, bar.reader(strings.NewReader(strings.Repeat("a", 1000))))
	bar.done(err)
	if n != 1000 || err != nil || buf.Len() == 0 {
		t.Fatalf("unknown-size bar: copied %d, %v, drew %q", n, err, buf.String())
	}
	var nilBar *transferBar
	if r := nilBar.reader(strings.NewReader("z")); r == nil {
		t.Fatal("a nil bar must pass the reader through")
	}
	nilBar.done(nil)
}
