package tools

import (
	"slices"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/typescript"
	"github.com/desk-runtime/desk/sandbox"
)

func names(ts []Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name())
	}
	return out
}

// TestOptionalTools: without a sandbox exec_command is not declared and
// Absent says why; in a full-access workspace (which runs commands on the
// host) or with a sandbox it is declared. execute_typescript is absent
// without a toolchain (with the reason the detection gave) and without a
// place to run commands, whatever the toolchain.
func TestOptionalTools(t *testing.T) {
	none := &Env{Settings: &desk.AgentSettings{ApprovalMode: desk.ApprovalModeUser}, TypeScriptAbsent: "node is not installed"}
	if slices.Contains(names(Declared(none)), "exec_command") {
		t.Fatal("exec_command is declared without a sandbox")
	}
	if len(Declared(none)) != len(All())-3-3-1-4 { // exec_command, write_stdin, execute_typescript, the three handler-only thread tools, ask (no dispatch service) and the four peer tools (not the manager)
		t.Fatalf("declared without a sandbox: %v", names(Declared(none)))
	}
	ab := Absent(none)
	if len(ab) != 3 || ab[0].Name != "exec_command" || ab[1].Name != "execute_typescript" || ab[2].Name != "write_stdin" ||
		!strings.Contains(ab[0].Reason, "no sandbox") || ab[1].Reason != "node is not installed" {
		t.Fatalf("absent without a sandbox: %+v", ab)
	}
	full := &Env{Settings: &desk.AgentSettings{ApprovalMode: desk.ApprovalModeFullAccess}}
	boxed := &Env{Sandbox: sandbox.Direct(), Settings: none.Settings}
	for _, env := range []*Env{full, boxed} {
		ab := Absent(env)
		if len(Declared(env)) != len(All())-4-1-4 || len(ab) != 1 || ab[0].Name != "execute_typescript" || !strings.Contains(ab[0].Reason, "typescript@7") {
			t.Fatalf("declared %v, absent %+v", names(Declared(env)), ab)
		}
		env.TypeScript = &typescript.Toolchain{TSC: "/x/tsc", Node: "/usr/bin/node"}
		if len(Declared(env)) != len(All())-3-1-4 || len(Absent(env)) != 0 {
			t.Fatalf("with a toolchain: declared %v, absent %+v", names(Declared(env)), Absent(env))
		}
	}
	none.TypeScript = &typescript.Toolchain{TSC: "/x/tsc", Node: "/usr/bin/node"}
	if ab := Absent(none); len(ab) != 3 || ab[1].Name != "execute_typescript" || !strings.Contains(ab[1].Reason, "no sandbox") {
		t.Fatalf("a toolchain without a sandbox: %+v", ab)
	}
}

// TestIdentityVars: the orchestrator surface has no thread id; another
// surface of the session is a handler thread and names itself.
func TestIdentityVars(t *testing.T) {
	x := &desk.Session{ID: "ses_1", Signature: "@calm-amber-river-a1b2c3", WorkspaceID: "ws_1", SurfaceID: "srf_1"}
	v := IdentityOf(x, "srf_1").Vars()
	if len(v) != 3 || v[EnvSessionID] != "ses_1" || v[EnvSignature] != x.Signature || v[EnvWorkspaceID] != "ws_1" {
		t.Fatalf("orchestrator vars %v", v)
	}
	if v := IdentityOf(x, "srf_2").Vars(); len(v) != 4 || v[EnvThreadID] != "srf_2" {
		t.Fatalf("thread vars %v", v)
	}
}
