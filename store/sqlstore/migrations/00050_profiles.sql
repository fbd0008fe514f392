-- +goose Up
-- Agent profiles (issue 26): a workspace's named ways to run an agent —
-- executor (a declared model or a registered runtime), reasoning effort,
-- approval mode, instructions, tool set, handler-thread profile. spec is
-- the JSON of desk.Profile's settings. A session keeps the name of the
-- profile it was made from, a snapshot of it (JSON, '' for none), and its
-- own reasoning effort, which PATCH /v1/sessions/{ses} changes for the
-- next turn.
CREATE TABLE profiles (
    workspace_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    spec         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, name)
);
ALTER TABLE sessions ADD COLUMN profile TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN profile_snapshot TEXT NOT NULL DEFAULT '';
ALTER TABLE sessions ADD COLUMN reasoning_effort TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN reasoning_effort;
ALTER TABLE sessions DROP COLUMN profile_snapshot;
ALTER TABLE sessions DROP COLUMN profile;
DROP TABLE profiles;
