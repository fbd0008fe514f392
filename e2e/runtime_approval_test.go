package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/testwait"
)

// alwaysCommand needs a person's approval (it is not scripted as
// ordinary, so each runtime asks to run it).
const alwaysCommand = "echo always-by-desk >> always.txt && cat always.txt"

// A runtime's approval as a person reads it (issue 26): the command
// line, not the runtime's JSON, with the runtime's own options; choosing
// its allow_always option lets the same command run on the next turn
// without a new approval.
func TestRuntimeApprovalReadable(t *testing.T) {
	t.Parallel()
	for _, pc := range protocolCases {
		t.Run(pc.name, func(t *testing.T) {
			t.Parallel()
			bin := pc.find(t)
			m := &scriptedModel{arrived: make(chan struct{}, 1)}
			argv, envNames, deskEnv := pc.model(t, bin, m, func(c modelCall) modelAnswer {
				// Turn n runs the command once: the history holds the
				// results of the turns before.
				for n, u := range []string{"ALWAYS-1", "ALWAYS-2"} {
					if strings.Contains(c.lastUser(), u) && len(c.Results) <= n {
						return modelAnswer{Command: alwaysCommand}
					}
				}
				return modelAnswer{Text: "Done."}
			})
			env := append([]string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL="}, deskEnv...)
			d := startDesk(t, deskOpts{Token: restartToken, Env: env})
			admin := api{t: t, url: d.URL, token: d.Token}
			var ws desk.Workspace
			admin.must(201, "POST", "/v1/workspaces", map[string]string{"name": "approvals"}, &ws)
			admin.must(200, "PATCH", "/v1/workspaces/"+ws.ID+"/agent", map[string]any{"network": false, "approval_mode": desk.ApprovalModeUser}, nil)
			admin.must(201, "POST", "/v1/runtimes", map[string]any{"name": "rt", "protocol": pc.protocol, "argv": argv, "env": envNames}, nil)
			var ses desk.Session
			admin.must(201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]string{"runtime": "rt"}, &ses)

			exe := admin.send(ses.ID, "ALWAYS-1: append to always.txt")
			var ap desk.Approval
			testwait.Until(t, 3*time.Minute, func() bool {
				var out struct{ Approvals []desk.Approval }
				admin.must(200, "GET", "/v1/sessions/"+ses.ID+"/approvals?pending=true", nil, &out)
				if len(out.Approvals) > 0 {
					ap = out.Approvals[0]
				}
				return ap.ID != "" || terminal(admin.execution(exe))
			}, "a pending approval")
			if ap.ID == "" {
				t.Fatalf("the turn ended without asking: %+v", admin.execution(exe))
			}
			t.Logf("approval: what %q cwd %q why %q options %+v", ap.What, ap.Cwd, ap.Why, ap.Options)
			if !strings.Contains(ap.What, "echo always-by-desk >> always.txt") || strings.ContainsAny(ap.What, "{}") || strings.Contains(ap.What, `\u003e`) {
				t.Fatalf("the approval does not read as the command line: %q", ap.What)
			}
			var always string
			for _, o := range ap.Options {
				if o.Kind == desk.OptionAllowAlways {
					always = o.ID
				}
				if o.Label == "" || o.ID == "" {
					t.Fatalf("an option without its id or label: %+v", ap.Options)
				}
			}
			if always == "" {
				t.Fatalf("the runtime's allow_always option is not offered: %+v", ap.Options)
			}
			// An option the runtime did not offer is refused, and changes nothing.
			if st, body := admin.do("POST", "/v1/approvals/"+ap.ID, map[string]string{"option_id": "no-such-option"}, nil); st != 400 || !strings.Contains(body, always) {
				t.Fatalf("an unknown option: %d %s", st, body)
			}
			var dec desk.Approval
			admin.must(200, "POST", "/v1/approvals/"+ap.ID, map[string]string{"option_id": always}, &dec)
			if dec.Status != desk.ApprovalApproved || dec.OptionID != always {
				t.Fatalf("decided %+v", dec)
			}
			ended(t, admin.settled(exe))
			if _, body := admin.do("GET", "/v1/sessions/"+ses.ID+"/guest/file?path=/workspace/always.txt", nil, nil); body != "always-by-desk\n" {
				t.Fatalf("always.txt after the first turn: %q", body)
			}

			// The same command next turn: it runs, and nobody is asked.
			ended(t, admin.settled(admin.send(ses.ID, "ALWAYS-2: append again")))
			if _, body := admin.do("GET", "/v1/sessions/"+ses.ID+"/guest/file?path=/workspace/always.txt", nil, nil); body != "always-by-desk\nalways-by-desk\n" {
				t.Fatalf("always.txt after the second turn: %q", body)
			}
			var all struct{ Approvals []desk.Approval }
			admin.must(200, "GET", "/v1/sessions/"+ses.ID+"/approvals", nil, &all)
			if len(all.Approvals) != 1 {
				t.Fatalf("the same command asked again after allow_always: %+v", all.Approvals)
			}
		})
	}
}
