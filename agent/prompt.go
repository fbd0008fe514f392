package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/extensions"
	"github.com/desk-runtime/desk/agent/tools"
)

// The system prompt is composed from small parts, each one paragraph with
// one job, in a fixed order. There are no per-scenario branches: the model
// decides what a message needs (PawWork principles 2–4).
var promptParts = []struct{ name, text string }{
	{"role", `You are the agent of a desk session: one general assistant for every message. Decide for yourself whether a message needs a direct answer, a look at the session's context, research, computation, or a durable artifact. Tools are always available; having a tool never means you must use it.`},
	{"files", `You see a guest file system and nothing else: /artifacts holds this session's durable artifacts (/artifacts/immutable is read-only), /context/<group> holds the items of the selection groups the session binds (read-only), /scratch is yours for this turn only and is deleted when it ends, and /workspace is the workspace's own files. Paths outside these are denied.`},
	{"artifacts", `Create an artifact only for a durable output worth keeping beyond the conversation — a report, an export, evidence, a large result — never just to hold an answer that fits in your reply. To change an artifact, write to its path again: it keeps its id.`},
	{"context", `The world block attached to the latest user message lists the bound groups (ids, names, item counts), the focused page if any, and how many artifacts the session has — never their contents. Use inspect when, and only when, you need evidence from them.`},
	{"extensions", `The repository may offer skills: folders with a SKILL.md under .agents/skills/ or .claude/skills/. list_extensions lists them (and any tool that is absent here, with why); load_extension loads one's instructions into this conversation from your next step on. Load a skill when a task matches its description, not before.`},
	{"safety", `Commands run in a sandbox; some actions wait for the user's approval. If an action is declined, do not try to get around it: explain, or choose another way. When you cannot continue well without the user, ask with request_user_input (or clarify).`},
	{"style", `Answer in the user's language. Be direct; show your result, not your process. Cite paths and artifact ids when you refer to files.`},
}

// Binding is what a surface's system prompt holds besides the fixed
// parts, in the order it follows them (docs/agent.md, "System prompt"):
// the identity, the repository's external instructions (read at the start
// of the turn), the skills the surface loaded (read at every step), then
// the turn's /plan demand and its pinned plan. What changes least comes
// first, so a provider's prompt cache keeps the longest prefix.
type Binding struct {
	Identity tools.Identity
	// PrimaryRoot is the workspace's primary root, marked as the active
	// project (Wesclaw): where commands start and the repository's
	// instructions come from. Empty when the workspace has none.
	PrimaryRoot string
	// Thread is the handler thread the surface is (nil on the
	// orchestrator): its role paragraph follows the identity.
	Thread       *desk.Thread
	Instructions []extensions.Instruction
	Skills       []LoadedSkill
	Plan         json.RawMessage
	ForcePlan    bool
	// ProfileInstructions are the instructions of the session's profile,
	// after the repository's (they are the person's choice for this
	// session).
	ProfileInstructions string
}

// LoadedSkill is a skill the surface loaded, as read for this step: its
// text, or why it could not be read.
type LoadedSkill struct {
	Name, Path string
	Text       *extensions.SkillText
	Problem    string
}

// SystemPrompt composes the system prompt of one step.
func SystemPrompt(b Binding) string {
	var s strings.Builder
	for i, p := range promptParts {
		if i > 0 {
			s.WriteString("\n\n")
		}
		s.WriteString(p.text)
	}
	if id := b.Identity; id.SessionID != "" {
		fmt.Fprintf(&s, "\n\nYou work for session %s (%s) of workspace %s", id.SessionID, id.Signature, id.WorkspaceID)
		if id.ThreadID != "" {
			fmt.Fprintf(&s, ", on its handler thread %s", id.ThreadID)
		}
		s.WriteString(". Commands you run see these as $DESK_SESSION_ID, $DESK_SIGNATURE and $DESK_WORKSPACE_ID")
		if id.ThreadID != "" {
			s.WriteString(" (and $DESK_THREAD_ID)")
		}
		s.WriteString(". They name the session; they grant nothing: desk stamps the origin of everything you make itself.")
	}
	if b.PrimaryRoot != "" {
		fmt.Fprintf(&s, "\n\nThe active project is %s, the workspace's primary root: commands run there unless you give another cwd.", b.PrimaryRoot)
	}
	if t := b.Thread; t != nil {
		fmt.Fprintf(&s, "\n\nThis conversation is handler thread %s (%q) of thread group %s: the session's orchestrator delegated one objective to you, and its first message here states it. Own it: work and repair locally, ask the user with request_user_input when you must (the answer comes back here), and reply in this thread as usual — ordinary replies never reach the orchestrator. Hand results back with thread_report: without outcome for an important update (or when the orchestrator asks for a report), with outcome delivered, failed or closed to conclude the objective. thread_current and thread_group show your objective and siblings; you cannot start threads.", t.ID, t.Title, t.GroupID)
	}
	writeInstructions(&s, b.Instructions)
	if t := strings.TrimSpace(b.ProfileInstructions); t != "" {
		s.WriteString("\n\nThe instructions of this session's agent profile:\n")
		s.WriteString(t)
	}
	writeSkills(&s, b.Skills)
	if b.ForcePlan {
		s.WriteString("\n\nThe user started this message with /plan: before anything else, present a plan card with the clarify tool and wait for the decision.")
	}
	if len(b.Plan) > 0 {
		s.WriteString("\n\nThe user approved this plan for the current turn; carry it out step by step:\n")
		s.Write(b.Plan)
	}
	return s.String()
}

