package httpdoor

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
)

// AuthFailures logs refused credentials to the app log as warnings an
// operator sees, at most one entry per remote address per Window: the
// first failure is logged at once, later ones in the window are counted,
// and the next entry for that address carries how many there were. So a
// client retrying a wrong token, or someone guessing, shows up without
// flooding the log. It is safe for concurrent use; the zero value is not
// usable, use NewAuthFailures.
type AuthFailures struct {
	log    *slog.Logger
	window time.Duration
	now    func() time.Time

	mu    sync.Mutex
	addrs map[string]*authWindow
}

type authWindow struct {
	logged time.Time // when the address's last entry was written
	missed int       // failures since then
}

// maxAuthAddrs bounds the addresses remembered; past it, windows that have
// ended are forgotten first (their counts go with them).
const maxAuthAddrs = 4096

// NewAuthFailures returns a limiter logging to log with a one-minute
// window; window and now may be zero for the defaults.
func NewAuthFailures(log *slog.Logger, window time.Duration, now func() time.Time) *AuthFailures {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if window <= 0 {
		window = time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &AuthFailures{log: log, window: window, now: now, addrs: map[string]*authWindow{}}
}

// Note records one refused credential of r; where says what refused it
// (the API, the web sign-in).
func (a *AuthFailures) Note(r *http.Request, where string, err error) {
	if a == nil {
		return
	}
	addr := r.RemoteAddr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		addr = h
	}
	now := a.now()
	a.mu.Lock()
	w := a.addrs[addr]
	if w != nil && now.Sub(w.logged) < a.window {
		w.missed++
		a.mu.Unlock()
		return
	}
	count := 1
	if w != nil {
		count += w.missed
	} else {
		if len(a.addrs) >= maxAuthAddrs {
			a.forget(now)
		}
		w = &authWindow{}
		a.addrs[addr] = w
	}
	w.logged, w.missed = now, 0
	a.mu.Unlock()
	a.log.Warn("authentication failed", desk.LogRemote, addr, "where", where, desk.LogCount, count,
		"window", a.window.String(), desk.LogMethod, r.Method, desk.LogPath, r.URL.Path, "reason", desk.ErrorMessage(err))
}

// forget drops the windows that have ended; with none ended, it drops all,
// so the map stays bounded under a spread of addresses. a.mu is held.
func (a *AuthFailures) forget(now time.Time) {
	for k, w := range a.addrs {
		if now.Sub(w.logged) >= a.window {
			delete(a.addrs, k)
		}
	}
	if len(a.addrs) >= maxAuthAddrs {
		clear(a.addrs)
	}
}
