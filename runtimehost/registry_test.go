package runtimehost_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/store/sqlite"
)

func TestRegistryRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.OpenWith(context.Background(), filepath.Join(dir, "d.db"), sqlite.Options{})
	must(t, err)
	defer st.Close()
	g := runtimehost.NewRegistry(st)
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
