// Package archive owns desk's append-only ledger: the stable archive of the
// work-ally seed (004, "Stable Archive Contract"). It owns
//
//   - the files: <home>/workspaces/<ws>/.system/archive/YYYY/MM/DD/<channel>--<conversation-id>.ndjson,
//     one per channel, conversation and day (see FileName for the exact,
//     reversible naming rule);
//   - the record contract: a fixed envelope (schema_version, at, direction,
//     event_type, channel, conversation_id, always first and in that order)
//     followed only by the closed, named fields of the record's event type
//     (and, for system_event, of its system_type). docs/archive.schema.json
//     describes the same contract as JSON Schema;
//   - group commit: one writer goroutine per open file batches every record
//     queued while the previous fsync ran into one write and one fsync, and
//     Append returns only after its record is durable;
//   - the readers: Days, List and Read stream a workspace's archive in order
//     (day, file name, line) and skip and report lines that do not parse;
//   - the conversation views: conversations/<channel>--<conversation>.md, a
//     readable transcript rebuilt from the archive incrementally, never the
//     source of truth and safe to delete.
//
// What it must never do: rewrite, reorder, compact or truncate a record or a
// file (a correction is a new record); accept a free-form "payload" or a
// channel SDK's "raw" object; write a record that breaks the contract (such a
// record is a programming error of the caller: Append refuses it, logs it,
// counts it and writes nothing). A crash may leave at most one unterminated
// final line per file; the next writer to open that file starts with a '\n'
// so the fragment stays a line of its own, and readers skip and report it.
//
// The package depends on the domain (desk.Origin, desk.Error), layout and
// atomicfile only; it knows nothing about HTTP, sessions or executions. The
// message path builds typed records and calls Append; the HTTP layer calls
// Days, List and Read.
package archive
