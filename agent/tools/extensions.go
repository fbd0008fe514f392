package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/extensions"
)

// Optional is a tool that is declared only where it can work: Unavailable
// says why it cannot in env ("" when it can). list_extensions reports the
// absent ones with their reasons, so the model knows what it lacks and
// why instead of finding out by failing. Unavailable may rely only on
// env's Sandbox, Settings, TypeScript and SurfaceKind: the context view asks outside
// any execution.
type Optional interface {
	Unavailable(env *Env) string
}

// Unavailable: commands need a sandbox, except in a full-access workspace,
// which runs them on the host.
func (execCommand) Unavailable(env *Env) string {
	if env.Sandbox != nil || (env.Settings != nil && env.Settings.ApprovalMode == desk.ApprovalModeFullAccess) {
		return ""
	}
	return "no sandbox is available on this desk (install bubblewrap); commands run only in a full-access workspace"
}

// AbsentTool is an optional tool that is not declared, and why (see
// desk.AbsentTool).
type AbsentTool = desk.AbsentTool

// Declared returns the tools declared to the model in env, sorted by name:
// All without the optional tools that cannot work there.
func Declared(env *Env) []Tool {
	var out []Tool
	for _, t := range All() {
		if o, ok := t.(Optional); ok && o.Unavailable(env) != "" {
			continue
		}
		out = append(out, t)
	}
	return out
}

// Absent lists the optional tools left out in env.
func Absent(env *Env) []AbsentTool {
	out := []AbsentTool{}
	for _, t := range All() {
		if _, scoped := t.(interface{ surfaceScoped() }); scoped {
			continue
		}
		if o, ok := t.(Optional); ok {
			if why := o.Unavailable(env); why != "" {
				out = append(out, AbsentTool{Name: t.Name(), Reason: why})
			}
		}
	}
	return out
}

type listExtensionsArgs struct{}

type listExtensions struct{ args[listExtensionsArgs] }

func (listExtensions) Name() string { return "list_extensions" }
func (listExtensions) Description() string {
	return "List the skills of the workspace's repository (folders with a SKILL.md under .agents/skills/ or .claude/skills/ of /workspace and of the primary root): name, description, path and whether this conversation loaded it; the repository's instruction files (AGENTS.md, CLAUDE.md) and whether the prompt holds them; the optional tools absent here, with why; and execute_typescript's compiler, Node and Node typings. Load a skill with load_extension."
}
func (listExtensions) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

// skillView is a skill as list_extensions shows it.
type skillView struct {
	extensions.Skill
	Loaded bool `json:"loaded"`
}

// instructionView is an instruction file as list_extensions shows it.
type instructionView struct {
	Path     string `json:"path"`
	Included bool   `json:"included"`
	Note     string `json:"note,omitempty"`
}

func (t listExtensions) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	if _, bad, err := t.decode(call.Args); bad != nil || err != nil {
		return bad, err
	}
	roots := extensions.Roots(env.Workspace)
	loaded, err := env.Store.LoadedExtensions(ctx, env.Execution.SurfaceID)
	if err != nil {
		return nil, err
	}
	skills := []skillView{}
	for _, s := range extensions.FindSkills(env.Jail, roots) {
		v := skillView{Skill: s}
		v.Loaded = s.Problem == "" && slices.ContainsFunc(loaded, func(l *desk.LoadedExtension) bool { return l.Name == s.Name })
		skills = append(skills, v)
	}
	on := env.Settings == nil || env.Settings.ExternalInstructions
	instr := []instructionView{}
	for _, in := range extensions.ReadInstructions(env.Jail, roots, on) {
		instr = append(instr, instructionView{Path: in.Path, Included: in.Included, Note: in.Note})
	}
	v := map[string]any{"skills": skills, "instructions": instr, "absent_tools": Absent(env),
		"note": "load a skill with load_extension {name}: its instructions join your system prompt from your next step on, for the rest of this conversation"}
	if tc := env.TypeScript; tc != nil && !slices.ContainsFunc(Absent(env), func(a AbsentTool) bool { return a.Name == "execute_typescript" }) {
		ts := map[string]any{"compiler": tc.Version, "node": tc.NodeVersion}
		if tc.TypesVersion != "" {
			ts["node_typings"] = "@types/node " + tc.TypesVersion + ": snippets may import node:fs, node:child_process, … and use process"
		} else {
			ts["node_typings"] = "none: snippets get only the ES2022 and DOM library (install @types/node beside the compiler, e.g. npm i -g @types/node)"
		}
		v["typescript"] = ts
	}
	return &Result{Value: v, Facts: map[string]any{"skills": len(skills), "instructions": len(instr)}}, nil
}

type loadExtensionArgs struct {
	Name string `json:"name" jsonschema_description:"the skill's name, as list_extensions lists it"`
}

type loadExtension struct{ args[loadExtensionArgs] }

func (loadExtension) Name() string { return "load_extension" }
func (loadExtension) Description() string {
	return "Load a skill of the repository (see list_extensions) into this conversation: from your next step on, and for the rest of the conversation, its SKILL.md instructions are in your system prompt with the paths of its files, which you can read or run. Loading changes nothing in the current step."
}
func (loadExtension) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t loadExtension) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	skills := extensions.FindSkills(env.Jail, extensions.Roots(env.Workspace))
	var found *extensions.Skill
	var names []string
	for i, s := range skills {
		if s.Problem != "" {
			continue
		}
		names = append(names, s.Name)
		if s.Name == a.Name {
			found = &skills[i]
		}
	}
	if found == nil {
		for _, s := range skills {
			if s.Name == a.Name {
				return badArg("name", "the skill %s (%s) cannot be loaded: %s", s.Name, s.Path, s.Problem), nil
			}
		}
		if len(names) == 0 {
			return badArg("name", "there is no skill named %q: this workspace's repository has no skills (folders with a SKILL.md under .agents/skills/ or .claude/skills/)", a.Name), nil
		}
		return badArg("name", "there is no skill named %q; the available ones are: %s", a.Name, strings.Join(names, ", ")), nil
	}
	txt, err := extensions.ReadSkill(env.Jail, *found)
	if err != nil {
		return fsResult(err, found.Path)
	}
	exe := env.Execution
	rec := &desk.LoadedExtension{SurfaceID: exe.SurfaceID, SessionID: env.Session.ID, Name: found.Name, Path: found.Path,
		Digest: txt.Digest, ExecutionID: exe.ID, CommandID: call.CommandID, LoadedAt: desk.Now()}
	fresh, err := env.Store.LoadExtension(ctx, rec)
	if err != nil {
		return nil, err
	}
	files := txt.Files
	if files == nil {
		files = []string{}
	}
	v := map[string]any{"loaded": found.Name, "path": found.Path, "files": files, "already_loaded": !fresh}
	if fresh {
		v["note"] = "its instructions are in your system prompt from your next step on"
	} else {
		v["note"] = "this conversation had already loaded it; its instructions are in your system prompt"
	}
	facts := map[string]any{"extension": found.Name, "path": found.Path, "digest": txt.Digest, "already_loaded": !fresh}
	return &Result{Value: v, Facts: facts}, nil
}
