-- +goose Up
-- A session may be bound to a git worktree of its workspace's checkout
-- (worktrees/<name> of the workspace); its /workspace is then that
-- worktree. Empty: the checkout itself.
ALTER TABLE sessions ADD COLUMN worktree TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE sessions DROP COLUMN worktree;
