-- +goose Up
-- Handler threads (svvy): a thread is a handler surface with a delegated
-- objective, in a durable thread group; episodes are what a handler
-- reports to its orchestrator with thread_report.
CREATE TABLE thread_groups (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    workspace_id TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX thread_groups_session ON thread_groups (session_id);

CREATE TABLE threads (
    id            TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL REFERENCES sessions (id),
    workspace_id  TEXT NOT NULL,
    surface_id    TEXT NOT NULL UNIQUE REFERENCES surfaces (id),
    group_id      TEXT NOT NULL REFERENCES thread_groups (id),
    title         TEXT NOT NULL,
    objective     TEXT NOT NULL,
    state         TEXT NOT NULL,
    history       TEXT NOT NULL,
    worktree      TEXT NOT NULL DEFAULT '',
    command_id    TEXT NOT NULL DEFAULT '',
    script_cursor BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX threads_session ON threads (session_id, id);
CREATE INDEX threads_group ON threads (group_id, id);
CREATE INDEX threads_command ON threads (command_id);

CREATE TABLE episodes (
    id              TEXT PRIMARY KEY,
    thread_id       TEXT NOT NULL REFERENCES threads (id),
    session_id      TEXT NOT NULL REFERENCES sessions (id),
    workspace_id    TEXT NOT NULL,
    kind            TEXT NOT NULL,
    outcome         TEXT NOT NULL DEFAULT '',
    title           TEXT NOT NULL,
    body            TEXT NOT NULL,
    origin          TEXT NOT NULL,
    command_id      TEXT NOT NULL DEFAULT '',
    execution_id    TEXT NOT NULL DEFAULT '',
    artifacts       TEXT NOT NULL DEFAULT '[]',
    notification_id TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL
);
CREATE INDEX episodes_thread ON episodes (thread_id, id);
CREATE INDEX episodes_command ON episodes (command_id);

-- +goose Down
DROP TABLE episodes;
DROP TABLE threads;
DROP TABLE thread_groups;
