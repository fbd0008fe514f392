package app_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/lifecycle"
)

// lcResult is the answer of offboard, restore and purge.
type lcResult struct {
	Workspace desk.CatalogEntry `json:"workspace"`
	Changed   bool              `json:"changed"`
	Path      string            `json:"path"`
}

// tree describes every entry under dir with its type, mode and content
// digest (or link target): offboard then restore must give it back
// exactly.
func tree(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			lines = append(lines, fmt.Sprintf("%s dir %v", rel, fi.Mode()))
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			lines = append(lines, fmt.Sprintf("%s link %s", rel, tgt))
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s file %v %s", rel, fi.Mode(), sha(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// lcWorld is an execution world with a failure switch for the lifecycle:
// set fail to "op/step" and that step stops as a crash would.
type lcWorld struct {
	*execWorld
	fail *atomic.Value
}

func newLCWorld(t *testing.T) *lcWorld {
	fail := &atomic.Value{}
	fail.Store("")
	w := newExecWorld(t, func(c *app.Config) {
		c.Lifecycle.Fail = func(op, step string) error {
			if fail.Load().(string) == op+"/"+step {
				return errors.New("injected crash at " + op + "/" + step)
			}
			return nil
		}
	})
	return &lcWorld{execWorld: w, fail: fail}
}

// furnish puts files of every kind in the workspace: checkout files with
// their own modes, a symlink, an artifact, a file API upload and a
// selection group item (materialized as hard links).
func (w *lcWorld) furnish() {
	w.T.Helper()
	co := w.App.Home.Abs(w.ws.ID, "checkout")
	must := func(err error) {
		if err != nil {
			w.T.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(co, "src", "deep"), 0o755))
	must(os.WriteFile(filepath.Join(co, "README.md"), []byte("# project\n"), 0o644))
	must(os.WriteFile(filepath.Join(co, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755))
	must(os.Chmod(filepath.Join(co, "run.sh"), 0o755))
	must(os.WriteFile(filepath.Join(co, "src", "deep", "secret.txt"), []byte("s3cret"), 0o600))
	must(os.Chmod(filepath.Join(co, "src", "deep", "secret.txt"), 0o600))
	must(os.Chmod(filepath.Join(co, "src", "deep"), 0o700))
	must(os.Symlink("README.md", filepath.Join(co, "readme-link")))
	w.put(w.a.ID, "notes.md", []byte("# notes\n"))
	w.mustUpload("/docs/plan.txt", []byte("the plan"))
	var g desk.Group
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/groups", map[string]string{"name": "ctx"}, &g)
	w.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"text": "an item"}, nil)
}

func (w *lcWorld) session(id string) desk.Session {
	w.T.Helper()
	var x desk.Session
	w.Must(200, "GET", "/v1/sessions/"+id, nil, &x)
	return x
}

func (w *lcWorld) catalog(ws string) desk.CatalogEntry {
	w.T.Helper()
	var l struct{ Workspaces []desk.CatalogEntry }
	w.Must(200, "GET", "/v1/catalog", nil, &l)
	for _, e := range l.Workspaces {
		if e.WorkspaceID == ws {
			return e
		}
	}
	w.T.Fatalf("workspace %s is not in the catalog", ws)
	return desk.CatalogEntry{}
}

func (w *lcWorld) journals() []*desk.LifecycleJournal {
	w.T.Helper()
	js, err := w.App.Store.ListLifecycleJournals(context.Background())
	if err != nil {
		w.T.Fatal(err)
	}
	return js
}

