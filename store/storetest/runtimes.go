package storetest

import (
	"context"
	"reflect"
	"testing"

	"github.com/desk-runtime/desk"
)

// testRuntimes: runtimes are registered once per name, listed by name,
// round-trip argv and env names, and are deleted; a session keeps its
// runtime name, and its native id is set once and never replaced.
func testRuntimes(t *testing.T, s desk.Store) {
	ctx := context.Background()
	now := desk.Now()
	r := &desk.Runtime{Name: "codex", Protocol: desk.RuntimeCodexAppServer, Argv: []string{"/usr/bin/codex", "app-server"}, Env: []string{"OPENAI_API_KEY"}, CreatedAt: now}
	must(t, s.CreateRuntime(ctx, r))
	must(t, s.CreateRuntime(ctx, &desk.Runtime{Name: "acp", Protocol: desk.RuntimeACP, Argv: []string{"/bin/agent"}, CreatedAt: now}))
	if err := s.CreateRuntime(ctx, &desk.Runtime{Name: "codex", Protocol: desk.RuntimeACP, Argv: []string{"/x"}, CreatedAt: now}); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("a second runtime named codex: %v, want conflict", err)
	}
	got, err := s.GetRuntime(ctx, "codex")
	must(t, err)
	if got.Protocol != r.Protocol || !reflect.DeepEqual(got.Argv, r.Argv) || !reflect.DeepEqual(got.Env, r.Env) || !got.CreatedAt.Equal(r.CreatedAt.Truncate(1000)) {
		t.Fatalf("read back %+v, wrote %+v", got, r)
	}
	ls, err := s.ListRuntimes(ctx)
	must(t, err)
	if len(ls) != 2 || ls[0].Name != "acp" || ls[1].Name != "codex" || ls[0].Env == nil {
		t.Fatalf("list: %+v", ls)
	}
	must(t, s.DeleteRuntime(ctx, "acp"))
	if err := s.DeleteRuntime(ctx, "acp"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := s.GetRuntime(ctx, "acp"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("get deleted: %v", err)
	}

	w, a := fixture(t, s, "runtimes")
	x := &desk.Session{
		ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: a.ID,
		Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now, Runtime: "codex",
		Origin: desk.Origin{WorkspaceID: w.ID, Actor: desk.AdminActor, Kind: desk.OriginUser},
	}
	must(t, s.CreateSession(ctx, x))
	must(t, s.SetSessionNativeID(ctx, x.ID, "thread-1"))
	must(t, s.SetSessionNativeID(ctx, x.ID, "thread-1"))
	if err := s.SetSessionNativeID(ctx, x.ID, "thread-2"); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("replacing the native id: %v, want conflict", err)
	}
	if err := s.SetSessionNativeID(ctx, "ses_missing", "n"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("native id of a missing session: %v", err)
	}
	back, err := s.GetSession(ctx, x.ID)
	must(t, err)
	if back.Runtime != "codex" || back.NativeID != "thread-1" {
		t.Fatalf("session read back with runtime %q native %q", back.Runtime, back.NativeID)
	}
}
