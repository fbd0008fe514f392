// Package transfer owns moving a whole workspace between desk servers as one
// tar.gz: export streams the workspace's directories and its rows (as NDJSON
// under meta/) without a temporary file, and import recreates the workspace
// with the same id on another server.
//
// An export is deterministic: entries are in a fixed order (meta first,
// then each exported directory walked in path order), and every mode, owner
// and time in it is normalized, so two exports of an unchanged workspace are
// byte-identical and so is the export of its import on another server.
//
// What it must never do: export .scratch/, host paths, token hashes or
// desk's temporary files; follow a link out of the workspace; or leave
// anything behind when an import is refused (it extracts into a staging
// directory beside the workspaces, inserts every row in one transaction, and
// only then keeps the tree). An archive is untrusted input: absolute paths,
// "..", links leading out, device files, rows of another workspace,
// archives over the size limit or that unpack to more than the ratio limit
// (a decompression bomb), and settings PATCH would refuse are refused.
package transfer

import (
	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/layout"
	"path"
)

// Format names the archive layout; Version changes when it does.
const (
	Format  = "desk-workspace-export"
	Version = 1
)

// Directories of a workspace that layout does not name yet: the Wesclaw
// seed exports skills/ and knowledge/ with a cell.
const (
	SkillsDir    = "skills"
	KnowledgeDir = "knowledge"
)

// tree is one directory of the workspace that exports carry.
type tree struct {
	rel string
	// actors marks the actors' file areas, which SkipWorkspace leaves out.
	actors bool
}

// trees are the exported directories, in archive order. Everything else in
// the workspace directory (.scratch/, other .system/ state, desk's
// temporary files) stays behind. Revisions come after the actors' areas and
// items after groups, so the hard links between them are written as links
// to the first name met.
var trees = []tree{
	{rel: layout.CheckoutDir},
	// The git worktrees sessions are bound to: their files (uncommitted
	// work included) travel with the checkout whose .git/worktrees/ knows
	// them, and the import relinks the two (relinkWorktrees).
	{rel: layout.WorktreesDir},
	{rel: archive.ViewsDir},
	{rel: KnowledgeDir},
	{rel: SkillsDir},
	{rel: layout.ActorsDir, actors: true},
	{rel: layout.ArchiveDir},
	{rel: layout.GroupsDir},
	{rel: layout.ItemsDir},
	{rel: layout.RevisionsDir},
	// The template baseline travels too, so an imported workspace can
	// still be upgraded three-way (once the importing desk has the
	// template registered).
	{rel: path.Dir(layout.TemplateBaseline)},
}

// metaDir holds the manifest and the rows.
const metaDir = "meta"

// manifestName is the archive's first entry.
const manifestName = metaDir + "/manifest.json"

// chunkBytes bounds one NDJSON entry of rows: a tar header needs the entry's
// size before its bytes, so rows are gathered per chunk, and the chunk size
// bounds the memory an export holds.
const chunkBytes = 4 << 20

// Manifest is meta/manifest.json.
type Manifest struct {
	Format        string   `json:"format"`
	Version       int      `json:"version"`
	WorkspaceID   string   `json:"workspace_id"`
	SkipWorkspace bool     `json:"skip_workspace"`
	Tables        []string `json:"tables"`
	Trees         []string `json:"trees"`
}

// DefaultMaxImportBytes bounds imports when no limit is configured.
const DefaultMaxImportBytes = 64 << 30

// DefaultMaxImportRatio bounds how many times its compressed size an
// archive may unpack to: real exports compress a few times, a
// decompression bomb a thousand. Archives that unpack to no more than
// ratioFloor are not held to it, since tiny archives of empty files
// compress far better than real data.
const DefaultMaxImportRatio = 100

// ratioFloor is the unpacked size below which the ratio is not checked.
const ratioFloor = 16 << 20

// Options configures the transfer service.
type Options struct {
	// MaxImportBytes bounds both the compressed body of an import and the
	// bytes it unpacks; 0 means DefaultMaxImportBytes.
	MaxImportBytes int64
	// MaxImportRatio bounds unpacked bytes to this many times the
	// compressed bytes read (DESK_IMPORT_MAX_RATIO); 0 means
	// DefaultMaxImportRatio.
	MaxImportRatio int64
	// ActorQuotaBytes is the file quota of each actor (files.Options):
	// an import whose actor area is larger is refused. 0 means none.
	ActorQuotaBytes int64
	// Level is the gzip level of exports (1-9); 0 means 6, gzip's default.
	// Changing it changes the bytes of exports.
	Level int
}

// Service implements desk.TransferService.
type Service struct {
	store      Store
	home       layout.Home
	workspaces desk.WorkspaceService
	opts       Options
}

var (
	_ desk.TransferService = (*Service)(nil)
	_ desk.Recoverer       = (*Service)(nil)
)

// New returns the transfer service.
func New(store Store, home layout.Home, workspaces desk.WorkspaceService, opts Options) *Service {
	if opts.MaxImportBytes <= 0 {
		opts.MaxImportBytes = DefaultMaxImportBytes
	}
	if opts.MaxImportRatio <= 0 {
		opts.MaxImportRatio = DefaultMaxImportRatio
	}
	if opts.Level <= 0 || opts.Level > 9 {
		opts.Level = 6
	}
	return &Service{store: store, home: home, workspaces: workspaces, opts: opts}
}

func requireAdmin(p desk.Principal, ok bool, what string) error {
	if !ok {
		return desk.Errorf(desk.EUNAUTHORIZED, "no credentials")
	}
	if !p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token may %s", what)
	}
	return nil
}