// TestOffboardRestoreExact: offboarding writes the handoff, retires the
// sessions, moves the directory whole and refuses work for it; restoring
// gives back the exact directory and the active sessions, and work runs
// again.
func TestOffboardRestoreExact(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	w.furnish()
	ctx := context.Background()
	// A third session retired by hand before, with work still queued on
	// it: restore must leave it retired.
	var c desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "C"}, &c)
	w.Must(200, "POST", "/v1/sessions/"+c.ID+"/retire", nil, nil)
	if _, _, err := w.App.Store.Enqueue(ctx, &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: c.SurfaceID, SessionID: c.ID,
		WorkspaceID: w.ws.ID, Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: "left for later\nsecond line",
		Origin:  desk.Origin{WorkspaceID: w.ws.ID, SessionID: c.ID, Actor: desk.AdminActor, Kind: desk.OriginUser},
		Channel: "http", ConversationID: c.ID, CreatedAt: desk.Now()}, desk.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	gitRepo := false
	if _, err := exec.LookPath("git"); err == nil {
		co := w.App.Home.Abs(w.ws.ID, "checkout")
		if out, err := exec.Command("git", "-C", co, "init", "-q").CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
		gitRepo = true
	}
	orig := w.App.Home.Workspace(w.ws.ID)
	before := tree(t, orig)

	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]any{}); r.Status != 400 {
		t.Fatalf("offboard without a reason = %d %s", r.Status, r.Body)
	}
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]any{"reason": "x", "successors": map[string]string{"ses_nope": w.b.ID}}); r.Status != 400 {
		t.Fatalf("offboard with an unknown successor key = %d %s", r.Status, r.Body)
	}
	if tree(t, orig) != before || w.session(w.a.ID).Lifecycle != desk.SessionActive {
		t.Fatal("a refused offboard changed something")
	}

	var res lcResult
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]any{
		"reason": "project finished", "notes": "ask Ana about the plan", "successors": map[string]string{w.a.ID: w.b.ID}}, &res)
	departed := w.App.Home.Departed(w.ws.ID)
	if !res.Changed || res.Workspace.State != desk.WorkspaceDeparted || res.Path != departed || res.Workspace.OffboardedAt == nil {
		t.Fatalf("offboard: %+v", res)
	}
	if _, err := os.Lstat(orig); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the original directory is still there: %v", err)
	}
	h, err := os.ReadFile(filepath.Join(departed, lifecycle.HandoffFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{w.ws.ID, "project finished", w.a.Signature, w.b.Signature, c.Signature,
		"`" + w.a.ID + "` → `" + w.b.ID + "`", "left for later …", "ask Ana about the plan"} {
		if !strings.Contains(string(h), want) {
			t.Errorf("HANDOFF.md lacks %q:\n%s", want, h)
		}
	}
	if gitRepo && !strings.Contains(string(h), "?? README.md") {
		t.Errorf("HANDOFF.md does not list the uncommitted checkout files:\n%s", h)
	}
	if _, err := os.Stat(filepath.Join(departed, lifecycle.OffboardingFile)); err != nil {
		t.Fatal(err)
	}
	e := w.catalog(w.ws.ID)
	if e.State != desk.WorkspaceDeparted || e.Reason != "project finished" || e.Handoff != string(h) || e.Successors[w.a.ID] != w.b.ID ||
		len(e.RetiredSessions) != 2 {
		t.Fatalf("catalog: %+v", e)
	}
	for _, id := range []string{w.a.ID, w.b.ID, c.ID} {
		if x := w.session(id); x.Lifecycle != desk.SessionRetired || x.Signature == "" {
			t.Fatalf("session %s after offboarding: %+v", id, x)
		}
	}
	var ws desk.Workspace
	w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID, nil, &ws)
	if ws.State != desk.WorkspaceDeparted {
		t.Fatalf("workspace state = %s", ws.State)
	}

	// A departed workspace takes no work and no writes, and says so.
	for _, rq := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/workspaces/" + w.ws.ID + "/sessions", map[string]string{"title": "new"}},
		{"POST", "/v1/sessions/" + w.a.ID + "/messages", map[string]string{"text": "hello"}},
		{"POST", "/v1/sessions/" + w.a.ID + "/recall", nil},
		{"POST", "/v1/sessions/" + w.a.ID + "/artifacts?name=x.md", []byte("x")},
		{"GET", "/v1/workspaces/" + w.ws.ID + "/files", nil},
	} {
		r := w.Admin(rq.method, rq.path, rq.body)
		if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "departed") {
			t.Errorf("%s %s on a departed workspace = %d %s; want 409 departed", rq.method, rq.path, r.Status, r.Body)
		}
	}
	if _, err := w.App.Exec.Submit(adminCtx(), w.a.ID, desk.SubmitInput{Text: "hello"}); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("submit to a departed workspace: %v", err)
	}
	if _, err := os.Lstat(orig); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a refused request recreated the original directory")
	}
	// Offboarding again changes nothing.
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]any{"reason": "again"}, &res)
	if res.Changed || res.Workspace.Reason != "project finished" {
		t.Fatalf("second offboard: %+v", res)
	}

	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/restore", nil, &res)
	if !res.Changed || res.Workspace.State != desk.WorkspaceActive || res.Workspace.RestoredAt == nil || res.Path != orig {
		t.Fatalf("restore: %+v", res)
	}
	if got := tree(t, orig); got != before {
		t.Fatalf("restored directory differs:\nbefore:\n%s\nafter:\n%s", before, got)
	}
	if _, err := os.Lstat(departed); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the departed copy is still there")
	}
	if w.session(w.a.ID).Lifecycle != desk.SessionActive || w.session(w.b.ID).Lifecycle != desk.SessionActive {
		t.Fatal("restore did not recall the sessions offboarding retired")
	}
	if w.session(c.ID).Lifecycle != desk.SessionRetired {
		t.Fatal("restore recalled a session retired before offboarding")
	}
	if e := w.catalog(w.ws.ID); e.Handoff == "" || e.Reason != "project finished" {
		t.Fatalf("the catalog lost the handoff: %+v", e)
	}
	// Work runs again; restoring twice changes nothing.
	run := w.submit(w.a.ID, "reply back")
	w.waitPhase(run.ExecutionID, desk.PhaseEnded)
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/restore", nil, &res)
	if res.Changed {
		t.Fatalf("second restore: %+v", res)
	}
	if len(w.journals()) != 0 {
		t.Fatalf("journals left: %v", w.journals())
	}
}

