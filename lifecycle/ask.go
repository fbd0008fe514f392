package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/desk-runtime/desk"
)

// AskInput is a cross-workspace ask (see desk.AskInput).
type AskInput = desk.AskInput

// Ask statuses.
const (
	AskDispatched  = desk.AskDispatched
	AskUnavailable = desk.AskUnavailable
)

// AskResult answers an ask (see desk.AskResult).
type AskResult = desk.AskResult

// maxPrompt matches the execution model's bound on one message.
const maxPrompt = 1 << 20

// reconstructPreamble is put before the prompt of a reconstructed target
// when the caller asks for it.
func reconstructPreamble(t desk.ResolveTarget) string {
	return fmt.Sprintf("You are a new worker reconstructing the work behind %s %s, which can no longer answer for itself. "+
		"You are not its original author and must not present yourself as such. Rebuild what you need from this workspace's "+
		"files, artifacts and history, and say so when you are unsure.\n\n---\n\n", t.Kind, t.ID)
}

// Ask resolves the target as follow-up resolution does and acts on the
// answer: exact queues the prompt on that session with the caller's
// origin; unavailable says why and dispatches nothing; reconstructed
// queues it on the session (labelled reconstructed) that resolution made
// in the target's workspace. A refused prompt leaves no session behind.
func (s *Service) Ask(ctx context.Context, in AskInput) (*AskResult, error) {
	if s.opts.Sessions == nil || s.opts.Submit == nil {
		return nil, desk.Errorf(desk.EUNAVAILABLE, "asking is not available on this desk")
	}
	if strings.TrimSpace(in.Prompt) == "" {
		return nil, desk.Errorf(desk.EINVALID, "prompt is required")
	}
	if len(in.Prompt) > maxPrompt || !utf8.ValidString(in.Prompt) {
		return nil, desk.Errorf(desk.EINVALID, "prompt must be valid UTF-8 of at most %d bytes", maxPrompt)
	}
	res, err := s.opts.Sessions.Resolve(ctx, in.Target)
	if err != nil {
		return nil, err
	}
	out := &AskResult{Resolution: res.Resolution, Reason: res.Reason, SessionID: res.SessionID, Signature: res.Signature, Origin: res.Origin}
	text := in.Prompt
	switch res.Resolution {
	case desk.ResolveExact:
	case desk.ResolveReconstructed:
		if in.Reconstruct {
			text = reconstructPreamble(in.Target) + in.Prompt
		}
	default:
		out.Status = AskUnavailable
		return out, nil
	}
	sub, err := s.opts.Submit.Submit(ctx, res.SessionID, desk.SubmitInput{Text: text, IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		// A refused ask leaves nothing behind: the session this resolution
		// made for it goes again (one made earlier stays).
		if res.Created {
			if derr := s.opts.Sessions.Delete(context.WithoutCancel(ctx), res.SessionID); derr != nil {
				return nil, errors.Join(err, fmt.Errorf("remove the session reconstructed for the refused ask: %w", derr))
			}
		}
		return nil, err
	}
	out.Status, out.QueuedItemID, out.ExecutionID = AskDispatched, sub.Item.ID, sub.ExecutionID
	return out, nil
}
