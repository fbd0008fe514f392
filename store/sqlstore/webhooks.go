package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/desk-runtime/desk"
)

const webhookCols = `id, workspace_id, routine_id, url, events, description, created_at`

func scanWebhook(sc interface{ Scan(...any) error }) (*desk.Webhook, error) {
	w := &desk.Webhook{}
	var events string
	var created int64
	if err := sc.Scan(&w.ID, &w.WorkspaceID, &w.RoutineID, &w.URL, &events, &w.Description, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(events), &w.Events); err != nil {
		return nil, err
	}
	w.CreatedAt = fromMicros(created)
	return w, nil
}

func (s *DB) CreateWebhook(ctx context.Context, w *desk.Webhook, secret string) error {
	_, err := s.exec(ctx, s.db, `INSERT INTO webhooks (`+webhookCols+`, secret) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.WorkspaceID, w.RoutineID, w.URL, encodeJSON(w.Events), w.Description, micros(w.CreatedAt), secret)
	return s.conflict(err, "webhook exists")
}

func (s *DB) GetWebhook(ctx context.Context, id string) (*desk.Webhook, error) {
	w, err := scanWebhook(s.queryRow(ctx, s.db, `SELECT `+webhookCols+` FROM webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, desk.Errorf(desk.ENOTFOUND, "webhook %s not found", id)
	}
	return w, err
}

func (s *DB) ListWebhooks(ctx context.Context) ([]*desk.Webhook, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+webhookCols+` FROM webhooks ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

func (s *DB) DeleteWebhook(ctx context.Context, id string) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := s.exec(ctx, tx, `DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE webhook_id = ?)`, id); err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx, `DELETE FROM webhook_deliveries WHERE webhook_id = ?`, id); err != nil {
			return err
		}
		res, err := s.exec(ctx, tx, `DELETE FROM webhooks WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = desk.Errorf(desk.ENOTFOUND, "webhook %s not found", id)
			}
			return err
		}
		return nil
	})
}

func (s *DB) WebhookSecret(ctx context.Context, id string) (string, error) {
	var secret string
	err := s.queryRow(ctx, s.db, `SELECT secret FROM webhooks WHERE id = ?`, id).Scan(&secret)
	if errors.Is(err, sql.ErrNoRows) {
		return "", desk.Errorf(desk.ENOTFOUND, "webhook %s not found", id)
	}
	return secret, err
}

