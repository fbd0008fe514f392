-- +goose Up
-- The transcript is a tree: each message names its parent (the message it
-- follows on its branch; empty for a surface's first message). An edited
-- user message starts a new branch from the original's parent and names
-- the original in edit_of; the queue row carries the edit until its turn
-- appends the message. Existing transcripts are one branch: each message's
-- parent is the one before it on its surface.
ALTER TABLE messages ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN edit_of TEXT NOT NULL DEFAULT '';
UPDATE messages SET parent_id = COALESCE((SELECT p.id FROM messages p
    WHERE p.surface_id = messages.surface_id AND p.seq = messages.seq - 1), '');
ALTER TABLE queue_items ADD COLUMN edit_of TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE queue_items DROP COLUMN edit_of;
ALTER TABLE messages DROP COLUMN edit_of;
ALTER TABLE messages DROP COLUMN parent_id;
