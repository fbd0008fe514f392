-- +goose Up
-- The workspace lifecycle: the catalog columns of a workspace row (which is
-- never deleted), the operation leases that serialize checkout-changing
-- operations across desk processes, the recovery journals written before an
-- operation mutates anything, and the provenance tombstones of artifacts a
-- purge deleted.
-- Portable like 00001: TEXT, BIGINT and BOOLEAN only; times are Unix
-- microseconds in UTC (0: never); maps and lists are JSON as TEXT.

ALTER TABLE workspaces ADD COLUMN lifecycle_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN lifecycle_notes TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN successors TEXT NOT NULL DEFAULT '{}';
ALTER TABLE workspaces ADD COLUMN handoff TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN retired_sessions TEXT NOT NULL DEFAULT '[]';
ALTER TABLE workspaces ADD COLUMN offboarded_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN restored_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN purged_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN absorbed_into TEXT NOT NULL DEFAULT '';
ALTER TABLE workspaces ADD COLUMN absorbed_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE workspaces ADD COLUMN import_commit TEXT NOT NULL DEFAULT '';

-- One lease per workspace. A lease names the desk process (owner) holding
-- it, so a lease of a dead owner can be taken over.
CREATE TABLE workspace_leases (
    workspace_id TEXT PRIMARY KEY,
    lease_id     TEXT NOT NULL,
    op           TEXT NOT NULL,
    owner        TEXT NOT NULL,
    acquired_at  BIGINT NOT NULL
);
CREATE INDEX workspace_leases_lease ON workspace_leases (lease_id);

-- A journal row exists from before an operation's first change until it
-- finished or was rolled back; startup recovery finds the rest.
CREATE TABLE lifecycle_journals (
    id           TEXT PRIMARY KEY,
    op           TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    owner        TEXT NOT NULL,
    step         TEXT NOT NULL,
    data         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX lifecycle_journals_workspace ON lifecycle_journals (workspace_id);

-- What a purge keeps of a deleted artifact: who made it, in which session,
-- so a follow-up aimed at it resolves to purged rather than unknown.
CREATE TABLE artifact_tombstones (
    id           TEXT PRIMARY KEY,
    session_id   TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    sha256       TEXT NOT NULL,
    origin       TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    purged_at    BIGINT NOT NULL
);
CREATE INDEX artifact_tombstones_workspace ON artifact_tombstones (workspace_id);

-- +goose Down
DROP TABLE artifact_tombstones;
DROP TABLE lifecycle_journals;
DROP TABLE workspace_leases;
ALTER TABLE workspaces DROP COLUMN import_commit;
ALTER TABLE workspaces DROP COLUMN absorbed_at;
ALTER TABLE workspaces DROP COLUMN absorbed_into;
ALTER TABLE workspaces DROP COLUMN purged_at;
ALTER TABLE workspaces DROP COLUMN restored_at;
ALTER TABLE workspaces DROP COLUMN offboarded_at;
ALTER TABLE workspaces DROP COLUMN retired_sessions;
ALTER TABLE workspaces DROP COLUMN handoff;
ALTER TABLE workspaces DROP COLUMN successors;
ALTER TABLE workspaces DROP COLUMN lifecycle_notes;
ALTER TABLE workspaces DROP COLUMN lifecycle_reason;
