package app_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/internal/npmbin"
	"github.com/desk-runtime/desk/layout"
)

// execute_typescript through HTTP with script sessions, with the real
// TypeScript 7 compiler (.ci/npm, found through DESK_NPM_BIN) and Node.

// tsWorld is an agent world whose desk uses the real compiler.
func tsWorld(t *testing.T) *agentWorld {
	t.Helper()
	tsc := npmbin.Find(t, "tsc", "TypeScript (typescript@7)")
	return newAgentWorld(t, func(c *app.Config) { c.TSC = tsc })
}

func snippet(code string) map[string]any {
	return tc("execute_typescript", map[string]any{"code": code})
}

// snippetArtifact finds the session's artifact at snippets/<command>.mts
// and returns its content.
func (w *agentWorld) snippetArtifact(x desk.Session, c *desk.Command) string {
	w.T.Helper()
	var list struct{ Artifacts []desk.Artifact }
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts", nil, &list)
	for _, a := range list.Artifacts {
		if a.Path == "/artifacts/snippets/"+c.ID+".mts" {
			if c.FinishedAt != nil && !slices.Contains(c.Artifacts, a.ID) {
				w.T.Fatalf("the command %s does not name its snippet %s: %v", c.ID, a.ID, c.Artifacts)
			}
			return string(w.Admin("GET", "/v1/sessions/"+x.ID+"/artifacts/"+a.ID+"/content", nil).Body)
		}
	}
	w.T.Fatalf("no artifact snippets/%s.mts among %+v", c.ID, list.Artifacts)
	return ""
}

// TestTypeScriptTypeErrorRefused: in the user approval mode a snippet
// with a type error is refused with structured diagnostics before anyone
// is asked to approve it, is not run, and is kept as an artifact.
func TestTypeScriptTypeErrorRefused(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := tsWorld(t)
	w.settings(map[string]any{"approval_mode": "user"})
	code := "const n: number = \"seven\";\nconsole.log(\"ran\", n);\n"
	x := w.script(calls(snippet(code)), says("it did not typecheck"))
	xe := w.settled(w.send(x.ID, "go").ExecutionID)
	oneTerminal(t, xe, desk.PhaseEnded)
	if aps := w.approvals(x.ID, false); len(aps) != 0 {
		t.Fatalf("a snippet with a type error asked for approval: %+v", aps)
	}
	cs := w.commands(x.ID)
	if len(cs) != 1 || cs[0].Tool != "execute_typescript" || cs[0].Status != desk.CommandFailed {
		t.Fatalf("commands: %+v", cs)
	}
	v := w.resultOf(x, cs[0])
	if errCode(v) != "TYPECHECK_FAILED" || v["stdout"] != nil {
		t.Fatalf("result: %v", v)
	}
	ds, _ := v["diagnostics"].([]any)
	if len(ds) != 1 {
		t.Fatalf("diagnostics: %v", v["diagnostics"])
	}
	d := ds[0].(map[string]any)
	if d["line"] != float64(1) || d["column"] != float64(7) || d["code"] != "TS2322" || !strings.Contains(d["message"].(string), "not assignable to type 'number'") {
		t.Fatalf("diagnostic: %v", d)
	}
	if v["snippet"] != "/artifacts/snippets/"+cs[0].ID+".mts" {
		t.Fatalf("snippet path: %v", v["snippet"])
	}
	if got := w.snippetArtifact(x, cs[0]); got != code {
		t.Fatalf("kept snippet %q", got)
	}
	var f map[string]any
	json.Unmarshal(cs[0].Facts, &f)
	if f["diagnostics"] != float64(1) || !strings.HasPrefix(fmt.Sprint(f["typescript"]), "7.") {
		t.Fatalf("facts: %s", cs[0].Facts)
	}
}

