package client

import (
	"context"
	"net/url"

	"github.com/desk-runtime/desk"
)

// Threads lists a session's handler threads in start order; group ""
// lists all of them.
func (c *Client) Threads(ctx context.Context, ses, group string) ([]*desk.Thread, error) {
	var out desk.ThreadList
	p := "/v1/sessions/" + esc(ses) + "/threads"
	if group != "" {
		p += "?thread_group_id=" + url.QueryEscape(group)
	}
	if err := c.doJSON(ctx, "GET", p, nil, &out); err != nil {
		return nil, err
	}
	return out.Threads, nil
}

// Thread returns one handler thread.
func (c *Client) Thread(ctx context.Context, thr string) (*desk.Thread, error) {
	var out desk.Thread
	if err := c.doJSON(ctx, "GET", "/v1/threads/"+esc(thr), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Episodes lists a thread's episodes in the order recorded.
func (c *Client) Episodes(ctx context.Context, thr string) ([]*desk.Episode, error) {
	var out desk.EpisodeList
	if err := c.doJSON(ctx, "GET", "/v1/threads/"+esc(thr)+"/episodes", nil, &out); err != nil {
		return nil, err
	}
	return out.Episodes, nil
}

// ThreadGroups lists a session's thread groups.
func (c *Client) ThreadGroups(ctx context.Context, ses string) ([]*desk.ThreadGroup, error) {
	var out desk.ThreadGroupList
	if err := c.doJSON(ctx, "GET", "/v1/sessions/"+esc(ses)+"/thread-groups", nil, &out); err != nil {
		return nil, err
	}
	return out.ThreadGroups, nil
}
