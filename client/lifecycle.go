package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/desk-runtime/desk"
)

// Catalog lists every workspace ever created (the admin) or the token's own.
func (c *Client) Catalog(ctx context.Context) ([]*desk.CatalogEntry, error) {
	var out desk.CatalogList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/catalog", nil, &out); err != nil {
		return nil, err
	}
	return out.Workspaces, nil
}

// CatalogEntry returns one workspace's catalog row.
func (c *Client) CatalogEntry(ctx context.Context, ws string) (*desk.CatalogEntry, error) {
	var e desk.CatalogEntry
	if err := c.doJSON(ctx, http.MethodGet, "/v1/catalog/"+esc(ws), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Offboard offboards a workspace (admin): a running execution answers
// desk.EBLOCKED; an already departed workspace answers Changed false.
func (c *Client) Offboard(ctx context.Context, ws string, in desk.OffboardInput) (*desk.LifecycleResult, error) {
	var out desk.LifecycleResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/offboard", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Restore moves a departed workspace back and recalls its sessions (admin).
func (c *Client) Restore(ctx context.Context, ws string) (*desk.LifecycleResult, error) {
	var out desk.LifecycleResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/restore", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Purge deletes a departed workspace for good (admin); confirm must repeat
// the workspace id.
func (c *Client) Purge(ctx context.Context, ws, confirm string) (*desk.LifecycleResult, error) {
	var out desk.LifecycleResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/purge", desk.PurgeRequest{Confirm: confirm}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Ask resolves a target and queues the prompt on the session it resolves
// to; an unavailable target dispatches nothing and says why.
func (c *Client) Ask(ctx context.Context, in desk.AskInput) (*desk.AskResult, error) {
	var out desk.AskResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/ask", in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Dispatches lists the dispatches the caller may see (session and
// workspace filter by the caller's or the target's).
func (c *Client) Dispatches(ctx context.Context, session, workspace string) ([]*desk.Dispatch, error) {
	q := url.Values{}
	if session != "" {
		q.Set("session", session)
	}
	if workspace != "" {
		q.Set("workspace", workspace)
	}
	var out desk.DispatchList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/dispatches?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	return out.Dispatches, nil
}

// Dispatch returns one dispatch.
func (c *Client) Dispatch(ctx context.Context, id string) (*desk.Dispatch, error) {
	var out desk.Dispatch
	if err := c.doJSON(ctx, http.MethodGet, "/v1/dispatches/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
