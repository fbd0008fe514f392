package desk

import (
	"context"
	"time"
)

// Draft is the unsent text of a surface's composer. It is durable surface
// state, not browser state: it survives a reload, another browser and a
// restart of desk, and goes only when it is sent or emptied.
type Draft struct {
	SessionID string    `json:"session_id"`
	SurfaceID string    `json:"surface_id"`
	Text      string    `json:"text"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MaxDraftBytes bounds a draft; a composer holding more is refused.
const MaxDraftBytes = 256 << 10

// UIStore keeps the state people's clients need beside the domain: composer
// drafts per surface, and which sessions someone has open, which decides
// whether a finished turn leaves its session unread.
type UIStore interface {
	// GetDraft returns the surface's draft; a surface without one has an
	// empty draft (never ENOTFOUND).
	GetDraft(ctx context.Context, sessionID, surfaceID string) (*Draft, error)
	// SaveDraft stores d (UpdatedAt is set); an empty text deletes it.
	SaveDraft(ctx context.Context, d *Draft) error

	// OpenSession records that viewer has the session open until the given
	// time and clears its unread flag, in one step. A session that does not
	// exist (or is being deleted) is ENOTFOUND.
	OpenSession(ctx context.Context, sessionID, viewer string, until time.Time) error
	// CloseSession forgets viewer's hold on the session.
	CloseSession(ctx context.Context, sessionID, viewer string) error
	// MarkUnreadIfClosed sets the session's unread flag unless some viewer
	// holds it open at now, reporting whether it did. It never changes the
	// session's updated_at: being read is not activity.
	MarkUnreadIfClosed(ctx context.Context, sessionID string, now time.Time) (bool, error)
}
