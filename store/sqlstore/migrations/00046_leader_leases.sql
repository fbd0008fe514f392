-- +goose Up
-- Leader leases: one row per lease name, held by one node (holder) for a
-- term until expires_at (Unix microseconds, UTC). A new holder, or the
-- same one after its lease expired, starts a new term; writes fenced by
-- a leader term commit only while the row still has it.
CREATE TABLE leader_leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    term       BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE leader_leases;