// TestTypeScriptRunsInSandbox: in the user approval mode a correct
// snippet waits for approval like exec_command, showing its source; once
// approved it runs with Node inside the sandbox (its hostname, its
// identity variables, the primary working directory) and its output
// comes back as exec_command's does. A denied one never runs.
func TestTypeScriptRunsInSandbox(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := tsWorld(t)
	w.settings(map[string]any{"approval_mode": "user"})
	code := `const os: any = await import("node:" + "os");
const proc: any = (globalThis as any).process;
const xs: number[] = [1, 2, 3];
console.log(xs.map((x) => x * 2).join(","), os.hostname(), proc.env.DESK_SESSION_ID, proc.cwd());
console.error("to stderr");
`
	x := w.script(calls(snippet(code)), says("ran it"))
	res := w.send(x.ID, "go")
	cmd := w.waitCommand(x.ID, "the snippet to wait", statusIs("execute_typescript", desk.CommandWaiting))
	pend := w.approvals(x.ID, true)
	if len(pend) != 1 || pend[0].CommandID != cmd.ID || pend[0].Tool != "execute_typescript" || !strings.Contains(pend[0].Summary, "xs.map") {
		t.Fatalf("pending approvals: %+v", pend)
	}
	// Kept already, before anyone decided.
	if got := w.snippetArtifact(x, cmd); got != code {
		t.Fatalf("kept snippet before approval %q", got)
	}
	w.Must(200, "POST", "/v1/approvals/"+pend[0].ID, map[string]string{"decision": "approve"}, nil)
	oneTerminal(t, w.settled(res.ExecutionID), desk.PhaseEnded)
	cmd = w.commands(x.ID)[0]
	v := w.resultOf(x, cmd)
	want := "2,4,6 sandbox " + x.ID + " /scratch\n"
	if cmd.Status != desk.CommandSucceeded || v["exit_code"] != float64(0) || v["stdout"] != want || v["stderr"] != "to stderr\n" {
		t.Fatalf("run: %s %v", cmd.Status, v)
	}
	if ds, ok := v["diagnostics"].([]any); !ok || len(ds) != 0 {
		t.Fatalf("diagnostics of a clean snippet: %v", v["diagnostics"])
	}
	var f map[string]any
	json.Unmarshal(cmd.Facts, &f)
	if f["sandboxed"] != true || f["snippet"] != "/artifacts/snippets/"+cmd.ID+".mts" {
		t.Fatalf("facts: %s", cmd.Facts)
	}
	w.snippetArtifact(x, cmd)

	// Denied: never run.
	y := w.script(calls(snippet(`console.log("should not run");`)), says("ok"))
	res = w.send(y.ID, "go")
	w.waitCommand(y.ID, "the snippet to wait", statusIs("execute_typescript", desk.CommandWaiting))
	pend = w.approvals(y.ID, true)
	w.Must(200, "POST", "/v1/approvals/"+pend[0].ID, map[string]string{"decision": "deny", "reason": "no"}, nil)
	oneTerminal(t, w.settled(res.ExecutionID), desk.PhaseEnded)
	if c := w.commands(y.ID)[0]; c.Status != desk.CommandDeclined || strings.Contains(c.Output, "should not run") {
		t.Fatalf("denied snippet: %+v", c)
	}
}

// TestTypeScriptSandboxBounds: a snippet's run is bounded like any
// command: one that floods its output past the workspace's output limit
// is stopped and recorded as a sandbox denial naming the limit.
func TestTypeScriptSandboxBounds(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := tsWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review", "sandbox": map[string]any{"output_bytes": 65536}})
	// Node writes to a full pipe only between turns of its event loop,
	// so the flood yields to it (a loop that never does grows in memory
	// instead, until the memory limit).
	flood := "const line: string = \"y\".repeat(1000);\nfor (;;) {\n  for (let i = 0; i < 50; i++) console.log(line);\n  await new Promise((r) => setTimeout(r, 0));\n}\n"
	x := w.script(calls(snippet(flood)), says("stopped"))
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	c := w.commands(x.ID)[0]
	var f map[string]any
	json.Unmarshal(c.Facts, &f)
	if c.Status != desk.CommandFailed || f["sandbox_denied"] != true || f["limit"] != "output" {
		t.Fatalf("flood: %s %s", c.Status, c.Facts)
	}
}

// TestTypeScriptAbsentWithoutCompiler: with no compiler the tool is not
// declared, the context view and list_extensions say why, and a call to
// it anyway answers NOT_CONFIGURED.
func TestTypeScriptAbsentWithoutCompiler(t *testing.T) {
	apptest.Parallel(t)
	missing := filepath.Join(t.TempDir(), "no-such", "tsc")
	w := newAgentWorld(t, func(c *app.Config) { c.TSC = missing })
	x := w.script(calls(tc("list_extensions", map[string]any{})), calls(snippet("console.log(1)")), says("none"))
	cv := w.contextView(x.ID)
	if slices.Contains(asStrings(cv["tools"]), "execute_typescript") {
		t.Fatalf("declared without a compiler: %v", cv["tools"])
	}
	if why := absentReason(cv["absent_tools"], "execute_typescript"); !strings.Contains(why, "DESK_TSC") || !strings.Contains(why, missing) {
		t.Fatalf("context view's absent tools: %v", cv["absent_tools"])
	}
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	cs := w.commands(x.ID)
	if why := absentReason(w.resultOf(x, cs[0])["absent_tools"], "execute_typescript"); !strings.Contains(why, missing) {
		t.Fatalf("list_extensions: %v", w.resultOf(x, cs[0]))
	}
	if v := w.resultOf(x, cs[1]); errCode(v) != "NOT_CONFIGURED" || cs[1].Status != desk.CommandFailed {
		t.Fatalf("called anyway: %s %v", cs[1].Status, v)
	}
}

