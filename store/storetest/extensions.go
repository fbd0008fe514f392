package storetest

import (
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testExtensions: external instructions are on for a new workspace and the
// setting round-trips; a surface's loads are kept once per name, in load
// order, apart from other surfaces', and go with a purged session.
func testExtensions(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	st, err := s.GetAgentSettings(ctx, w.ID)
	must(t, err)
	if !st.ExternalInstructions {
		t.Fatal("a new workspace has external instructions off")
	}
	st.ExternalInstructions = false
	must(t, s.SetAgentSettings(ctx, w.ID, st))
	if got, _ := s.GetAgentSettings(ctx, w.ID); got.ExternalInstructions || got.ApprovalMode != st.ApprovalMode {
		t.Fatalf("settings after set: %+v", got)
	}

	x := newSession(t, s, w, owner, "s")
	y := newSession(t, s, w, owner, "t")
	at := desk.Now()
	load := func(x *desk.Session, name, digest string, d time.Duration) bool {
		t.Helper()
		ok, err := s.LoadExtension(ctx, &desk.LoadedExtension{SurfaceID: x.SurfaceID, SessionID: x.ID, Name: name,
			Path: "/workspace/.agents/skills/" + name + "/SKILL.md", Digest: digest, ExecutionID: "exe_1", CommandID: "cmd_" + name,
			LoadedAt: at.Add(d)})
		must(t, err)
		return ok
	}
	if !load(x, "pdf", "sha256:a", 0) || !load(x, "charts", "sha256:b", time.Second) || !load(y, "pdf", "sha256:c", 0) {
		t.Fatal("a first load was not recorded")
	}
	if load(x, "pdf", "sha256:z", 2*time.Second) {
		t.Fatal("a second load of the same name was recorded")
	}
	got, err := s.LoadedExtensions(ctx, x.SurfaceID)
	must(t, err)
	if len(got) != 2 || got[0].Name != "pdf" || got[0].Digest != "sha256:a" || got[0].CommandID != "cmd_pdf" ||
		got[1].Name != "charts" || !got[0].LoadedAt.Equal(at) || got[0].SessionID != x.ID {
		t.Fatalf("loaded on x: %+v", got)
	}
	if _, err := s.LoadExtension(ctx, &desk.LoadedExtension{SurfaceID: x.SurfaceID}); desk.ErrorCode(err) != desk.EINVALID {
		t.Fatalf("a load without a name: %v", err)
	}
	must(t, s.PurgeSession(ctx, x.ID))
	if got, _ := s.LoadedExtensions(ctx, x.SurfaceID); len(got) != 0 {
		t.Fatalf("a purged session's loads stayed: %+v", got)
	}
	if got, _ := s.LoadedExtensions(ctx, y.SurfaceID); len(got) != 1 || got[0].Digest != "sha256:c" {
		t.Fatalf("another session's loads: %+v", got)
	}
}
