package desk

import "time"

// Artifact is a durable file of a session with its metadata. Its bytes live
// in the session's artifact directory at RelPath; Path is the same file as
// the session's executions see it (for example "/artifacts/report.md").
type Artifact struct {
	ID          string    `json:"id"`
	SessionID   string    `json:"session_id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	Path        string    `json:"path"`
	Kind        string    `json:"kind"`
	MediaType   string    `json:"media_type"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Immutable   bool      `json:"immutable"`
	Revision    int64     `json:"revision"`
	Missing     bool      `json:"missing,omitempty"`
	Origin      Origin    `json:"origin"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`

	// ActorID is the actor whose file area holds the bytes (the session's
	// actor). RelPath is the file's path relative to the session's artifact
	// directory, with forward slashes.
	ActorID string `json:"-"`
	RelPath string `json:"-"`

	// Prev describes the revision kept for one-step revert, if any.
	Prev *ArtifactRevision `json:"-"`
	// Pending names a fully written file in the artifact directory that is
	// being installed as this row's content; startup finishes the rename if
	// desk stopped between the commit and the rename.
	Pending string `json:"-"`
	// Deleting marks a row whose file is being removed; it is invisible and
	// startup finishes the delete.
	Deleting bool `json:"-"`
}

// ArtifactRevision is the metadata of a kept earlier revision of an
// artifact. Its bytes live in the workspace's revision store.
type ArtifactRevision struct {
	Revision  int64  `json:"revision"`
	Kind      string `json:"kind"`
	MediaType string `json:"media_type"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
}
