-- +goose Up
-- The lease version an execution runs under: its queue row's claim
-- version when it was claimed, one more at each takeover by another desk
-- process. Every write of a running execution is fenced by its owner and
-- this version (desk.Fence).
ALTER TABLE executions ADD COLUMN lease_version BIGINT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE executions DROP COLUMN lease_version;
