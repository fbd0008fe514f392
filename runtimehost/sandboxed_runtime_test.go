package runtimehost_test

// A real runtime inside the real sandbox: codex-acp from npm, started by
// the host with the bubblewrap spawner (its node_modules bound read-only
// through installRoot, its state directory as HOME), answers one turn
// from the scripted Responses server. The workspace's network is off (the
// default): the child reaches the model only through desk's gateway,
// bridged into its sandbox, which calls the server with the operator's
// key and records the turn's usage.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/gateway"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/models"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/wire"
	"github.com/desk-runtime/desk/sandbox"
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
	srv := strict.NewResponses(t, strict.Reply{Text: "Hello from inside the sandbox.", Usage: strict.Usage{Input: 1000, Output: 40}})

	f := setup(t, resolved)
	ctx := context.Background()
	set, err := f.store.GetAgentSettings(ctx, f.sess.WorkspaceID)
	must(t, err)
	set.ApprovalMode, set.Network = desk.ApprovalModeUser, false
	must(t, f.store.SetAgentSettings(ctx, f.sess.WorkspaceID, set))
	must(t, f.store.DeleteRuntime(ctx, "dbl"))
	// codex-acp reads its model provider from -c: its base URL is the
	// gateway's, which desk puts in for ${DESK_GATEWAY_URL}; its key is
	// the child's gateway credential (OPENAI_API_KEY).
	argv := []string{resolved}
	for _, kv := range []string{"model=gpt-5-codex", "model_provider=desk", "model_providers.desk.name=desk",
		"model_providers.desk.base_url=${DESK_GATEWAY_URL}/v1", "model_providers.desk.wire_api=responses",
		"model_providers.desk.env_key=OPENAI_API_KEY", "model_providers.desk.request_max_retries=0",
		"model_providers.desk.stream_max_retries=0", "approval_policy=on-request", "sandbox_mode=read-only"} {
		argv = append(argv, "-c", kv)
	}
	must(t, f.store.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: argv, CreatedAt: desk.Now()}))
	state := runtimehost.StateDir(f.home, f.sess)
	cfg := `[projects."/workspace"]
trust_level = "trusted"
`
	must(t, os.MkdirAll(filepath.Join(state, "codex"), 0o700))
	must(t, os.WriteFile(filepath.Join(state, "codex", "config.toml"), []byte(cfg), 0o600))
	const operatorKey = "sk-operator-key-only-desk-holds"
	srv.RequireKey(operatorKey)
	deskEnv := map[string]string{"OPENAI_BASE_URL": srv.BaseURL(), "OPENAI_API_KEY": operatorKey}
	lookup := func(k string) (string, bool) { v, ok := deskEnv[k]; return v, ok }
	gw := gateway.New(gateway.Options{Usage: f.store, Models: gatewayModels(t), Dir: filepath.Join(t.TempDir(), "gw"), LookupEnv: lookup})
	must(t, gw.Open(ctx))
	defer gw.Close(ctx)

	h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
		Spawner:    sandbox.BubblewrapSpawner(bwrap), Gateway: gw, LookupEnv: lookup})
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
	// Every call the child made is the turn's, as the provider counted it.
	u, err := f.store.SumUsage(ctx, desk.UsageFilter{SessionID: f.sess.ID})
	must(t, err)
	if len(srv.Accepted()) == 0 || u.Total.Calls != int64(len(srv.Accepted())) || u.Total.OutputTokens < 40 {
		t.Fatalf("usage %+v for %d accepted calls", u.Total, len(srv.Accepted()))
	}
	// Its state lives in the state directory on the host (CODEX_HOME).
	if ents, _ := os.ReadDir(filepath.Join(state, "codex")); len(ents) < 2 {
		t.Fatalf("codex wrote nothing to its state directory: %v", ents)
	}
}

