package client

import (
	"context"
	"net/http"

	"github.com/desk-runtime/desk"
)

// Inbox lists everything waiting on the token's caller, oldest first.
func (c *Client) Inbox(ctx context.Context) (*desk.Inbox, error) {
	var in desk.Inbox
	if err := c.doJSON(ctx, http.MethodGet, "/v1/inbox", nil, &in); err != nil {
		return nil, err
	}
	return &in, nil
}