func adminCtx() context.Context {
	return desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
}

// TestOffboardBlockedByRunningExecution: offboarding is refused, and
// nothing changes, while an execution of the workspace runs.
func TestOffboardBlockedByRunningExecution(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	run := w.submit(w.a.ID, "gate lc")
	w.waitPhase(run.ExecutionID, desk.PhaseRunning)
	before := tree(t, w.App.Home.Workspace(w.ws.ID))
	r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "done"})
	if r.Status != 409 || r.ErrorCode() != desk.EBLOCKED || !strings.Contains(r.ErrorMessage(), run.ExecutionID) {
		t.Fatalf("offboard while running = %d %s; want 409 blocked naming %s", r.Status, r.Body, run.ExecutionID)
	}
	e := w.catalog(w.ws.ID)
	if e.State != desk.WorkspaceActive || e.Reason != "" || tree(t, w.App.Home.Workspace(w.ws.ID)) != before ||
		w.session(w.a.ID).Lifecycle != desk.SessionActive || len(w.journals()) != 0 {
		t.Fatalf("a blocked offboard changed something: %+v", e)
	}
	w.ex.Open("lc")
	w.waitPhase(run.ExecutionID, desk.PhaseEnded)
	var res lcResult
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "done"}, &res)
	if res.Workspace.State != desk.WorkspaceDeparted {
		t.Fatalf("offboard once idle: %+v", res)
	}
}

