-- +goose Up
-- Routines: work a workspace starts on a schedule. next_run_at is durable
-- so a restart neither loses nor repeats a tick, and nodes claim a tick
-- by moving it with a conditional UPDATE. Times are Unix microseconds.
CREATE TABLE routines (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    name           TEXT NOT NULL,
    schedule       TEXT NOT NULL,
    time_zone      TEXT NOT NULL DEFAULT '',
    session_id     TEXT NOT NULL DEFAULT '',
    title_template TEXT NOT NULL DEFAULT '',
    model          TEXT NOT NULL DEFAULT '',
    runtime        TEXT NOT NULL DEFAULT '',
    prompt         TEXT NOT NULL,
    overlap        TEXT NOT NULL,
    enabled        BOOLEAN NOT NULL DEFAULT TRUE,
    actor          TEXT NOT NULL,
    next_run_at    BIGINT NOT NULL,
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL
);
CREATE INDEX routines_workspace ON routines (workspace_id, id);
CREATE INDEX routines_due ON routines (enabled, next_run_at);

CREATE TABLE routine_runs (
    id            TEXT PRIMARY KEY,
    routine_id    TEXT NOT NULL,
    workspace_id  TEXT NOT NULL,
    trigger_kind  TEXT NOT NULL,
    scheduled_for BIGINT NOT NULL,
    status        TEXT NOT NULL,
    session_id    TEXT NOT NULL DEFAULT '',
    queue_item_id TEXT NOT NULL DEFAULT '',
    execution_id  TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    started_at    BIGINT NOT NULL,
    finished_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX routine_runs_routine ON routine_runs (routine_id, id);
CREATE INDEX routine_runs_status ON routine_runs (status);

-- +goose Down
DROP TABLE routine_runs;
DROP TABLE routines;
