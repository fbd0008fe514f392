package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/typescript"
	"github.com/desk-runtime/desk/sandbox"
)

// execute_typescript: a snippet is typechecked by the real TypeScript
// compiler, refused on any diagnostic, kept as an artifact whatever
// happens, and run with Node through exec_command's own path (the same
// approval gate, sandbox, limits, denials and output caps).
//
// Where things live, and why:
//
//   - The snippet is kept as the artifact /artifacts/snippets/<command>.mts
//     before it is typechecked, so a refused one is kept too.
//   - Each typecheck runs in a fresh temporary host directory that no
//     guest mount reaches, bound into its sandbox as /opt/desk/snippet with
//     the compiler's own directory and the node_modules of @types/node
//     read-only beside it and nothing of the session (no /artifacts,
//     /scratch or /workspace, no network): the compiler sees the snippet,
//     its libraries and Node's typings, nothing else, so an import of
//     another file or package finds nothing.
//   - The run binds that directory read-only into exec_command's sandbox,
//     so what Node runs is what was just compiled from the approved
//     arguments: no other tool call of the step can change it in between
//     (a copy under /scratch could be rewritten by a parallel write_file
//     after the person approved the snippet).
//
// The call is typechecked before its approval is asked for (Precheck), so
// a snippet with type errors is refused without asking anyone, and again
// when it runs (Run compiles from the arguments into a fresh directory).

const (
	// snippetMax bounds a snippet's source.
	snippetMax = 256 << 10
	// typecheckTimeout bounds one compile.
	typecheckTimeout = 2 * time.Minute
	// Guest paths of the compiler's directory, Node's and the snippet's.
	guestTSDir      = "/opt/desk/typescript"
	guestNodeDir    = "/opt/desk/node"
	guestSnippetDir = "/opt/desk/snippet"
	// guestTypesDir is the node_modules with @types/node, read-only; it is
	// not an ancestor of the snippet, so Node-style lookup from the
	// snippet never finds it: only --typeRoots names it.
	guestTypesDir = "/opt/desk/types/node_modules"
)

type executeTypeScriptArgs struct {
	Code           string `json:"code" jsonschema_description:"the TypeScript source of one ES module (top-level await allowed), at most 256 KiB; it may use the ES2022 and DOM standard library (console, fetch, URL, …) and, when list_extensions reports Node typings, Node's built-in modules and globals (node:fs, node:child_process, process, …); it cannot import other files or packages"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"minimum=1,maximum=1800" jsonschema_description:"kill the run after this many seconds; default 120"`
}

type executeTypeScript struct{ args[executeTypeScriptArgs] }

func (executeTypeScript) Name() string { return "execute_typescript" }
func (executeTypeScript) Description() string {
	return "Typecheck a TypeScript snippet with the TypeScript compiler (strict, ES2022, an ES module) and, when it has no diagnostic at all, run it with Node in the same sandbox as exec_command (working directory: the workspace's primary root, else /scratch). A snippet with diagnostics is not run: the result lists them as {line, column, code, message}. Every snippet is kept as an artifact under /artifacts/snippets/. The result of a run is exec_command's (exit_code, stdout, stderr). May need approval."
}

// Unavailable: the tool needs the toolchain, and a place to run commands.
func (executeTypeScript) Unavailable(env *Env) string {
	if env.TypeScript == nil {
		if env.TypeScriptAbsent != "" {
			return env.TypeScriptAbsent
		}
		return "no TypeScript toolchain is configured on this desk (npm i -g typescript@7, or DESK_TSC)"
	}
	if why := (execCommand{}).Unavailable(env); why != "" {
		return why
	}
	return ""
}

// Gate: a snippet that would run needs approval as a command does; the
// person deciding sees its source.
func (t executeTypeScript) Gate(_ *Env, raw json.RawMessage) (bool, string) {
	a, bad, err := t.decode(raw)
	if bad != nil || err != nil {
		return false, ""
	}
	return true, "run TypeScript with node:\n" + clipSnippet(a.Code, 4<<10)
}

func clipSnippet(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n[… truncated]"
}

