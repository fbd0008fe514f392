-- +goose Up
-- The live codes of login links, shared by every node of the database:
-- the SHA-256 of the code and of the token it signs in with, never either
-- one. A redeemed code's row is deleted in the statement that redeems it,
-- so a code works once however many nodes race for it. Times are Unix
-- microseconds in UTC.
CREATE TABLE login_links (
    code_hash  TEXT PRIMARY KEY,
    token_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX login_links_created ON login_links (created_at);

-- +goose Down
DROP TABLE login_links;