// TestLifecycleGuard: a workspace whose lease another operation holds is
// busy; two guards (two desk processes) on one database exclude each
// other, all or nothing; a dead owner's lease is taken over.
func TestLifecycleGuard(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	ctx := context.Background()
	release, err := w.App.Guard.Acquire(ctx, desk.OpTemplateUpgrade, w.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "done"})
	if r.Status != 409 || r.ErrorMessage() != "workspace "+w.ws.ID+" is busy with template-upgrade" {
		t.Fatalf("offboard under a held guard = %d %s", r.Status, r.Body)
	}
	if w.catalog(w.ws.ID).State != desk.WorkspaceActive {
		t.Fatal("a busy offboard changed the state")
	}
	release()
	release() // twice is harmless

	// A second desk process: its own registered, heartbeating owner.
	now := desk.Now()
	other := &desk.Owner{ID: desk.NewID("own"), Host: "elsewhere", PID: 1, StartedAt: now, HeartbeatAt: now}
	if err := w.App.Store.RegisterOwner(ctx, other); err != nil {
		t.Fatal(err)
	}
	g2 := lifecycle.NewGuard(w.App.Store, other.ID, lifecycle.GuardOptions{})
	var ws2 desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "second"}, &ws2)
	rel1, err := w.App.Guard.Acquire(ctx, desk.OpAbsorb, w.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g2.Acquire(ctx, desk.OpAbsorb, ws2.ID, w.ws.ID); !desk.IsCode(err, desk.ECONFLICT) ||
		desk.ErrorMessage(err) != "workspace "+w.ws.ID+" is busy with absorb" {
		t.Fatalf("second guard on a held workspace: %v", err)
	}
	// All or nothing: the free workspace of the refused pair is not held.
	rel2, err := w.App.Guard.Acquire(ctx, desk.OpPurge, ws2.ID)
	if err != nil {
		t.Fatalf("the refused acquire kept a lease: %v", err)
	}
	rel2()
	rel1()
	relB, err := g2.Acquire(ctx, desk.OpAbsorb, ws2.ID, w.ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.App.Guard.Acquire(ctx, desk.OpRestore, w.ws.ID); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("first guard while the second holds: %v", err)
	}
	// The other process stops heartbeating: its leases are taken over.
	if err := w.App.Store.HeartbeatOwner(ctx, other.ID, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	rel3, err := w.App.Guard.Acquire(ctx, desk.OpRestore, w.ws.ID, ws2.ID)
	if err != nil {
		t.Fatalf("a dead owner's lease was not taken over: %v", err)
	}
	relB() // the old holder's release must not drop the new lease
	if _, err := g2.Acquire(ctx, desk.OpRestore, w.ws.ID); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("the stale holder's release dropped the new lease: %v", err)
	}
	rel3()
}

// TestPurgeKeepsTombstones: purge needs confirmation and a departed
// workspace; it deletes files, transcripts, artifacts and queue rows, keeps
// the catalog tombstone, the retired identities and provenance, and the id
// stays reserved for good.
func TestPurgeKeepsTombstones(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	w.furnish()
	art := w.put(w.a.ID, "report.md", []byte("# report\n"))
	run := w.submit(w.a.ID, "reply done")
	w.waitPhase(run.ExecutionID, desk.PhaseEnded)
	export := w.Must(200, "GET", "/v1/workspaces/"+w.ws.ID+"/export", nil, nil).Body

	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/purge", map[string]string{"confirm": w.ws.ID}); r.Status != 409 {
		t.Fatalf("purge of an active workspace = %d %s", r.Status, r.Body)
	}
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "gone"}, nil)
	var rs desk.Resolution
	w.Must(200, "POST", "/v1/resolve", map[string]any{"target": map[string]string{"kind": "session", "id": w.a.ID}}, &rs)
	if rs.Resolution != desk.ResolveUnavailable || rs.Reason != "departed-workspace" {
		t.Fatalf("resolution while departed: %+v", rs)
	}
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/purge", map[string]string{"confirm": "yes"}); r.Status != 400 {
		t.Fatalf("purge without the id as confirmation = %d %s", r.Status, r.Body)
	}
	var res lcResult
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/purge", map[string]string{"confirm": w.ws.ID}, &res)
	if !res.Changed || res.Workspace.State != desk.WorkspacePurged || res.Workspace.PurgedAt == nil || res.Path != "" {
		t.Fatalf("purge: %+v", res)
	}
	if _, err := os.Lstat(w.App.Home.Departed(w.ws.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the departed directory survived the purge")
	}
	// The tombstone and the retired identities stay.
	e := w.catalog(w.ws.ID)
	if e.State != desk.WorkspacePurged || e.Name != "acme" || e.Reason != "gone" {
		t.Fatalf("tombstone: %+v", e)
	}
	x := w.session(w.a.ID)
	if x.Lifecycle != desk.SessionRetired || x.Signature != w.a.Signature || x.Origin.Actor != desk.AdminActor {
		t.Fatalf("retired identity: %+v", x)
	}
	// Transcripts, queue rows and artifacts are gone; executions stay as
	// provenance.
	ctx := context.Background()
	if q, _ := w.App.Store.ListQueue(ctx, w.a.ID, false); len(q) != 0 {
		t.Fatalf("queue rows survived: %d", len(q))
	}
	if ms, _ := w.App.Store.ListMessages(ctx, w.a.SurfaceID, 0, 100); len(ms) != 0 {
		t.Fatalf("messages survived: %d", len(ms))
	}
	if as, _ := w.App.Store.ListArtifacts(ctx, w.a.ID); len(as) != 0 {
		t.Fatalf("artifacts survived: %d", len(as))
	}
	if _, err := w.App.Store.GetExecution(ctx, run.ExecutionID); err != nil {
		t.Fatalf("the execution record went: %v", err)
	}
	for _, target := range []map[string]string{{"kind": "session", "id": w.a.ID}, {"kind": "artifact", "id": art.ID}, {"kind": "workspace", "id": w.ws.ID}} {
		w.Must(200, "POST", "/v1/resolve", map[string]any{"target": target}, &rs)
		if rs.Resolution != desk.ResolveUnavailable || rs.Reason != "purged-workspace" {
			t.Fatalf("resolution of %v after purge: %+v", target, rs)
		}
	}
	// Purged is final: restore refuses, purge again changes nothing, the
	// id is reserved for create and import.
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/restore", nil); r.Status != 409 {
		t.Fatalf("restore after purge = %d %s", r.Status, r.Body)
	}
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/purge", map[string]string{"confirm": w.ws.ID}, &res)
	if res.Changed {
		t.Fatalf("second purge: %+v", res)
	}
	now := desk.Now()
	err := w.App.Store.CreateWorkspace(ctx, &desk.Workspace{ID: w.ws.ID, Name: "again", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}, nil, false)
	if !desk.IsCode(err, desk.ECONFLICT) || !strings.Contains(desk.ErrorMessage(err), "permanently reserved") {
		t.Fatalf("create with a purged id: %v", err)
	}
	r := w.Admin("POST", "/v1/workspaces/import", export)
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "permanently reserved") {
		t.Fatalf("import of a purged id = %d %s", r.Status, r.Body)
	}
	if _, err := os.Lstat(w.App.Home.Workspace(w.ws.ID)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the refused import left a directory")
	}
}

