package runtimehost_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/store/sqlite"
)

func TestRegistryRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.OpenWith(context.Background(), filepath.Join(dir, "d.db"), sqlite.Options{})
	must(t, err)
	defer st.Close()
	g := runtimehost.NewRegistry(st, runtimehost.RegistryOptions{})
	admin := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
	actor := desk.WithPrincipal(context.Background(), desk.Principal{ActorID: "act_x", WorkspaceID: "ws_x"})
	plain := filepath.Join(dir, "notexec")
	must(t, os.WriteFile(plain, []byte("x"), 0o644))
	for _, c := range []struct {
		ctx  context.Context
		r    desk.Runtime
		code string
		want string
	}{
		{actor, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"/bin/cat"}}, desk.EFORBIDDEN, "only the admin"},
		{admin, desk.Runtime{Name: "a", Protocol: "pi-rpc", Argv: []string{"/bin/cat"}}, desk.EINVALID, "unknown runtime protocol \"pi-rpc\""},
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{plain}}, desk.EINVALID, "is not an executable file"},
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"no-such-program-xyz"}}, desk.EINVALID, "not a program on desk's PATH"},
		{admin, desk.Runtime{Name: "a", Protocol: "acp"}, desk.EINVALID, "argv is required"},
		{admin, desk.Runtime{Name: "A b", Protocol: "acp", Argv: []string{"/bin/cat"}}, desk.EINVALID, "runtime name"},
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"/bin/cat"}, Env: []string{"KEY=value"}}, desk.EINVALID, "names of environment variables"},
		// A runtime never holds a provider key: the gateway gives it its own.
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"/bin/cat"}, Env: []string{"HTTPS_PROXY", "OPENAI_API_KEY"}}, desk.EINVALID, "env OPENAI_API_KEY: OPENAI_API_KEY is given to every runtime child by desk's model gateway"},
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"/bin/cat"}, Env: []string{"ANTHROPIC_API_KEY"}}, desk.EINVALID, "gateway"},
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"/bin/cat"}, Env: []string{"OPENAI_COMPATIBLE_API_KEY"}}, desk.EINVALID, "a runtime never holds one"},
		{admin, desk.Runtime{Name: "a", Protocol: "acp", Argv: []string{"/bin/cat"}, Env: []string{"ANTHROPIC_BASE_URL"}}, desk.EINVALID, "gateway"},
	} {
		_, err := g.Add(c.ctx, c.r)
		if !desk.IsCode(err, c.code) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %s naming %q", c.r, err, c.code, c.want)
		}
	}
	if ls, _ := st.ListRuntimes(context.Background()); len(ls) != 0 {
		t.Fatalf("refused registrations stored: %+v", ls)
	}
	x, err := g.Add(admin, desk.Runtime{Name: "cat", Protocol: "acp", Argv: []string{"cat", "-u"}, Env: []string{"B", "A", "B"}})
	must(t, err)
	if !filepath.IsAbs(x.Argv[0]) || x.Argv[1] != "-u" || strings.Join(x.Env, ",") != "A,B" {
		t.Fatalf("registered %+v: argv[0] resolved, env names sorted and unique", x)
	}
	if _, err := g.List(actor); !desk.IsCode(err, desk.EFORBIDDEN) {
		t.Fatalf("actor list: %v", err)
	}
	must(t, g.Remove(admin, "cat"))
}

// A program whose bound directory overlaps DESK_HOME is refused, naming
// the overlap, however the paths are spelled (symbolic links to either
// side resolved); nothing is stored.
func TestRegistryRefusesInstallOverlappingHome(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.OpenWith(context.Background(), filepath.Join(dir, "d.db"), sqlite.Options{})
	must(t, err)
	defer st.Close()
	user := filepath.Join(dir, "user")      // a user's ~
	home := filepath.Join(user, ".desk")    // the default DESK_HOME below it
	tools := filepath.Join(dir, "tools")    // a directory of its own
	linked := filepath.Join(dir, "homelnk") // a link to DESK_HOME
	must(t, os.MkdirAll(filepath.Join(home, "bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(tools, "node_modules", "pkg", "bin"), 0o755))
	must(t, os.Symlink(user, linked))
	exe := func(p string) string {
		must(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
		return p
	}
	inUser := exe(filepath.Join(user, "codex"))
	inHome := exe(filepath.Join(home, "bin", "agent"))
	// A program in a node_modules tree binds the outermost node_modules,
	// ~/node_modules here: a sibling of DESK_HOME, no overlap.
	must(t, os.MkdirAll(filepath.Join(user, "node_modules", "x", "bin"), 0o755))
	npm := exe(filepath.Join(user, "node_modules", "x", "bin", "x"))
	fine := exe(filepath.Join(tools, "node_modules", "pkg", "bin", "agent"))
	viaLink := filepath.Join(linked, "codex")

	admin := desk.WithPrincipal(context.Background(), desk.Principal{Admin: true})
	for _, hm := range []string{home, filepath.Join(linked, ".desk")} {
		g := runtimehost.NewRegistry(st, runtimehost.RegistryOptions{Home: layout.Home{Root: hm}})
		for _, c := range []struct{ bin, want string }{
			{inUser, "the program's directory " + user + ", which the sandbox binds read-only, contains DESK_HOME " + home},
			{viaLink, "contains DESK_HOME " + home},
			{inHome, "lies inside DESK_HOME " + home},
		} {
			_, err := g.Add(admin, desk.Runtime{Name: "r", Protocol: "acp", Argv: []string{c.bin}})
			if !desk.IsCode(err, desk.EINVALID) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("home %s, program %s: %v, want 400 naming %q", hm, c.bin, err, c.want)
			}
		}
		// The node_modules program binds user/node_modules: no overlap.
		if _, err := g.Add(admin, desk.Runtime{Name: "npm", Protocol: "acp", Argv: []string{npm}}); err != nil {
			t.Errorf("home %s: %s refused: %v", hm, npm, err)
		}
		must(t, g.Remove(admin, "npm"))
	}
	if ls, _ := st.ListRuntimes(context.Background()); len(ls) != 0 {
		t.Fatalf("refused registrations stored: %+v", ls)
	}
	// DESK_HOME inside a node_modules tree that is bound whole.
	g := runtimehost.NewRegistry(st, runtimehost.RegistryOptions{Home: layout.Home{Root: filepath.Join(tools, "node_modules", "desk-home")}})
	if _, err := g.Add(admin, desk.Runtime{Name: "nm", Protocol: "acp", Argv: []string{fine}}); !desk.IsCode(err, desk.EINVALID) ||
		!strings.Contains(err.Error(), "the program's directory "+filepath.Join(tools, "node_modules")+", which the sandbox binds read-only, contains DESK_HOME") {
		t.Errorf("DESK_HOME under the bound node_modules: %v", err)
	}
}
