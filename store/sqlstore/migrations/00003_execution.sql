-- +goose Up
-- The one execution model: surfaces with durable queues, executions with
-- phases, admission blocks, the owners (desk processes) that run them, and
-- the event log that live streams resume from.

ALTER TABLE sessions ADD COLUMN surface_id TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN reconstructed_from TEXT NOT NULL DEFAULT '';

CREATE TABLE surfaces (
    id                   TEXT PRIMARY KEY,
    session_id           TEXT NOT NULL REFERENCES sessions (id),
    workspace_id         TEXT NOT NULL,
    kind                 TEXT NOT NULL,
    title                TEXT NOT NULL,
    attached_until       BIGINT NOT NULL DEFAULT 0,
    last_activity        BIGINT NOT NULL DEFAULT 0,
    held                 BOOLEAN NOT NULL DEFAULT FALSE,
    consecutive_failures BIGINT NOT NULL DEFAULT 0,
    created_at           BIGINT NOT NULL
);
CREATE INDEX surfaces_session ON surfaces (session_id);

-- Sessions created before this migration get their orchestrator surface,
-- with an id derived from the session's.
INSERT INTO surfaces (id, session_id, workspace_id, kind, title, created_at)
    SELECT 'srf_' || substr(id, 5), id, workspace_id, 'orchestrator', '', created_at FROM sessions;
UPDATE sessions SET surface_id = 'srf_' || substr(id, 5);

CREATE TABLE queue_items (
    id               TEXT PRIMARY KEY,
    surface_id       TEXT NOT NULL REFERENCES surfaces (id),
    session_id       TEXT NOT NULL,
    workspace_id     TEXT NOT NULL,
    kind             TEXT NOT NULL,
    status           TEXT NOT NULL,
    priority         BIGINT NOT NULL,
    position         BIGINT NOT NULL,
    origin           TEXT NOT NULL,
    text             TEXT NOT NULL,
    idempotency_key  TEXT NOT NULL DEFAULT '',
    channel          TEXT NOT NULL,
    conversation_id  TEXT NOT NULL,
    approved         BOOLEAN NOT NULL DEFAULT FALSE,
    claimed_by       TEXT NOT NULL DEFAULT '',
    lease_expires_at BIGINT NOT NULL DEFAULT 0,
    lease_version    BIGINT NOT NULL DEFAULT 0,
    attempts         BIGINT NOT NULL DEFAULT 0,
    execution_id     TEXT NOT NULL DEFAULT '',
    error            TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
-- A repeated idempotency key within a session returns the first row.
CREATE UNIQUE INDEX queue_items_idempotency ON queue_items (session_id, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX queue_items_dispatch ON queue_items (surface_id, status, priority, position);
CREATE INDEX queue_items_session ON queue_items (session_id, created_at);
CREATE INDEX queue_items_queued ON queue_items (status, surface_id);

CREATE TABLE executions (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL,
    surface_id    TEXT NOT NULL REFERENCES surfaces (id),
    workspace_id  TEXT NOT NULL,
    queue_item_id TEXT NOT NULL,
    phase         TEXT NOT NULL,
    origin        TEXT NOT NULL,
    owner         TEXT NOT NULL,
    requested_at  BIGINT NOT NULL,
    started_at    BIGINT NOT NULL DEFAULT 0,
    finished_at   BIGINT NOT NULL DEFAULT 0,
    reason        TEXT NOT NULL DEFAULT '',
    interruption  TEXT NOT NULL DEFAULT '',
    stop_error    TEXT NOT NULL DEFAULT ''
);
-- The single-writer rule, enforced by the database: at most one execution
-- of a surface is starting, running or stopping, whichever process admits it.
CREATE UNIQUE INDEX executions_one_active ON executions (surface_id) WHERE phase IN ('starting', 'running', 'stopping');
CREATE INDEX executions_session ON executions (session_id, requested_at);
CREATE INDEX executions_phase ON executions (phase);

CREATE TABLE blocks (
    id          TEXT PRIMARY KEY,
    surface_id  TEXT NOT NULL REFERENCES surfaces (id),
    session_id  TEXT NOT NULL,
    kind        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL DEFAULT 0,
    released_at BIGINT NOT NULL DEFAULT 0,
    released_by TEXT NOT NULL DEFAULT ''
);
CREATE INDEX blocks_surface ON blocks (surface_id, released_at);
CREATE INDEX blocks_session ON blocks (session_id);

-- Owners are desk processes. An execution or claim whose owner is gone is
-- recovered by whoever notices first.
CREATE TABLE owners (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    stopped_at   BIGINT NOT NULL DEFAULT 0
);

-- The event log. seq comes from a counter row updated in the same
-- transaction as the change, so seq order is commit order and a reader
-- resuming after N never later finds an event below N.
CREATE TABLE events (
    seq          BIGINT PRIMARY KEY,
    at           BIGINT NOT NULL,
    type         TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    surface_id   TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    actor_id     TEXT NOT NULL,
    data         TEXT NOT NULL
);
CREATE INDEX events_session ON events (session_id, seq);
CREATE INDEX events_execution ON events (execution_id, seq);
CREATE INDEX events_workspace ON events (workspace_id, seq);
CREATE INDEX events_at ON events (at);

CREATE TABLE event_counter (
    id       BIGINT PRIMARY KEY,
    last_seq BIGINT NOT NULL
);
INSERT INTO event_counter (id, last_seq) VALUES (1, 0);

-- +goose Down
DROP TABLE event_counter;
DROP TABLE events;
DROP TABLE owners;
DROP TABLE blocks;
DROP TABLE executions;
DROP TABLE queue_items;
DROP TABLE surfaces;
ALTER TABLE sessions DROP COLUMN reconstructed_from;
ALTER TABLE sessions DROP COLUMN surface_id;
