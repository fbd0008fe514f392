package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
)

type requestUserInput struct{}

func (requestUserInput) Name() string { return "request_user_input" }
func (requestUserInput) Description() string {
	return "Ask the user 1 to 3 questions when you cannot proceed well without them. Each question has 2 or 3 options with exactly one recommended, or a default answer. Unless the workspace waits for answers, you get the recommended or default answers at once and the user's real answers arrive later as a new message."
}
func (requestUserInput) Schema() json.RawMessage {
	return schema(questionsSchema)
}
func (requestUserInput) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

const questionsSchema = `{"type":"object","properties":{"questions":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"object","properties":{"id":{"type":"string"},"question":{"type":"string"},"options":{"type":"array","minItems":2,"maxItems":3,"items":{"type":"object","properties":{"label":{"type":"string"},"recommended":{"type":"boolean"}},"required":["label"],"additionalProperties":false}},"default":{"type":"string"}},"required":["question"],"additionalProperties":false}}},"required":["questions"],"additionalProperties":false}`

func (requestUserInput) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	var a struct {
		Questions []desk.InputQuestion `json:"questions"`
	}
	if r := decode(call.Args, &a); r != nil {
		return r, nil
	}
	return ask(ctx, env, call, a.Questions)
}

// ValidateQuestions enforces the svvy shape: 1–3 questions, each with 2–3
// options of which exactly one is recommended, or a default answer.
func ValidateQuestions(qs []desk.InputQuestion) error {
	if len(qs) < 1 || len(qs) > 3 {
		return fmt.Errorf("ask 1 to 3 questions (got %d)", len(qs))
	}
	for i, q := range qs {
		if strings.TrimSpace(q.Question) == "" {
			return fmt.Errorf("question %d is empty", i+1)
		}
		if len(q.Options) == 0 {
			if q.Default == "" {
				return fmt.Errorf("question %d needs 2 or 3 options or a default answer", i+1)
			}
			continue
		}
		if len(q.Options) < 2 || len(q.Options) > 3 {
			return fmt.Errorf("question %d has %d options; give 2 or 3", i+1, len(q.Options))
		}
		rec := 0
		for _, o := range q.Options {
			if o.Recommended {
				rec++
			}
		}
		if rec != 1 {
			return fmt.Errorf("question %d has %d recommended options; mark exactly one", i+1, rec)
		}
	}
	return nil
}

func ask(ctx context.Context, env *Env, call *Call, qs []desk.InputQuestion) (*Result, error) {
	if err := ValidateQuestions(qs); err != nil {
		return Fail(CodeBadInput, "%v", err), nil
	}
	for i := range qs {
		if qs[i].ID == "" {
			qs[i].ID = fmt.Sprintf("q%d", i+1)
		}
	}
	if env.Ask == nil {
		return Fail(CodeNotConfigured, "asking the user is not available here"), nil
	}
	answers, defaulted, err := env.Ask(ctx, call.CommandID, qs)
	if err != nil {
		return nil, err
	}
	v := map[string]any{"answers": answers, "defaulted": defaulted}
	if defaulted {
		v["note"] = "these are the recommended or default answers; the user's own answers, if they come, arrive as a new message"
	}
	return &Result{Value: v, Facts: map[string]any{"questions": len(qs), "defaulted": defaulted}}, nil
}

type clarify struct{}

func (clarify) Name() string { return "clarify" }
func (clarify) Description() string {
	return "Control the work with the user: ask questions (same shape as request_user_input), or, when you judge the work complex, present a plan card {title, steps[]} and wait for the user to approve, decline or ask for changes. An approved plan is kept in front of you for the rest of the turn; a declined plan ends the turn."
}
func (clarify) Schema() json.RawMessage {
	return schema(`{"type":"object","properties":{"questions":` + questionsSchema[strings.Index(questionsSchema, `{"type":"array"`):strings.Index(questionsSchema, `},"required":["questions"]`)+1] + `,"plan":{"type":"object","properties":{"title":{"type":"string"},"steps":{"type":"array","minItems":1,"items":{"type":"string"}},"notes":{"type":"string"}},"required":["title","steps"],"additionalProperties":false}},"additionalProperties":false}`)
}
func (clarify) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (clarify) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	var a struct {
		Questions []desk.InputQuestion `json:"questions"`
		Plan      json.RawMessage      `json:"plan"`
	}
	if r := decode(call.Args, &a); r != nil {
		return r, nil
	}
	switch {
	case len(a.Plan) > 0 && len(a.Questions) > 0:
		return Fail(CodeBadInput, "give questions or a plan, not both"), nil
	case len(a.Questions) > 0:
		return ask(ctx, env, call, a.Questions)
	case len(a.Plan) == 0:
		return Fail(CodeBadInput, "give questions or a plan"), nil
	}
	var card struct {
		Title string   `json:"title"`
		Steps []string `json:"steps"`
		Notes string   `json:"notes"`
	}
	if err := json.Unmarshal(a.Plan, &card); err != nil || strings.TrimSpace(card.Title) == "" || len(card.Steps) == 0 {
		return Fail(CodeBadInput, "a plan needs a title and at least one step"), nil
	}
	if env.Propose == nil {
		return Fail(CodeNotConfigured, "plan cards are not available here"), nil
	}
	status, notes, err := env.Propose(ctx, call.CommandID, a.Plan)
	if err != nil {
		return nil, err
	}
	facts := map[string]any{"plan": card.Title, "decision": status}
	switch status {
	case desk.PlanApproved:
		return &Result{Value: map[string]any{"decision": "approved", "note": "the plan is approved; carry it out"}, Facts: facts}, nil
	case desk.PlanRevised:
		return &Result{Value: map[string]any{"decision": "revise", "notes": notes, "note": "the user asks for changes; propose a new plan card"}, Facts: facts}, nil
	default:
		return &Result{Value: map[string]any{"decision": "declined"}, Facts: facts, Stop: "the user declined the plan"}, nil
	}
}
