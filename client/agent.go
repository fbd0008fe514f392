package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/desk-runtime/desk"
)

// TranscriptOptions pages a transcript: Surface "" is the orchestrator,
// Before 0 the newest page, Limit 0 the server's default.
type TranscriptOptions struct {
	Surface string
	Before  int64
	Limit   int
	// Branches lists every branch of the transcript tree by seq (Before
	// and Limit do not apply), not only the active one.
	Branches bool
}

// Transcript returns a page of a surface's messages, oldest first.
func (c *Client) Transcript(ctx context.Context, ses string, o TranscriptOptions) ([]*desk.Message, error) {
	q := url.Values{}
	if o.Surface != "" {
		q.Set("surface", o.Surface)
	}
	if o.Before > 0 {
		q.Set("before", strconv.FormatInt(o.Before, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Branches {
		q.Set("branches", "true")
	}
	var out desk.MessageList
	if err := c.doJSON(ctx, "GET", withQuery("/v1/sessions/"+esc(ses)+"/messages", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// EditMessage queues the revised text of a committed user message as a new
// branch from that message's parent (edit and resend).
func (c *Client) EditMessage(ctx context.Context, ses, msg, text string) (*desk.SubmitResult, error) {
	var out desk.SubmitResult
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/messages/"+esc(msg)+"/edit", desk.MessageEdit{Text: text}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Approvals lists a session's approval requests (only undecided ones
// when pending).
func (c *Client) Approvals(ctx context.Context, ses string, pending bool) ([]*desk.Approval, error) {
	q := url.Values{}
	if pending {
		q.Set("pending", "true")
	}
	var out desk.ApprovalList
	if err := c.doJSON(ctx, "GET", withQuery("/v1/sessions/"+esc(ses)+"/approvals", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Approvals, nil
}

// DecideApproval answers a gated tool call: decision is approve, deny,
// or the id of one of the approval's options.
func (c *Client) DecideApproval(ctx context.Context, apr, decision, reason string) (*desk.Approval, error) {
	var out desk.Approval
	body := desk.ApprovalDecision{Decision: decision, Reason: reason}
	if decision != "approve" && decision != "deny" {
		body = desk.ApprovalDecision{OptionID: decision, Reason: reason}
	}
	if err := c.doJSON(ctx, "POST", "/v1/approvals/"+esc(apr), body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InputRequests lists the questions the agent asked in a session.
func (c *Client) InputRequests(ctx context.Context, ses string) ([]*desk.InputRequest, error) {
	var out desk.InputRequestList
	if err := c.doJSON(ctx, "GET", "/v1/sessions/"+esc(ses)+"/input-requests", nil, &out); err != nil {
		return nil, err
	}
	return out.InputRequests, nil
}

// InputAnswered is the answer to AnswerInput: the request, and the queued
// row when a non-blocking request's answer was queued.
type InputAnswered = desk.InputAnswerResult

// AnswerInput answers a question, question id → answer.
func (c *Client) AnswerInput(ctx context.Context, inp string, answers map[string]string) (*InputAnswered, error) {
	var out InputAnswered
	if err := c.doJSON(ctx, "POST", "/v1/input-requests/"+esc(inp)+"/answer", desk.InputAnswer{Answers: answers}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