// TestLifecycleRecovery: a crash right after offboarding began, right
// after a restore's move, and in a move that finished its copy with both
// directories present is finished at the next start, before queued work
// runs; a second recovery changes nothing.
func TestLifecycleRecovery(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	w.furnish()
	ctx := context.Background()
	orig, departed := w.App.Home.Workspace(w.ws.ID), w.App.Home.Departed(w.ws.ID)
	before := tree(t, orig)

	// 1. Offboarding crashed right after it began (state offboarding,
	// nothing else done); the restart finishes it.
	w.fail.Store("offboard/offboarding")
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "crash test"}); r.Status != 500 {
		t.Fatalf("offboard with an injected crash = %d %s", r.Status, r.Body)
	}
	if e := w.catalog(w.ws.ID); e.State != desk.WorkspaceOffboarding || len(w.journals()) != 1 {
		t.Fatalf("after the crash: %+v, %d journals", e, len(w.journals()))
	}
	w.fail.Store("")
	w.Restart()
	e := w.catalog(w.ws.ID)
	if e.State != desk.WorkspaceDeparted || e.Reason != "crash test" || len(w.journals()) != 0 {
		t.Fatalf("recovery did not finish the offboarding: %+v", e)
	}
	if _, err := os.Stat(filepath.Join(departed, lifecycle.HandoffFile)); err != nil {
		t.Fatal(err)
	}
	if w.session(w.a.ID).Lifecycle != desk.SessionRetired {
		t.Fatal("recovery did not retire the sessions")
	}
	settled := tree(t, departed)
	if err := w.App.Lifecycle.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if tree(t, departed) != settled || w.catalog(w.ws.ID).UpdatedAt != e.UpdatedAt {
		t.Fatal("a second recovery changed something")
	}

	// 2. A restore crashed right after its move: the directory is back,
	// the handoff files and the retired sessions are not yet dealt with.
	w.fail.Store("restore/moved")
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/restore", nil); r.Status != 500 {
		t.Fatalf("restore with an injected crash = %d %s", r.Status, r.Body)
	}
	if e := w.catalog(w.ws.ID); e.State != desk.WorkspaceRestoring {
		t.Fatalf("after the crash: %+v", e)
	}
	w.fail.Store("")
	w.Restart()
	if e := w.catalog(w.ws.ID); e.State != desk.WorkspaceActive || len(w.journals()) != 0 {
		t.Fatalf("recovery did not finish the restore: %+v", e)
	}
	if got := tree(t, orig); got != before {
		t.Fatalf("restored directory differs:\nbefore:\n%s\nafter:\n%s", before, got)
	}
	if w.session(w.a.ID).Lifecycle != desk.SessionActive {
		t.Fatal("recovery did not recall the sessions")
	}
	snap := tree(t, orig)
	if err := w.App.Lifecycle.Recover(ctx); err != nil || tree(t, orig) != snap {
		t.Fatalf("a second recovery changed something (%v)", err)
	}

	// 3. An offboarding's move across file systems copied the directory
	// and stopped before deleting the source: both directories exist.
	w.fail.Store("offboard/retired")
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "copied"}); r.Status != 500 {
		t.Fatalf("offboard with an injected crash = %d %s", r.Status, r.Body)
	}
	w.fail.Store("")
	withHandoff := tree(t, orig)
	if err := os.MkdirAll(filepath.Dir(departed), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", orig, departed).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := w.App.Lifecycle.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(orig); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("recovery left the source of a finished copy")
	}
	if got := tree(t, departed); got != withHandoff {
		t.Fatalf("departed copy differs:\n%s\nwant:\n%s", got, withHandoff)
	}
	if e := w.catalog(w.ws.ID); e.State != desk.WorkspaceDeparted || e.Reason != "copied" || len(w.journals()) != 0 {
		t.Fatalf("after recovery: %+v", e)
	}
	if err := w.App.Lifecycle.Recover(ctx); err != nil || tree(t, departed) != withHandoff {
		t.Fatalf("a second recovery changed something (%v)", err)
	}
}

