package desk

import "time"

// Group is an ambient selection group (PawWork §6): a named set of web items
// owned by the workspace. Sessions bind groups; they never own them.
type Group struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	Name        string    `json:"name"`
	ItemCount   int       `json:"item_count"`
	Origin      Origin    `json:"origin"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Item kinds.
const (
	ItemText = "text"
	ItemURL  = "url"
	ItemFile = "file"
)

// Item is a web item: a captured text, a URL or a file. It lives as long as
// a group references it or an execution leases it.
type Item struct {
	ID          string    `json:"id"`
	WorkspaceID string    `json:"workspace_id"`
	Kind        string    `json:"kind"`
	Name        string    `json:"name"`
	URL         string    `json:"url,omitempty"`
	Title       string    `json:"title,omitempty"`
	MediaType   string    `json:"media_type"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Origin      Origin    `json:"origin"`
	CreatedAt   time.Time `json:"created_at"`
}
