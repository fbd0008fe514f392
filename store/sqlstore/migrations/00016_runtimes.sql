-- +goose Up
-- External agent runtimes an operator registered (desk.Runtime). argv and
-- env are JSON arrays; env holds variable names only, never values.
CREATE TABLE runtimes (
    name       TEXT PRIMARY KEY,
    protocol   TEXT NOT NULL,
    argv       TEXT NOT NULL,
    env        TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL
);
-- A runtime-backed session names its runtime and, once known, the
-- runtime's own conversation id.
ALTER TABLE sessions ADD COLUMN runtime TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN native_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN native_id;
ALTER TABLE sessions DROP COLUMN runtime;
DROP TABLE runtimes;
