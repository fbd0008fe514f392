package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		f := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCLITemplateAddListUpgrade(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	v1, v2 := t.TempDir(), t.TempDir()
	writeTree(t, v1, map[string]string{"README.md": "one\n", "AGENTS.md": "rules\n", "src/x.go": "package x\n", ".git/HEAD": "not a template file\n"})
	writeTree(t, v2, map[string]string{"README.md": "two\n", "AGENTS.md": "rules v2\n", "src/x.go": "package x\n"})

	c.fail(exitUsage, "template", "add", "basic", v1) // --version is required
	if out := c.ok("template", "add", "basic", v1, "--version", "1"); !strings.Contains(out, "3 files, 2 managed") {
		t.Fatalf("template add = %q", out)
	}
	var tv desk.TemplateVersion
	c.json(&tv, "template", "add", "basic", v2, "--version", "2")
	if tv.Version != "2" || len(tv.Files) != 3 {
		t.Fatalf("template add --json = %+v", tv)
	}
	c.fail(exitConflict, "template", "add", "basic", v2, "--version", "2")
	if out := c.ok("template", "list"); !strings.Contains(out, "basic") || !strings.Contains(out, "2") {
		t.Fatalf("template list = %q", out)
	}

	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "proj", "--template", "basic@1")
	co := filepath.Join(c.app.Config.Home, "workspaces", ws.ID, "checkout")
	if b, err := os.ReadFile(filepath.Join(co, "README.md")); err != nil || string(b) != "one\n" {
		t.Fatalf("README after create: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(co, ".git")); err == nil {
		t.Fatal("the template's .git was copied")
	}
	// A local edit that conflicts with the template's.
	writeTree(t, co, map[string]string{"AGENTS.md": "rules, mine\n"})

	var plan desk.UpgradePlan
	c.json(&plan, "template", "upgrade", ws.ID, "--dry-run")
	if plan.Summary[desk.UpgradeConflict] != 1 || plan.Summary[desk.UpgradeReady] != 1 {
		t.Fatalf("dry run plan %+v", plan.Summary)
	}
	// Without a terminal a missing resolution is a usage error naming it.
	r := c.fail(exitUsage, "template", "upgrade", ws.ID)
	if !strings.Contains(r.e.Error(), "AGENTS.md") {
		t.Fatalf("missing resolution error: %v", r.e)
	}
	c.fail(exitUsage, "template", "upgrade", ws.ID, "--resolve", "AGENTS.md=mine")
	out := c.ok("template", "upgrade", ws.ID, "--to", "2", "--resolve", "AGENTS.md=workspace")
	if !strings.Contains(out, "AGENTS.md") || !strings.Contains(out, "upgraded to basic 2: 1 written") {
		t.Fatalf("upgrade output %q", out)
	}
	for p, want := range map[string]string{"README.md": "two\n", "AGENTS.md": "rules, mine\n"} {
		if b, _ := os.ReadFile(filepath.Join(co, p)); string(b) != want {
			t.Errorf("%s = %q; want %q", p, b, want)
		}
	}
}

func TestCLIWorkspaceAbsorb(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var target, source desk.Workspace
	c.json(&target, "workspace", "create", "target")
	c.json(&source, "workspace", "create", "source")
	home := c.app.Config.Home
	writeTree(t, filepath.Join(home, "workspaces", target.ID, "checkout"), map[string]string{"a.md": "target a\n"})
	writeTree(t, filepath.Join(home, "workspaces", source.ID, "checkout"), map[string]string{"a.md": "source a\n", "b.md": "b\n", ".env": "X=1\n"})

	if out := c.ok("workspace", "absorb", target.ID, source.ID, "--dry-run"); !strings.Contains(out, "1 ready, 0 duplicate, 1 conflict, 1 left behind") {
		t.Fatalf("dry run = %q", out)
	}
	c.fail(exitUsage, "workspace", "absorb", target.ID, source.ID)
	var res desk.AbsorbResult
	c.json(&res, "workspace", "absorb", target.ID, source.ID, "--resolve", "checkout/a.md=both")
	if res.Source == nil || res.Source.State != desk.WorkspaceDeparted || res.Source.AbsorbedInto != target.ID || len(res.Written) != 2 {
		t.Fatalf("absorb --json = %+v", res)
	}
	co := filepath.Join(home, "workspaces", target.ID, "checkout")
	if b, _ := os.ReadFile(filepath.Join(co, "a.md")); string(b) != "target a\n" {
		t.Fatalf("target a.md = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(co, "imports", res.Plan.ImportTag, "a.md")); string(b) != "source a\n" {
		t.Fatalf("imported a.md = %q", b)
	}
}
