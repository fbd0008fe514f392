package workspace

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
)

// BrowserSessionPrefix starts every browser session id, so the app log's
// redactor recognizes one by its shape. No token starts with it, so an id
// offered as a bearer token is simply unknown.
const BrowserSessionPrefix = "deskweb_"

// BrowserSessions implements desk.BrowserSessionService over the store.
type BrowserSessions struct {
	store     Store
	tokens    *Service // authenticates the token a browser signs in with
	adminHash string
	now       func() time.Time
}

var _ desk.BrowserSessionService = (*BrowserSessions)(nil)

// NewBrowserSessions returns the web UI's browser sessions, made from the
// tokens Authenticate accepts (adminToken is the admin's). now is the
// clock (nil means time.Now); tests move it to expire sessions.
func NewBrowserSessions(store Store, adminToken string, now func() time.Time) *BrowserSessions {
	if now == nil {
		now = time.Now
	}
	return &BrowserSessions{store: store, tokens: &Service{store: store, adminToken: adminToken},
		adminHash: HashToken(adminToken), now: now}
}

// clock is now at the stores' precision.
func (b *BrowserSessions) clock() time.Time { return b.now().UTC().Truncate(time.Microsecond) }

func (b *BrowserSessions) Start(ctx context.Context, token string) (string, desk.Principal, error) {
	p, err := b.tokens.Authenticate(ctx, token)
	if err != nil {
		return "", p, err
	}
	now := b.clock()
	// Signing in sweeps the expired rows, so the table holds at most the
	// sign-ins of the last BrowserSessionMax without a collector.
	if _, err := b.store.DeleteExpiredBrowserSessions(ctx, now.Add(-desk.BrowserSessionIdle), now.Add(-desk.BrowserSessionMax)); err != nil {
		return "", p, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("workspace: crypto/rand failed: " + err.Error())
	}
	id := BrowserSessionPrefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:]))
	row := &desk.BrowserSession{IDHash: HashToken(id), TokenHash: HashToken(token), Actor: desk.AdminActor, CreatedAt: now, LastSeen: now}
	if !p.Admin {
		row.Actor, row.WorkspaceID = p.ActorID, p.WorkspaceID
	}
	if err := b.store.CreateBrowserSession(ctx, row); err != nil {
		return "", p, err
	}
	return id, p, nil
}

// signedOut is the one answer for an id that opens nothing, whatever the
// reason, so a cookie says nothing about why it stopped working.
func signedOut() error {
	return desk.Errorf(desk.EUNAUTHORIZED, "not signed in: the browser session is unknown, ended or expired")
}

func (b *BrowserSessions) Authenticate(ctx context.Context, id string) (desk.Principal, error) {
	if !strings.HasPrefix(id, BrowserSessionPrefix) {
		return desk.Principal{}, signedOut()
	}
	h := HashToken(id)
	row, err := b.store.GetBrowserSession(ctx, h)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return desk.Principal{}, signedOut()
	}
	if err != nil {
		return desk.Principal{}, err
	}
	now := b.clock()
	p, ok, err := b.principal(ctx, row)
	if err != nil {
		return desk.Principal{}, err
	}
	if !ok || now.Sub(row.LastSeen) >= desk.BrowserSessionIdle || now.Sub(row.CreatedAt) >= desk.BrowserSessionMax {
		// Expired, or its token is no longer valid: the row goes now.
		if err := b.store.DeleteBrowserSession(ctx, h); err != nil {
			return desk.Principal{}, err
		}
		return desk.Principal{}, signedOut()
	}
	if now.Sub(row.LastSeen) >= desk.BrowserSessionTouch {
		err := b.store.TouchBrowserSession(ctx, h, now)
		if desk.IsCode(err, desk.ENOTFOUND) {
			return desk.Principal{}, signedOut() // ended meanwhile
		}
		// Any other failure (a full disk) costs at most a minute of idle
		// time; it does not stop the page from being read.
	}
	return p, nil
}

// principal is who row's token stands for now; ok is false when that
// token no longer signs in (the admin token changed, the actor's token is
// gone), which ends the browser sessions made from it.
func (b *BrowserSessions) principal(ctx context.Context, row *desk.BrowserSession) (desk.Principal, bool, error) {
	if row.Actor == desk.AdminActor {
		return desk.Principal{Admin: true}, subtle.ConstantTimeCompare([]byte(row.TokenHash), []byte(b.adminHash)) == 1, nil
	}
	a, err := b.store.ActorByTokenHash(ctx, row.TokenHash)
	if desk.IsCode(err, desk.ENOTFOUND) {
		return desk.Principal{}, false, nil
	}
	if err != nil {
		return desk.Principal{}, false, err
	}
	if a.ID != row.Actor {
		return desk.Principal{}, false, nil
	}
	return desk.Principal{WorkspaceID: a.WorkspaceID, ActorID: a.ID, ActorKind: a.Kind}, true, nil
}

func (b *BrowserSessions) End(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	return b.store.DeleteBrowserSession(ctx, HashToken(id))
}

func (b *BrowserSessions) RevokeAll(ctx context.Context) (int, error) {
	p, err := principal(ctx)
	if err != nil {
		return 0, err
	}
	actor := "" // the admin ends every browser session
	if !p.Admin {
		actor = p.ActorID
	}
	return b.store.DeleteBrowserSessions(ctx, actor)
}
