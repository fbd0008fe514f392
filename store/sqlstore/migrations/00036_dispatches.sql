-- +goose Up
-- Dispatches: one ask of a caller to a target, with who owns the reply
-- (OpenAlice's dispatch snapshot). The snapshot columns never change; the
-- status, the target's queue row and execution, and the reply are filled
-- in as the dispatch goes. Times are Unix microseconds.
CREATE TABLE dispatches (
    id                  TEXT PRIMARY KEY,
    created_at          BIGINT NOT NULL,
    caller              TEXT NOT NULL,
    caller_workspace_id TEXT NOT NULL DEFAULT '',
    caller_session_id   TEXT NOT NULL DEFAULT '',
    target              TEXT NOT NULL,
    target_session_id   TEXT NOT NULL,
    target_workspace_id TEXT NOT NULL,
    subject             TEXT NOT NULL DEFAULT '',
    text                TEXT NOT NULL,
    reply               TEXT NOT NULL,
    reply_surface_id    TEXT NOT NULL DEFAULT '',
    status              TEXT NOT NULL,
    queue_item_id       TEXT NOT NULL DEFAULT '',
    execution_id        TEXT NOT NULL DEFAULT '',
    reply_item_id       TEXT NOT NULL DEFAULT '',
    reply_text          TEXT NOT NULL DEFAULT '',
    error               TEXT NOT NULL DEFAULT '',
    settled_at          BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX dispatches_open ON dispatches (status, created_at);
CREATE INDEX dispatches_caller_session ON dispatches (caller_session_id, created_at);
CREATE INDEX dispatches_target_session ON dispatches (target_session_id, created_at);

-- +goose Down
DROP TABLE dispatches;
