package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
)

// newCLIWith is newCLI with a server configuration.
func newCLIWith(t *testing.T, cfg app.Config) *cli {
	t.Helper()
	cfg.Home, cfg.Version = t.TempDir(), "test"
	a, err := app.Open(context.Background(), cfg)
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

func TestCLIFiles(t *testing.T) {
	t.Parallel()
	c := newCLIWith(t, app.Config{ActorQuotaBytes: 1 << 20})
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "files")
	dir := t.TempDir()
	local := randomFile(t, dir, "data.bin", 300<<10)

	var up desk.FileUpload
	c.json(&up, "files", "put", ws.ID, filepath.Join(dir, "data.bin"), "/reports/")
	if up.Path != "/reports/data.bin" || up.Size != int64(len(local)) || !up.Created {
		t.Fatalf("put = %+v", up)
	}
	if out := c.runIn(strings.NewReader("from stdin"), "files", "put", ws.ID, "-", "/notes.txt"); out.e != nil || !strings.Contains(out.out, "stored /notes.txt") {
		t.Fatalf("put from stdin: %v %s", out.e, out.out)
	}
	out := c.ok("files", "ls", ws.ID, "--depth", "0")
	for _, want := range []string{"/reports/", "/reports/data.bin", "/notes.txt", "300.0 KiB"} {
		if !strings.Contains(out, want) {
			t.Fatalf("ls lacks %q:\n%s", want, out)
		}
	}
	// --json streams one entry per line.
	lines := strings.Split(strings.TrimSpace(c.ok("--json", "files", "ls", ws.ID, "/reports")), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], `"path":"/reports/data.bin"`) {
		t.Fatalf("ls --json = %q", lines)
	}
	got := filepath.Join(dir, "got.bin")
	c.ok("files", "get", ws.ID, "/reports/data.bin", "-o", got)
	if b, _ := os.ReadFile(got); !bytes.Equal(b, local) {
		t.Fatalf("get changed the bytes")
	}
	c.fail(exitConflict, "files", "get", ws.ID, "/reports/data.bin", "-o", got)
	if r := c.run("files", "get", ws.ID, "/notes.txt", "-o", "-"); r.out != "from stdin" {
		t.Fatalf("get -o - = %q", r.out)
	}
	var st desk.FileStats
	c.json(&st, "files", "stats", ws.ID)
	if st.Files != 2 || st.QuotaBytes != 1<<20 {
		t.Fatalf("stats = %+v", st)
	}
	if out := c.ok("files", "stats", ws.ID); !strings.Contains(out, "/reports") || !strings.Contains(out, "available") {
		t.Fatalf("stats:\n%s", out)
	}

	// Exit codes scripts rely on.
	c.fail(exitNotFound, "files", "get", ws.ID, "/none.txt", "-o", filepath.Join(dir, "none"))
	c.fail(exitAuth, "files", "ls", ws.ID, "/", "--actor", "nobody-but-the-admin", "--token", "desk_unknown")
	// A path that climbs out is refused as not allowed (403).
	c.fail(exitAuth, "files", "get", ws.ID, "/../etc/passwd", "-o", "-")
	c.fail(exitUsage, "files", "ls", ws.ID, "--depth", "-1")
	randomFile(t, dir, "big.bin", 2<<20)
	c.fail(exitTooLarge, "files", "put", ws.ID, filepath.Join(dir, "big.bin"), "/big.bin")

	// An actor token with --actor naming someone else.
	var actor struct {
		Actor desk.Actor
		Token string
	}
	c.json(&actor, "actor", "create", ws.ID, "alice")
	r := c.run("--token", actor.Token, "files", "ls", ws.ID, "--actor", "owner")
	if r.code() != exitAuth {
		t.Fatalf("an actor naming the owner: exit %d (%v)", r.code(), r.e)
	}
	c.ok("files", "put", ws.ID, filepath.Join(dir, "data.bin"), "/mine.bin", "--actor", "alice")
	if out := c.ok("--token", actor.Token, "files", "ls", ws.ID); !strings.Contains(out, "/mine.bin") {
		t.Fatalf("alice's own listing:\n%s", out)
	}

	var del struct {
		Deleted []desk.FileEntry
		Files   int64
	}
	c.json(&del, "files", "rm", ws.ID, "/notes.txt")
	if del.Files != 1 || del.Deleted[0].Path != "/notes.txt" {
		t.Fatalf("rm = %+v", del)
	}
	if out := c.ok("files", "rm-prefix", ws.ID, "/reports/"); !strings.Contains(out, "deleted /reports/data.bin") || !strings.Contains(out, "1 files and 0 folders deleted") {
		t.Fatalf("rm-prefix:\n%s", out)
	}
	c.fail(exitInvalid, "files", "rm-prefix", ws.ID, "/")
	var rep desk.GCReport
	c.json(&rep, "files", "gc", ws.ID)
	if rep.WorkspaceID != ws.ID {
		t.Fatalf("gc = %+v", rep)
	}
}

