package desk

import (
	"context"
	"encoding/json"
	"time"
)

// PrefixWebhook and PrefixWebhookDelivery are the id prefixes of
// completion webhooks and of their deliveries. A delivery's id is the
// Standard Webhooks "webhook-id": the same on every attempt, before and
// after a restart, so receivers deduplicate with it.
const (
	PrefixWebhook         = "whk"
	PrefixWebhookDelivery = "whd"
	PrefixWebhookEvent    = "evt"
)

// Webhook event types. execution.* are written with the turn's settle, in
// its transaction; routine.finished with the run's final status.
const (
	WebhookExecutionEnded       = "execution.ended"
	WebhookExecutionFailed      = "execution.failed"
	WebhookExecutionInterrupted = "execution.interrupted"
	WebhookRoutineFinished      = "routine.finished"
)

// WebhookEvents lists every event type a webhook may subscribe to.
var WebhookEvents = []string{WebhookExecutionEnded, WebhookExecutionFailed, WebhookExecutionInterrupted, WebhookRoutineFinished}

// Webhook delivery statuses. A pending delivery is due at NextAttemptAt
// (or leased by a node until then); delivered and failed are final.
const (
	WebhookDeliveryPending   = "pending"
	WebhookDeliveryDelivered = "delivered"
	WebhookDeliveryFailed    = "failed"
)

// Webhook is a URL that receives a signed POST when a turn (or a
// routine run) finishes.
type Webhook struct {
	ID string `json:"id"`
	// WorkspaceID limits it to one workspace; empty means every one.
	WorkspaceID string `json:"workspace_id,omitempty"`
	// RoutineID limits it to one routine's events: routine.finished of
	// that routine only.
	RoutineID   string    `json:"routine_id,omitempty"`
	URL         string    `json:"url"`
	Events      []string  `json:"events"`
	Description string    `json:"description,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
}

// WebhookCreate is the body of POST /v1/webhooks.
type WebhookCreate struct {
	// URL is where deliveries are POSTed: http or https, and (unless the
	// operator allows private addresses) not a loopback, private,
	// link-local or metadata address.
	URL string `json:"url"`
	// Events defaults to every execution.* event.
	Events      []string `json:"events,omitempty"`
	WorkspaceID string   `json:"workspace_id,omitempty"`
	RoutineID   string   `json:"routine_id,omitempty"`
	Description string   `json:"description,omitempty"`
}

// WebhookCreated is the answer to POST /v1/webhooks: the webhook and its
// signing secret, which is shown this once and never again.
type WebhookCreated struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookList lists webhooks.
type WebhookList struct {
	Webhooks []*Webhook `json:"webhooks"`
}

// WebhookDelivery is one event on its way to one webhook.
type WebhookDelivery struct {
	ID          string `json:"id"`
	WebhookID   string `json:"webhook_id"`
	WorkspaceID string `json:"workspace_id"`
	// EventID is the event's id, the same for every webhook it goes to.
	EventID string `json:"event_id"`
	Event   string `json:"event"`
	// Payload is the exact body POSTed on every attempt.
	Payload       json.RawMessage `json:"payload"`
	Status        string          `json:"status"`
	Attempts      int             `json:"attempts"`
	NextAttemptAt time.Time       `json:"next_attempt_at"`
	LastStatus    int             `json:"last_status,omitempty"`
	LastError     string          `json:"last_error,omitempty"`
	CreatedAt     time.Time       `json:"created_at"`
	FinishedAt    *time.Time      `json:"finished_at,omitempty"`
	// AttemptLog is filled by GET …/deliveries/{whd} only.
	AttemptLog []*WebhookAttempt `json:"attempt_log,omitempty"`
}

// WebhookAttempt is one POST of a delivery.
type WebhookAttempt struct {
	DeliveryID string    `json:"delivery_id"`
	N          int       `json:"n"`
	At         time.Time `json:"at"`
	StatusCode int       `json:"status_code,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMS int64     `json:"duration_ms"`
}