// A registration from before the gateway that passes desk's provider key
// (OPENAI_API_KEY): the child starts, without the key. Its environment
// holds the gateway's credential and URLs (the bridge's port on its own
// loopback) instead.
func TestOldRegistrationNeverPassesTheKey(t *testing.T) {
	f := scriptedFixture(t)
	ctx := context.Background()
	must(t, f.store.DeleteRuntime(ctx, "dbl"))
	self, err := os.Executable()
	must(t, err)
	must(t, f.store.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: []string{self},
		Env: []string{"ANTHROPIC_API_KEY", "DESK_TEST_ACP_AGENT", "OPENAI_API_KEY"}, CreatedAt: desk.Now()}))
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap is not installed")
	}
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	set, err := f.store.GetAgentSettings(ctx, f.sess.WorkspaceID)
	must(t, err)
	set.ApprovalMode, set.Network = desk.ApprovalModeUser, false // sandboxed, network off
	must(t, f.store.SetAgentSettings(ctx, f.sess.WorkspaceID, set))
	const real = "sk-operator-real-key-0123456789"
	lookup := func(k string) (string, bool) {
		switch k {
		case "DESK_TEST_ACP_AGENT":
			return "1", true
		case "OPENAI_API_KEY", "ANTHROPIC_API_KEY":
			return real, true
		}
		return "", false
	}
	gw := gateway.New(gateway.Options{Usage: f.store, Models: gatewayModels(t), LookupEnv: lookup})
	must(t, gw.Open(ctx))
	defer gw.Close(ctx)
	h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
		Spawner:    sandbox.BubblewrapSpawner(bwrap), Gateway: gw, LookupEnv: lookup})
	defer h.Close(ctx)
	outs := runScript(t, h, f, []op{{Op: "env", Path: "OPENAI_API_KEY"}, {Op: "env", Path: "ANTHROPIC_API_KEY"},
		{Op: "env", Path: "OPENAI_BASE_URL"}, {Op: "env", Path: "ANTHROPIC_BASE_URL"}})
	for i, o := range outs {
		if strings.Contains(o.Content, real) {
			t.Fatalf("the child holds the operator's key (op %d)", i)
		}
	}
	if !strings.HasPrefix(outs[0].Content, "desk-gw-") || outs[1].Content != outs[0].Content {
		t.Fatalf("credentials %q %q", outs[0].Content, outs[1].Content)
	}
	want := fmt.Sprintf("http://127.0.0.1:%d", gateway.GuestPort)
	if outs[2].Content != want+"/v1" || outs[3].Content != want {
		t.Fatalf("base URLs %q %q", outs[2].Content, outs[3].Content)
	}
}

// A runtime's model call reaches the operator's provider through the
// gateway however the child runs: sandboxed without network (the bridge),
// sandboxed with the network (the host's loopback) and on the host
// (full-access). The provider sees the operator's key, the child never,
// and the call is the turn's usage.
func TestModelCallsThroughTheGatewayInEveryMode(t *testing.T) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip("bubblewrap is not installed")
	}
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no sandbox here: %v", err)
	}
	for _, c := range []struct {
		name    string
		mode    string
		network bool
	}{
		{"sandbox-network-off", desk.ApprovalModeUser, false},
		{"sandbox-network-on", desk.ApprovalModeUser, true},
		{"full-access", desk.ApprovalModeFullAccess, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := scriptedFixture(t)
			ctx := context.Background()
			set, err := f.store.GetAgentSettings(ctx, f.sess.WorkspaceID)
			must(t, err)
			set.ApprovalMode, set.Network = c.mode, c.network
			must(t, f.store.SetAgentSettings(ctx, f.sess.WorkspaceID, set))
			const real = "sk-operator-real-key-9876543210"
			srv := strict.NewResponses(t, strict.Reply{Text: "through the gateway", Usage: strict.Usage{Input: 70, Output: 7}})
			srv.RequireKey(real)
			lookup := func(k string) (string, bool) {
				switch k {
				case "DESK_TEST_ACP_AGENT":
					return "1", true
				case "OPENAI_API_KEY":
					return real, true
				case "OPENAI_BASE_URL":
					return srv.BaseURL(), true
				}
				return "", false
			}
			gw := gateway.New(gateway.Options{Usage: f.store, Models: gatewayModels(t), LookupEnv: lookup})
			must(t, gw.Open(ctx))
			defer gw.Close(ctx)
			h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
				Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
				Spawner:    sandbox.BubblewrapSpawner(bwrap), Gateway: gw, LookupEnv: lookup})
			defer h.Close(ctx)
			outs := runScript(t, h, f, []op{{Op: "model"}, {Op: "env", Path: "OPENAI_API_KEY"}})
			if outs[0].Code != 200 || !strings.Contains(outs[0].Content, "through the gateway") {
				t.Fatalf("the child's model call: %+v (provider refused %+v)", outs[0], srv.Rejected())
			}
			if strings.Contains(outs[0].Content+outs[1].Content, real) || !strings.HasPrefix(outs[1].Content, "desk-gw-") {
				t.Fatalf("the child's key %q", outs[1].Content)
			}
			u, err := f.store.SumUsage(ctx, desk.UsageFilter{SessionID: f.sess.ID})
			must(t, err)
			if u.Total.Calls != 1 || u.Total.TotalTokens != 77 {
				t.Fatalf("usage %+v", u.Total)
			}
		})
	}
}

