package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
)

// The system prompt is composed from small parts, each one paragraph with
// one job, in a fixed order. There are no per-scenario branches: the model
// decides what a message needs (PawWork principles 2–4).
var promptParts = []struct{ name, text string }{
	{"role", `You are the agent of a desk session: one general assistant for every message. Decide for yourself whether a message needs a direct answer, a look at the session's context, research, computation, or a durable artifact. Tools are always available; having a tool never means you must use it.`},
	{"files", `You see a guest file system and nothing else: /artifacts holds this session's durable artifacts (/artifacts/immutable is read-only), /context/<group> holds the items of the selection groups the session binds (read-only), /scratch is yours for this turn only and is deleted when it ends, and /workspace is the workspace's own files. Paths outside these are denied.`},
	{"artifacts", `Create an artifact only for a durable output worth keeping beyond the conversation — a report, an export, evidence, a large result — never just to hold an answer that fits in your reply. To change an artifact, write to its path again: it keeps its id.`},
	{"context", `The world block attached to the latest user message lists the bound groups (ids, names, item counts), the focused page if any, and how many artifacts the session has — never their contents. Use inspect when, and only when, you need evidence from them.`},
	{"safety", `Commands run in a sandbox; some actions wait for the user's approval. If an action is declined, do not try to get around it: explain, or choose another way. When you cannot continue well without the user, ask with request_user_input (or clarify).`},
	{"style", `Answer in the user's language. Be direct; show your result, not your process. Cite paths and artifact ids when you refer to files.`},
}

// SystemPrompt returns the system prompt and, when a plan is pinned, the
// plan re-injected before every step.
func SystemPrompt(plan json.RawMessage, forcePlan bool) string {
	var b strings.Builder
	for i, p := range promptParts {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(p.text)
	}
	if forcePlan {
		b.WriteString("\n\nThe user started this message with /plan: before anything else, present a plan card with the clarify tool and wait for the decision.")
	}
	if len(plan) > 0 {
		b.WriteString("\n\nThe user approved this plan for the current turn; carry it out step by step:\n")
		b.Write(plan)
	}
	return b.String()
}

// World is the compact world snapshot attached to the latest user message:
// ids, names and counts, never bodies (S-B, S-Q).
type World struct {
	Groups    []WorldGroup    `json:"groups"`
	Focus     json.RawMessage `json:"focus,omitempty"`
	Artifacts int             `json:"artifact_count"`
}

// WorldGroup is one bound group as the world block shows it.
type WorldGroup struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	ItemCount int    `json:"item_count"`
}

// Block renders the world as the text attached to the latest user message.
func (w World) Block() string {
	b, _ := json.Marshal(w)
	return "<world>" + string(b) + "</world>"
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

var _ = fmt.Sprintf
