package storetest

import (
	"context"
	"testing"

	"github.com/desk-runtime/desk"
)

// testSandboxLimits: a workspace's sandbox limits start at zero (every
// default) and round-trip through SetAgentSettings with the other
// settings.
func testSandboxLimits(t *testing.T, s desk.Store) {
	ctx := context.Background()
	w, _ := fixture(t, s, "limits")
	st, err := s.GetAgentSettings(ctx, w.ID)
	must(t, err)
	if st.Sandbox != (desk.SandboxLimits{}) {
		t.Fatalf("a new workspace's sandbox limits: %+v", st.Sandbox)
	}
	st.Network = true
	st.Sandbox = desk.SandboxLimits{Processes: 64, MemoryBytes: 1 << 30, CPUSeconds: 30, TmpBytes: 64 << 20, OutputBytes: 1 << 20}
	must(t, s.SetAgentSettings(ctx, w.ID, st))
	got, err := s.GetAgentSettings(ctx, w.ID)
	must(t, err)
	if got.Sandbox != st.Sandbox || !got.Network {
		t.Fatalf("read back %+v; wrote %+v", got, st)
	}
}
