-- +goose Up
-- Repository instructions and skills. Portable like 00001: TEXT, BIGINT
-- and BOOLEAN only; times are Unix microseconds in UTC.

-- Whether the checkout's AGENTS.md / CLAUDE.md reach the system prompt.
ALTER TABLE workspaces ADD COLUMN external_instructions BOOLEAN NOT NULL DEFAULT TRUE;

-- The extensions (skills) a surface loaded with load_extension, in load
-- order: durable for the rest of the surface's conversation. One row per
-- surface and name.
CREATE TABLE loaded_extensions (
    surface_id   TEXT NOT NULL,
    name         TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    path         TEXT NOT NULL,
    digest       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    command_id   TEXT NOT NULL,
    loaded_at    BIGINT NOT NULL,
    PRIMARY KEY (surface_id, name)
);
CREATE INDEX loaded_extensions_session ON loaded_extensions (session_id);

-- +goose Down
DROP TABLE loaded_extensions;
ALTER TABLE workspaces DROP COLUMN external_instructions;
