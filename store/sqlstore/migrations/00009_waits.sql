-- +goose Up
-- Turns that wait on a person survive a restart. Portable like 00001:
-- TEXT, BIGINT and BOOLEAN only; times are Unix microseconds in UTC.

-- The tool result the model was given for a call ({"text","is_error",
-- "stop"}), kept on its record when the call finishes: a turn continued
-- after a restart hands the model the same results without running the
-- finished calls again.
ALTER TABLE commands ADD COLUMN result TEXT NOT NULL DEFAULT '';

-- When a blocking request_user_input stops waiting and its defaults
-- stand (0: it does not block). The deadline is kept, not the wait's
-- start, so a restart neither restarts nor forgets the timeout.
ALTER TABLE input_requests ADD COLUMN deadline BIGINT NOT NULL DEFAULT 0;

-- Title jobs: a session's automatic title is a durable job from the first
-- message until the title is set. A job whose desk died is retried once
-- at the next start (attempts counts the tries begun); a person's rename
-- still wins, since only an auto-titled session takes the result.
CREATE TABLE title_jobs (
    session_id    TEXT PRIMARY KEY,
    first_message TEXT NOT NULL,
    attempts      BIGINT NOT NULL,
    created_at    BIGINT NOT NULL
);

-- +goose Down
DROP TABLE title_jobs;
ALTER TABLE input_requests DROP COLUMN deadline;
ALTER TABLE commands DROP COLUMN result;
