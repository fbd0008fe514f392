package app_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/absorb"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
)

// absorbPair makes a target and a source workspace whose files give every
// absorb status, and a session in the source.
func absorbPair(e *apptest.Env) (target, source desk.Workspace, ses desk.Session) {
	e.T.Helper()
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "target"}, &target)
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "research"}, &source)
	e.Must(201, "POST", "/v1/workspaces/"+source.ID+"/sessions", map[string]string{"title": "source work"}, &ses)
	for p, c := range map[string]string{"shared.md": "same\n", "plan.md": "target plan\n", "keep.md": "target keep\n", "only-target.md": "t\n"} {
		writeCheckout(e, target.ID, p, c)
	}
	for p, c := range map[string]string{
		"shared.md": "same\n", "plan.md": "source plan\n", "keep.md": "source keep\n",
		"data/results.csv": "a,b\n1,2\n", "notes.md": "source notes\n",
		".env": "TOKEN=secret\n", "node_modules/x/i.js": "cache\n", "AGENTS.md": "source rules\n",
	} {
		writeCheckout(e, source.ID, p, c)
	}
	return target, source, ses
}

// TestAbsorbOverHTTP: the plan's summary counts, "both" keeping the
// target's copy plus the import, the source departing with absorbed_into
// and its sessions retired, and a restore of the source giving it back.
func TestAbsorbOverHTTP(t *testing.T) { testAbsorbOverHTTP(t, app.Config{}) }

func testAbsorbOverHTTP(t *testing.T, cfg app.Config) {
	e := apptest.Start(t, cfg)
	target, source, ses := absorbPair(e)
	srcDir := filepath.Join(e.Config.Home, "workspaces", source.ID)
	srcBefore := treeSnapshot(t, srcDir)
	url := "/v1/workspaces/" + target.ID + "/absorb?source=" + source.ID

	var plan desk.AbsorbPlan
	e.Must(200, "GET", url, nil, &plan)
	if plan.Summary["ready"] != 2 || plan.Summary["duplicate"] != 1 || plan.Summary["conflict"] != 2 {
		t.Fatalf("summary %v (%+v)", plan.Summary, plan.Entries)
	}
	left := map[string]string{}
	for _, x := range plan.Excluded {
		left[x.Path] = x.Reason
	}
	if left["checkout/.env"] != absorb.ReasonEnv || left["checkout/node_modules"] != absorb.ReasonCache || left["checkout/AGENTS.md"] != absorb.ReasonManaged {
		t.Fatalf("excluded %v", left)
	}
	// The plan changes nothing; applying without resolutions is refused.
	if r := e.Admin("POST", url, map[string]any{"digest": plan.Digest}); r.Status != 409 || !strings.Contains(r.ErrorMessage(), "unresolved") {
		t.Fatalf("unresolved = %d %s", r.Status, r.Body)
	}
	if r := e.Admin("POST", url, map[string]any{"digest": strings.Repeat("0", 64), "resolutions": map[string]string{}}); r.ErrorCode() != desk.ESTALEPLAN {
		t.Fatalf("stale = %d %s", r.Status, r.Body)
	}
	var res desk.AbsorbResult
	e.Must(200, "POST", url, map[string]any{"digest": plan.Digest,
		"resolutions": map[string]string{"checkout/plan.md": "both", "checkout/keep.md": "target"}}, &res)
	imp := "imports/" + absorb.ImportTag(&source) + "/plan.md"
	for p, want := range map[string]string{
		"plan.md": "target plan\n", imp: "source plan\n", "keep.md": "target keep\n",
		"notes.md": "source notes\n", "data/results.csv": "a,b\n1,2\n", "only-target.md": "t\n",
		".env": "<absent>", "AGENTS.md": "<absent>", "node_modules/x/i.js": "<absent>",
	} {
		if got := readCheckout(e, target.ID, p); got != want {
			t.Errorf("target %s = %q; want %q", p, got, want)
		}
	}
	if !strings.HasPrefix(imp, "imports/research-") {
		t.Fatalf("import path %s", imp)
	}
	// The source departed, with the absorb in the catalog.
	var ce desk.CatalogEntry
	e.Must(200, "GET", "/v1/catalog/"+source.ID, nil, &ce)
	if ce.State != desk.WorkspaceDeparted || ce.AbsorbedInto != target.ID || ce.AbsorbedAt == nil {
		t.Fatalf("catalog %+v", ce)
	}
	var x desk.Session
	e.Must(200, "GET", "/v1/sessions/"+ses.ID, nil, &x)
	if x.Lifecycle != desk.SessionRetired || x.WorkspaceID != source.ID {
		t.Fatalf("source session %+v", x)
	}
	// Provenance is untouched and restoring the source gives it back whole.
	e.Must(200, "POST", "/v1/workspaces/"+source.ID+"/restore", nil, nil)
	if got := treeSnapshot(t, srcDir); !reflect.DeepEqual(got, srcBefore) {
		t.Fatalf("restored source differs:\n%v\nwant\n%v", got, srcBefore)
	}
	e.Must(200, "GET", "/v1/sessions/"+ses.ID, nil, &x)
	if x.Lifecycle != desk.SessionActive {
		t.Fatalf("restored session %s", x.Lifecycle)
	}
}

