package storetest

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// testFiles covers the file API's metadata (usage totals, host paths) and
// the row transfer of export and import.
func testFiles(t *testing.T, open Opener) {
	t.Run("Usage", func(t *testing.T) { testUsage(t, open(t)) })
	t.Run("HostPaths", func(t *testing.T) { testHostPaths(t, open(t)) })
	t.Run("TransferRoundTrip", func(t *testing.T) { testTransferRoundTrip(t, open(t), open(t)) })
	t.Run("TransferRefusals", func(t *testing.T) { testTransferRefusals(t, open(t), open(t)) })
}

func testUsage(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	_, err := s.GetActorUsage(ctx, owner.ID)
	wantCode(t, err, desk.ENOTFOUND)
	// Without a measured total, additions have nothing to add to.
	must(t, s.AddActorUsage(ctx, owner.ID, 100, 1))
	_, err = s.GetActorUsage(ctx, owner.ID)
	wantCode(t, err, desk.ENOTFOUND)

	must(t, s.SetActorUsage(ctx, &desk.ActorUsage{WorkspaceID: w.ID, ActorID: owner.ID, Bytes: 10, Files: 2, UpdatedAt: desk.Now()}))
	must(t, s.AddActorUsage(ctx, owner.ID, 5, 1))
	must(t, s.AddActorUsage(ctx, owner.ID, -3, -1))
	u, err := s.GetActorUsage(ctx, owner.ID)
	must(t, err)
	if u.Bytes != 12 || u.Files != 2 || u.WorkspaceID != w.ID {
		t.Fatalf("usage = %+v, want 12 bytes in 2 files", u)
	}
	// A measurement replaces the running total.
	must(t, s.SetActorUsage(ctx, &desk.ActorUsage{WorkspaceID: w.ID, ActorID: owner.ID, Bytes: 7, Files: 1, UpdatedAt: desk.Now()}))
	u, _ = s.GetActorUsage(ctx, owner.ID)
	if u.Bytes != 7 || u.Files != 1 {
		t.Fatalf("usage after a measurement = %+v", u)
	}
}

func testHostPaths(t *testing.T, s desk.Store) {
	w, _ := fixture(t, s, "alpha")
	got, err := s.GetWorkspace(ctx, w.ID)
	must(t, err)
	if len(got.HostPaths) != 0 || got.PrimaryRoot != "" {
		t.Fatalf("a new workspace has host paths %v, primary root %q", got.HostPaths, got.PrimaryRoot)
	}
	// The identity recorded at declaration round-trips (hostpath.Check sets it; fsjail checks it at every use).
	hp := []desk.HostPath{{Path: "/srv/data", Mode: desk.HostPathRO, Dev: 2049, Ino: 131}, {Path: "/home/me/proj", Mode: desk.HostPathRW}}
	up, err := s.UpdateWorkspacePaths(ctx, w.ID, hp, "/home/me/proj")
	must(t, err)
	if !reflect.DeepEqual(up.HostPaths, hp) || up.PrimaryRoot != "/home/me/proj" {
		t.Fatalf("updated = %+v", up)
	}
	got, _ = s.GetWorkspace(ctx, w.ID)
	if !reflect.DeepEqual(got.HostPaths, hp) || got.PrimaryRoot != "/home/me/proj" {
		t.Fatalf("stored = %+v", got)
	}
	list, _ := s.ListWorkspaces(ctx)
	if len(list) != 1 || !reflect.DeepEqual(list[0].HostPaths, hp) {
		t.Fatalf("listed = %+v", list)
	}
	up, err = s.UpdateWorkspacePaths(ctx, w.ID, nil, "")
	must(t, err)
	if len(up.HostPaths) != 0 || up.PrimaryRoot != "" {
		t.Fatalf("cleared = %+v", up)
	}
	_, err = s.UpdateWorkspacePaths(ctx, "ws_nope", nil, "")
	wantCode(t, err, desk.ENOTFOUND)
}

// exportAll collects every exported row of the workspace, as NDJSON text
// per table, the way an export encodes them.
func exportAll(t *testing.T, s desk.Store, ws string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range s.TransferTables() {
		must(t, s.ExportRows(ctx, ws, table, func(r desk.Row) error {
			b, err := json.Marshal(r)
			out[table] = append(out[table], string(b))
			return err
		}))
	}
	return out
}

// rowsOf turns exported NDJSON back into an import source, decoding
// numbers as json.Number the way the importer does.
func rowsOf(t *testing.T, s desk.Store, rows map[string][]string, extra ...struct {
	table string
	row   desk.Row
}) func() (string, desk.Row, error) {
	type item struct {
		table string
		row   desk.Row
	}
	var items []item
	for _, table := range s.TransferTables() {
		for _, line := range rows[table] {
			var r desk.Row
			dec := json.NewDecoder(strings.NewReader(line))
			dec.UseNumber()
			must(t, dec.Decode(&r))
			items = append(items, item{table, r})
		}
	}
	for _, e := range extra {
		items = append(items, item{e.table, e.row})
	}
	return func() (string, desk.Row, error) {
		if len(items) == 0 {
			return "", nil, io.EOF
		}
		it := items[0]
		items = items[1:]
		return it.table, it.row, nil
	}
}

