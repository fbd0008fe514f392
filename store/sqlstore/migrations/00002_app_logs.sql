-- +goose Up
-- The app log: structured, already redacted operational entries.
-- Portable like 00001: TEXT, BIGINT and BOOLEAN only; times are Unix
-- microseconds in UTC; fields is a JSON object as TEXT.

CREATE TABLE app_logs (
    seq          BIGINT PRIMARY KEY,
    at           BIGINT NOT NULL,
    level        TEXT NOT NULL,
    source       TEXT NOT NULL,
    message      TEXT NOT NULL,
    fields       TEXT NOT NULL,
    workspace_id TEXT NOT NULL DEFAULT '',
    session_id   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX app_logs_level ON app_logs (level, seq);
CREATE INDEX app_logs_source ON app_logs (source, seq);
CREATE INDEX app_logs_workspace ON app_logs (workspace_id, seq);
CREATE INDEX app_logs_session ON app_logs (session_id, seq);
CREATE INDEX app_logs_at ON app_logs (at);

-- The seq high-water mark, one row. Appends reserve seqs by updating it in
-- their own transaction (the row lock orders writers, also across processes
-- sharing one Postgres), and pruning never touches it, so a seq is never
-- handed out twice — unlike autoincrement, whose reuse rules differ between
-- SQLite and Postgres.
CREATE TABLE app_log_counter (
    id       BIGINT PRIMARY KEY,
    last_seq BIGINT NOT NULL
);
INSERT INTO app_log_counter (id, last_seq) VALUES (1, 0);

-- Per-viewer seen marks: entries with seq <= seq are read by that viewer.
CREATE TABLE app_log_seen (
    viewer     TEXT PRIMARY KEY,
    seq        BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE app_log_seen;
DROP TABLE app_log_counter;
DROP TABLE app_logs;
