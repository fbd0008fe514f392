package desk

import (
	"context"
	"io"
	"os"
	"time"
)

// Host path modes.
const (
	HostPathRO = "ro"
	HostPathRW = "rw"
)

// HostPath is a host directory a workspace lets its agents use (Wesclaw
// HostPaths). The guest sees it at the same path. desk only checks the
// boundary: it never creates, chmods, collects or exports a host path
// (INV-IO-07).
type HostPath struct {
	Path string `json:"path"`
	Mode string `json:"mode"` // HostPathRO or HostPathRW
	// Dev and Ino identify the directory that was declared, recorded by
	// the server when it checked the declaration (nothing a request sends
	// sets them). Every use opens the path again and answers 403 unless it
	// is still that directory, so replacing a declared path by a symbolic
	// link or another directory after the check gains nothing.
	Dev uint64 `json:"dev,omitempty"`
	Ino uint64 `json:"ino,omitempty"`
}

// WorkspacePatch changes a workspace's host paths and primary root. Nil
// fields stay as they are.
type WorkspacePatch struct {
	HostPaths   *[]HostPath
	PrimaryRoot *string
}

// File entry types. FileTypeLink appears only in delete reports: listings
// leave symbolic links out.
const (
	FileTypeFile = "file"
	FileTypeDir  = "dir"
	FileTypeLink = "link"
)

// FileEntry is one file or directory of an actor's file area. Path is
// relative to the area with a leading "/". Kind, SHA256 and ArtifactID are
// set for files that are artifacts (files under /sessions/<ses>/ with a row).
type FileEntry struct {
	Path       string    `json:"path"`
	Type       string    `json:"type"`
	Size       int64     `json:"size"`
	Modified   time.Time `json:"modified"`
	Kind       string    `json:"kind,omitempty"`
	SHA256     string    `json:"sha256,omitempty"`
	ArtifactID string    `json:"artifact_id,omitempty"`
}

// FileScope names whose file area a request works on. Actor is the
// requested actor (id or name) and is honoured only for the admin token;
// empty means the caller's own actor, or the workspace owner for the admin.
type FileScope struct {
	WorkspaceID string
	Actor       string
}

// FileListOptions selects what List walks. Depth 1 lists the directory's
// own entries, n lists n levels, and 0 means no limit.
type FileListOptions struct {
	Path  string
	Depth int
}

// FileListing describes a finished listing: whose area, which directory,
// how deep, and how many entries were sent.
type FileListing struct {
	ActorID string `json:"actor"`
	Path    string `json:"path"`
	Depth   int    `json:"depth"`
	Count   int64  `json:"count"`
}

// FilePut is the input of FileService.Upload.
type FilePut struct {
	Path string
	// MediaType is a hint for files that become artifacts; the bytes decide.
	MediaType string
	Body      io.Reader
	// Size is the expected length, or -1 when unknown. A body that ends
	// early or runs long is refused and nothing is kept.
	Size int64
}

// FileUpload is what an upload stored.
type FileUpload struct {
	FileEntry
	Created bool `json:"created"`
}

// DeleteSummary totals what a delete removed.
type DeleteSummary struct {
	ActorID string `json:"actor"`
	Files   int64  `json:"files"`
	Dirs    int64  `json:"dirs"`
	Bytes   int64  `json:"bytes"`
}

// FolderUsage totals one top-level folder of an actor's area ("/" stands
// for the files directly in the area).
type FolderUsage struct {
	Path  string `json:"path"`
	Files int64  `json:"files"`
	Bytes int64  `json:"bytes"`
}

// FileStats is the usage of one actor's file area, measured by walking it.
type FileStats struct {
	WorkspaceID string        `json:"workspace_id"`
	ActorID     string        `json:"actor"`
	Files       int64         `json:"files"`
	Dirs        int64         `json:"dirs"`
	Bytes       int64         `json:"bytes"`
	Artifacts   int64         `json:"artifacts"`
	Folders     []FolderUsage `json:"folders"`
	// QuotaBytes is the actor's quota, 0 when unlimited. UsedBytes is what
	// counts against it (the same as Bytes once measured).
	QuotaBytes     int64 `json:"quota_bytes"`
	UsedBytes      int64 `json:"used_bytes"`
	AvailableBytes int64 `json:"available_bytes,omitempty"`
}

