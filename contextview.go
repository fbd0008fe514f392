package desk

import "encoding/json"

// ContextView is what GET /v1/sessions/{ses}/context shows: exactly what
// the next turn would send, and how full the window is. The agent builds
// it; it lives here so the doors that show it need not link the agent (and
// with it the model SDKs and the shell parser).
type ContextView struct {
	Model        string        `json:"model"`
	SystemPrompt string        `json:"system_prompt"`
	World        World         `json:"world"`
	WorldBlock   string        `json:"world_block"`
	Tools        []string      `json:"tools"`
	Messages     int           `json:"messages"`
	Budget       ContextBudget `json:"budget"`
	// ExternalInstructions are the checkout's instruction files the next
	// turn finds (included in the system prompt or not, and why);
	// LoadedExtensions the skills the surface loaded; AbsentTools the
	// optional tools not declared here, with why.
	ExternalInstructions []Instruction      `json:"external_instructions"`
	LoadedExtensions     []*LoadedExtension `json:"loaded_extensions"`
	AbsentTools          []AbsentTool       `json:"absent_tools"`
}

// ContextBudget is a surface's context budget.
type ContextBudget struct {
	UsedTokens int     `json:"used_tokens"`
	Window     int     `json:"window"`
	Percent    float64 `json:"percent"`
	Level      string  `json:"level"` // neutral, warn, high
	// Source says where UsedTokens comes from: BudgetProvider (the counts
	// the last model call reported) or BudgetEstimate.
	Source string `json:"source"`
}

// Context budget sources.
const (
	BudgetEstimate = "estimate" // desk's estimate of the next request (bytes / 4)
	BudgetProvider = "provider" // the provider's counts of the last call, plus an estimate of what came after
)

// World is what the agent is told about the session's surroundings: its
// bound groups, the focused page and how many artifacts it has.
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

// Instruction is one discovered external instruction file (AGENTS.md,
// CLAUDE.md): a read-only record of what the prompt holds from it.
type Instruction struct {
	Path   string `json:"path"`   // guest path
	Digest string `json:"digest"` // "sha256:<hex>" of the whole file
	Size   int64  `json:"size"`
	// Included says whether the file's text is in the system prompt;
	// IncludedBytes how much of it (less than Size when it was cut).
	Included      bool `json:"included"`
	IncludedBytes int  `json:"included_bytes"`
	Truncated     bool `json:"truncated"`
	// Note says why a file is cut, left out or unreadable.
	Note string `json:"note,omitempty"`

	// Text is what the prompt holds (the cut text, without the note).
	Text string `json:"-"`
}

// AbsentTool is an optional tool that is not declared, and why.
type AbsentTool struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}
