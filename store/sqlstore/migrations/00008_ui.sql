-- +goose Up
-- State the web UI (and any other client) keeps beside the domain.
-- Portable like 00001: TEXT, BIGINT and BOOLEAN only; times are Unix
-- microseconds in UTC. PurgeSession removes a session's rows here.

-- Composer drafts, one per surface: durable surface state that survives a
-- reload, another browser and a restart, and goes when sent or emptied.
CREATE TABLE ui_drafts (
    surface_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    text       TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX ui_drafts_session ON ui_drafts (session_id);

-- Who has a session open, until when (a heartbeat extends it). A turn that
-- finishes while no row here is current leaves the session unread.
CREATE TABLE ui_session_views (
    session_id TEXT NOT NULL,
    viewer     TEXT NOT NULL,
    open_until BIGINT NOT NULL,
    PRIMARY KEY (session_id, viewer)
);

-- +goose Down
DROP TABLE ui_session_views;
DROP TABLE ui_drafts;