// TestRecoveryBeforeDispatch: queued work of a workspace whose restore was
// interrupted runs only after the restart finished the restore.
func TestRecoveryBeforeDispatch(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	ctx := context.Background()
	w.Must(200, "POST", "/v1/workspaces/"+w.ws.ID+"/offboard", map[string]string{"reason": "pause"}, nil)
	// Queue work on the (retired) session directly, as if it was queued
	// before the offboarding.
	it := &desk.QueueItem{ID: desk.NewID(desk.PrefixQueue), SurfaceID: w.a.SurfaceID, SessionID: w.a.ID, WorkspaceID: w.ws.ID,
		Kind: desk.QueueUserMessage, Priority: desk.PriorityNormal, Text: "reply resumed",
		Origin:  desk.Origin{WorkspaceID: w.ws.ID, SessionID: w.a.ID, Actor: desk.AdminActor, Kind: desk.OriginUser},
		Channel: "http", ConversationID: w.a.ID, CreatedAt: desk.Now()}
	if _, _, err := w.App.Store.Enqueue(ctx, it, desk.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	w.fail.Store("restore/restoring")
	if r := w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/restore", nil); r.Status != 500 {
		t.Fatalf("restore with an injected crash = %d %s", r.Status, r.Body)
	}
	// Several dispatcher polls: nothing may start.
	testwait.Never(t, 200*time.Millisecond, func() bool { return w.item(w.a.ID, it.ID).Status != desk.QueueStatusQueued }, "work of a restoring workspace to be dispatched")
	w.fail.Store("")
	w.Restart()
	if e := w.catalog(w.ws.ID); e.State != desk.WorkspaceActive {
		t.Fatalf("after restart: %+v", e)
	}
	waitFor(t, "the queued work to run after recovery", func() bool {
		return w.item(w.a.ID, it.ID).Status == desk.QueueStatusDelivered
	})
}

