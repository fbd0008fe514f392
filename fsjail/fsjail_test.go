package fsjail

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/desk-runtime/desk"
)

const testMarker = "SECRET-MARKER-unit-7f3a"

func newTestTree(t *testing.T) *testTree {
	t.Helper()
	tr := buildTree(t, t.TempDir(), testMarker)
	t.Cleanup(func() { tr.jail.Close() })
	return tr
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := desk.ErrorCode(err); got != code {
		t.Errorf("%s: code %q (err %v), want %q", what, got, err, code)
	}
}

func readGuest(t *testing.T, j *Jail, guest string) string {
	t.Helper()
	f, err := j.Open(guest)
	if err != nil {
		t.Fatalf("Open(%q): %v", guest, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %q: %v", guest, err)
	}
	return string(b)
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	return out
}

func TestClean(t *testing.T) {
	ok := []struct{ in, want string }{
		{"/", "/"},
		{"//", "/"},
		{"/artifacts", "/artifacts"},
		{"/artifacts/", "/artifacts"},
		{"//artifacts///sub//b.txt/", "/artifacts/sub/b.txt"},
		{"/artifacts/..x/x..", "/artifacts/..x/x.."},
		{"/artifacts/.hidden", "/artifacts/.hidden"},
		{"/artifacts/r\u00e9sum\u00e9 .md", "/artifacts/r\u00e9sum\u00e9 .md"},
	}
	for _, c := range ok {
		got, err := Clean(c.in)
		if err != nil || got != c.want {
			t.Errorf("Clean(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []struct{ in, code string }{
		{"", desk.EINVALID},
		{"a.txt", desk.EINVALID},
		{"artifacts/a.txt", desk.EINVALID},
		{"/artifacts/a\x00.txt", desk.EINVALID},
		{"/artifacts/\xff\xfe", desk.EINVALID},
		{"/artifacts/./a.txt", desk.EINVALID},
		{"/" + strings.Repeat("a", MaxPathLen), desk.EINVALID},
		{"/artifacts/../context", desk.EFORBIDDEN},
		{"/artifacts/..", desk.EFORBIDDEN},
		{"/..", desk.EFORBIDDEN},
		{`C:\x`, desk.EFORBIDDEN},
		{"C:/x", desk.EFORBIDDEN},
		{"c:", desk.EFORBIDDEN},
		{"~/x", desk.EFORBIDDEN},
		{"~root/.ssh", desk.EFORBIDDEN},
		{`/artifacts\..\x`, desk.EFORBIDDEN},
	}
	for _, c := range bad {
		got, err := Clean(c.in)
		if err == nil {
			t.Errorf("Clean(%q) = %q, want error %s", c.in, got, c.code)
			continue
		}
		wantCode(t, "Clean("+strings.ToValidUTF8(c.in, "?")+")", err, c.code)
	}
}

func TestNewRefusesBadMounts(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]Mount{
		"root":          {{Guest: "/", Host: dir}},
		"relative":      {{Guest: "artifacts", Host: dir}},
		"unclean":       {{Guest: "/artifacts/", Host: dir}},
		"dotdot":        {{Guest: "/a/../b", Host: dir}},
		"nul guest":     {{Guest: "/a\x00", Host: dir}},
		"relative host": {{Guest: "/a", Host: "rel/dir"}},
		"empty host":    {{Guest: "/a", Host: ""}},
		"nul host":      {{Guest: "/a", Host: dir + "\x00"}},
		"duplicate":     {{Guest: "/a", Host: dir}, {Guest: "/a", Host: dir}},
		"nested":        {{Guest: "/a", Host: dir}, {Guest: "/a-b", Host: dir}, {Guest: "/a/c", Host: dir}},
		"ro dir abs":    {{Guest: "/a", Host: dir, ReadOnlyDirs: []string{"/immutable"}}},
		"ro dir up":     {{Guest: "/a", Host: dir, ReadOnlyDirs: []string{"../x"}}},
		"ro dir empty":  {{Guest: "/a", Host: dir, ReadOnlyDirs: []string{""}}},
		"ro dir slash":  {{Guest: "/a", Host: dir, ReadOnlyDirs: []string{"immutable/"}}},
	}
	for name, ms := range cases {
		j, err := New(ms)
		if err == nil {
			j.Close()
			t.Errorf("%s: New accepted %+v", name, ms)
			continue
		}
		wantCode(t, name, err, desk.EINVALID)
		if strings.Contains(err.Error(), dir) {
			t.Errorf("%s: error names the host path: %v", name, err)
		}
	}
	// Siblings sharing a name prefix are not nested.
	j, err := New([]Mount{{Guest: "/a", Host: dir}, {Guest: "/a-b", Host: dir}, {Guest: "/ab/c", Host: dir}})
	if err != nil {
		t.Fatalf("siblings refused: %v", err)
	}
	j.Close()
}

func TestReadEachMount(t *testing.T) {
	tr := newTestTree(t)
	cases := map[string]string{
		"/artifacts/a.txt":              "alpha",
		"/artifacts/sub/b.txt":          "bravo",
		"/artifacts/immutable/lock.txt": "locked",
		"/artifacts/ok_link":            "bravo",
		"/artifacts/sub/up_ok":          "alpha",
		"/artifacts/ro_link/lock.txt":   "locked",
		"/context/grp_01/item.md":       "item one",
		"/context/grp_02/note.md":       "note two",
		"/scratch/tmp.txt":              "scratchy",
		"/workspace/README.md":          "# readme",
		"/workspace//README.md/":        "# readme",
		tr.hostRO + "/ro.txt":           "read only host file",
		tr.hostRW + "/rw.txt":           "read write host file",
		tr.hostRW + "/to_root/rw.txt":   "read write host file",
	}
	for guest, want := range cases {
		if got := readGuest(t, tr.jail, guest); got != want {
			t.Errorf("Open(%q) read %q, want %q", guest, got, want)
		}
	}
}

func TestEscapesAreForbidden(t *testing.T) {
	tr := newTestTree(t)
	j := tr.jail
	for _, guest := range []string{
		"/artifacts/evil_abs",
		"/artifacts/evil_rel",
		"/artifacts/evil_dir",
		"/artifacts/evil_dir/secret.txt",
		tr.hostRW + "/escape",
	} {
		f, err := j.Open(guest)
		if err == nil {
			f.Close()
		}
		wantCode(t, "Open "+guest, err, desk.EFORBIDDEN)
		_, err = j.Stat(guest)
		wantCode(t, "Stat "+guest, err, desk.EFORBIDDEN)
		_, err = j.ReadDir(guest)
		wantCode(t, "ReadDir "+guest, err, desk.EFORBIDDEN)
		_, _, err = j.Writable(guest)
		wantCode(t, "Writable "+guest, err, desk.EFORBIDDEN)
		// Declared host paths are their own guest paths; only the host
		// paths that are not the guest's own may never appear.
		if err != nil && strings.Contains(strings.ReplaceAll(err.Error(), guest, ""), tr.dir) {
			t.Errorf("%s: error names a host path: %v", guest, err)
		}
	}

	es, err := j.ReadDir("/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	// The evil links are omitted, and so are the dangling and looping ones:
	// none of them can be described without leaving the mount.
	want := []string{"a.txt", "immutable", "ok_link", "ro_link", "sub"}
	if got := names(es); !slices.Equal(got, want) {
		t.Errorf("ReadDir(/artifacts) = %v, want %v", got, want)
	}
	for _, e := range es {
		switch e.Name {
		case "ok_link":
			if e.Type != TypeFile || e.Size != int64(len("bravo")) || e.ReadOnly {
				t.Errorf("ok_link described as %+v", e)
			}
		case "ro_link", "immutable":
			if e.Type != TypeDir || !e.ReadOnly {
				t.Errorf("%s described as %+v", e.Name, e)
			}
		case "a.txt":
			if e.Type != TypeFile || e.Path != "/artifacts/a.txt" || e.ReadOnly || e.Modified.IsZero() {
				t.Errorf("a.txt described as %+v", e)
			}
		}
	}
	es, err = j.ReadDir(tr.hostRW)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(es); !slices.Equal(got, []string{"rw.txt", "to_root"}) {
		t.Errorf("ReadDir(host rw) = %v", got)
	}
}

func TestOutsidePaths(t *testing.T) {
	tr := newTestTree(t)
	cases := []struct{ guest, code string }{
		{"/artifacts/../x", desk.EFORBIDDEN},
		{"/etc/passwd", desk.EFORBIDDEN},
		{"/etc", desk.EFORBIDDEN},
		{`C:\x`, desk.EFORBIDDEN},
		{"~/x", desk.EFORBIDDEN},
		{"a.txt", desk.EINVALID},
		{"", desk.EINVALID},
		{"/artifacts/a\x00.txt", desk.EINVALID},
		{"/artifacts/\xc3\x28", desk.EINVALID},
		{"/artifactsx", desk.EFORBIDDEN},
		{"/contextual", desk.EFORBIDDEN},
		{"/context/grp_03", desk.EFORBIDDEN},
		// Another session's files and the secret are real host paths, but
		// not declared ones.
		{filepath.ToSlash(tr.secret), desk.EFORBIDDEN},
		{filepath.ToSlash(filepath.Join(tr.dir, "home", "ses_B", "artifacts", "secret.txt")), desk.EFORBIDDEN},
		{filepath.ToSlash(tr.dir) + "/hostro2", desk.EFORBIDDEN},
		{"/artifacts/missing.txt", desk.ENOTFOUND},
		{"/artifacts/a.txt/below", desk.ENOTFOUND},
		{"/artifacts/dangling", desk.ENOTFOUND},
		{"/artifacts/loop", desk.EINVALID},
	}
	// "/home" is only forbidden when no declared host path lies below it.
	home := true
	for _, m := range tr.jail.Mounts() {
		if strings.HasPrefix(m.Guest, "/home/") {
			home = false
		}
	}
	if home {
		cases = append(cases, struct{ guest, code string }{"/home", desk.EFORBIDDEN})
	}
	for _, c := range cases {
		_, err := tr.jail.Stat(c.guest)
		wantCode(t, "Stat "+strings.ToValidUTF8(c.guest, "?"), err, c.code)
		f, err := tr.jail.Open(c.guest)
		if err == nil {
			f.Close()
		}
		wantCode(t, "Open "+strings.ToValidUTF8(c.guest, "?"), err, c.code)
		if err != nil && strings.Contains(strings.ReplaceAll(err.Error(), c.guest, ""), tr.dir) {
			t.Errorf("%q: error names a host path: %v", c.guest, err)
		}
	}
	_, err := tr.jail.Resolve("/etc/passwd")
	if msg := desk.ErrorMessage(err); !strings.Contains(msg, "/etc/passwd") || !strings.Contains(msg, "outside the guest file system") {
		t.Errorf("Resolve(/etc/passwd) message %q", msg)
	}
}

func TestOpenRefusesDirectories(t *testing.T) {
	tr := newTestTree(t)
	for _, g := range []string{"/", "/context", "/artifacts", "/artifacts/sub", "/artifacts/ro_link", tr.hostRW + "/to_root"} {
		f, err := tr.jail.Open(g)
		if err == nil {
			f.Close()
		}
		wantCode(t, "Open "+g, err, desk.EINVALID)
		if !strings.Contains(desk.ErrorMessage(err), "is a directory") {
			t.Errorf("Open(%q) message %q", g, desk.ErrorMessage(err))
		}
	}
	_, err := tr.jail.ReadDir("/artifacts/a.txt")
	wantCode(t, "ReadDir of a file", err, desk.EINVALID)
}

func TestWritable(t *testing.T) {
	tr := newTestTree(t)
	refused := []struct{ guest, says string }{
		{"/context/grp_01/item.md", "/context/grp_01 is read-only"},
		{"/context/grp_01/new.md", "/context/grp_01 is read-only"},
		{"/context/grp_01", "/context/grp_01 is read-only"},
		{"/artifacts/immutable/x", "/artifacts/immutable is read-only"},
		{"/artifacts/immutable/lock.txt", "/artifacts/immutable is read-only"},
		{"/artifacts/immutable", "/artifacts/immutable is read-only"},
		{"/artifacts/ro_link/x", "/artifacts/immutable is read-only"},
		{"/artifacts/ro_link", "/artifacts/immutable is read-only"},
		{tr.hostRO + "/ro.txt", tr.hostRO + " is read-only"},
		{tr.hostRO + "/new.txt", tr.hostRO + " is read-only"},
		{"/", "read-only"},
		{"/context", "read-only"},
		{parent(tr.hostRW), "read-only"},
		{"/artifacts", "root of a mount"},
		{"/workspace", "root of a mount"},
		{tr.hostRW + "/to_root", "root of a mount"},
		{"/artifacts/evil_dir/x", "outside"},
		{"/etc/passwd", "outside"},
		{"/artifacts/../context/x", ".."},
	}
	for _, c := range refused {
		_, root, err := tr.jail.Writable(c.guest)
		wantCode(t, "Writable "+c.guest, err, desk.EFORBIDDEN)
		if root != nil {
			t.Errorf("Writable(%q) returned a root with its error", c.guest)
		}
		if msg := desk.ErrorMessage(err); !strings.Contains(msg, c.says) {
			t.Errorf("Writable(%q) message %q, want it to say %q", c.guest, msg, c.says)
		}
	}

	allowed := []struct{ guest, rel string }{
		{"/artifacts/new.txt", "new.txt"},
		{"/artifacts/a.txt", "a.txt"},
		{"/artifacts/sub/new/deep.txt", "sub/new/deep.txt"},
		{"/artifacts/immutable2", "immutable2"},
		{"/scratch/x", "x"},
		{"/workspace/x", "x"},
		{tr.hostRW + "/new.txt", "new.txt"},
	}
	for _, c := range allowed {
		r, root, err := tr.jail.Writable(c.guest)
		if err != nil || root == nil {
			t.Errorf("Writable(%q): %v", c.guest, err)
			continue
		}
		if r.Rel != c.rel || r.Virtual {
			t.Errorf("Writable(%q) = %+v, want rel %q", c.guest, r, c.rel)
		}
	}

	// The returned root is the one to write through: an atomic write lands
	// in the mount's host directory.
	r, root, err := tr.jail.Writable("/artifacts/new.txt")
	if err != nil {
		t.Fatal(err)
	}
	f, err := root.Create(r.Rel + ".tmp")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("fresh")
	f.Sync()
	f.Close()
	if err := root.Rename(r.Rel+".tmp", r.Rel); err != nil {
		t.Fatal(err)
	}
	if got := readGuest(t, tr.jail, "/artifacts/new.txt"); got != "fresh" {
		t.Errorf("written file reads %q", got)
	}
}

func TestVirtualDirectories(t *testing.T) {
	tr := newTestTree(t)
	es, err := tr.jail.ReadDir("/")
	if err != nil {
		t.Fatal(err)
	}
	top := strings.SplitN(strings.TrimPrefix(filepath.ToSlash(tr.dir), "/"), "/", 2)[0]
	want := []string{"artifacts", "context", "scratch", "workspace", top}
	slices.Sort(want)
	if got := names(es); !slices.Equal(got, want) {
		t.Errorf("ReadDir(/) = %v, want %v", got, want)
	}
	for _, e := range es {
		if e.Type != TypeDir || e.Path != "/"+e.Name {
			t.Errorf("ReadDir(/) entry %+v", e)
		}
		if (e.Name == "context" || e.Name == top) != e.ReadOnly {
			t.Errorf("ReadDir(/) entry %s read-only = %v", e.Name, e.ReadOnly)
		}
	}

	es, err = tr.jail.ReadDir("/context")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(es); !slices.Equal(got, []string{"grp_01", "grp_02"}) {
		t.Errorf("ReadDir(/context) = %v", got)
	}
	for _, e := range es {
		if e.Type != TypeDir || !e.ReadOnly || e.Modified.IsZero() {
			t.Errorf("ReadDir(/context) entry %+v", e)
		}
	}

	for _, g := range []string{"/", "/context", parent(tr.hostRW)} {
		e, err := tr.jail.Stat(g)
		if err != nil || e.Type != TypeDir || !e.ReadOnly || e.Path != g {
			t.Errorf("Stat(%q) = %+v, %v", g, e, err)
		}
		r, err := tr.jail.Resolve(g)
		if err != nil || !r.Virtual {
			t.Errorf("Resolve(%q) = %+v, %v", g, r, err)
		}
		_, err = tr.jail.Root(r)
		wantCode(t, "Root of virtual "+g, err, desk.EINVALID)
	}
}

func TestStatReadOnlyFlags(t *testing.T) {
	tr := newTestTree(t)
	cases := map[string]bool{
		"/artifacts":                    false,
		"/artifacts/a.txt":              false,
		"/artifacts/immutable":          true,
		"/artifacts/immutable/lock.txt": true,
		"/artifacts/ro_link":            true,
		"/artifacts/ro_link/lock.txt":   true,
		"/context/grp_01":               true,
		"/context/grp_01/item.md":       true,
		tr.hostRO + "/ro.txt":           true,
		tr.hostRW + "/rw.txt":           false,
	}
	for g, ro := range cases {
		e, err := tr.jail.Stat(g)
		if err != nil {
			t.Errorf("Stat(%q): %v", g, err)
			continue
		}
		if e.ReadOnly != ro {
			t.Errorf("Stat(%q).ReadOnly = %v, want %v", g, e.ReadOnly, ro)
		}
		if e.Path != g || e.Name != base(g) {
			t.Errorf("Stat(%q) = %+v", g, e)
		}
	}
	e, err := tr.jail.Stat("/artifacts/sub/b.txt")
	if err != nil || e.Type != TypeFile || e.Size != 5 {
		t.Errorf("Stat(b.txt) = %+v, %v", e, err)
	}
	e, err = tr.jail.Stat("/artifacts/sub")
	if err != nil || e.Type != TypeDir || e.Size != 0 {
		t.Errorf("Stat(sub) = %+v, %v", e, err)
	}
}

func TestResolve(t *testing.T) {
	tr := newTestTree(t)
	r, err := tr.jail.Resolve("//artifacts/sub//b.txt/")
	if err != nil {
		t.Fatal(err)
	}
	if r.Guest != "/artifacts/sub/b.txt" || r.Rel != "sub/b.txt" || r.Mount.Guest != "/artifacts" || r.Virtual {
		t.Errorf("Resolve = %+v", r)
	}
	r, err = tr.jail.Resolve("/context/grp_02")
	if err != nil || r.Rel != "." || r.Mount.Guest != "/context/grp_02" || !r.Mount.ReadOnly {
		t.Errorf("Resolve(/context/grp_02) = %+v, %v", r, err)
	}
	// The Resolved value is the caller's: changing it must not change the jail.
	r, _ = tr.jail.Resolve("/artifacts/a.txt")
	r.Mount.ReadOnlyDirs[0] = "elsewhere"
	if _, _, err := tr.jail.Writable("/artifacts/immutable/x"); err == nil {
		t.Error("mutating a Resolved changed the jail's rules")
	}
	ms := tr.jail.Mounts()
	ms[0].ReadOnlyDirs[0] = "elsewhere"
	if _, _, err := tr.jail.Writable("/artifacts/immutable/x"); err == nil {
		t.Error("mutating Mounts() changed the jail's rules")
	}
}

func TestMissingHostDirectory(t *testing.T) {
	dir := t.TempDir()
	scratch := filepath.Join(dir, "scratch")
	j, err := New([]Mount{{Guest: "/scratch", Host: scratch}, {Guest: "/workspace", Host: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	_, err = j.Stat("/scratch")
	wantCode(t, "Stat of missing mount", err, desk.ENOTFOUND)
	_, err = j.Stat("/scratch/x")
	wantCode(t, "Stat below missing mount", err, desk.ENOTFOUND)
	_, _, err = j.Writable("/scratch/x")
	wantCode(t, "Writable below missing mount", err, desk.ENOTFOUND)
	if strings.Contains(err.Error(), dir) {
		t.Errorf("error names the host path: %v", err)
	}
	es, err := j.ReadDir("/")
	if err != nil || !slices.Equal(names(es), []string{"workspace"}) {
		t.Errorf("ReadDir(/) = %v, %v", names(es), err)
	}
	// The jail does not create the directory; once the caller does, the
	// mount works without rebuilding the jail.
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Fatalf("jail created the host directory: %v", err)
	}
	if err := os.Mkdir(scratch, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.Writable("/scratch/x"); err != nil {
		t.Errorf("Writable after mkdir: %v", err)
	}
}

func TestClosed(t *testing.T) {
	tr := newTestTree(t)
	if _, err := tr.jail.Stat("/artifacts/a.txt"); err != nil {
		t.Fatal(err)
	}
	if err := tr.jail.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tr.jail.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := tr.jail.Stat("/artifacts/a.txt")
	wantCode(t, "Stat after Close", err, desk.EUNAVAILABLE)
}

func TestConcurrentUse(t *testing.T) {
	tr := newTestTree(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := tr.jail.ReadDir("/"); err != nil {
					t.Error(err)
					return
				}
				f, err := tr.jail.Open("/artifacts/sub/b.txt")
				if err != nil {
					t.Error(err)
					return
				}
				f.Close()
				if _, _, err := tr.jail.Writable("/scratch/f" + string(rune('a'+i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestWorkDir(t *testing.T) {
	tr := newTestTree(t)
	cases := []struct {
		name                                  string
		explicit, primary, scratch, artifacts string
		want, code                            string
	}{
		{"explicit wins", "/workspace/src", "/workspace", "/scratch", "/artifacts", "/workspace/src", ""},
		{"explicit is cleaned", "/artifacts//sub/", "", "", "/artifacts", "/artifacts/sub", ""},
		{"primary root next", "", tr.hostRW, "/scratch", "/artifacts", tr.hostRW, ""},
		{"scratch next", "", "", "/scratch", "/artifacts", "/scratch", ""},
		{"artifacts last", "", "", "", "/artifacts", "/artifacts", ""},
		{"nothing available", "", "", "", "", "", desk.EINVALID},
		{"explicit outside", "/etc", "/workspace", "/scratch", "/artifacts", "", desk.EFORBIDDEN},
		{"explicit escape", "/artifacts/../etc", "/workspace", "", "", "", desk.EFORBIDDEN},
		{"explicit relative", "src", "/workspace", "", "", "", desk.EINVALID},
		{"explicit virtual", "/context", "/workspace", "", "", "/context", ""},
		{"bad primary is not skipped", "", "/nowhere", "/scratch", "/artifacts", "", desk.EFORBIDDEN},
	}
	for _, c := range cases {
		got, err := tr.jail.WorkDir(c.explicit, c.primary, c.scratch, c.artifacts)
		if c.code != "" {
			wantCode(t, c.name, err, c.code)
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: WorkDir = %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
