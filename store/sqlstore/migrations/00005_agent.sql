-- +goose Up
-- The agent: transcripts, command records, approvals, input requests, plan
-- cards, web-item leases, and the per-session and per-workspace settings.

ALTER TABLE sessions ADD COLUMN model TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN script TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN script_cursor BIGINT NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN title_source TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE sessions ADD COLUMN focus TEXT NOT NULL DEFAULT '';

ALTER TABLE workspaces ADD COLUMN approval_mode TEXT NOT NULL DEFAULT 'user';
ALTER TABLE workspaces ADD COLUMN network BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE workspaces ADD COLUMN blocking_input BOOLEAN NOT NULL DEFAULT FALSE;

CREATE TABLE messages (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    surface_id   TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    role         TEXT NOT NULL,
    text         TEXT NOT NULL,
    tool_calls   TEXT NOT NULL DEFAULT '',
    tool_call_id TEXT NOT NULL DEFAULT '',
    tool_name    TEXT NOT NULL DEFAULT '',
    is_error     BOOLEAN NOT NULL DEFAULT FALSE,
    meta         TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    UNIQUE (surface_id, seq)
);
CREATE INDEX messages_session ON messages (session_id);

CREATE TABLE commands (
    id           TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    surface_id   TEXT NOT NULL,
    call_id      TEXT NOT NULL,
    tool         TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    status       TEXT NOT NULL,
    started_at   BIGINT NOT NULL DEFAULT 0,
    finished_at  BIGINT NOT NULL DEFAULT 0,
    output       TEXT NOT NULL DEFAULT '',
    facts        TEXT NOT NULL DEFAULT '',
    artifacts    TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);
CREATE INDEX commands_execution ON commands (execution_id, created_at);
CREATE INDEX commands_session ON commands (session_id);

CREATE TABLE approvals (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    tool         TEXT NOT NULL,
    summary      TEXT NOT NULL,
    status       TEXT NOT NULL,
    decided_by   TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    decided_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX approvals_session ON approvals (session_id, status);

CREATE TABLE input_requests (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    surface_id   TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    questions    TEXT NOT NULL,
    blocking     BOOLEAN NOT NULL,
    status       TEXT NOT NULL,
    answers      TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    answered_at  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX input_requests_session ON input_requests (session_id, created_at);

CREATE TABLE plans (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    card         TEXT NOT NULL,
    status       TEXT NOT NULL,
    notes        TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    decided_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX plans_session ON plans (session_id);

-- An execution that inspected an item holds it until it settles (S-N).
CREATE TABLE item_leases (
    item_id      TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    PRIMARY KEY (item_id, execution_id)
);
CREATE INDEX item_leases_execution ON item_leases (execution_id);

-- +goose Down
DROP TABLE item_leases;
DROP TABLE plans;
DROP TABLE input_requests;
DROP TABLE approvals;
DROP TABLE commands;
DROP TABLE messages;
ALTER TABLE workspaces DROP COLUMN blocking_input;
ALTER TABLE workspaces DROP COLUMN network;
ALTER TABLE workspaces DROP COLUMN approval_mode;
ALTER TABLE sessions DROP COLUMN focus;
ALTER TABLE sessions DROP COLUMN title_source;
ALTER TABLE sessions DROP COLUMN script_cursor;
ALTER TABLE sessions DROP COLUMN script;
ALTER TABLE sessions DROP COLUMN model;