// ActorUsage is the stored running total of an actor's file area. File API
// writes and deletes update it in the same operation; walks (stats, GC)
// replace it with a measured value.
type ActorUsage struct {
	WorkspaceID string
	ActorID     string
	Bytes       int64
	Files       int64
	UpdatedAt   time.Time
}

// GC action kinds.
const (
	GCScratch   = "scratch"   // a scratch directory of an execution that is not running was removed
	GCTempFile  = "temp_file" // an abandoned temporary file was removed
	GCItem      = "item"      // an unreachable web item was collected
	GCRevision  = "revision"  // kept revisions of an artifact that no longer exists were removed
	GCMissing   = "missing"   // an artifact row whose file vanished was marked missing
	GCFound     = "found"     // a row marked missing has its file again; the mark was cleared
	GCIndexed   = "indexed"   // a file in a session folder without a row became an artifact
	GCUnindexed = "unindexed" // a file without a row that could not be indexed; left alone
)

// GCAction is one thing workspace GC did or found.
type GCAction struct {
	Kind       string `json:"kind"`
	Target     string `json:"target"` // a workspace-relative path or an id
	Bytes      int64  `json:"bytes"`
	ArtifactID string `json:"artifact_id,omitempty"`
	Detail     string `json:"detail,omitempty"`
}

// GCReport is what one workspace GC did. It never deletes an artifact or a
// user file. Actions lists at most a bounded number of actions (Truncated
// says when more happened); Counts always has the exact count per kind.
type GCReport struct {
	WorkspaceID    string           `json:"workspace_id"`
	ReclaimedBytes int64            `json:"reclaimed_bytes"`
	Counts         map[string]int64 `json:"counts"`
	Actions        []GCAction       `json:"actions"`
	Truncated      bool             `json:"truncated"`
}

// FileService is the per-actor durable file area (Wesclaw's workspace
// files): list, download, upload, delete, delete by prefix, stats and GC,
// plus the workspace's host paths and primary root. Files under
// /sessions/<ses>/ are that session's artifacts, with rows.
type FileService interface {
	// List walks a directory (or describes one file) and calls fn for each
	// entry in path order; every refusal happens before the first call.
	List(ctx context.Context, scope FileScope, opts FileListOptions, fn func(FileEntry) error) (*FileListing, error)
	// Open returns the file for reading; the caller closes it.
	Open(ctx context.Context, scope FileScope, path string) (*os.File, FileEntry, error)
	Upload(ctx context.Context, scope FileScope, in FilePut) (*FileUpload, error)
	// Delete removes one file (or an empty directory) and reports it to fn.
	Delete(ctx context.Context, scope FileScope, path string, fn func(FileEntry) error) (*DeleteSummary, error)
	// DeleteByPrefix removes every path that starts with prefix, reporting
	// each to fn as it goes.
	DeleteByPrefix(ctx context.Context, scope FileScope, prefix string, fn func(FileEntry) error) (*DeleteSummary, error)
	Stats(ctx context.Context, scope FileScope) (*FileStats, error)
	// GC collects what nothing owns in the workspace (admin).
	GC(ctx context.Context, workspaceID string) (*GCReport, error)
	// PatchWorkspace sets host paths and the primary root (admin).
	PatchWorkspace(ctx context.Context, workspaceID string, p WorkspacePatch) (*Workspace, error)
}

// ArtifactPathPut is the input of ArtifactPaths.PutPath.
type ArtifactPathPut struct {
	MediaType string
	Body      io.Reader
	Size      int64 // -1 when unknown
	// Admit is called once the new bytes are durable and before they
	// become visible, with the size of the file they replace (-1 for a new
	// file) and their own size. An error refuses the upload and nothing is
	// kept; otherwise undo is called if the install then fails. Nil means
	// the artifact service's own actor-quota check (the agent's tools).
	Admit func(replaced, size int64) (undo func(), err error)
}

