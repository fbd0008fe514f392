-- +goose Up
-- One portable schema for SQLite and Postgres: TEXT, BIGINT and BOOLEAN only.
-- Times are Unix microseconds in UTC. JSON documents (origins, revisions) are TEXT.

CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    state      TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE actors (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    name         TEXT NOT NULL,
    kind         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE actor_tokens (
    hash       TEXT PRIMARY KEY,
    actor_id   TEXT NOT NULL REFERENCES actors (id),
    created_at BIGINT NOT NULL
);

CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    signature    TEXT NOT NULL UNIQUE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    actor_id     TEXT NOT NULL REFERENCES actors (id),
    title        TEXT NOT NULL,
    pinned       BOOLEAN NOT NULL DEFAULT FALSE,
    archived     BOOLEAN NOT NULL DEFAULT FALSE,
    unread       BOOLEAN NOT NULL DEFAULT FALSE,
    lifecycle    TEXT NOT NULL,
    origin       TEXT NOT NULL,
    deleting     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX sessions_workspace ON sessions (workspace_id, actor_id);

CREATE TABLE artifacts (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    workspace_id TEXT NOT NULL,
    actor_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    rel_path     TEXT NOT NULL,
    kind         TEXT NOT NULL,
    media_type   TEXT NOT NULL,
    size         BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    immutable    BOOLEAN NOT NULL,
    revision     BIGINT NOT NULL,
    missing      BOOLEAN NOT NULL DEFAULT FALSE,
    origin       TEXT NOT NULL,
    prev         TEXT NOT NULL DEFAULT '',
    pending      TEXT NOT NULL DEFAULT '',
    deleting     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    UNIQUE (session_id, rel_path)
);

CREATE TABLE selection_groups (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    name         TEXT NOT NULL,
    origin       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX selection_groups_workspace ON selection_groups (workspace_id);

CREATE TABLE items (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    kind         TEXT NOT NULL,
    name         TEXT NOT NULL,
    url          TEXT NOT NULL,
    title        TEXT NOT NULL,
    media_type   TEXT NOT NULL,
    size         BIGINT NOT NULL,
    sha256       TEXT NOT NULL,
    origin       TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE INDEX items_workspace ON items (workspace_id);

-- Membership is separate from items: an item removed from its group lives on
-- while something else (another group, an execution lease) still holds it.
CREATE TABLE group_items (
    group_id TEXT NOT NULL REFERENCES selection_groups (id),
    item_id  TEXT NOT NULL REFERENCES items (id),
    position BIGINT NOT NULL,
    PRIMARY KEY (group_id, item_id)
);
CREATE INDEX group_items_item ON group_items (item_id);

CREATE TABLE session_bindings (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    group_id   TEXT NOT NULL REFERENCES selection_groups (id),
    position   BIGINT NOT NULL,
    PRIMARY KEY (session_id, group_id)
);
CREATE INDEX session_bindings_group ON session_bindings (group_id);

-- +goose Down
DROP TABLE session_bindings;
DROP TABLE group_items;
DROP TABLE items;
DROP TABLE selection_groups;
DROP TABLE artifacts;
DROP TABLE sessions;
DROP TABLE actor_tokens;
DROP TABLE actors;
DROP TABLE workspaces;
