package client

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/desk-runtime/desk"
)

// SubmitInput is a message for POST /v1/sessions/{ses}/messages.
type SubmitInput = desk.MessageSubmit

// Send queues a message on a session.
func (c *Client) Send(ctx context.Context, ses string, in SubmitInput) (*desk.SubmitResult, error) {
	var out desk.SubmitResult
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/messages", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Queue lists a session's queue rows (all adds finished ones).
func (c *Client) Queue(ctx context.Context, ses string, all bool) ([]*desk.QueueItem, error) {
	q := url.Values{}
	if all {
		q.Set("all", "true")
	}
	var out desk.QueueList
	if err := c.doJSON(ctx, "GET", withQuery("/v1/sessions/"+esc(ses)+"/queue", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// QueueOp applies steer, cancel or approve to a queued row.
func (c *Client) QueueOp(ctx context.Context, ses, item, op string) (*desk.QueueItem, error) {
	var out desk.QueueItem
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/queue/"+esc(item)+"/"+esc(op), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// QueueMove moves a queued row to the front or back.
func (c *Client) QueueMove(ctx context.Context, ses, item, to string) (*desk.QueueItem, error) {
	var out desk.QueueItem
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/queue/"+esc(item)+"/move", desk.QueueMove{To: to}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeQueue resumes a held surface (the orchestrator when surface is "").
func (c *Client) ResumeQueue(ctx context.Context, ses, surface string) (*desk.Surface, error) {
	var out desk.Surface
	body := desk.QueueResume{Surface: surface}
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/queue/resume", body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Executions lists a session's executions, newest first.
func (c *Client) Executions(ctx context.Context, ses string) ([]*desk.Execution, error) {
	var out desk.ExecutionList
	if err := c.doJSON(ctx, "GET", "/v1/sessions/"+esc(ses)+"/executions", nil, &out); err != nil {
		return nil, err
	}
	return out.Executions, nil
}

// Execution returns one execution with its events.
func (c *Client) Execution(ctx context.Context, exe string) (*desk.Execution, error) {
	var out desk.Execution
	if err := c.doJSON(ctx, "GET", "/v1/executions/"+esc(exe), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Interrupt stops the exact execution.
func (c *Client) Interrupt(ctx context.Context, ses, exe string) (*desk.InterruptResult, error) {
	var out desk.InterruptResult
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/executions/"+esc(exe)+"/interrupt", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Blocks lists a session's admission blocks.
func (c *Client) Blocks(ctx context.Context, ses string) ([]*desk.Block, error) {
	var out desk.BlockList
	if err := c.doJSON(ctx, "GET", "/v1/sessions/"+esc(ses)+"/blocks", nil, &out); err != nil {
		return nil, err
	}
	return out.Blocks, nil
}

// ReleaseBlock clears a block (starting nothing).
func (c *Client) ReleaseBlock(ctx context.Context, ses, blk string) (*desk.Block, error) {
	var out desk.Block
	if err := c.doJSON(ctx, "POST", "/v1/sessions/"+esc(ses)+"/blocks/"+esc(blk)+"/release", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EventFilter selects live events.
type EventFilter struct {
	Workspace, Session, Execution string
}

// Events follows live events after lastID (-1: from now), reconnecting
// with Last-Event-ID, until ctx ends or fn fails.
func (c *Client) Events(ctx context.Context, f EventFilter, lastID int64, fn func(*desk.Event) error) error {
	q := url.Values{}
	for k, v := range map[string]string{"workspace": f.Workspace, "session": f.Session, "execution": f.Execution} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return c.Stream(ctx, withQuery("/v1/events", q), lastID, func(e Event) error {
		if e.Type == "error" {
			var b struct{ Code, Message string }
			_ = json.Unmarshal(e.Data, &b)
			return desk.Errorf(b.Code, "%s", b.Message)
		}
		var ev desk.Event
		if e.Type == "gap" {
			ev.Type, ev.Data = "gap", e.Data
			return fn(&ev)
		}
		if err := json.Unmarshal(e.Data, &ev); err != nil {
			return err
		}
		return fn(&ev)
	})
}
