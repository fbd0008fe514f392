package desk

import "time"

// TemplateFile is one file of a template version. Content travels as
// base64 in JSON.
type TemplateFile struct {
	Path    string `json:"path"`
	Content []byte `json:"content,omitempty"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256,omitempty"`
	// Managed is set for the files a template upgrade reconciles
	// (README.md, AGENTS.md, CLAUDE.md, .agents/skills/**, .claude/skills/**);
	// the others are installed once and then belong to the workspace.
	Managed bool `json:"managed"`
}

// TemplateVersion is one registered, immutable version of a template.
type TemplateVersion struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	CreatedAt time.Time      `json:"created_at"`
	Files     []TemplateFile `json:"files"`
}

// TemplateBaseline is what a workspace got from its template: the version
// and the content of each managed file as it was installed (or as the last
// upgrade left it), the base of every three-way upgrade.
type TemplateBaseline struct {
	Template    string            `json:"template"`
	Version     string            `json:"version"`
	InstalledAt time.Time         `json:"installed_at"`
	Files       map[string][]byte `json:"files"`
}

// Statuses of a template upgrade plan entry.
const (
	UpgradeUnchanged = "unchanged" // the workspace already has the template's content
	UpgradeReady     = "ready"     // only the template changed, or a three-way merge was clean
	UpgradePreserved = "preserved" // only the workspace changed: it is kept
	UpgradeConflict  = "conflict"  // both changed and do not merge: a resolution is needed
	UpgradeAdd       = "add"       // new in the template
	UpgradeRemove    = "remove"    // dropped by the template, unchanged in the workspace
)

// Resolutions of a template upgrade conflict.
const (
	ResolveWorkspace = "workspace"
	ResolveTemplate  = "template"
)

// UpgradeEntry is one managed path of an upgrade plan. Hashes are SHA-256
// hex; an empty hash means the file is absent on that side.
type UpgradeEntry struct {
	Path            string `json:"path"`
	Status          string `json:"status"`
	BaseSHA256      string `json:"base_sha256,omitempty"`
	WorkspaceSHA256 string `json:"workspace_sha256,omitempty"`
	TemplateSHA256  string `json:"template_sha256,omitempty"`
	// ResultSHA256 is what a ready or add entry writes (for a merge, the
	// merged bytes); empty for a removal.
	ResultSHA256 string `json:"result_sha256,omitempty"`
	Merged       bool   `json:"merged,omitempty"`
	// ConflictPreview shows a conflict as git merge-file --diff3 renders
	// it, for a person to decide; it is never written to a file.
	ConflictPreview string `json:"conflict_preview,omitempty"`
}

// UpgradePlan is a template upgrade, computed and not applied. Applying
// needs its Digest, which changes whenever the plan or any input would.
type UpgradePlan struct {
	WorkspaceID string         `json:"workspace_id"`
	Template    string         `json:"template"`
	FromVersion string         `json:"from_version"`
	ToVersion   string         `json:"to_version"`
	Entries     []UpgradeEntry `json:"entries"`
	Summary     map[string]int `json:"summary"`
	Digest      string         `json:"digest"`
}

// UpgradeApply is the request to apply a plan.
type UpgradeApply struct {
	Digest      string            `json:"digest"`
	Resolutions map[string]string `json:"resolutions,omitempty"`
}

// UpgradeResult says what applying a plan did.
type UpgradeResult struct {
	Plan *UpgradePlan `json:"plan"`
	// Written and Deleted are the checkout paths changed.
	Written []string `json:"written"`
	Deleted []string `json:"deleted"`
	// Commit is the git commit made in the checkout, when it is a
	// repository and something changed.
	Commit string `json:"commit,omitempty"`
}

// Statuses of an absorb plan entry.
const (
	AbsorbReady     = "ready"     // only the source has the file: it is copied
	AbsorbDuplicate = "duplicate" // both have the same bytes: nothing to do
	AbsorbConflict  = "conflict"  // both have different bytes: a resolution is needed
)

// Resolutions of an absorb conflict.
const (
	AbsorbKeepTarget = "target" // keep the target's file, drop the source's
	AbsorbUseSource  = "source" // replace the target's file with the source's
	AbsorbKeepBoth   = "both"   // keep the target's file and import the source's under imports/
)

// AbsorbEntry is one source file of an absorb plan. Path is relative to
// the workspace directory (checkout/…, skills/…, knowledge/…).
type AbsorbEntry struct {
	Path         string `json:"path"`
	Status       string `json:"status"`
	Size         int64  `json:"size"`
	SourceSHA256 string `json:"source_sha256"`
	TargetSHA256 string `json:"target_sha256,omitempty"`
	// ImportPath is where "both" puts the source's copy.
	ImportPath string `json:"import_path,omitempty"`
	// Note explains a conflict that is not about content (the target has a
	// directory there), which only "target" or "both" can resolve.
	Note string `json:"note,omitempty"`
}

// AbsorbExclusion is a source path an absorb leaves behind, and why.
type AbsorbExclusion struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// AbsorbPlan is an absorb, computed and not applied.
type AbsorbPlan struct {
	TargetID   string            `json:"target_id"`
	SourceID   string            `json:"source_id"`
	SourceName string            `json:"source_name"`
	ImportTag  string            `json:"import_tag"`
	Entries    []AbsorbEntry     `json:"entries"`
	Excluded   []AbsorbExclusion `json:"excluded"`
	Summary    map[string]int    `json:"summary"`
	Digest     string            `json:"digest"`
}

// AbsorbApply is the request to apply an absorb plan.
type AbsorbApply struct {
	Digest      string            `json:"digest"`
	Resolutions map[string]string `json:"resolutions,omitempty"`
}

// AbsorbResult says what an absorb did.
type AbsorbResult struct {
	Plan *AbsorbPlan `json:"plan"`
	// Written are the target paths written.
	Written []string `json:"written"`
	// ImportCommit is the target's git commit, when its checkout is a
	// repository and something changed there.
	ImportCommit string        `json:"import_commit,omitempty"`
	Source       *CatalogEntry `json:"source"`
}
