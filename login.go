package desk

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// LoginLink is a one-time link that signs a browser into the web UI: its
// code is exchanged once, before ExpiresAt, for the session cookie the
// token form sets. The link never carries the token itself.
type LoginLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// LoginLinkURL is the login link of code on the desk at base
// (scheme://host[:port]).
func LoginLinkURL(base, code string) string {
	return strings.TrimRight(base, "/") + "/login?code=" + url.QueryEscape(code)
}

// LoginLinkStore keeps the live codes of login links, so a link issued by
// one node is exchanged on any node of the same database. Only a code's
// SHA-256 is stored, with the SHA-256 of the token it signs in with: a
// copy of the table signs nobody in.
type LoginLinkStore interface {
	// CreateLoginLink stores a code hash valid until expires, then drops
	// every code expired at createdAt and all but the newest keep codes.
	CreateLoginLink(ctx context.Context, codeHash, tokenHash string, createdAt, expires time.Time, keep int) error
	// RedeemLoginLink consumes a code hash still valid at now and returns
	// its token hash. It fails with ENOTFOUND for a code that was used,
	// has expired or is unknown; of two nodes redeeming one code at once,
	// exactly one succeeds (the database's delete decides).
	RedeemLoginLink(ctx context.Context, codeHash string, now time.Time) (tokenHash string, err error)
}
