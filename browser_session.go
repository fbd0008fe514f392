package desk

import (
	"context"
	"time"
)

// BrowserSession is one sign-in of the web UI. The browser holds a random
// id in a cookie; desk keeps only its SHA-256 and what it stands for, so
// a copy of the cookie is worth nothing to the API, a copy of the
// database opens no browser, and desk can end it at any time.
type BrowserSession struct {
	// IDHash is the hex SHA-256 of the cookie's id.
	IDHash string
	// TokenHash is the hex SHA-256 of the token that signed the browser
	// in; the session lives only as long as that token does.
	TokenHash string
	// Actor is the signed-in actor's id, or AdminActor for the admin.
	Actor       string
	WorkspaceID string // actor sessions only
	CreatedAt   time.Time
	// LastSeen is the last time the session was used, to within
	// BrowserSessionTouch.
	LastSeen time.Time
}

// Browser session lifetimes: a session ends after BrowserSessionIdle
// without use, and BrowserSessionMax after sign-in in any case. LastSeen
// moves at most once per BrowserSessionTouch, so a busy page does not
// write a row on every request.
const (
	BrowserSessionIdle  = 12 * time.Hour
	BrowserSessionMax   = 24 * time.Hour
	BrowserSessionTouch = time.Minute
)

// BrowserSessionStore keeps the web UI's browser sessions.
type BrowserSessionStore interface {
	CreateBrowserSession(ctx context.Context, s *BrowserSession) error
	// GetBrowserSession fails with ENOTFOUND for an unknown hash.
	GetBrowserSession(ctx context.Context, idHash string) (*BrowserSession, error)
	// TouchBrowserSession sets LastSeen (ENOTFOUND when the row is gone).
	TouchBrowserSession(ctx context.Context, idHash string, at time.Time) error
	// DeleteBrowserSession ends one session; an unknown hash is no error.
	DeleteBrowserSession(ctx context.Context, idHash string) error
	// DeleteBrowserSessions ends every session of actor (an actor id or
	// AdminActor), or every session at all when actor is "", and says how
	// many it ended.
	DeleteBrowserSessions(ctx context.Context, actor string) (int, error)
	// DeleteExpiredBrowserSessions deletes the sessions last seen before
	// idleBefore or created before createdBefore.
	DeleteExpiredBrowserSessions(ctx context.Context, idleBefore, createdBefore time.Time) (int, error)
}

// BrowserSessionService signs browsers into the web UI. A browser session
// stands for the token it was made from but is not that token: its id
// opens the web UI only, never the API, and ends on logout, on
// RevokeAll, after BrowserSessionIdle unused, after BrowserSessionMax, or
// when its token stops being valid.
type BrowserSessionService interface {
	// Start authenticates token and starts a browser session for its
	// principal; id is what the browser's cookie holds.
	Start(ctx context.Context, token string) (id string, p Principal, err error)
	// Authenticate maps a browser session id to its principal
	// (EUNAUTHORIZED when unknown, ended or expired).
	Authenticate(ctx context.Context, id string) (Principal, error)
	// End ends one browser session; an unknown id is no error.
	End(ctx context.Context, id string) error
	// RevokeAll ends the browser sessions the caller may end: every one
	// for the admin, the caller's own actor's otherwise.
	RevokeAll(ctx context.Context) (int, error)
}

// BrowserSessionsRevoked answers a revocation of browser sessions.
type BrowserSessionsRevoked struct {
	Revoked int `json:"revoked"`
}
