package runtimehost_test

// A real runtime inside the real sandbox: codex-acp from npm, started by
// the host with the bubblewrap spawner (its node_modules bound read-only
// through installRoot, its state directory as HOME), answers one turn
// from the scripted Responses server. The workspace allows the network:
// with it off, the child could not reach even the loopback model server.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider/strict"
	"github.com/desk-runtime/desk/agent/sandbox"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/wire"
)

func TestCodexACPAnswersInTheSandbox(t *testing.T) {
	bin := npmbin.Find(t, "codex-acp", "codex-acp (@zed-industries/codex-acp)")
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap is not installed")
	}
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	// As the registry stores it: symbolic links resolved (.bin/codex-acp
	// is a link into node_modules/@zed-industries/codex-acp/bin).
	resolved, err := filepath.EvalSymlinks(bin)
	must(t, err)
	srv := strict.NewResponses(t, strict.Reply{Text: "Hello from inside the sandbox."})

	f := setup(t, resolved)
	ctx := context.Background()
	set, err := f.store.GetAgentSettings(ctx, f.sess.WorkspaceID)
	must(t, err)
	set.ApprovalMode, set.Network = desk.ApprovalModeUser, true
	must(t, f.store.SetAgentSettings(ctx, f.sess.WorkspaceID, set))
	must(t, f.store.DeleteRuntime(ctx, "dbl"))
	must(t, f.store.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: []string{resolved},
		Env: []string{"SCRIPTED_API_KEY"}, CreatedAt: desk.Now()}))
	state := runtimehost.StateDir(f.home, f.sess)
	cfg := fmt.Sprintf(`model = "gpt-5-codex"
model_provider = "scripted"
approval_policy = "on-request"
sandbox_mode = "read-only"

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects."/workspace"]
trust_level = "trusted"
`, srv.BaseURL())
	must(t, os.MkdirAll(filepath.Join(state, "codex"), 0o700))
	must(t, os.WriteFile(filepath.Join(state, "codex", "config.toml"), []byte(cfg), 0o600))

	h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
		Spawner:    sandbox.BubblewrapSpawner(bwrap),
		LookupEnv: func(k string) (string, bool) {
			if k == "SCRIPTED_API_KEY" {
				return "dummy", true
			}
			return "", false
		}})
	defer h.Close(ctx)
	tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := h.Execute(tctx, f.turn(&emitted{}, "say hello"))
	if err != nil {
		t.Fatalf("turn: %v (model server refused %+v)", err, srv.Rejected())
	}
	if !strings.Contains(out.Reply, "Hello from inside the sandbox.") {
		t.Fatalf("reply %q", out.Reply)
	}
	if rs := srv.Accepted(); len(rs) == 0 || !strings.Contains(strings.Join(rs[len(rs)-1].UserTexts(), "|"), "say hello") {
		t.Fatalf("the model server did not get the prompt: %+v", srv.Requests())
	}
	x, err := f.store.GetSession(ctx, f.sess.ID)
	must(t, err)
	if x.NativeID == "" {
		t.Fatal("no native id recorded")
	}
	// Its state lives in the state directory on the host (CODEX_HOME).
	if ents, _ := os.ReadDir(filepath.Join(state, "codex")); len(ents) < 2 {
		t.Fatalf("codex wrote nothing to its state directory: %v", ents)
	}
}
