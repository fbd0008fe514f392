-- +goose Up
-- Whether a workspace's agent may write the hooks and config of its
-- checkout's git repository (desk.AgentSettings.GitWritable; off: they
-- are read-only in the sandbox).
ALTER TABLE workspaces ADD COLUMN git_writable BOOLEAN NOT NULL DEFAULT FALSE;

-- +goose Down
ALTER TABLE workspaces DROP COLUMN git_writable;