func asStrings(v any) []string {
	var out []string
	for _, s := range asAny(v) {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

func asAny(v any) []any { s, _ := v.([]any); return s }

func absentReason(v any, name string) string {
	for _, a := range asAny(v) {
		if m, _ := a.(map[string]any); m["name"] == name {
			return fmt.Sprint(m["reason"])
		}
	}
	return ""
}

// TestTypeScriptFullAccess: in a full-access workspace the snippet runs
// on the host without a gate or a sandbox (said so in its result), after
// the same typecheck.
func TestTypeScriptFullAccess(t *testing.T) {
	apptest.Parallel(t)
	w := tsWorld(t)
	w.settings(map[string]any{"approval_mode": "full-access"})
	code := "const proc: any = (globalThis as any).process;\nconsole.log(proc.cwd() === proc.env.DESK_SCRATCH, proc.env.DESK_SESSION_ID);\n"
	x := w.script(calls(snippet(code)), calls(snippet("let s: string = 1;")), says("done"))
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	cs := w.commands(x.ID)
	v := w.resultOf(x, cs[0])
	if cs[0].Status != desk.CommandSucceeded || v["stdout"] != "true "+x.ID+"\n" || v["sandboxed"] != false {
		t.Fatalf("full-access run: %s %v", cs[0].Status, v)
	}
	if v := w.resultOf(x, cs[1]); errCode(v) != "TYPECHECK_FAILED" || cs[1].Status != desk.CommandFailed {
		t.Fatalf("full-access type error: %v", v)
	}
	if len(w.approvals(x.ID, false)) != 0 {
		t.Fatal("full-access asked for approval")
	}
}

// TestTypeScriptNodeTypings: with @types/node beside the compiler (.ci/npm
// installs it) a snippet is typechecked against Node's typings, so it may
// import node:fs and node:child_process and use process, and it runs in
// the sandbox on the session's /workspace and /scratch; an import of
// another file or of a package finds nothing, since the typecheck sees
// only the snippet, the compiler and the typings. list_extensions names
// the typings.
func TestTypeScriptNodeTypings(t *testing.T) {
	apptest.Parallel(t)
	needSandbox(t)
	w := tsWorld(t)
	w.settings(map[string]any{"approval_mode": "auto-review"})
	co := w.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	if err := os.WriteFile(filepath.Join(co, "data.txt"), []byte("a\nb\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code := `import { readFileSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
const lines: string[] = readFileSync("/workspace/data.txt", "utf8").trim().split("\n");
writeFileSync("/scratch/count.txt", String(lines.length));
const back: string = execFileSync("cat", ["/scratch/count.txt"]).toString();
console.log(lines.length, process.env.DESK_SESSION_ID, back);
`
	x := w.script(calls(snippet(code)), calls(snippet(`import { y } from "./other.mjs";
console.log(y);
`)), calls(snippet(`import z from "zod";
console.log(z);
`)), calls(tc("list_extensions", map[string]any{})), says("done"))
	oneTerminal(t, w.settled(w.send(x.ID, "go").ExecutionID), desk.PhaseEnded)
	cs := w.commands(x.ID)
	if len(cs) != 4 {
		t.Fatalf("commands: %+v", cs)
	}
	if v := w.resultOf(x, cs[0]); cs[0].Status != desk.CommandSucceeded || v["stdout"] != "3 "+x.ID+" 3\n" {
		t.Fatalf("the Node snippet: %s %v", cs[0].Status, v)
	}
	for _, c := range cs[1:3] {
		v := w.resultOf(x, c)
		ds, _ := v["diagnostics"].([]any)
		if c.Status != desk.CommandFailed || errCode(v) != "TYPECHECK_FAILED" || len(ds) != 1 || ds[0].(map[string]any)["code"] != "TS2307" {
			t.Fatalf("an import of another module: %s %v", c.Status, v)
		}
	}
	ts, _ := w.resultOf(x, cs[3])["typescript"].(map[string]any)
	if !strings.HasPrefix(fmt.Sprint(ts["compiler"]), "7.") || !strings.HasPrefix(fmt.Sprint(ts["node_typings"]), "@types/node ") {
		t.Fatalf("list_extensions' typescript: %v", ts)
	}
}
