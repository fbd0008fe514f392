// Package safenext decides where a browser goes after signing in to desk's
// web UI: the page it asked for, when that is a same-origin absolute path
// however a browser reads it, and / otherwise. It is its own package so
// its fuzz test builds in seconds.
package safenext

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxNextDecodes bounds how many layers of percent-encoding Path
// peels; a next that still changes after that many is refused.
const maxNextDecodes = 8

// Path keeps a post-login redirect on desk's own pages: it returns raw
// when raw is a same-origin absolute path and "/" otherwise.
//
// A browser reads a Location header the WHATWG way: it drops ASCII tab
// and newline anywhere, treats `\` as `/`, and takes `//host` (in any of
// those spellings) as another site. So raw is refused unless it, and
// every form it percent-decodes to, layer after layer, starts with
// exactly one `/` followed by something other than `/` or `\`, and holds
// no `\`, no control character (tab, CR, LF included), no invalid UTF-8
// and no broken percent escape. desk's own pages need none of those.
func Path(raw string) string {
	if len(raw) > 4096 {
		return "/"
	}
	cur := raw
	for range maxNextDecodes {
		if !plainPath(cur) {
			return "/"
		}
		dec, err := url.PathUnescape(cur)
		if err != nil {
			return "/"
		}
		if dec == cur {
			return raw
		}
		cur = dec
	}
	return "/"
}

// plainPath reports whether s is an absolute path a browser resolves on
// the same origin however it normalises it.
func plainPath(s string) bool {
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.HasPrefix(s, "/\\") {
		return false
	}
	if strings.ContainsRune(s, '\\') || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}
