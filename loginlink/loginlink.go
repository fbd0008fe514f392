// Package loginlink keeps the one-time codes of desk's login links: the
// link `desk serve` prints at startup and `desk login-link` asks for, which
// a browser exchanges for the web UI's session cookie without the token
// ever travelling in a URL.
//
// A code is random (256 bits), short-lived and single-use. Codes live in
// the database (desk.LoginLinkStore), so a link issued by one node is
// exchanged on any node of the same database, exactly once: the store
// deletes the code in the statement that redeems it. Only the code's
// SHA-256 is stored, looked up by that hash, so a lookup's timing says
// nothing about how close a guess was. At most MaxLive codes are live at
// once; issuing one more drops the oldest.
package loginlink

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// Prefix starts every code, so the app log's redactor recognizes a code
// by its shape wherever one turns up (see applog's token shapes).
const Prefix = "desklink_"

// DefaultTTL is how long a code stays valid when New is given none.
const DefaultTTL = 10 * time.Minute

// MaxLive bounds the codes kept at once.
const MaxLive = 16

var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Codes issues and redeems the codes that sign a browser in with one
// token. It is safe for concurrent use.
type Codes struct {
	store     desk.LoginLinkStore
	token     string
	tokenHash string
	ttl       time.Duration
	now       func() time.Time
}

// New returns Codes kept in store that sign in with token, each valid for
// ttl (0 means DefaultTTL); now is the clock (nil means time.Now).
func New(store desk.LoginLinkStore, token string, ttl time.Duration, now func() time.Time) *Codes {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Codes{store: store, token: token, tokenHash: hash(token), ttl: ttl, now: now}
}

func hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// Issue makes a fresh code and says when it expires.
func (c *Codes) Issue(ctx context.Context) (code string, expires time.Time, err error) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	code = Prefix + strings.ToLower(encoding.EncodeToString(b))
	now := c.now()
	expires = now.Add(c.ttl)
	if err := c.store.CreateLoginLink(ctx, hash(code), c.tokenHash, now, expires, MaxLive); err != nil {
		return "", time.Time{}, err
	}
	return code, expires, nil
}

// Redeem consumes code and returns the token it signs in with. A code
// that was used, has expired or was never issued answers ok false, and so
// does one issued for another token (a node configured with a different
// admin token than the node that issued the link); err is a store failure.
func (c *Codes) Redeem(ctx context.Context, code string) (token string, ok bool, err error) {
	if !strings.HasPrefix(code, Prefix) {
		return "", false, nil
	}
	th, err := c.store.RedeemLoginLink(ctx, hash(code), c.now())
	if desk.ErrorCode(err) == desk.ENOTFOUND {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if subtle.ConstantTimeCompare([]byte(th), []byte(c.tokenHash)) != 1 {
		return "", false, nil
	}
	return c.token, true, nil
}