func testTransferRoundTrip(t *testing.T, src, dst desk.Store) {
	w, owner := fixture(t, src, "alpha")
	other, _ := fixture(t, src, "beta")
	_, err := src.UpdateWorkspacePaths(ctx, w.ID, []desk.HostPath{{Path: "/srv", Mode: desk.HostPathRO}}, "/srv")
	must(t, err)
	x := newSession(t, src, w, owner, "kept")
	gone := newSession(t, src, w, owner, "being deleted")
	a := newArtifact(t, src, x, "report.md")
	newArtifact(t, src, gone, "x.md")
	must(t, src.MarkSessionDeleting(ctx, gone.ID))
	g := &desk.Group{ID: desk.NewID(desk.PrefixGroup), WorkspaceID: w.ID, Name: "g", CreatedAt: desk.Now(), UpdatedAt: desk.Now()}
	must(t, src.CreateGroup(ctx, g))
	it := &desk.Item{ID: desk.NewID(desk.PrefixItem), WorkspaceID: w.ID, Kind: desk.ItemText, Name: "n", CreatedAt: desk.Now()}
	must(t, src.AddItem(ctx, g.ID, it))
	must(t, src.SetBindings(ctx, x.ID, []string{g.ID}))
	newSession(t, src, other, ownerOf(t, src, other), "other workspace")

	rows := exportAll(t, src, w.ID)
	for _, table := range []string{"workspaces", "actors", "sessions", "artifacts", "selection_groups", "items", "group_items", "session_bindings"} {
		if len(rows[table]) != 1 {
			t.Fatalf("exported %d rows of %s, want 1 (the deleting session and the other workspace stay out): %v", len(rows[table]), table, rows[table])
		}
	}
	must(t, dst.ImportRows(ctx, w.ID, rowsOf(t, dst, rows)))
	if again := exportAll(t, dst, w.ID); !reflect.DeepEqual(again, rows) {
		t.Fatalf("rows changed in the round trip:\n%v\n%v", rows, again)
	}
	got, err := dst.GetArtifact(ctx, a.ID)
	must(t, err)
	if got.RelPath != "report.md" || got.SessionID != x.ID || got.Origin != a.Origin {
		t.Fatalf("imported artifact = %+v", got)
	}
	ws, err := dst.GetWorkspace(ctx, w.ID)
	must(t, err)
	if ws.PrimaryRoot != "/srv" || len(ws.HostPaths) != 1 {
		t.Fatalf("imported workspace = %+v", ws)
	}
	// Importing the same rows again collides and changes nothing.
	err = dst.ImportRows(ctx, w.ID, rowsOf(t, dst, rows))
	wantCode(t, err, desk.ECONFLICT)
}

// ownerOf returns the owner of a workspace created by fixture.
func ownerOf(t *testing.T, s desk.Store, w *desk.Workspace) *desk.Actor {
	a, err := s.ActorByName(ctx, w.ID, desk.OwnerActorName)
	must(t, err)
	return a
}

func testTransferRefusals(t *testing.T, src, dst desk.Store) {
	w, owner := fixture(t, src, "alpha")
	newSession(t, src, w, owner, "s")
	rows := exportAll(t, src, w.ID)
	victim, _ := fixture(t, dst, "victim")
	before := exportAll(t, dst, victim.ID)

	tamper := func(table string, edit func(desk.Row)) map[string][]string {
		out := map[string][]string{}
		for k, v := range rows {
			out[k] = append([]string(nil), v...)
		}
		var r desk.Row
		must(t, json.Unmarshal([]byte(out[table][0]), &r))
		edit(r)
		b, _ := json.Marshal(r)
		out[table][0] = string(b)
		return out
	}
	cases := []struct {
		name string
		rows map[string][]string
		code string
	}{
		{"session of another workspace", tamper("sessions", func(r desk.Row) { r["workspace_id"] = victim.ID }), desk.EINVALID},
		{"unknown column", tamper("actors", func(r desk.Row) { r["is_admin"] = true }), desk.EINVALID},
		{"wrong kind", tamper("actors", func(r desk.Row) { r["created_at"] = "yesterday" }), desk.EINVALID},
		{"session being deleted", tamper("sessions", func(r desk.Row) { r["deleting"] = true }), desk.EINVALID},
		{"dangling reference", tamper("sessions", func(r desk.Row) { r["actor_id"] = desk.NewID(desk.PrefixActor) }), desk.EINVALID},
	}
	for _, c := range cases {
		err := dst.ImportRows(ctx, w.ID, rowsOf(t, dst, c.rows))
		wantCode(t, err, c.code)
		if _, err := dst.GetWorkspace(ctx, w.ID); !desk.IsCode(err, desk.ENOTFOUND) {
			t.Fatalf("%s: a refused import left workspace %s behind (%v)", c.name, w.ID, err)
		}
	}
	// An unknown table is refused too.
	err := dst.ImportRows(ctx, w.ID, rowsOf(t, dst, rows, struct {
		table string
		row   desk.Row
	}{"app_logs", desk.Row{"seq": json.Number("1")}}))
	wantCode(t, err, desk.EINVALID)
	if after := exportAll(t, dst, victim.ID); !reflect.DeepEqual(after, before) {
		t.Fatalf("refused imports changed another workspace:\n%v\n%v", before, after)
	}
	if _, err := dst.GetWorkspace(ctx, w.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("a refused import left the workspace behind")
	}
}