// Precheck keeps the snippet and typechecks it; a snippet with
// diagnostics is refused before anyone is asked to approve it.
func (t executeTypeScript) Precheck(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	c, bad, err := t.compile(ctx, env, call.CommandID, a.Code)
	if c != nil {
		os.RemoveAll(c.dir)
	}
	return bad, err
}

func (t executeTypeScript) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	if why := t.Unavailable(env); why != "" {
		return Fail(CodeNotConfigured, "execute_typescript is not available here: %s", why), nil
	}
	c, bad, err := t.compile(ctx, env, call.CommandID, a.Code)
	if bad != nil || err != nil {
		return bad, err
	}
	defer os.RemoveAll(c.dir)
	timeout := execDefaultTimeout
	if a.TimeoutSeconds != 0 {
		timeout = time.Duration(a.TimeoutSeconds) * time.Second
	}
	tc := env.TypeScript
	if err := materialize(ctx, env); err != nil {
		return nil, err
	}
	cr, bad, err := prepareCommand(env, "node", "", timeout)
	if bad != nil || err != nil {
		return bad, err
	}
	if cr.direct {
		cr.spec.Command = "exec " + shQuote(tc.Node) + " " + shQuote(filepath.Join(c.dir, filepath.FromSlash(typescript.Output)))
	} else {
		cr.spec.Mounts = append(cr.spec.Mounts,
			sandbox.Mount{Guest: guestNodeDir, Host: filepath.Dir(tc.Node)},
			sandbox.Mount{Guest: guestSnippetDir, Host: c.dir})
		cr.spec.Command = "exec " + path.Join(guestNodeDir, filepath.Base(tc.Node)) + " " + path.Join(guestSnippetDir, typescript.Output)
	}
	out, err := runPrepared(ctx, env, call, cr)
	if err != nil || out == nil {
		return out, err
	}
	if v, ok := out.Value.(map[string]any); ok {
		v["snippet"] = c.guest
		v["diagnostics"] = []typescript.Diagnostic{}
	}
	if out.Facts != nil {
		out.Facts["snippet"] = c.guest
		out.Facts["typescript"] = tc.Version
	}
	out.Artifacts = append([]string{c.artifact}, out.Artifacts...)
	return out, nil
}

// compiled is a snippet that typechecked: its directory holds the source
// and typescript.Output.
type compiled struct {
	dir      string // host, temporary; the caller removes it
	guest    string // the snippet's artifact path
	artifact string // its id
}

