package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/conversation"
)

// The agent waits on a person through the conversation service's gate,
// the same one the runtime host uses; what is the agent's own is its
// reviewer (a model call, or the rule set) for auto-review workspaces.

// gate decides whether a gated call may start, by the workspace's approval
// mode (conversation.Gate.Approve).
func (tr *turn) gate(cmd *desk.Command, summary string) (bool, string, error) {
	// A tool's gate summary is already what a person reads ("write
	// /artifacts/a.md", the command line); the agent offers the gate's
	// default options.
	return tr.waits.Approve(tr.ctx, conversation.Approval{Command: cmd, Summary: summary, Request: desk.ApprovalRequest{What: summary}, Mode: tr.settings.ApprovalMode,
		Review: func() (bool, string) { return tr.review(cmd.Tool, summary) }})
}

// ask is request_user_input: blocking per workspace, for up to InputWait
// (conversation.Gate.Ask).
func (tr *turn) ask(ctx context.Context, commandID string, qs []desk.InputQuestion) (map[string]string, bool, error) {
	return tr.waits.Ask(ctx, conversation.Question{CommandID: commandID, Questions: qs, Blocking: tr.settings.BlockingInput, Wait: tr.a.opts.InputWait})
}

// propose shows a plan card and waits for the decision. An approved plan
// is pinned to the execution and re-injected before every step.
func (tr *turn) propose(ctx context.Context, commandID string, card json.RawMessage) (string, string, error) {
	got, err := tr.waits.Propose(ctx, commandID, card)
	if err != nil {
		return "", "", err
	}
	if got.Status == desk.PlanApproved {
		tr.mu.Lock()
		tr.plan, tr.planned = got.Card, true
		tr.mu.Unlock()
		tr.t.Emit("plan.pinned", map[string]any{"plan_id": got.ID})
	}
	return got.Status, got.Notes, nil
}

// review is auto-review: a reviewer model call decides when the session
// has a real model; otherwise the documented rule set does.
func (tr *turn) review(tool, summary string) (bool, string) {
	if tr.spec.Provider != "script" && tr.prov != nil {
		ok, reason, err := tr.modelReview(tool, summary)
		if err == nil {
			return ok, "reviewer: " + reason
		}
		tr.a.log.Warn("auto-review model call failed; using the rule set", "err", err)
	}
	return ruleReview(tool, summary)
}

func (tr *turn) modelReview(tool, summary string) (bool, string, error) {
	req := provider.Request{Model: tr.spec.Model, MaxTokens: 200,
		System:   `You review one action an AI agent wants to take in a sandboxed workspace. Approve ordinary work; deny actions that destroy data wholesale, exfiltrate secrets, or change the host. Answer with one line: APPROVE: <reason> or DENY: <reason>.`,
		Messages: []provider.Message{{Role: provider.RoleUser, Content: fmt.Sprintf("Tool: %s\nAction: %s", tool, summary)}}}
	ctx, cancel := context.WithTimeout(tr.ctx, time.Minute)
	defer cancel()
	resp, err := tr.prov.Stream(ctx, req, func(provider.Event) {})
	if err != nil {
		return false, "", err
	}
	tr.recordReview(resp)
	line := strings.TrimSpace(resp.Text)
	switch {
	case strings.HasPrefix(strings.ToUpper(line), "APPROVE"):
		return true, strings.TrimSpace(strings.TrimPrefix(line[7:], ":")), nil
	case strings.HasPrefix(strings.ToUpper(line), "DENY"):
		return false, strings.TrimSpace(strings.TrimPrefix(line[4:], ":")), nil
	}
	return false, "", fmt.Errorf("unreadable review %q", line)
}
