-- +goose Up
-- The actor file area (Wesclaw): host paths and the primary root of a
-- workspace, and the running usage total of each actor's area.
-- Portable like 00001: TEXT, BIGINT and BOOLEAN only; times are Unix
-- microseconds in UTC; host_paths is a JSON array as TEXT.

ALTER TABLE workspaces ADD COLUMN host_paths TEXT NOT NULL DEFAULT '[]';
ALTER TABLE workspaces ADD COLUMN primary_root TEXT NOT NULL DEFAULT '';

-- One row per actor whose area has been measured. File API writes and
-- deletes add to it in the same operation; stats and GC walks replace it
-- with the measured value. No row means "not measured yet".
CREATE TABLE actor_usage (
    actor_id     TEXT PRIMARY KEY REFERENCES actors (id),
    workspace_id TEXT NOT NULL,
    bytes        BIGINT NOT NULL,
    files        BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

-- +goose Down
DROP TABLE actor_usage;
ALTER TABLE workspaces DROP COLUMN primary_root;
ALTER TABLE workspaces DROP COLUMN host_paths;