// enqueueWebhooks writes, in tx, one pending delivery of the event for
// every webhook that wants it: the event's workspace (or every
// workspace), its type, and for a routine's event the routine (or none).
// It runs inside the transaction that makes the event true, which is
// what makes the outbox lose nothing.
func (s *DB) enqueueWebhooks(ctx context.Context, tx *sql.Tx, workspaceID, routineID, event string, now time.Time, data any) error {
	rows, err := s.query(ctx, tx, `SELECT id, routine_id, events FROM webhooks WHERE workspace_id = '' OR workspace_id = ?`, workspaceID)
	if err != nil {
		return err
	}
	var targets []string
	for rows.Next() {
		var id, rtn, evs string
		if err := rows.Scan(&id, &rtn, &evs); err != nil {
			rows.Close()
			return err
		}
		var events []string
		if err := json.Unmarshal([]byte(evs), &events); err != nil {
			rows.Close()
			return err
		}
		if slices.Contains(events, event) && (rtn == "" || rtn == routineID) {
			targets = append(targets, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(targets) == 0 {
		return err
	}
	ev := desk.WebhookEvent{ID: desk.NewID(desk.PrefixWebhookEvent), Type: event, Timestamp: now, Data: data}
	payload := encodeJSON(ev)
	for _, id := range targets {
		if _, err := s.exec(ctx, tx, `INSERT INTO webhook_deliveries (id, webhook_id, workspace_id, event_id, event, payload, status,
			attempts, next_attempt_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?)`,
			desk.NewID(desk.PrefixWebhookDelivery), id, workspaceID, ev.ID, event, payload, desk.WebhookDeliveryPending,
			micros(now), micros(now)); err != nil {
			return err
		}
	}
	return nil
}

// executionWebhookData is the summary an execution.* event carries.
func executionWebhookData(x *desk.Execution) desk.WebhookExecutionData {
	return desk.WebhookExecutionData{WorkspaceID: x.WorkspaceID, SessionID: x.SessionID, SurfaceID: x.SurfaceID,
		ExecutionID: x.ID, QueueItemID: x.QueueItemID, Phase: x.Phase, Reason: x.Reason, StartedAt: x.StartedAt, FinishedAt: x.FinishedAt}
}

const deliveryCols = `id, webhook_id, workspace_id, event_id, event, payload, status, attempts, next_attempt_at,
	last_status, last_error, created_at, finished_at`

func scanDelivery(sc interface{ Scan(...any) error }) (*desk.WebhookDelivery, error) {
	d := &desk.WebhookDelivery{}
	var payload string
	var next, created, finished int64
	if err := sc.Scan(&d.ID, &d.WebhookID, &d.WorkspaceID, &d.EventID, &d.Event, &payload, &d.Status, &d.Attempts, &next,
		&d.LastStatus, &d.LastError, &created, &finished); err != nil {
		return nil, err
	}
	d.Payload = json.RawMessage(payload)
	d.NextAttemptAt, d.CreatedAt, d.FinishedAt = fromMicros(next), fromMicros(created), optPtr(finished)
	return d, nil
}

func (s *DB) listDeliveries(ctx context.Context, q string, args ...any) ([]*desk.WebhookDelivery, error) {
	rows, err := s.query(ctx, s.db, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE `+q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.WebhookDelivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (s *DB) DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]*desk.WebhookDelivery, error) {
	return s.listDeliveries(ctx, `status = ? AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`,
		desk.WebhookDeliveryPending, micros(now), limit)
}

func (s *DB) ClaimWebhookDelivery(ctx context.Context, id string, expectNext, leaseUntil time.Time) (bool, error) {
	res, err := s.exec(ctx, s.db, `UPDATE webhook_deliveries SET next_attempt_at = ? WHERE id = ? AND status = ? AND next_attempt_at = ?`,
		micros(leaseUntil), id, desk.WebhookDeliveryPending, micros(expectNext))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

func (s *DB) RecordWebhookAttempt(ctx context.Context, d *desk.WebhookDelivery, a *desk.WebhookAttempt) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		fin := int64(0)
		if d.FinishedAt != nil {
			fin = micros(*d.FinishedAt)
		}
		res, err := s.exec(ctx, tx, `UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?, last_status = ?,
			last_error = ?, finished_at = ? WHERE id = ?`,
			d.Status, d.Attempts, micros(d.NextAttemptAt), d.LastStatus, d.LastError, fin, d.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				// Deleted with its webhook meanwhile: no orphan attempt.
				err = desk.Errorf(desk.ENOTFOUND, "webhook delivery %s not found", d.ID)
			}
			return err
		}
		// The attempt's number is its key: a node whose lease ran out and
		// that finishes after another node recorded the same attempt
		// changes nothing (the transaction rolls back).
		if _, err := s.exec(ctx, tx, `INSERT INTO webhook_attempts (delivery_id, n, at, status_code, error, duration_us) VALUES (?, ?, ?, ?, ?, ?)`,
			a.DeliveryID, a.N, micros(a.At), a.StatusCode, a.Error, a.DurationMS*1000); err != nil {
			return s.conflict(err, "attempt already recorded")
		}
		return nil
	})
}

func (s *DB) GetWebhookDelivery(ctx context.Context, id string) (*desk.WebhookDelivery, error) {
	d, err := scanDelivery(s.queryRow(ctx, s.db, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, desk.Errorf(desk.ENOTFOUND, "webhook delivery %s not found", id)
	}
	return d, err
}

func (s *DB) ListWebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]*desk.WebhookDelivery, error) {
	return s.listDeliveries(ctx, `webhook_id = ? ORDER BY id DESC LIMIT ?`, webhookID, limit)
}

func (s *DB) ListWebhookAttempts(ctx context.Context, deliveryID string) ([]*desk.WebhookAttempt, error) {
	rows, err := s.query(ctx, s.db, `SELECT delivery_id, n, at, status_code, error, duration_us FROM webhook_attempts
		WHERE delivery_id = ? ORDER BY n`, deliveryID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*desk.WebhookAttempt
	for rows.Next() {
		a := &desk.WebhookAttempt{}
		var at, dur int64
		if err := rows.Scan(&a.DeliveryID, &a.N, &at, &a.StatusCode, &a.Error, &dur); err != nil {
			return nil, err
		}
		a.At, a.DurationMS = fromMicros(at), dur/1000
		out = append(out, a)
	}
	return out, rows.Err()
}

func (s *DB) RedeliverWebhookDelivery(ctx context.Context, id string, now time.Time) error {
	res, err := s.exec(ctx, s.db, `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, finished_at = 0 WHERE id = ?`,
		desk.WebhookDeliveryPending, micros(now), id)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil {
			err = desk.Errorf(desk.ENOTFOUND, "webhook delivery %s not found", id)
		}
		return err
	}
	return nil
}
