package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultSessionsPerToken is how many MCP sessions one bearer token may
// keep open at once unless TransportOptions.SessionsPerToken says
// otherwise.
const DefaultSessionsPerToken = 32

// sessionIDHeader is the streamable HTTP transport's session header.
const sessionIDHeader = "Mcp-Session-Id"

// sessionTable bounds the MCP sessions of each bearer token. The SDK's
// handler keeps the sessions themselves (and closes one idle for the
// idle timeout); the table sits in front of it, records which token
// opened each session and when it was last used, and when a token opens
// one session more than its cap, closes that token's least recently used
// idle session first (idle: no POST in flight; an open GET stream alone
// does not make a session busy). When every session of the token is busy
// the new one is refused with 429. Another token's sessions are never
// touched.
type sessionTable struct {
	max       int
	getServer func(*http.Request) *sdk.Server
	now       func() time.Time

	mu      sync.Mutex
	closed  bool
	byID    map[string]*liveSession
	byToken map[string]*tokenSessions // token digest → its sessions
	wg      sync.WaitGroup            // one watcher per live session
}

// liveSession is what the table knows of one open MCP session.
type liveSession struct {
	id, token string
	ss        *sdk.ServerSession
	busy      int       // POSTs in flight
	used      time.Time // the last request's start or end
}

type tokenSessions struct {
	open    map[string]*liveSession
	pending int // sessions being initialized
}

func newSessionTable(max int, getServer func(*http.Request) *sdk.Server) *sessionTable {
	if max <= 0 {
		max = DefaultSessionsPerToken
	}
	return &sessionTable{max: max, getServer: getServer, now: time.Now,
		byID: map[string]*liveSession{}, byToken: map[string]*tokenSessions{}}
}

// wrap puts the table in front of the SDK's handler; requests reach it
// authenticated (a TokenInfo in the context).
func (t *sessionTable) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var token string
		if ti := auth.TokenInfoFromContext(r.Context()); ti != nil {
			token = ti.UserID
		}
		sid := r.Header.Get(sessionIDHeader)
		switch {
		case sid != "":
			post := r.Method == http.MethodPost
			ls := t.begin(sid, token, post)
			defer t.end(ls, post)
			next.ServeHTTP(w, r)
		case r.Method == http.MethodPost:
			t.serveNew(w, r, token, next)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// begin records a request of a live session (nil if the table does not
// know it for this token: the SDK answers such a request itself).
func (t *sessionTable) begin(sid, token string, post bool) *liveSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := t.byID[sid]
	if ls == nil || ls.token != token {
		return nil
	}
	if post {
		ls.busy++
	}
	ls.used = t.now()
	return ls
}

func (t *sessionTable) end(ls *liveSession, post bool) {
	if ls == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if post {
		ls.busy--
	}
	ls.used = t.now()
}

// serveNew serves a POST that opens a session: it makes room under the
// token's cap first, then records the session the SDK opened.
func (t *sessionTable) serveNew(w http.ResponseWriter, r *http.Request, token string, next http.Handler) {
	victim, err := t.reserve(token)
	if err != nil {
		status := http.StatusTooManyRequests
		if err == errClosing {
			status = http.StatusServiceUnavailable
		} else {
			w.Header().Set("Retry-After", "10")
		}
		writeRPCError(w, status, jsonrpc.CodeInvalidRequest, err.Error())
		return
	}
	if victim != nil {
		// The host of the evicted session gets 404 on its next request
		// and opens a new one, as the transport specifies.
		_ = victim.Close()
	}
	next.ServeHTTP(w, r)
	t.settle(r, token, w.Header().Get(sessionIDHeader))
}

var errClosing = errors.New("desk is shutting down: no new MCP session")

// reserve makes room for one more session of token: below the cap it
// only counts it as pending; at the cap it takes the least recently used
// idle session out of the table and returns it to be closed. With none
// idle it refuses.
func (t *sessionTable) reserve(token string) (*sdk.ServerSession, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errClosing
	}
	ts := t.byToken[token]
	if ts == nil {
		ts = &tokenSessions{open: map[string]*liveSession{}}
		t.byToken[token] = ts
	}
	var victim *sdk.ServerSession
	if len(ts.open)+ts.pending >= t.max {
		var lru *liveSession
		for _, ls := range ts.open {
			if ls.busy == 0 && (lru == nil || ls.used.Before(lru.used)) {
				lru = ls
			}
		}
		if lru == nil {
			if len(ts.open) == 0 && ts.pending == 0 {
				delete(t.byToken, token)
			}
			return nil, fmt.Errorf("too many MCP sessions for this token: %d are open and none is idle; "+
				"end one (DELETE /mcp with its Mcp-Session-Id) or retry later", t.max)
		}
		t.forget(lru)
		victim = lru.ss
	}
	ts.pending++
	return victim, nil
}

// settle ends a reservation: the session the SDK opened under sid, if it
// did and it is still open, joins the table, with a watcher that takes it
// out when it ends (idle timeout, DELETE, eviction, shutdown).
func (t *sessionTable) settle(r *http.Request, token, sid string) {
	var ss *sdk.ServerSession
	if sid != "" {
		if srv := t.getServer(r); srv != nil {
			for s := range srv.Sessions() {
				if s.ID() == sid {
					ss = s
					break
				}
			}
		}
	}
	t.mu.Lock()
	ts := t.byToken[token]
	ts.pending--
	if ss == nil || t.closed {
		if len(ts.open) == 0 && ts.pending == 0 {
			delete(t.byToken, token)
		}
		t.mu.Unlock()
		if ss != nil {
			_ = ss.Close() // shutting down meanwhile
		}
		return
	}
	ls := &liveSession{id: sid, token: token, ss: ss, used: t.now()}
	t.byID[sid] = ls
	ts.open[sid] = ls
	t.wg.Go(func() {
		_ = ss.Wait()
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.byID[sid] == ls {
			t.forget(ls)
		}
	})
	t.mu.Unlock()
}

// forget takes ls out of the table. Called with t.mu held.
func (t *sessionTable) forget(ls *liveSession) {
	delete(t.byID, ls.id)
	ts := t.byToken[ls.token]
	delete(ts.open, ls.id)
	if len(ts.open) == 0 && ts.pending == 0 {
		delete(t.byToken, ls.token)
	}
}

// count is the number of open sessions the table holds for a token
// digest (all tokens when token is "").
func (t *sessionTable) count(token string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if token == "" {
		return len(t.byID)
	}
	if ts := t.byToken[token]; ts != nil {
		return len(ts.open)
	}
	return 0
}

// close refuses new sessions, closes every open one and waits for their
// watchers.
func (t *sessionTable) close(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	var open []*sdk.ServerSession
	for _, ls := range t.byID {
		open = append(open, ls.ss)
	}
	t.mu.Unlock()
	var errs []error
	for _, ss := range open {
		if err := ss.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return errors.Join(errs...)
}