// A child whose model call failed and that then waits for ever (as a
// runtime retrying an unreachable provider does) has its turn failed with
// the gateway's reason once the failures have lasted GatewayFailAfter.
func TestFailingModelCallsFailTheTurn(t *testing.T) {
	f := scriptedFixture(t)
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	down := "http://" + ln.Addr().String()
	ln.Close()
	lookup := func(k string) (string, bool) {
		switch k {
		case "DESK_TEST_ACP_AGENT":
			return "1", true
		case "OPENAI_API_KEY":
			return "sk-operator", true
		case "OPENAI_BASE_URL":
			return down + "/v1", true
		}
		return "", false
	}
	gw := gateway.New(gateway.Options{Usage: f.store, Models: gatewayModels(t), LookupEnv: lookup})
	must(t, gw.Open(ctx))
	defer gw.Close(ctx)
	// full-access (the fixture's mode): the child on the host, no bwrap
	// needed.
	h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}},
		Gateway:    gw, LookupEnv: lookup, GatewayFailAfter: time.Second})
	defer h.Close(ctx)
	b, _ := json.Marshal([]op{{Op: "model"}, {Op: "hang"}})
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, err = h.Execute(tctx, f.turn(&emitted{}, string(b)))
	if err == nil || tctx.Err() != nil || !strings.Contains(err.Error(), "cannot reach the provider at "+down) {
		t.Fatalf("turn: %v (deadline: %v)", err, tctx.Err())
	}
	if h.Running() != 0 {
		t.Fatal("the failing child is still running")
	}
}

// gatewayModels are the models the operator offers in these tests: the
// gateway forwards calls for them only.
func gatewayModels(t *testing.T) *models.Catalog {
	t.Helper()
	c, err := models.New("", []string{"openai:gpt-test", "openai:gpt-5-codex"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A runtime child knows whose it is, as desk's commands do: the session,
// its signature and its workspace, as the session's own values — a
// registration passing DESK_SESSION_ID from desk's environment does not
// make it another session's (issue 26 item 6).
func TestChildGetsItsSessionsIdentity(t *testing.T) {
	f := scriptedFixture(t)
	ctx := context.Background()
	must(t, f.store.DeleteRuntime(ctx, "dbl"))
	self, err := os.Executable()
	must(t, err)
	must(t, f.store.CreateRuntime(ctx, &desk.Runtime{Name: "dbl", Protocol: desk.RuntimeACP, Argv: []string{self},
		Env: []string{"DESK_TEST_ACP_AGENT", desk.EnvSessionID}, CreatedAt: desk.Now()}))
	lookup := func(k string) (string, bool) {
		switch k {
		case "DESK_TEST_ACP_AGENT":
			return "1", true
		case desk.EnvSessionID:
			return "ses_someone_else", true
		}
		return "", false
	}
	h := runtimehost.New(runtimehost.Options{Store: f.store, Home: f.home, CancelGrace: time.Second,
		Transports: map[wire.Protocol]wire.Transport{wire.ACP: acp.Transport{}}, LookupEnv: lookup})
	defer h.Close(ctx)
	outs := runScript(t, h, f, []op{{Op: "env", Path: desk.EnvSessionID}, {Op: "env", Path: desk.EnvSignature}, {Op: "env", Path: desk.EnvWorkspaceID}})
	if outs[0].Content != f.sess.ID || outs[1].Content != f.sess.Signature || outs[2].Content != f.sess.WorkspaceID {
		t.Fatalf("the child's identity %q %q %q; want %s %s %s", outs[0].Content, outs[1].Content, outs[2].Content, f.sess.ID, f.sess.Signature, f.sess.WorkspaceID)
	}
}
