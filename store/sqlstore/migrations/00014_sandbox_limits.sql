-- +goose Up
-- A workspace's sandbox limits for its agent's commands
-- (desk.SandboxLimits as JSON; a zero or absent field is the default).
ALTER TABLE workspaces ADD COLUMN sandbox_limits TEXT NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE workspaces DROP COLUMN sandbox_limits;