// ArtifactPaths addresses artifacts by their path in the session's
// artifact directory: the file API's door to the same files and rows the
// artifact API and the agents use.
type ArtifactPaths interface {
	// PutPath creates or replaces the artifact at rel, classified and
	// validated like any artifact; an existing file without a row is
	// first indexed, so its bytes are kept as the previous revision.
	PutPath(ctx context.Context, sessionID, rel string, in ArtifactPathPut) (a *Artifact, created bool, err error)
	// DeleteByPath deletes the artifact at rel (row, bytes, revisions). It
	// is ENOTFOUND when no row describes that path.
	DeleteByPath(ctx context.Context, sessionID, rel string) (*Artifact, error)
	// IndexPath gives an existing file without a row an artifact row and
	// returns it (or the row that already exists).
	IndexPath(ctx context.Context, sessionID, rel string) (*Artifact, error)
	// IndexNew gives a row to every file of the session's artifact
	// directory that has none (what a command or an external runtime
	// left there) and returns the new rows in path order. A file the
	// classifier refuses stays a plain file.
	IndexNew(ctx context.Context, sessionID string) ([]*Artifact, error)
	// Materialize fills this node's working copy of the session's
	// artifact directory with the artifacts whose files it lacks (kept by
	// another node, or lost with a disk), before a command or a runtime
	// turn reads /artifacts.
	Materialize(ctx context.Context, sessionID string) error
}

// FilesStore is the metadata the file API keeps: usage totals per actor and
// the workspace's host paths.
type FilesStore interface {
	GetActorUsage(ctx context.Context, actorID string) (*ActorUsage, error)
	// SetActorUsage stores a measured total, replacing the running one.
	SetActorUsage(ctx context.Context, u *ActorUsage) error
	// AddActorUsage adds to the running total; it does nothing when no
	// total has been measured yet.
	AddActorUsage(ctx context.Context, actorID string, bytes, files int64) error
	UpdateWorkspacePaths(ctx context.Context, id string, hostPaths []HostPath, primaryRoot string) (*Workspace, error)
}

// Row is one database row as exported: column name to a string, int64,
// bool or nil.
type Row map[string]any

// TransferStore moves a workspace's rows in and out as plain rows, table by
// table, for export and import.
type TransferStore interface {
	// TransferTables lists the exported tables in dependency order.
	TransferTables() []string
	// ExportRows calls fn for each of the workspace's rows of table, in
	// primary-key order.
	ExportRows(ctx context.Context, workspaceID, table string, fn func(Row) error) error
	// ImportRows inserts the rows next yields (until io.EOF) in one
	// transaction and checks that every row belongs to the workspace; any
	// failure leaves the store unchanged.
	ImportRows(ctx context.Context, workspaceID string, next func() (table string, row Row, err error)) error
}

// ExportOptions modify an export.
type ExportOptions struct {
	// SkipWorkspace leaves the actors' file areas (workspace/) out.
	SkipWorkspace bool
}

// ImportOptions modify an import.
type ImportOptions struct {
	// NewTokens mints a fresh token for every imported actor; exports never
	// carry tokens.
	NewTokens bool
	// Size is the body's declared length, or -1.
	Size int64
}

// ActorToken is a token minted for an imported actor, shown once.
type ActorToken struct {
	Actor *Actor `json:"actor"`
	Token string `json:"token"`
}

// ImportResult is what an import recreated.
type ImportResult struct {
	Workspace *Workspace       `json:"workspace"`
	Rows      map[string]int64 `json:"rows"`
	Files     int64            `json:"files"`
	Bytes     int64            `json:"bytes"`
	Tokens    []ActorToken     `json:"tokens,omitempty"`
}

// TransferService exports a workspace as one tar.gz and imports it again.
type TransferService interface {
	// Export writes the archive to w; refusals happen before the first
	// byte is written.
	Export(ctx context.Context, workspaceID string, opts ExportOptions, w io.Writer) error
	Import(ctx context.Context, r io.Reader, opts ImportOptions) (*ImportResult, error)
}
