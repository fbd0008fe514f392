// Package agui owns desk's AG-UI door: it reads AG-UI 1.0's RunAgentInput
// and answers with the AG-UI event stream of the desk execution the run
// is. A run is one desk execution, or the part of one between two
// interrupts: an approval, a blocking question or a plan waiting for
// review ends the run with an interrupt outcome, and the next run's
// resume entries answer it while the execution, durable as every desk
// turn, waits. Nothing here holds state between requests: a run is found
// again from its runId (the submit's idempotency key) and its events
// from the event log, so any node answers, and a client that lost its
// connection continues from Last-Event-ID with nothing repeated and
// nothing lost.
package agui

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// ProtocolVersion is the AG-UI revision this door speaks.
const ProtocolVersion = "1.0"

// RunAgentInput is AG-UI's request to run an agent. threadId is the desk
// session. Fields AG-UI adds later are accepted and ignored, as its
// schema's open objects ask.
type RunAgentInput struct {
	// ThreadID is the desk session the run belongs to.
	ThreadID string `json:"threadId" jsonschema:"minLength=1"`
	// RunID names the run; a repeated runId is the same run (its
	// submit is not repeated), so a client can re-subscribe to it.
	RunID           string   `json:"runId" jsonschema:"minLength=1,maxLength=180"`
	ProtocolVersion string   `json:"protocolVersion,omitempty"`
	ParentRunID     string   `json:"parentRunId,omitempty"`
	State           any      `json:"state,omitempty"`
	Messages        []Msg    `json:"messages"`
	Tools           []Tool   `json:"tools,omitempty"`
	Context         []Ctx    `json:"context,omitempty"`
	ForwardedProps  any      `json:"forwardedProps,omitempty"`
	Resume          []Resume `json:"resume,omitempty"`
}

// Msg is one message of the conversation the client holds. desk keeps
// its own transcript, so only the newest user message is taken.
type Msg struct {
	ID   string `json:"id"`
	Role string `json:"role"`
	// Content is a string or a list of content parts.
	Content json.RawMessage `json:"content,omitempty"`
}

// Tool is a frontend tool the client offers.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  any    `json:"parameters,omitempty"`
}

// Ctx is a named piece of ambient information for the run.
type Ctx struct {
	Description string `json:"description"`
	Value       string `json:"value"`
}

// Resume answers one interrupt of an earlier run.
type Resume struct {
	InterruptID string `json:"interruptId"`
	// Status is resolved or cancelled (a cancelled approval is denied).
	Status  string          `json:"status" jsonschema:"enum=resolved,enum=cancelled"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// ApprovalAnswer is the payload that resolves an approval interrupt:
// one of the options the interrupt offered, or approve/deny.
type ApprovalAnswer struct {
	OptionID string `json:"option_id,omitempty"`
	Decision string `json:"decision,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// InputAnswer is the payload that resolves a question interrupt:
// question id → answer.
type InputAnswer struct {
	Answers map[string]string `json:"answers"`
}

// PlanAnswer is the payload that resolves a plan interrupt.
type PlanAnswer struct {
	Decision string `json:"decision"` // approve, decline or revise (with notes)
	Notes    string `json:"notes,omitempty"`
}

// Bounds of what a request may carry.
const (
	maxRunID    = 180
	maxMessages = 10_000
	maxResume   = 64
)

// Validate checks what desk needs of an input, naming the first field
// that is wrong.
func (in *RunAgentInput) Validate() error {
	switch {
	case in.ThreadID == "":
		return desk.Errorf(desk.EINVALID, "threadId is required: it is the desk session the run belongs to")
	case in.RunID == "":
		return desk.Errorf(desk.EINVALID, "runId is required")
	case len(in.RunID) > maxRunID || !utf8.ValidString(in.RunID):
		return desk.Errorf(desk.EINVALID, "runId is longer than %d bytes or not UTF-8", maxRunID)
	case len(in.Messages) > maxMessages:
		return desk.Errorf(desk.EINVALID, "messages has %d entries; at most %d", len(in.Messages), maxMessages)
	case len(in.Resume) > maxResume:
		return desk.Errorf(desk.EINVALID, "resume has %d entries; at most %d", len(in.Resume), maxResume)
	case in.ProtocolVersion != "" && !strings.HasPrefix(in.ProtocolVersion, "1."):
		return desk.Errorf(desk.EINVALID, "protocolVersion %q is not one this door speaks (AG-UI %s)", in.ProtocolVersion, ProtocolVersion)
	}
	for i, r := range in.Resume {
		if r.InterruptID == "" {
			return desk.Errorf(desk.EINVALID, "resume[%d].interruptId is required", i)
		}
		if r.Status != "resolved" && r.Status != "cancelled" {
			return desk.Errorf(desk.EINVALID, "resume[%d].status is %q; expected resolved or cancelled", i, r.Status)
		}
	}
	return nil
}

// prompt is the text the run submits: the newest user message (with the
// run's context before it), or "" when the run only resumes.
func (in *RunAgentInput) prompt() (string, error) {
	var last *Msg
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == "user" {
			last = &in.Messages[i]
			break
		}
	}
	if last == nil {
		return "", nil
	}
	text, err := contentText(last.Content)
	if err != nil {
		return "", desk.Errorf(desk.EINVALID, "messages: the user message %q: %v", last.ID, err)
	}
	if strings.TrimSpace(text) == "" {
		return "", desk.Errorf(desk.EINVALID, "messages: the user message %q has no text", last.ID)
	}
	if len(in.Context) == 0 {
		return text, nil
	}
	var b strings.Builder
	b.WriteString("Context from the client:\n")
	for _, c := range in.Context {
		fmt.Fprintf(&b, "- %s: %s\n", c.Description, c.Value)
	}
	b.WriteString("\n")
	b.WriteString(text)
	return b.String(), nil
}

// contentText is a message content's text: the string, or its text
// parts joined. Other parts (images, documents) are refused: desk's turn
// input is text.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor a list of parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content[%d] is a %s part; desk takes text parts only", i, p.Type)
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// Event is one AG-UI event as sent: its type and its fields.
type Event map[string]any

// Interrupt kinds: the prefix of an interrupt id, which is
// "<kind>:<desk id>:<event seq>". The seq is where the run stopped, so
// the run that resumes it continues right after (it is only a position
// in the execution's own events, which the caller may read anyway).
const (
	kindApproval = "approval"
	kindInput    = "input"
	kindPlan     = "plan"
)

func interruptID(kind, id string, seq int64) string {
	return fmt.Sprintf("%s:%s:%d", kind, id, seq)
}

// parseInterruptID splits an interrupt id desk made.
func parseInterruptID(s string) (kind, id string, seq int64, err error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", "", 0, desk.Errorf(desk.EINVALID, "resume names interrupt %q, which desk did not raise", s)
	}
	if _, err := fmt.Sscanf(parts[2], "%d", &seq); err != nil || seq < 0 {
		return "", "", 0, desk.Errorf(desk.EINVALID, "resume names interrupt %q, which desk did not raise", s)
	}
	switch parts[0] {
	case kindApproval, kindInput, kindPlan:
	default:
		return "", "", 0, desk.Errorf(desk.EINVALID, "resume names interrupt %q, which desk did not raise", s)
	}
	return parts[0], parts[1], seq, nil
}
