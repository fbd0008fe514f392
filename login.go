package desk

import (
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
