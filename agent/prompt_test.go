package agent

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk/agent/extensions"
	"github.com/desk-runtime/desk/agent/tools"
)

// TestSystemPromptBinding: the binding follows the fixed parts in its
// documented order — identity, instructions, skills, plan — an included
// file between lines naming it (a cut one with its note), a left-out one
// absent, and a skill that can no longer be read named with why.
func TestSystemPromptBinding(t *testing.T) {
	base := SystemPrompt(Binding{})
	b := Binding{
		Identity:    tools.Identity{SessionID: "ses_1", Signature: "@calm-amber-river-a1b2c3", WorkspaceID: "ws_1", ThreadID: "srf_2"},
		PrimaryRoot: "/home/me/project",
		Instructions: []extensions.Instruction{
			{Path: "/workspace/AGENTS.md", Size: 100000, Digest: "sha256:aa", Included: true, Truncated: true, Text: "RULE ONE\n", Note: "cut: the file has 100000 bytes"},
			{Path: "/workspace/CLAUDE.md", Size: 5, Digest: "sha256:bb", Note: "external instructions are off"},
		},
		Skills: []LoadedSkill{
			{Name: "pdf-tools", Path: "/workspace/.agents/skills/pdf/SKILL.md", Text: &extensions.SkillText{Body: "Use fill.py.", Files: []string{"/workspace/.agents/skills/pdf/fill.py"}}},
			{Name: "gone", Path: "/workspace/.claude/skills/gone/SKILL.md", Problem: "/workspace/.claude/skills/gone/SKILL.md does not exist"},
		},
		Plan: []byte(`{"title":"Ship"}`),
	}
	s := SystemPrompt(b)
	if !strings.HasPrefix(s, base) {
		t.Fatal("the binding does not follow the fixed parts")
	}
	order := []string{
		"You work for session ses_1 (@calm-amber-river-a1b2c3) of workspace ws_1, on its handler thread srf_2",
		"$DESK_THREAD_ID",
		"The active project is /home/me/project, the workspace's primary root",
		"=== /workspace/AGENTS.md (100000 bytes, sha256:aa) ===\nRULE ONE\n[desk: cut: the file has 100000 bytes]\n=== end of /workspace/AGENTS.md ===",
		"=== skill pdf-tools: /workspace/.agents/skills/pdf/SKILL.md ===\nFiles: /workspace/.agents/skills/pdf/fill.py\nUse fill.py.\n=== end of skill pdf-tools ===",
		"=== skill gone: /workspace/.claude/skills/gone/SKILL.md ===\n[desk: the skill could not be read at this step: /workspace/.claude/skills/gone/SKILL.md does not exist]",
		`carry it out step by step:` + "\n" + `{"title":"Ship"}`,
	}
	at := len(base)
	for _, part := range order {
		i := strings.Index(s[at:], part)
		if i < 0 {
			t.Fatalf("missing or out of order: %q in\n%s", part, s[len(base):])
		}
		at += i + len(part)
	}
	if strings.Contains(s, "CLAUDE.md") {
		t.Fatal("a file left out is in the prompt")
	}
	if strings.Contains(base, "active project") {
		t.Fatal("a workspace without a primary root names an active project")
	}
}
