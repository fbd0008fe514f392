-- +goose Up
-- The web UI's browser sessions: only the SHA-256 of the id a browser's
-- cookie holds, and of the token that signed it in. actor is an actor id
-- or 'admin'. Times are Unix microseconds in UTC.
CREATE TABLE browser_sessions (
    id_hash      TEXT PRIMARY KEY,
    token_hash   TEXT NOT NULL,
    actor        TEXT NOT NULL,
    workspace_id TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    last_seen    BIGINT NOT NULL
);
CREATE INDEX browser_sessions_actor ON browser_sessions (actor);
CREATE INDEX browser_sessions_last_seen ON browser_sessions (last_seen);
CREATE INDEX browser_sessions_created ON browser_sessions (created_at);

-- +goose Down
DROP TABLE browser_sessions;