func TestCLIWorkspaceExportImport(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "moving")
	dir := t.TempDir()
	randomFile(t, dir, "a.bin", 64<<10)
	c.ok("files", "put", ws.ID, filepath.Join(dir, "a.bin"), "/a.bin")
	var x desk.Session
	c.json(&x, "session", "create", ws.ID, "--title", "s")
	c.ok("files", "put", ws.ID, filepath.Join(dir, "a.bin"), "/sessions/"+x.ID+"/a.bin")

	archive := filepath.Join(dir, "ws.tar.gz")
	var ex struct {
		SavedTo string `json:"saved_to"`
		Size    int64
	}
	c.json(&ex, "workspace", "export", ws.ID, "-o", archive)
	if ex.SavedTo != archive || ex.Size == 0 {
		t.Fatalf("export = %+v", ex)
	}
	c.fail(exitConflict, "workspace", "export", ws.ID, "-o", archive)
	first, _ := os.ReadFile(archive)

	c2 := newCLI(t)
	out := c2.ok("workspace", "import", archive, "--new-tokens")
	if !strings.Contains(out, "imported workspace "+ws.ID) || !strings.Contains(out, "token of owner") {
		t.Fatalf("import:\n%s", out)
	}
	again := filepath.Join(dir, "again.tar.gz")
	c2.ok("workspace", "export", ws.ID, "-o", again)
	if second, _ := os.ReadFile(again); !bytes.Equal(first, second) {
		t.Fatalf("export → import → export changed the bytes")
	}
	c2.fail(exitConflict, "workspace", "import", archive)
	os.WriteFile(filepath.Join(dir, "junk.tar.gz"), []byte("junk"), 0o644)
	c2.fail(exitInvalid, "workspace", "import", filepath.Join(dir, "junk.tar.gz"))

	// Host paths and the primary root.
	host := t.TempDir()
	var paths struct {
		HostPaths   []desk.HostPath `json:"host_paths"`
		PrimaryRoot string          `json:"primary_root"`
	}
	c.json(&paths, "workspace", "paths", ws.ID, "--host-path", host+":rw", "--primary-root", host)
	if len(paths.HostPaths) != 1 || paths.HostPaths[0].Mode != "rw" || paths.PrimaryRoot != host {
		t.Fatalf("paths = %+v", paths)
	}
	if out := c.ok("workspace", "paths", ws.ID); !strings.Contains(out, host) {
		t.Fatalf("paths:\n%s", out)
	}
	c.fail(exitInvalid, "workspace", "paths", ws.ID, "--primary-root", "/etc")
	c.json(&paths, "workspace", "paths", ws.ID, "--clear-host-paths", "--primary-root", "")
	if len(paths.HostPaths) != 0 || paths.PrimaryRoot != "" {
		t.Fatalf("cleared = %+v", paths)
	}
}
