package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/client"
)

// newServer starts a real desk (SQLite in a temporary home) behind an
// httptest server and returns an admin client for it.
func newServer(t *testing.T) (*httptest.Server, *client.Client) {
	t.Helper()
	ctx := context.Background()
	a, err := app.Open(ctx, app.Config{Home: t.TempDir(), Version: "v0.0.0-test"})
	if err != nil {
		t.Fatalf("app.Open: %v", err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.Close(context.Background())
	})
	c, err := client.New(srv.URL, a.AdminToken)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return srv, c
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := desk.ErrorCode(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
	var de *desk.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *desk.Error", err, err)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestNew(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7777":            "http://127.0.0.1:7777",
		"localhost:7777":            "http://localhost:7777",
		":7777":                     "http://127.0.0.1:7777",
		"http://example.com:80/":    "http://example.com:80",
		"https://desk.example.com":  "https://desk.example.com",
		"https://example.com/desk/": "https://example.com/desk",
		" http://[::1]:7777 ":       "http://[::1]:7777",
	} {
		c, err := client.New(in, "tok")
		if err != nil {
			t.Errorf("New(%q): %v", in, err)
			continue
		}
		if c.BaseURL != want {
			t.Errorf("New(%q).BaseURL = %q, want %q", in, c.BaseURL, want)
		}
		if c.Token != "tok" || c.HTTP == nil {
			t.Errorf("New(%q) = %+v: token or HTTP client missing", in, c)
		}
		if c.HTTP != nil && c.HTTP.Timeout != 0 {
			t.Errorf("New(%q): HTTP client has a total timeout %v that would cut long transfers", in, c.HTTP.Timeout)
		}
	}
	for _, bad := range []string{"", "ftp://host:21", "http://", "http://host:1?x=1"} {
		if _, err := client.New(bad, "tok"); desk.ErrorCode(err) != desk.EINVALID {
			t.Errorf("New(%q) error = %v, want invalid", bad, err)
		}
	}
}

