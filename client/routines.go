package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/desk-runtime/desk"
)

// Routines: prompts a workspace submits on a schedule.

func routinesPath(ws string) string { return "/v1/workspaces/" + esc(ws) + "/routines" }

// CreateRoutine creates a routine in workspace ws.
func (c *Client) CreateRoutine(ctx context.Context, ws string, in desk.RoutineCreate) (*desk.Routine, error) {
	var r desk.Routine
	if err := c.doJSON(ctx, http.MethodPost, routinesPath(ws), in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ListRoutines lists the workspace's routines the token may see.
func (c *Client) ListRoutines(ctx context.Context, ws string) ([]*desk.Routine, error) {
	var out desk.RoutineList
	if err := c.doJSON(ctx, http.MethodGet, routinesPath(ws), nil, &out); err != nil {
		return nil, err
	}
	return out.Routines, nil
}

// GetRoutine gets one routine.
func (c *Client) GetRoutine(ctx context.Context, ws, id string) (*desk.Routine, error) {
	var r desk.Routine
	if err := c.doJSON(ctx, http.MethodGet, routinesPath(ws)+"/"+esc(id), nil, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// UpdateRoutine changes the fields u names.
func (c *Client) UpdateRoutine(ctx context.Context, ws, id string, u desk.RoutineUpdate) (*desk.Routine, error) {
	var r desk.Routine
	if err := c.doJSON(ctx, http.MethodPatch, routinesPath(ws)+"/"+esc(id), u, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// DeleteRoutine deletes a routine and its run history.
func (c *Client) DeleteRoutine(ctx context.Context, ws, id string) error {
	return c.doJSON(ctx, http.MethodDelete, routinesPath(ws)+"/"+esc(id), nil, nil)
}

// RunRoutine runs a routine now, by hand.
func (c *Client) RunRoutine(ctx context.Context, ws, id string) (*desk.RoutineRun, error) {
	var run desk.RoutineRun
	if err := c.doJSON(ctx, http.MethodPost, routinesPath(ws)+"/"+esc(id)+"/run", struct{}{}, &run); err != nil {
		return nil, err
	}
	return &run, nil
}

// RoutineRuns lists a routine's runs, newest first; limit 0 means the
// server's default.
func (c *Client) RoutineRuns(ctx context.Context, ws, id string, limit int) ([]*desk.RoutineRun, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out desk.RoutineRunList
	if err := c.doJSON(ctx, http.MethodGet, withQuery(routinesPath(ws)+"/"+esc(id)+"/runs", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Runs, nil
}