// compile keeps the snippet as an artifact and typechecks it in a fresh
// directory; a non-nil Result refuses it (diagnostics, a sandbox denial,
// a bad snippet). On a refusal the directory is already gone.
func (t executeTypeScript) compile(ctx context.Context, env *Env, commandID, code string) (*compiled, *Result, error) {
	if strings.TrimSpace(code) == "" {
		return nil, badArg("code", "is empty"), nil
	}
	if len(code) > snippetMax {
		return nil, Fail(CodeTooLarge, "the snippet has %d bytes; at most %d are accepted", len(code), snippetMax), nil
	}
	tc := env.TypeScript
	if tc == nil {
		return nil, Fail(CodeNotConfigured, "execute_typescript is not available here: %s", t.Unavailable(env)), nil
	}
	art, err := keepSnippet(ctx, env, commandID, code)
	if err != nil {
		r, err := fsResult(err, "/artifacts/snippets/")
		return nil, r, err
	}
	guest := art.Path // the guest path
	dir, err := os.MkdirTemp("", "desk-snippet-")
	if err != nil {
		return nil, nil, fmt.Errorf("execute_typescript: %w", err)
	}
	c := &compiled{dir: dir, guest: guest, artifact: art.ID}
	refuse := func(r *Result) (*compiled, *Result, error) {
		os.RemoveAll(dir)
		if r.Facts == nil {
			r.Facts = map[string]any{}
		}
		r.Facts["snippet"] = guest
		r.Artifacts = []string{art.ID}
		if v, ok := r.Value.(map[string]any); ok {
			v["snippet"] = guest
		}
		return nil, r, nil
	}
	if err := os.WriteFile(filepath.Join(dir, typescript.Source), []byte(code), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("execute_typescript: %w", err)
	}
	// The compiler runs sandboxed wherever a sandbox exists (also in a
	// full-access workspace), seeing only the snippet and itself.
	runner := env.Sandbox
	tsc, types := path.Join(guestTSDir, filepath.Base(tc.TSC)), ""
	mounts := []sandbox.Mount{{Guest: guestSnippetDir, Host: dir, Writable: true}, {Guest: guestTSDir, Host: tc.Dir()}}
	if tc.Types != "" {
		types = guestTypesDir
		mounts = append(mounts, sandbox.Mount{Guest: guestTypesDir, Host: tc.Types})
	}
	if runner == nil {
		runner, tsc, types = sandbox.Direct(), tc.TSC, tc.Types
	}
	cmd := "exec " + shQuote(tsc)
	for _, a := range typescript.Args(types) {
		cmd += " " + shQuote(a)
	}
	spec := sandbox.Spec{
		Mounts: mounts, Cwd: guestSnippetDir, Command: cmd,
		Timeout: typecheckTimeout, MaxOutput: execKeep, Limits: limits(env),
	}
	res, err := runner.Run(ctx, spec, nil)
	if err != nil {
		r, err := runError(err, "tsc", guestSnippetDir)
		if r != nil {
			return refuse(r)
		}
		os.RemoveAll(dir)
		return nil, nil, err
	}
	if res.Interrupted && ctx.Err() != nil {
		os.RemoveAll(dir)
		return nil, nil, ctx.Err()
	}
	if res.Denial != nil {
		r := Fail(CodeSandboxDenied, "the typecheck was stopped by the sandbox: %s", res.Denial.Reason)
		r.Facts = map[string]any{"sandbox_denied": true, "reason": res.Denial.Reason}
		return refuse(r)
	}
	if res.TimedOut {
		return refuse(Fail(CodeTypeErrors, "the typecheck did not finish within %s; the snippet was not run", typecheckTimeout))
	}
	diags := typescript.Parse([]byte(res.Stdout + "\n" + res.Stderr))
	_, statErr := os.Stat(filepath.Join(dir, filepath.FromSlash(typescript.Output)))
	if len(diags) == 0 && res.ExitCode == 0 && statErr == nil {
		return c, nil, nil
	}
	msg := fmt.Sprintf("the snippet has %d TypeScript diagnostic(s) and was not run", len(diags))
	if len(diags) == 0 {
		msg = fmt.Sprintf("the TypeScript compiler failed (exit status %d) and the snippet was not run: %s", res.ExitCode,
			clipSnippet(strings.TrimSpace(joinOutput(res.Stdout, res.Stderr)), 2<<10))
		diags = []typescript.Diagnostic{}
	} else {
		d := diags[0]
		msg += fmt.Sprintf("; the first: line %d, column %d: %s %s", d.Line, d.Column, d.Code, d.Message)
	}
	r := Fail(CodeTypeErrors, "%s", msg)
	r.Value.(map[string]any)["diagnostics"] = diags
	r.Output = joinOutput(res.Stdout, res.Stderr)
	r.Facts = map[string]any{"diagnostics": len(diags), "typecheck_exit_code": res.ExitCode, "typescript": tc.Version}
	return refuse(r)
}

// keepSnippet stores the snippet as snippets/<command>.mts of the
// session's artifacts; a second call for the same command (a resumed
// turn, Run after Precheck) finds it kept already.
func keepSnippet(ctx context.Context, env *Env, commandID, code string) (*desk.Artifact, error) {
	rel := path.Join("snippets", commandID+".mts")
	if a, err := env.Store.ArtifactByPath(ctx, env.Session.ID, rel); err == nil {
		return a, nil
	} else if !desk.IsCode(err, desk.ENOTFOUND) {
		return nil, err
	}
	a, _, err := env.Paths.PutPath(ctx, env.Session.ID, rel, desk.ArtifactPathPut{Body: strings.NewReader(code), Size: int64(len(code)), MediaType: "text/plain"})
	return a, err
}

// shQuote quotes s for /bin/sh.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