func TestWorkspacesActorsSessions(t *testing.T) {
	ctx := context.Background()
	srv, c := newServer(t)

	v, err := c.Health(ctx)
	if err != nil || v != "v0.0.0-test" {
		t.Fatalf("Health = %q, %v", v, err)
	}
	// Health needs no token.
	anon, _ := client.New(srv.URL, "")
	if v, err := anon.Health(ctx); err != nil || v != "v0.0.0-test" {
		t.Fatalf("anonymous Health = %q, %v", v, err)
	}

	ws := must[*desk.Workspace](t)(c.CreateWorkspace(ctx, "alpha"))
	if !desk.HasPrefix(ws.ID, desk.PrefixWorkspace) || ws.Name != "alpha" || ws.State != desk.WorkspaceActive {
		t.Fatalf("CreateWorkspace = %+v", ws)
	}
	got := must[*desk.Workspace](t)(c.GetWorkspace(ctx, ws.ID))
	if got.ID != ws.ID || got.Name != "alpha" || !got.CreatedAt.Equal(ws.CreatedAt) {
		t.Fatalf("GetWorkspace = %+v, want %+v", got, ws)
	}
	list := must[[]*desk.Workspace](t)(c.ListWorkspaces(ctx))
	if len(list) != 1 || list[0].ID != ws.ID {
		t.Fatalf("ListWorkspaces = %+v", list)
	}

	actor, tok, err := c.CreateActor(ctx, ws.ID, "bot", desk.ActorAgent)
	if err != nil {
		t.Fatal(err)
	}
	if !desk.HasPrefix(actor.ID, desk.PrefixActor) || actor.Name != "bot" || actor.Kind != desk.ActorAgent || actor.WorkspaceID != ws.ID || tok == "" {
		t.Fatalf("CreateActor = %+v, %q", actor, tok)
	}
	_, _, err = c.CreateActor(ctx, ws.ID, "bad kind", "robot")
	wantCode(t, err, desk.EINVALID)
	actors := must[[]*desk.Actor](t)(c.ListActors(ctx, ws.ID))
	names := map[string]bool{}
	for _, a := range actors {
		names[a.Name] = true
	}
	if len(actors) != 2 || !names[desk.OwnerActorName] || !names["bot"] {
		t.Fatalf("ListActors = %+v, want owner and bot", actors)
	}

	// An actor token sees only itself and may not administer.
	bot, _ := client.New(srv.URL, tok)
	if as, err := bot.ListActors(ctx, ws.ID); err != nil || len(as) != 1 || as[0].ID != actor.ID {
		t.Fatalf("actor ListActors = %+v, %v", as, err)
	}
	_, err = bot.CreateWorkspace(ctx, "nope")
	wantCode(t, err, desk.EFORBIDDEN)

	s1 := must[*desk.Session](t)(c.CreateSession(ctx, ws.ID, client.SessionCreate{Title: "first"}))
	if !desk.HasPrefix(s1.ID, desk.PrefixSession) || s1.Title != "first" || s1.WorkspaceID != ws.ID || s1.Signature == "" {
		t.Fatalf("CreateSession = %+v", s1)
	}
	s2 := must[*desk.Session](t)(c.CreateSession(ctx, ws.ID, client.SessionCreate{Actor: "bot", Title: "second"}))
	if s2.Actor != actor.ID {
		t.Fatalf("session for actor bot has actor %q, want %q", s2.Actor, actor.ID)
	}
	if g := must[*desk.Session](t)(c.GetSession(ctx, s1.ID)); g.ID != s1.ID || g.Title != "first" {
		t.Fatalf("GetSession = %+v", g)
	}

	title := "renamed"
	yes := true
	u := must[*desk.Session](t)(c.UpdateSession(ctx, s1.ID, client.SessionPatch{Title: &title, Pinned: &yes}))
	if u.Title != "renamed" || !u.Pinned || u.Archived {
		t.Fatalf("UpdateSession = %+v", u)
	}
	u = must[*desk.Session](t)(c.UpdateSession(ctx, s2.ID, client.SessionPatch{Archived: &yes}))
	if !u.Archived || u.Title != "second" {
		t.Fatalf("UpdateSession(archive) = %+v", u)
	}

	ids := func(xs []*desk.Session) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x.ID)
		}
		return out
	}
	no := false
	for _, tc := range []struct {
		f    client.SessionFilter
		want []string
	}{
		{client.SessionFilter{}, []string{s2.ID, s1.ID}},
		{client.SessionFilter{Pinned: &yes}, []string{s1.ID}},
		{client.SessionFilter{Archived: &yes}, []string{s2.ID}},
		{client.SessionFilter{Archived: &no}, []string{s1.ID}},
	} {
		got := ids(must[[]*desk.Session](t)(c.ListSessions(ctx, ws.ID, tc.f)))
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			// Order is by update time; compare as sets when lengths agree.
			if len(got) != len(tc.want) || !sameSet(got, tc.want) {
				t.Errorf("ListSessions(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		}
	}

	if err := c.DeleteSession(ctx, s2.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSession(ctx, s2.ID)
	wantCode(t, err, desk.ENOTFOUND)
	wantCode(t, c.DeleteSession(ctx, s2.ID), desk.ENOTFOUND)
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func newSession(t *testing.T, c *client.Client) (*desk.Workspace, *desk.Session) {
	t.Helper()
	ctx := context.Background()
	ws := must[*desk.Workspace](t)(c.CreateWorkspace(ctx, "w"))
	s := must[*desk.Session](t)(c.CreateSession(ctx, ws.ID, client.SessionCreate{Title: "t"}))
	return ws, s
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// onlyReader hides every interface but io.Reader, so the client cannot
// learn the length from the type.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestArtifacts(t *testing.T) {
	ctx := context.Background()
	_, c := newServer(t)
	_, s := newSession(t, c)

	v1 := []byte("# Report\n\nfirst draft\n")
	a, err := c.PutArtifact(ctx, s.ID, "report.md", onlyReader{bytes.NewReader(v1)}, int64(len(v1)), client.PutOptions{MediaType: "text/markdown"})
	if err != nil {
		t.Fatal(err)
	}
	if !desk.HasPrefix(a.ID, desk.PrefixArtifact) || a.Name != "report.md" || a.Size != int64(len(v1)) ||
		a.SHA256 != sum(v1) || a.Revision != 1 || a.Immutable || a.SessionID != s.ID || a.Path != "/artifacts/report.md" {
		t.Fatalf("PutArtifact = %+v", a)
	}

	// Unknown length: the body is sent chunked.
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("streamed "))
		pw.Write([]byte("without a length\n"))
		pw.Close()
	}()
	st, err := c.PutArtifact(ctx, s.ID, "notes.txt", pr, -1, client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len("streamed without a length\n")) || st.Name != "notes.txt" {
		t.Fatalf("chunked PutArtifact = %+v", st)
	}

	// An empty body with a known length of zero.
	empty, err := c.PutArtifact(ctx, s.ID, "empty.txt", strings.NewReader(""), 0, client.PutOptions{})
	if err != nil || empty.Size != 0 {
		t.Fatalf("empty PutArtifact = %+v, %v", empty, err)
	}

	imm, err := c.PutArtifact(ctx, s.ID, "frozen.txt", strings.NewReader("fixed"), 5, client.PutOptions{Immutable: true})
	if err != nil || !imm.Immutable {
		t.Fatalf("immutable PutArtifact = %+v, %v", imm, err)
	}
	_, err = c.UpdateArtifact(ctx, s.ID, imm.ID, strings.NewReader("changed"), 7, "")
	if desk.ErrorCode(err) == "" {
		t.Fatal("updating an immutable artifact succeeded")
	}

	got := must[*desk.Artifact](t)(c.GetArtifact(ctx, s.ID, a.ID))
	if got.ID != a.ID || got.SHA256 != a.SHA256 || got.Size != a.Size {
		t.Fatalf("GetArtifact = %+v, want %+v", got, a)
	}
	list := must[[]*desk.Artifact](t)(c.ListArtifacts(ctx, s.ID))
	if len(list) != 4 || list[0].ID != a.ID {
		t.Fatalf("ListArtifacts = %d artifacts, first %+v", len(list), list[0])
	}

	v2 := []byte("# Report\n\nsecond draft, longer\n")
	up, err := c.UpdateArtifact(ctx, s.ID, a.ID, bytes.NewReader(v2), int64(len(v2)), "text/markdown")
	if err != nil {
		t.Fatal(err)
	}
	if up.ID != a.ID || up.Revision != 2 || up.SHA256 != sum(v2) {
		t.Fatalf("UpdateArtifact = %+v", up)
	}
	body, size, err := c.OpenArtifact(ctx, s.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Equal(b, v2) || size != int64(len(v2)) {
		t.Fatalf("OpenArtifact = %q (size %d), %v; want %q", b, size, err, v2)
	}
	d, err := c.DownloadArtifact(ctx, s.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.Body.Close()
	if d.SHA256 != sum(v2) || d.Name != "report.md" || d.Size != int64(len(v2)) || d.MediaType == "" {
		t.Fatalf("DownloadArtifact = %+v", d)
	}

	rv, err := c.RevertArtifact(ctx, s.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rv.ID != a.ID || rv.SHA256 != sum(v1) || rv.Revision != 3 {
		t.Fatalf("RevertArtifact = %+v", rv)
	}
	_, err = c.RevertArtifact(ctx, s.ID, st.ID) // nothing to revert to
	wantCode(t, err, desk.ECONFLICT)

	if err := c.DeleteArtifact(ctx, s.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetArtifact(ctx, s.ID, a.ID)
	wantCode(t, err, desk.ENOTFOUND)
	_, _, err = c.OpenArtifact(ctx, s.ID, a.ID)
	wantCode(t, err, desk.ENOTFOUND)
	wantCode(t, c.DeleteArtifact(ctx, s.ID, a.ID), desk.ENOTFOUND)

	_, err = c.PutArtifact(ctx, s.ID, "", strings.NewReader("x"), 1, client.PutOptions{})
	wantCode(t, err, desk.EINVALID)
}

// countingZeros is an endless source of zero bytes that counts reads.
type countingZeros struct{ n atomic.Int64 }

func (z *countingZeros) Read(p []byte) (int, error) {
	clear(p)
	z.n.Add(int64(len(p)))
	return len(p), nil
}

func TestUploadErrors(t *testing.T) {
	ctx := context.Background()
	_, c := newServer(t)
	_, s := newSession(t, c)

	// A refused upload is refused before the body is sent.
	const size = 256 << 20
	z := &countingZeros{}
	_, err := c.PutArtifact(ctx, "ses_00000000000000000000000000", "x.bin", io.LimitReader(z, size), size, client.PutOptions{})
	wantCode(t, err, desk.ENOTFOUND)
	if n := z.n.Load(); n >= size {
		t.Errorf("the client sent all %d bytes of a refused upload", n)
	} else {
		t.Logf("refused upload: %d of %d bytes read", n, size)
	}

	// A local read failure is reported as itself, not as an unreachable server.
	boom := errors.New("disk on fire")
	_, err = c.PutArtifact(ctx, s.ID, "bad.bin", io.MultiReader(strings.NewReader("abc"), errReader{boom}), 100, client.PutOptions{})
	if !errors.Is(err, boom) {
		t.Fatalf("PutArtifact with a failing body = %v, want %v", err, boom)
	}
	// A body shorter than its announced size stores nothing.
	_, err = c.PutArtifact(ctx, s.ID, "short.bin", onlyReader{strings.NewReader("abc")}, 10, client.PutOptions{})
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: err = %v, want unexpected EOF", err)
	}
	if as := must[[]*desk.Artifact](t)(c.ListArtifacts(ctx, s.ID)); len(as) != 0 {
		t.Fatalf("failed uploads left artifacts: %+v", as)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestStreamingRoundTrip(t *testing.T) {
	ctx := context.Background()
	_, c := newServer(t)
	_, s := newSession(t, c)

	const size = 20 << 20
	rng := rand.NewChaCha8([32]byte{1, 2, 3})
	up := sha256.New()
	src := io.TeeReader(io.LimitReader(rng, size), up)
	a, err := c.PutArtifact(ctx, s.ID, "random.bin", onlyReader{src}, size, client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := hex.EncodeToString(up.Sum(nil))
	if a.Size != size || a.SHA256 != want {
		t.Fatalf("stored %d bytes with sha256 %s, want %d and %s", a.Size, a.SHA256, size, want)
	}

	body, n, err := c.OpenArtifact(ctx, s.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	if n != size {
		t.Fatalf("Content-Length = %d, want %d", n, size)
	}
	down := sha256.New()
	got, err := io.Copy(down, body)
	if err != nil || got != size {
		t.Fatalf("downloaded %d bytes, %v", got, err)
	}
	if h := hex.EncodeToString(down.Sum(nil)); h != want {
		t.Fatalf("downloaded sha256 %s, want %s", h, want)
	}
}

func TestGroupsBindingsGuest(t *testing.T) {
	ctx := context.Background()
	_, c := newServer(t)
	ws, s := newSession(t, c)

	g := must[*desk.Group](t)(c.CreateGroup(ctx, ws.ID, "refs"))
	if !desk.HasPrefix(g.ID, desk.PrefixGroup) || g.Name != "refs" || g.WorkspaceID != ws.ID {
		t.Fatalf("CreateGroup = %+v", g)
	}
	if gs := must[[]*desk.Group](t)(c.ListGroups(ctx, ws.ID)); len(gs) != 1 || gs[0].ID != g.ID {
		t.Fatalf("ListGroups = %+v", gs)
	}

	txt := must[*desk.Item](t)(c.AddTextItem(ctx, g.ID, "note", "remember this"))
	if txt.Kind != desk.ItemText || txt.Size != int64(len("remember this")) || !desk.HasPrefix(txt.ID, desk.PrefixItem) {
		t.Fatalf("AddTextItem = %+v", txt)
	}
	u := must[*desk.Item](t)(c.AddURLItem(ctx, g.ID, "https://example.com/a?b=c", "Example"))
	if u.Kind != desk.ItemURL || u.URL != "https://example.com/a?b=c" || u.Title != "Example" {
		t.Fatalf("AddURLItem = %+v", u)
	}
	data := []byte("col1,col2\n1,2\n")
	f := must[*desk.Item](t)(c.AddFileItem(ctx, g.ID, "data.csv", onlyReader{bytes.NewReader(data)}, int64(len(data))))
	if f.Kind != desk.ItemFile || f.Size != int64(len(data)) || f.SHA256 != sum(data) {
		t.Fatalf("AddFileItem = %+v", f)
	}

	got, items, err := c.GetGroup(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != g.ID || got.Name != "refs" || len(items) != 3 || got.ItemCount != 3 {
		t.Fatalf("GetGroup = %+v with %d items", got, len(items))
	}
	if err := c.RemoveItem(ctx, g.ID, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, items, _ = c.GetGroup(ctx, g.ID); len(items) != 2 {
		t.Fatalf("after RemoveItem: %d items, want 2", len(items))
	}
	wantCode(t, c.RemoveItem(ctx, g.ID, u.ID), desk.ENOTFOUND)

	bound := must[[]*desk.Group](t)(c.SetBindings(ctx, s.ID, []string{g.ID}))
	if len(bound) != 1 || bound[0].ID != g.ID {
		t.Fatalf("SetBindings = %+v", bound)
	}
	if b := must[[]*desk.Group](t)(c.Bindings(ctx, s.ID)); len(b) != 1 || b[0].ID != g.ID {
		t.Fatalf("Bindings = %+v", b)
	}

	// The guest file system shows the artifact and the bound group.
	art := []byte("hello guest\n")
	a := must[*desk.Artifact](t)(c.PutArtifact(ctx, s.ID, "hello.txt", bytes.NewReader(art), int64(len(art)), client.PutOptions{}))
	root := must[[]desk.GuestEntry](t)(c.GuestList(ctx, s.ID, ""))
	seen := map[string]string{}
	for _, e := range root {
		seen[e.Path] = e.Type
	}
	if seen["/artifacts"] != "dir" || seen["/context"] != "dir" {
		t.Fatalf("GuestList(/) = %+v, want /artifacts and /context directories", root)
	}
	ents := must[[]desk.GuestEntry](t)(c.GuestList(ctx, s.ID, "/artifacts"))
	found := false
	for _, e := range ents {
		if e.Path == a.Path && e.Type == "file" && e.Size == int64(len(art)) {
			found = true
		}
	}
	if !found {
		t.Fatalf("GuestList(/artifacts) = %+v, want %s", ents, a.Path)
	}
	if ctxEnts := must[[]desk.GuestEntry](t)(c.GuestList(ctx, s.ID, "/context/"+g.ID)); len(ctxEnts) == 0 {
		t.Fatalf("GuestList(/context/%s) is empty", g.ID)
	}
	rc, err := c.GuestFile(ctx, s.ID, a.Path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(b, art) {
		t.Fatalf("GuestFile = %q, want %q", b, art)
	}
	_, err = c.GuestFile(ctx, s.ID, "/artifacts/missing.txt")
	wantCode(t, err, desk.ENOTFOUND)

	if cleared := must[[]*desk.Group](t)(c.SetBindings(ctx, s.ID, nil)); len(cleared) != 0 {
		t.Fatalf("SetBindings(nil) = %+v, want none", cleared)
	}
	if err := c.DeleteGroup(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	_, _, err = c.GetGroup(ctx, g.ID)
	wantCode(t, err, desk.ENOTFOUND)

	// Removed and deleted items are now unreachable; pressure reclaims them.
	rep, err := c.StoragePressure(ctx, desk.PressureSoft)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Level != desk.PressureSoft || rep.Actions == nil {
		t.Fatalf("StoragePressure = %+v", rep)
	}
	for _, x := range rep.Actions {
		if strings.HasPrefix(x.Target, desk.PrefixArtifact+"_") {
			t.Fatalf("storage pressure touched an artifact: %+v", x)
		}
	}
	_, err = c.StoragePressure(ctx, "extreme")
	wantCode(t, err, desk.EINVALID)
}

func TestErrors(t *testing.T) {
	ctx := context.Background()
	srv, c := newServer(t)

	_, err := c.GetSession(ctx, "ses_00000000000000000000000000")
	wantCode(t, err, desk.ENOTFOUND)
	_, err = c.GetSession(ctx, "not-an-id/../x")
	wantCode(t, err, desk.ENOTFOUND)

	bad, _ := client.New(srv.URL, "wrong-token")
	_, err = bad.ListWorkspaces(ctx)
	wantCode(t, err, desk.EUNAUTHORIZED)
	none, _ := client.New(srv.URL, "")
	_, err = none.ListWorkspaces(ctx)
	wantCode(t, err, desk.EUNAUTHORIZED)

	// A closed port is unavailable.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	gone, _ := client.New(addr, "tok")
	_, err = gone.ListWorkspaces(ctx)
	wantCode(t, err, desk.EUNAVAILABLE)
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("unavailable error %q does not name %s", err, addr)
	}

	// A cancelled context is reported as such.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.ListWorkspaces(cctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request error = %v", err)
	}

	// Do: raw requests and the error contract.
	var ws struct {
		Workspaces []*desk.Workspace `json:"workspaces"`
	}
	if err := c.Do(ctx, http.MethodGet, "/v1/workspaces", nil, "", &ws); err != nil || ws.Workspaces == nil {
		t.Fatalf("Do(GET /v1/workspaces) = %+v, %v", ws, err)
	}
	var w desk.Workspace
	if err := c.Do(ctx, http.MethodPost, "/v1/workspaces", strings.NewReader(`{"name":"raw"}`), "application/json", &w); err != nil || w.Name != "raw" {
		t.Fatalf("Do(POST) = %+v, %v", w, err)
	}
	err = c.Do(ctx, http.MethodPost, "/v1/workspaces", strings.NewReader(`{"nmae":"typo"}`), "application/json", nil)
	wantCode(t, err, desk.EINVALID)
	err = c.Do(ctx, http.MethodGet, "/v1/nowhere", nil, "", nil)
	wantCode(t, err, desk.ENOTFOUND)

	// A body that is not the error contract (a proxy's page) is internal
	// with the status text.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream is down", http.StatusBadGateway)
	}))
	defer proxy.Close()
	pc, _ := client.New(proxy.URL, "tok")
	_, err = pc.ListWorkspaces(ctx)
	wantCode(t, err, desk.EINTERNAL)
	if !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "upstream is down") {
		t.Errorf("proxy error %q lacks the status", err)
	}
}

func TestNoTotalTimeout(t *testing.T) {
	// A slow download must not be cut by the client: only the context
	// bounds a transfer.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "4")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for i := 0; i < 4; i++ {
			time.Sleep(50 * time.Millisecond)
			w.Write([]byte{'x'})
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "tok")
	body, size, err := c.OpenArtifact(context.Background(), "ses_x", "art_y")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil || string(b) != "xxxx" || size != 4 {
		t.Fatalf("slow download = %q (%d), %v", b, size, err)
	}
}
