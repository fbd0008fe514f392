// Package loginlink keeps the one-time codes of desk's login links: the
// link `desk serve` prints at startup and `desk login-link` asks for, which
// a browser exchanges for the web UI's session cookie without the token
// ever travelling in a URL.
//
// A code is random (256 bits), short-lived, single-use and held only in
// this process's memory, so a restart forgets every code. At most MaxLive
// codes are live at once; issuing one more drops the oldest. Codes are
// compared in constant time against every live code, so neither a map
// lookup nor an early exit says how close a guess was.
package loginlink

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"strings"
	"sync"
	"time"
)

// Prefix starts every code, so the app log's redactor recognizes a code
// by its shape wherever one turns up (see applog's token shapes).
const Prefix = "desklink_"

// DefaultTTL is how long a code stays valid when New is given none.
const DefaultTTL = 10 * time.Minute

// MaxLive bounds the codes kept at once.
const MaxLive = 16

var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

type entry struct {
	code    []byte
	expires time.Time
}

// Codes issues and redeems the codes that sign a browser in with one
// token. It is safe for concurrent use.
type Codes struct {
	token string
	ttl   time.Duration
	now   func() time.Time

	mu   sync.Mutex
	live []entry // oldest first
}

// New returns Codes that sign in with token, each valid for ttl (0 means
// DefaultTTL); now is the clock (nil means time.Now).
func New(token string, ttl time.Duration, now func() time.Time) *Codes {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Codes{token: token, ttl: ttl, now: now}
}

// Issue makes a fresh code and says when it expires.
func (c *Codes) Issue() (code string, expires time.Time) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	code = Prefix + strings.ToLower(encoding.EncodeToString(b))
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	c.prune(now)
	if len(c.live) >= MaxLive {
		c.live = append(c.live[:0], c.live[len(c.live)-MaxLive+1:]...)
	}
	expires = now.Add(c.ttl)
	c.live = append(c.live, entry{code: []byte(code), expires: expires})
	return code, expires
}

// Redeem consumes code and returns the token it signs in with. A code
// that was used, has expired or was never issued answers ok false.
func (c *Codes) Redeem(code string) (token string, ok bool) {
	got := []byte(code)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prune(c.now())
	found := -1
	for i, e := range c.live {
		// Every live code is compared, whatever matched before.
		if subtle.ConstantTimeCompare(got, e.code) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	c.live = append(c.live[:found], c.live[found+1:]...)
	return c.token, true
}

// prune drops expired codes; the caller holds mu.
func (c *Codes) prune(now time.Time) {
	keep := c.live[:0]
	for _, e := range c.live {
		if now.Before(e.expires) {
			keep = append(keep, e)
		}
	}
	clear(c.live[len(keep):])
	c.live = keep
}
