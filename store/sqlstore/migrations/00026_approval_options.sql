-- +goose Up
-- An approval as a person reads it (issue 26): request is the JSON of
-- desk.ApprovalRequest (what, diff, cwd, why and the executor's options);
-- option_id the option chosen. Rows from before keep '' (their summary).
ALTER TABLE approvals ADD COLUMN request TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN option_id TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE approvals DROP COLUMN option_id;
ALTER TABLE approvals DROP COLUMN request;