// writeInstructions adds the included external instruction files, in
// their fixed order, each between a header and a footer naming it.
func writeInstructions(s *strings.Builder, ins []extensions.Instruction) {
	first := true
	for _, in := range ins {
		if !in.Included {
			continue
		}
		if first {
			s.WriteString("\n\nThe repository's instruction files for agents follow, in order, each between lines naming it. Follow them for work in the repository; where they conflict with the user's request or with the rules above, those win. You cannot change them for this turn: an edit to one is seen from the next turn on.")
			first = false
		}
		fmt.Fprintf(s, "\n\n=== %s (%d bytes, %s) ===\n%s", in.Path, in.Size, in.Digest, in.Text)
		if !strings.HasSuffix(in.Text, "\n") {
			s.WriteString("\n")
		}
		if in.Truncated {
			fmt.Fprintf(s, "[desk: %s]\n", in.Note)
		}
		fmt.Fprintf(s, "=== end of %s ===", in.Path)
	}
}

// writeSkills adds the loaded skills, in load order: each one's SKILL.md
// body and the paths of its other files.
func writeSkills(s *strings.Builder, skills []LoadedSkill) {
	if len(skills) == 0 {
		return
	}
	s.WriteString("\n\nSkills you loaded in this conversation (load_extension) follow. Use a skill when the task matches it; its files are in the guest file system at the paths listed, for read_file or for commands.")
	for _, k := range skills {
		fmt.Fprintf(s, "\n\n=== skill %s: %s ===\n", k.Name, k.Path)
		if k.Text == nil {
			fmt.Fprintf(s, "[desk: the skill could not be read at this step: %s]\n", k.Problem)
			fmt.Fprintf(s, "=== end of skill %s ===", k.Name)
			continue
		}
		if len(k.Text.Files) > 0 {
			s.WriteString("Files: " + strings.Join(k.Text.Files, ", "))
			if k.Text.More > 0 {
				fmt.Fprintf(s, " (and %d more; list_files shows them)", k.Text.More)
			}
			s.WriteString("\n")
		}
		s.WriteString(k.Text.Body)
		if !strings.HasSuffix(k.Text.Body, "\n") {
			s.WriteString("\n")
		}
		if k.Text.Truncated {
			fmt.Fprintf(s, "[desk: cut: %s has %d bytes; the prompt holds the first %d KiB; read the rest with read_file]\n", k.Path, k.Text.Size, extensions.MaxSkillBytes>>10)
		}
		fmt.Fprintf(s, "=== end of skill %s ===", k.Name)
	}
}

// worldOf builds the world from the session's bindings, focus and artifact
// count.
func worldOf(groups []*desk.Group, focus json.RawMessage, artifacts int) World {
	w := World{Groups: []WorldGroup{}, Focus: focus, Artifacts: artifacts}
	for _, g := range groups {
		w.Groups = append(w.Groups, WorldGroup{ID: g.ID, Name: g.Name, ItemCount: g.ItemCount})
	}
	return w
}

// estimateTokens is a conservative token estimate (four bytes a token).
func estimateTokens(parts ...string) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return (n + 3) / 4
}

// budgetLevel grades context use: neutral below 40 %, warn from 40 %, high
// from 60 %.
func budgetLevel(pct float64) string {
	switch {
	case pct >= 60:
		return "high"
	case pct >= 40:
		return "warn"
	}
	return "neutral"
}

func percent(used, window int) float64 {
	if window <= 0 {
		return 0
	}
	return float64(int(float64(used)*1000/float64(window))) / 10
}
