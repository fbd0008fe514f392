package client

import (
	"context"
	"net/http"

	"github.com/desk-runtime/desk"
)

// ProfileCreate is the input of CreateProfile and PutProfile.
type ProfileCreate = desk.ProfileCreate

// ListProfiles lists a workspace's agent profiles, desk's defaults
// included.
func (c *Client) ListProfiles(ctx context.Context, ws string) ([]*desk.Profile, error) {
	var out desk.ProfileList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/profiles", nil, &out); err != nil {
		return nil, err
	}
	return out.Profiles, nil
}

// GetProfile reads one profile.
func (c *Client) GetProfile(ctx context.Context, ws, name string) (*desk.Profile, error) {
	var p desk.Profile
	if err := c.doJSON(ctx, http.MethodGet, "/v1/workspaces/"+esc(ws)+"/profiles/"+esc(name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// CreateProfile creates a profile.
func (c *Client) CreateProfile(ctx context.Context, ws string, in ProfileCreate) (*desk.Profile, error) {
	var p desk.Profile
	if err := c.doJSON(ctx, http.MethodPost, "/v1/workspaces/"+esc(ws)+"/profiles", in, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// PutProfile replaces a profile (or stores one replacing a default).
func (c *Client) PutProfile(ctx context.Context, ws, name string, in ProfileCreate) (*desk.Profile, error) {
	var p desk.Profile
	if err := c.doJSON(ctx, http.MethodPut, "/v1/workspaces/"+esc(ws)+"/profiles/"+esc(name), in, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeleteProfile removes a profile.
func (c *Client) DeleteProfile(ctx context.Context, ws, name string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/workspaces/"+esc(ws)+"/profiles/"+esc(name), nil, nil)
}
