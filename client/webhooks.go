package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/desk-runtime/desk"
)

// Completion webhooks (admin token only).

// CreateWebhook creates a webhook; the answer's Secret is shown only now.
func (c *Client) CreateWebhook(ctx context.Context, in desk.WebhookCreate) (*desk.WebhookCreated, error) {
	var h desk.WebhookCreated
	if err := c.doJSON(ctx, http.MethodPost, "/v1/webhooks", in, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// ListWebhooks lists the webhooks.
func (c *Client) ListWebhooks(ctx context.Context) ([]*desk.Webhook, error) {
	var out desk.WebhookList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/webhooks", nil, &out); err != nil {
		return nil, err
	}
	return out.Webhooks, nil
}

// GetWebhook gets one webhook.
func (c *Client) GetWebhook(ctx context.Context, id string) (*desk.Webhook, error) {
	var h desk.Webhook
	if err := c.doJSON(ctx, http.MethodGet, "/v1/webhooks/"+esc(id), nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// DeleteWebhook deletes a webhook and its deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/v1/webhooks/"+esc(id), nil, nil)
}

// WebhookDeliveries lists a webhook's deliveries, newest first; limit 0
// means the server's default.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, limit int) ([]*desk.WebhookDelivery, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out desk.WebhookDeliveryList
	if err := c.doJSON(ctx, http.MethodGet, withQuery("/v1/webhooks/"+esc(id)+"/deliveries", q), nil, &out); err != nil {
		return nil, err
	}
	return out.Deliveries, nil
}

// WebhookDelivery gets one delivery with its attempt log.
func (c *Client) WebhookDelivery(ctx context.Context, hook, id string) (*desk.WebhookDelivery, error) {
	var d desk.WebhookDelivery
	if err := c.doJSON(ctx, http.MethodGet, "/v1/webhooks/"+esc(hook)+"/deliveries/"+esc(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// RedeliverWebhook sends a delivery again now, with the same id.
func (c *Client) RedeliverWebhook(ctx context.Context, hook, id string) (*desk.WebhookDelivery, error) {
	var d desk.WebhookDelivery
	if err := c.doJSON(ctx, http.MethodPost, "/v1/webhooks/"+esc(hook)+"/deliveries/"+esc(id)+"/redeliver", struct{}{}, &d); err != nil {
		return nil, err
	}
	return &d, nil
}
