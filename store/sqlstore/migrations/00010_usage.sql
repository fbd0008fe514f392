-- +goose Up
-- Model usage and token budgets. Portable like 00001: TEXT, BIGINT and
-- BOOLEAN only; times are Unix microseconds in UTC.

-- One row per model call the provider answered, with the counts it
-- reported. Rows are accounting, like execution records: a purge keeps
-- them, and they travel with a workspace's export.
CREATE TABLE model_usage (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    session_id    TEXT NOT NULL,
    surface_id    TEXT NOT NULL,
    execution_id  TEXT NOT NULL DEFAULT '',
    actor_id      TEXT NOT NULL,
    purpose       TEXT NOT NULL,
    model         TEXT NOT NULL,
    input_tokens  BIGINT NOT NULL,
    output_tokens BIGINT NOT NULL,
    cached_tokens BIGINT NOT NULL,
    created_at    BIGINT NOT NULL
);
-- A claim in a workspace with a budget sums this index alone.
CREATE INDEX model_usage_workspace ON model_usage (workspace_id, input_tokens, output_tokens);
CREATE INDEX model_usage_session ON model_usage (session_id);
CREATE INDEX model_usage_execution ON model_usage (execution_id);
CREATE INDEX model_usage_surface ON model_usage (surface_id, purpose, created_at);

-- The workspace's token budget (0: none).
ALTER TABLE workspaces ADD COLUMN token_budget BIGINT NOT NULL DEFAULT 0;

-- A budget block names the budget and the usage it found.
ALTER TABLE blocks ADD COLUMN budget BIGINT NOT NULL DEFAULT 0;
ALTER TABLE blocks ADD COLUMN used BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE blocks DROP COLUMN used;
ALTER TABLE blocks DROP COLUMN budget;
ALTER TABLE workspaces DROP COLUMN token_budget;
DROP TABLE model_usage;