// WebhookDeliveryList lists a webhook's deliveries, newest first.
type WebhookDeliveryList struct {
	Deliveries []*WebhookDelivery `json:"deliveries"`
}

// WebhookEvent is the JSON body a webhook receives.
type WebhookEvent struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// WebhookExecutionData is the data of an execution.* event: ids and a
// summary, never message text or secrets.
type WebhookExecutionData struct {
	WorkspaceID string     `json:"workspace_id"`
	SessionID   string     `json:"session_id"`
	SurfaceID   string     `json:"surface_id"`
	ExecutionID string     `json:"execution_id"`
	QueueItemID string     `json:"queue_item_id"`
	Phase       string     `json:"phase"`
	Reason      string     `json:"reason,omitempty"`
	StartedAt   *time.Time `json:"started_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// WebhookRoutineData is the data of a routine.finished event.
type WebhookRoutineData struct {
	WorkspaceID string `json:"workspace_id"`
	RoutineID   string `json:"routine_id"`
	RunID       string `json:"run_id"`
	Status      string `json:"status"`
	SessionID   string `json:"session_id,omitempty"`
	ExecutionID string `json:"execution_id,omitempty"`
	Error       string `json:"error,omitempty"`
}

// WebhookService owns webhooks and delivers their events. Only the admin
// configures webhooks: their URLs reach the network from desk's host.
type WebhookService interface {
	Create(ctx context.Context, in WebhookCreate) (*WebhookCreated, error)
	Get(ctx context.Context, id string) (*Webhook, error)
	List(ctx context.Context) ([]*Webhook, error)
	Delete(ctx context.Context, id string) error
	Deliveries(ctx context.Context, webhookID string, limit int) ([]*WebhookDelivery, error)
	// Delivery is one delivery with its attempt log.
	Delivery(ctx context.Context, webhookID, deliveryID string) (*WebhookDelivery, error)
	// Redeliver makes a delivery pending and due now, whatever its status;
	// it keeps its id, so the receiver can tell it is the same event.
	Redeliver(ctx context.Context, webhookID, deliveryID string) (*WebhookDelivery, error)
}

// WebhookStore keeps webhooks, their secrets and their deliveries. The
// execution store writes a delivery for every matching webhook in the
// transaction that settles an execution, and the routine store in the
// one that finishes a run, so an event is never acknowledged without its
// delivery.
type WebhookStore interface {
	CreateWebhook(ctx context.Context, w *Webhook, secret string) error
	// GetWebhook fails with ENOTFOUND for an unknown id.
	GetWebhook(ctx context.Context, id string) (*Webhook, error)
	ListWebhooks(ctx context.Context) ([]*Webhook, error)
	// DeleteWebhook removes the webhook, its deliveries and their attempts.
	DeleteWebhook(ctx context.Context, id string) error
	WebhookSecret(ctx context.Context, id string) (string, error)
	// DueWebhookDeliveries lists pending deliveries due at or before now,
	// oldest due first, at most limit.
	DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]*WebhookDelivery, error)
	// ClaimWebhookDelivery leases a pending delivery until leaseUntil if
	// its next attempt time is still expectNext: of several nodes exactly
	// one gets true. A node that dies mid-attempt leaves the lease to
	// expire, and the delivery is tried again (at least once).
	ClaimWebhookDelivery(ctx context.Context, id string, expectNext, leaseUntil time.Time) (bool, error)
	// RecordWebhookAttempt appends a and writes d's status, attempts,
	// next attempt time, last status and error and finish time, in one
	// transaction.
	RecordWebhookAttempt(ctx context.Context, d *WebhookDelivery, a *WebhookAttempt) error
	GetWebhookDelivery(ctx context.Context, id string) (*WebhookDelivery, error)
	ListWebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]*WebhookDelivery, error)
	ListWebhookAttempts(ctx context.Context, deliveryID string) ([]*WebhookAttempt, error)
	// RedeliverWebhookDelivery makes a delivery pending and due at now.
	RedeliverWebhookDelivery(ctx context.Context, id string, now time.Time) error
}
