package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/desk-runtime/desk"
)

// questionArg is one question the model asks (the svvy shape).
type questionArg struct {
	ID       string      `json:"id,omitempty" jsonschema_description:"a short id the answer is keyed by; q1, q2, … when absent"`
	Question string      `json:"question" jsonschema_description:"the question, as the user reads it"`
	Options  []optionArg `json:"options,omitempty" jsonschema:"minItems=2,maxItems=3" jsonschema_description:"2 or 3 answers to choose from, exactly one of them recommended; leave out and give a default for an open question"`
	Default  string      `json:"default,omitempty" jsonschema_description:"the answer used until the user gives one (required when there are no options)"`
}

type optionArg struct {
	Label       string `json:"label" jsonschema_description:"the answer, as the user sees it"`
	Recommended bool   `json:"recommended,omitempty" jsonschema_description:"true on exactly one option: the answer you would choose"`
}

// questionsOf turns the model's questions into desk's.
func questionsOf(qs []questionArg) []desk.InputQuestion {
	out := make([]desk.InputQuestion, len(qs))
	for i, q := range qs {
		out[i] = desk.InputQuestion{ID: q.ID, Question: q.Question, Default: q.Default}
		for _, o := range q.Options {
			out[i].Options = append(out[i].Options, desk.InputOption{Label: o.Label, Recommended: o.Recommended})
		}
	}
	return out
}

type requestUserInputArgs struct {
	Questions []questionArg `json:"questions" jsonschema:"minItems=1,maxItems=3" jsonschema_description:"1 to 3 questions"`
}

type requestUserInput struct{ args[requestUserInputArgs] }

func (requestUserInput) Name() string { return "request_user_input" }
func (requestUserInput) Description() string {
	return "Ask the user 1 to 3 questions when you cannot proceed well without them. Each question has 2 or 3 options with exactly one recommended, or a default answer. Unless the workspace waits for answers, you get the recommended or default answers at once and the user's real answers arrive later as a new message."
}
func (requestUserInput) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t requestUserInput) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	return ask(ctx, env, call, questionsOf(a.Questions))
}

// ValidateQuestions enforces the svvy shape: 1–3 questions, each with 2–3
// options of which exactly one is recommended, or a default answer, and
// no two with the same id. Errors name the field by its JSON pointer.
func ValidateQuestions(qs []desk.InputQuestion) error {
	if len(qs) < 1 || len(qs) > 3 {
		return fmt.Errorf("/questions: got %d questions, want 1 to 3", len(qs))
	}
	ids := map[string]int{}
	for i, q := range qs {
		at := fmt.Sprintf("/questions/%d", i)
		if strings.TrimSpace(q.Question) == "" {
			return fmt.Errorf("%s/question: is empty", at)
		}
		id := q.ID
		if id == "" {
			id = fmt.Sprintf("q%d", i+1)
		}
		if j, dup := ids[id]; dup {
			return fmt.Errorf("%s/id: %q is already the id of /questions/%d", at, id, j)
		}
		ids[id] = i
		if len(q.Options) == 0 {
			if q.Default == "" {
				return fmt.Errorf("%s: needs 2 or 3 options or a default answer", at)
			}
			continue
		}
		if len(q.Options) < 2 || len(q.Options) > 3 {
			return fmt.Errorf("%s/options: got %d options, want 2 or 3", at, len(q.Options))
		}
		rec := 0
		for j, o := range q.Options {
			if strings.TrimSpace(o.Label) == "" {
				return fmt.Errorf("%s/options/%d/label: is empty", at, j)
			}
			if o.Recommended {
				rec++
			}
		}
		if rec != 1 {
			return fmt.Errorf("%s/options: %d are recommended; mark exactly one", at, rec)
		}
	}
	return nil
}

func ask(ctx context.Context, env *Env, call *Call, qs []desk.InputQuestion) (*Result, error) {
	if err := ValidateQuestions(qs); err != nil {
		return Fail(CodeBadInput, "arguments: %v", err), nil
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

// planArg is a plan card.
type planArg struct {
	Title string   `json:"title" jsonschema_description:"what the plan achieves, in a few words"`
	Steps []string `json:"steps" jsonschema:"minItems=1" jsonschema_description:"the steps, in order, each one line"`
	Notes string   `json:"notes,omitempty" jsonschema_description:"assumptions, risks or choices the user should know before deciding"`
}

type clarifyArgs struct {
	Questions []questionArg `json:"questions,omitempty" jsonschema:"minItems=1,maxItems=3" jsonschema_description:"1 to 3 questions, as for request_user_input; give questions or a plan, not both"`
	Plan      *planArg      `json:"plan,omitempty" jsonschema_description:"a plan card the user approves, declines or asks to revise; give a plan or questions, not both"`
}

type clarify struct{ args[clarifyArgs] }

func (clarify) Name() string { return "clarify" }
func (clarify) Description() string {
	return "Control the work with the user: ask questions (same shape as request_user_input), or, when you judge the work complex, present a plan card {title, steps[]} and wait for the user to approve, decline or ask for changes. An approved plan is kept in front of you for the rest of the turn; a declined plan ends the turn."
}
func (clarify) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }

func (t clarify) Run(ctx context.Context, env *Env, call *Call) (*Result, error) {
	a, bad, err := t.decode(call.Args)
	if bad != nil || err != nil {
		return bad, err
	}
	switch {
	case a.Plan != nil && len(a.Questions) > 0:
		return Fail(CodeBadInput, "arguments: /questions and /plan: give questions or a plan, not both"), nil
	case len(a.Questions) > 0:
		return ask(ctx, env, call, questionsOf(a.Questions))
	case a.Plan == nil:
		return Fail(CodeBadInput, "arguments: /questions or /plan: give questions or a plan"), nil
	}
	card := *a.Plan
	if strings.TrimSpace(card.Title) == "" {
		return badArg("plan/title", "is empty"), nil
	}
	for i, s := range card.Steps {
		if strings.TrimSpace(s) == "" {
			return badArg(fmt.Sprintf("plan/steps/%d", i), "is empty"), nil
		}
	}
	if env.Propose == nil {
		return Fail(CodeNotConfigured, "plan cards are not available here"), nil
	}
	raw, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	status, notes, err := env.Propose(ctx, call.CommandID, raw)
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