// TestAsk: a cross-workspace ask in each resolution: exact queues the
// prompt with the caller's origin; unavailable dispatches nothing;
// reconstructed makes a labelled session with the plain prompt, or the
// preamble when asked.
func TestAsk(t *testing.T) {
	apptest.Parallel(t)
	w := newLCWorld(t)
	type askRes struct {
		Status, Resolution, Reason string
		SessionID                  string `json:"session_id"`
		QueuedItemID               string `json:"queued_item_id"`
	}
	ask := func(target map[string]string, prompt string, reconstruct bool) askRes {
		t.Helper()
		var r askRes
		w.Must(200, "POST", "/v1/ask", map[string]any{"target": target, "prompt": prompt, "reconstruct": reconstruct}, &r)
		return r
	}
	// exact
	r := ask(map[string]string{"kind": "session", "id": w.a.ID}, "reply from afar", false)
	if r.Status != "dispatched" || r.Resolution != desk.ResolveExact || r.SessionID != w.a.ID || r.QueuedItemID == "" {
		t.Fatalf("exact: %+v", r)
	}
	it := w.item(w.a.ID, r.QueuedItemID)
	if it.Text != "reply from afar" || it.Origin.Actor != desk.AdminActor || it.Origin.Kind != desk.OriginUser {
		t.Fatalf("queued prompt: %+v", it)
	}
	waitFor(t, "the asked turn to run", func() bool { return w.item(w.a.ID, r.QueuedItemID).Status == desk.QueueStatusDelivered })

	// unavailable: a retired session, a departed workspace, an unknown one
	w.Must(200, "POST", "/v1/sessions/"+w.b.ID+"/retire", nil, nil)
	r = ask(map[string]string{"kind": "session", "id": w.b.ID}, "anyone?", false)
	if r.Status != "unavailable" || r.Reason != "retired-session" || r.QueuedItemID != "" {
		t.Fatalf("retired: %+v", r)
	}
	if q, _ := w.App.Store.ListQueue(context.Background(), w.b.ID, false); len(q) != 0 {
		t.Fatalf("an unavailable ask queued %d rows", len(q))
	}
	var other desk.Workspace
	w.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "other"}, &other)
	var os1 desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+other.ID+"/sessions", map[string]string{"title": "O"}, &os1)
	w.Must(200, "POST", "/v1/workspaces/"+other.ID+"/offboard", map[string]string{"reason": "away"}, nil)
	r = ask(map[string]string{"kind": "session", "id": os1.ID}, "anyone?", false)
	if r.Status != "unavailable" || r.Reason != "departed-workspace" {
		t.Fatalf("departed: %+v", r)
	}
	r = ask(map[string]string{"kind": "workspace", "id": other.ID}, "anyone?", false)
	if r.Status != "unavailable" || r.Reason != "departed-workspace" {
		t.Fatalf("departed workspace: %+v", r)
	}
	r = ask(map[string]string{"kind": "workspace", "id": "ws_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "anyone?", false)
	if r.Status != "unavailable" || r.Reason != "unknown-workspace" {
		t.Fatalf("unknown workspace: %+v", r)
	}

	// reconstructed: plain prompt, then with the preamble
	r = ask(map[string]string{"kind": "workspace", "id": w.ws.ID}, "what happened here?", false)
	if r.Status != "dispatched" || r.Resolution != desk.ResolveReconstructed || r.SessionID == "" || r.SessionID == w.a.ID {
		t.Fatalf("reconstructed: %+v", r)
	}
	rec := w.session(r.SessionID)
	if rec.ReconstructedFrom == "" || rec.WorkspaceID != w.ws.ID {
		t.Fatalf("reconstructed session: %+v", rec)
	}
	if it := w.item(r.SessionID, r.QueuedItemID); it.Text != "what happened here?" {
		t.Fatalf("reconstructed prompt without the preamble: %q", it.Text)
	}
	r = ask(map[string]string{"kind": "session", "id": "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_id": w.ws.ID}, "continue it", true)
	if r.Resolution != desk.ResolveReconstructed {
		t.Fatalf("reconstruct: %+v", r)
	}
	if it := w.item(r.SessionID, r.QueuedItemID); !strings.HasPrefix(it.Text, "You are a new worker reconstructing") ||
		!strings.HasSuffix(it.Text, "continue it") {
		t.Fatalf("reconstructed prompt with the preamble: %q", it.Text)
	}
	if rr := w.Admin("POST", "/v1/ask", map[string]any{"target": map[string]string{"kind": "session", "id": w.a.ID}, "prompt": " "}); rr.Status != 400 {
		t.Fatalf("empty prompt = %d", rr.Status)
	}
}
