package client

import (
	"context"
	"net/http"

	"github.com/desk-runtime/desk"
)

// RuntimeAdd is the input of AddRuntime: Env names variables, never values.
type RuntimeAdd = desk.RuntimeCreate

// AddRuntime registers an external agent runtime (admin).
func (c *Client) AddRuntime(ctx context.Context, in RuntimeAdd) (*desk.Runtime, error) {
	var r desk.Runtime
	if err := c.doJSON(ctx, http.MethodPost, "/v1/runtimes", in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ListRuntimes lists the registered runtimes (admin).
func (c *Client) ListRuntimes(ctx context.Context) ([]*desk.Runtime, error) {
	var out desk.RuntimeList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/runtimes", nil, &out); err != nil {
		return nil, err
	}
	return out.Runtimes, nil
}

// RemoveRuntime removes a runtime's registration (admin).
func (c *Client) RemoveRuntime(ctx context.Context, name string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/runtimes/"+esc(name), nil, nil)
}