// TestAbsorbFailureLeavesBothAsTheyWere: git refusing the import commit
// (a commit.cleanup only git commit reads; no repository hook runs, so a
// hook cannot refuse it) fails the absorb after its files were copied;
// both workspaces are as they were and the source stays active.
func TestAbsorbFailureLeavesBothAsTheyWere(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{})
	target, source, ses := absorbPair(e)
	tco := checkoutPath(e, target.ID, "")
	head := gitRepo(t, tco)
	runGit(t, tco, "config", "commit.cleanup", "bogus")
	tDir, sDir := filepath.Join(e.Config.Home, "workspaces", target.ID), filepath.Join(e.Config.Home, "workspaces", source.ID)
	tBefore, sBefore := treeSnapshot(t, tDir), treeSnapshot(t, sDir)
	url := "/v1/workspaces/" + target.ID + "/absorb?source=" + source.ID
	var plan desk.AbsorbPlan
	e.Must(200, "GET", url, nil, &plan)
	r := e.Admin("POST", url, map[string]any{"digest": plan.Digest,
		"resolutions": map[string]string{"checkout/plan.md": "source", "checkout/keep.md": "both"}})
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "Invalid cleanup mode bogus") {
		t.Fatalf("absorb with git refusing the commit = %d %s", r.Status, r.Body)
	}
	if got := treeSnapshot(t, tDir); !reflect.DeepEqual(got, tBefore) {
		t.Fatalf("target changed:\n%v\nwant\n%v", got, tBefore)
	}
	if got := treeSnapshot(t, sDir); !reflect.DeepEqual(got, sBefore) {
		t.Fatal("source changed")
	}
	if runGit(t, tco, "rev-parse", "HEAD") != head || runGit(t, tco, "diff", "--cached", "--name-only") != "" {
		t.Fatal("target git changed")
	}
	var ce desk.CatalogEntry
	e.Must(200, "GET", "/v1/catalog/"+source.ID, nil, &ce)
	var x desk.Session
	e.Must(200, "GET", "/v1/sessions/"+ses.ID, nil, &x)
	if ce.State != desk.WorkspaceActive || ce.AbsorbedInto != "" || x.Lifecycle != desk.SessionActive {
		t.Fatalf("source catalog %+v session %s", ce, x.Lifecycle)
	}
	// Without it the same plan goes through, with an import commit.
	runGit(t, tco, "config", "--unset", "commit.cleanup")
	var res desk.AbsorbResult
	e.Must(200, "POST", url, map[string]any{"digest": plan.Digest,
		"resolutions": map[string]string{"checkout/plan.md": "source", "checkout/keep.md": "both"}}, &res)
	if res.ImportCommit == "" || res.Source.ImportCommit != res.ImportCommit || readCheckout(e, target.ID, "plan.md") != "source plan\n" {
		t.Fatalf("result %+v", res)
	}
}
