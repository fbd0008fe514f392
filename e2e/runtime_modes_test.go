package e2e

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// ordinaryCommand writes a file in the workspace and reads it back: what
// a real model asks a coding agent to do first, with nothing escalated.
const ordinaryCommand = "echo ordinary-$((20+1)) > /workspace/x && cat /workspace/x"

// Codex in the mode docs/runtimes.md recommends (approval on request,
// its sandbox workspace-write) runs an ordinary command inside desk's
// sandbox without asking: its own bubblewrap sandbox nests inside desk's
// (issue 26). Before, every such command failed with bwrap's "Creating
// new namespace failed" because desk's sandbox forbade user namespaces,
// and only escalated calls (which the acceptance suite scripts) ran.
func TestRuntimeCodexRunsAnOrdinaryCommand(t *testing.T) {
	t.Parallel()
	for _, pc := range []protocolCase{
		{name: "acp", protocol: "acp", bin: "codex-acp", what: "codex-acp (@zed-industries/codex-acp)",
			model: codexModel(func(bin string) []string { return append([]string{bin}, codexConfigMode(true, "workspace-write")...) })},
		{name: "codex-app-server", protocol: "codex-app-server", bin: "codex", what: "Codex (@openai/codex)",
			model: codexModel(func(bin string) []string {
				return append([]string{bin, "app-server"}, codexConfigMode(false, "workspace-write")...)
			})},
	} {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			bin := pc.find(t)
			m := &scriptedModel{arrived: make(chan struct{}, 1)}
			argv, envNames, deskEnv := pc.model(t, bin, m, func(c modelCall) modelAnswer {
				if len(c.Results) > 0 {
					return modelAnswer{Text: "Done."}
				}
				return modelAnswer{Command: ordinaryCommand, Ordinary: true}
			})
			env := append([]string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL="}, deskEnv...)
			d := startDesk(t, deskOpts{Token: restartToken, Env: env})
			admin := api{t: t, url: d.URL, token: d.Token}
			var ws desk.Workspace
			admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "modes"}, &ws)
			// desk's sandbox with the network off, approvals asked of a
			// person: the runtime must not need one for this command.
			admin.must(200, "PATCH", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"network": false, "approval_mode": desk.ApprovalModeUser}, nil)
			admin.must(201, "POST", "/v1/runtimes", map[string]any{"name": "rt", "protocol": pc.protocol, "argv": argv, "env": envNames}, nil)
			var ses desk.Session
			admin.must(201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]string{"runtime": "rt"}, &ses)
			exe := admin.send(ses.ID, "write x")
			x := admin.settled(exe)
			if x.Phase != desk.PhaseEnded {
				t.Fatalf("execution %s (%q)", x.Phase, x.Reason)
			}
			var results []string
			for _, c := range m.requests() {
				results = append(results, c.Results...)
			}
			if got := strings.Join(results, "|"); !strings.Contains(got, "ordinary-21") || strings.Contains(got, "namespace") {
				t.Fatalf("the command's result as the model saw it: %q", got)
			}
			if _, body := admin.do("GET", "/v1/sessions/"+ses.ID+"/guest/file?path=/workspace/x", nil, nil); body != "ordinary-21\n" {
				t.Fatalf("/workspace/x: %q", body)
			}
			var out struct{ Approvals []desk.Approval }
			admin.must(200, "GET", "/v1/sessions/"+ses.ID+"/approvals", nil, &out)
			if len(out.Approvals) != 0 {
				t.Fatalf("an ordinary command asked for approval: %+v", out.Approvals)
			}
		})
	}
}
