-- +goose Up
-- Completion webhooks and their durable outbox. A delivery row is
-- inserted in the transaction that settles an execution (or finishes a
-- routine run), so an acknowledged event always has its deliveries;
-- next_attempt_at is both the retry time and, while an attempt is under
-- way, the claiming node's lease. Times are Unix microseconds.
CREATE TABLE webhooks (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL DEFAULT '',
    routine_id   TEXT NOT NULL DEFAULT '',
    url          TEXT NOT NULL,
    events       TEXT NOT NULL,
    description  TEXT NOT NULL DEFAULT '',
    secret       TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    id              TEXT PRIMARY KEY,
    webhook_id      TEXT NOT NULL,
    workspace_id    TEXT NOT NULL,
    event_id        TEXT NOT NULL,
    event           TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    last_status     INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    finished_at     BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id);

CREATE TABLE webhook_attempts (
    delivery_id TEXT NOT NULL,
    n           INTEGER NOT NULL,
    at          BIGINT NOT NULL,
    status_code INTEGER NOT NULL DEFAULT 0,
    error       TEXT NOT NULL DEFAULT '',
    duration_us BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (delivery_id, n)
);

-- The inbox lists what is pending across sessions: by status, not by
-- session.
CREATE INDEX approvals_status ON approvals (status, created_at);
CREATE INDEX input_requests_status ON input_requests (status, created_at);
CREATE INDEX plans_status ON plans (status, created_at);

-- +goose Down
DROP INDEX plans_status;
DROP INDEX input_requests_status;
DROP INDEX approvals_status;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
