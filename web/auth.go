package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/web/safenext"
)

// Cookie names. The session cookie holds the id of a browser session
// (see desk.BrowserSessionService), never a token: HttpOnly so no script
// reads it, SameSite=Strict so no other site's page sends it. The login
// cookie is the double-submit secret of the login form, which has no
// session to derive a CSRF token from yet. legacyTokenCookie is the
// cookie that once held the bearer token itself: it is never read, and
// cleared wherever a browser still sends it.
const (
	sessionCookie     = "desk_session"
	legacyTokenCookie = "desk_token"
	loginCookie       = "desk_login"
	csrfHeader        = "X-CSRF-Token"
	csrfField         = "csrf"
)

// request is what an authenticated handler gets.
type request struct {
	*http.Request
	p       desk.Principal
	session string // the browser session id
	csrf    string
}

type handler func(w http.ResponseWriter, r *request) error

// csrfFor derives the CSRF token of a browser session from its id: a page
// of desk can show it, another site cannot compute it, and it needs no
// state beyond the session's own.
func csrfFor(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("desk web ui csrf v2"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// auth authenticates the session cookie, checks the CSRF token of every
// state-changing request, and runs h with the caller's principal in the
// request context.
func (s *Server) auth(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		clearLegacyCookie(w, r)
		c, err := r.Cookie(sessionCookie)
		var p desk.Principal
		if err == nil && c.Value != "" && s.d.BrowserSessions != nil {
			p, err = s.d.BrowserSessions.Authenticate(r.Context(), c.Value)
		} else {
			err = desk.Errorf(desk.EUNAUTHORIZED, "not signed in")
		}
		if err != nil {
			if !desk.IsCode(err, desk.EUNAUTHORIZED) {
				s.fail(w, r, err)
				return
			}
			if c != nil {
				// A session that ended: the browser forgets it too.
				http.SetCookie(w, expired(sessionCookie, "/"))
			}
			s.toLogin(w, r)
			return
		}
		rq := &request{Request: r.WithContext(desk.WithPrincipal(r.Context(), p)), p: p, session: c.Value, csrf: csrfFor(c.Value)}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := checkCSRF(r, rq.csrf); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		if err := h(w, rq); err != nil {
			s.failSignedIn(w, rq, err)
		}
	})
}

// clearLegacyCookie tells a browser to drop the old token cookie, which
// held a bearer token for 30 days.
func clearLegacyCookie(w http.ResponseWriter, r *http.Request) {
	if _, err := r.Cookie(legacyTokenCookie); err == nil {
		http.SetCookie(w, expired(legacyTokenCookie, "/"))
	}
}

// expired is the cookie that deletes name.
func expired(name, path string) *http.Cookie {
	return &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode}
}

// checkCSRF refuses a state-changing request unless it carries the CSRF
// token (header from htmx and the UI's scripts, or a form field) and, when
// the browser says where it came from, came from desk's own pages.
func checkCSRF(r *http.Request, want string) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return desk.Errorf(desk.EFORBIDDEN, "cross-site request refused")
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return desk.Errorf(desk.EFORBIDDEN, "request from another origin (%s) refused", o)
		}
	}
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(csrfField)
	}
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return desk.Errorf(desk.EFORBIDDEN, "missing or wrong CSRF token; reload the page")
	}
	return nil
}

// toLogin sends an unauthenticated request to the login form: htmx follows
// HX-Redirect, a page load a 303.
func (s *Server) toLogin(w http.ResponseWriter, r *http.Request) {
	next := "/"
	if r.Method == http.MethodGet && !isHTMX(r) {
		next = r.URL.RequestURI()
	}
	dest := "/login?next=" + url.QueryEscape(next)
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case isHTMX(r):
		w.Header().Set("HX-Redirect", dest)
		w.WriteHeader(http.StatusUnauthorized)
	case r.Method == http.MethodGet && r.Header.Get("Accept") != "text/event-stream":
		http.Redirect(w, r, dest, http.StatusSeeOther)
	default:
		http.Error(w, "not signed in", http.StatusUnauthorized)
	}
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	clearLegacyCookie(w, r)
	if r.URL.Query().Has("code") {
		s.loginLink(w, r)
		return
	}
	msg := ""
	if r.URL.Query().Get("error") != "" {
		msg = "That token was not accepted."
	}
	s.renderLogin(w, r, http.StatusOK, safeNext(r.URL.Query().Get("next")), msg)
}

// renderLogin shows the sign-in form with a fresh double-submit secret.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, next, msg string) {
	secret := randomString()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: secret, Path: "/login", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: 3600})
	w.Header().Set("Cache-Control", "no-store")
	s.renderStatus(w, status, "login-page", map[string]any{"CSRF": secret, "Next": next,
		"Error": msg, "Version": s.d.Version})
}

// loginLink exchanges a login link's one-time code for a browser
// session, then sends the browser to / so the code leaves the address bar
// and the history. The code never reaches a log: a refusal is noted by
// path only, and the redactor knows its shape.
func (s *Server) loginLink(w http.ResponseWriter, r *http.Request) {
	clearLegacyCookie(w, r)
	var tok string
	ok := s.d.LoginLinks != nil
	if ok {
		var err error
		tok, ok, err = s.d.LoginLinks.Redeem(r.Context(), r.URL.Query().Get("code"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if !ok {
		s.d.AuthLog.Note(r, "web login link", desk.Errorf(desk.EUNAUTHORIZED, "login link used, expired or unknown"))
		s.renderLogin(w, r, http.StatusUnauthorized, "/",
			"This login link was already used, has expired or is unknown. Run desk login-link for a new one, or sign in with a token.")
		return
	}
	if err := s.startSession(w, r, tok); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("signed in with a login link", desk.LogRemote, remoteHost(r))
	redirectNext(w, "/")
}

// startSession starts a browser session for tok, sets its cookie and
// drops the login form's secret. The cookie lives no longer than the
// session can.
func (s *Server) startSession(w http.ResponseWriter, r *http.Request, tok string) error {
	if s.d.BrowserSessions == nil {
		return desk.Errorf(desk.EUNAVAILABLE, "this server signs no browsers in")
	}
	id, _, err := s.d.BrowserSessions.Start(r.Context(), tok)
	if err != nil {
		return err
	}
	http.SetCookie(w, expired(loginCookie, "/login"))
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(desk.BrowserSessionMax / time.Second)})
	w.Header().Set("Cache-Control", "no-store")
	return nil
}

// redirectNext answers 303 to next, a path safeNext let through, as is:
// http.Redirect would clean the path, and a cleaned path is not the one
// that was checked.
func redirectNext(w http.ResponseWriter, next string) {
	w.Header().Set("Location", next)
	w.WriteHeader(http.StatusSeeOther)
}

func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// login checks the pasted token and starts a browser session. The form is
// guarded by the double-submit login cookie, so another site cannot log a
// browser in with the attacker's token.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	clearLegacyCookie(w, r)
	c, err := r.Cookie(loginCookie)
	form := r.PostFormValue(csrfField)
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) != 1 {
		s.fail(w, r, desk.Errorf(desk.EFORBIDDEN, "the login form expired; reload it and try again"))
		return
	}
	if err := checkCSRF(r, form); err != nil {
		s.fail(w, r, err)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	tok := strings.TrimSpace(r.PostFormValue("token"))
	if tok == "" {
		s.refused(w, r, next, desk.Errorf(desk.EUNAUTHORIZED, "no token was given"))
		return
	}
	if err := s.startSession(w, r, tok); err != nil {
		if desk.IsCode(err, desk.EUNAUTHORIZED) {
			s.refused(w, r, next, err)
			return
		}
		s.fail(w, r, err)
		return
	}
	redirectNext(w, next)
}

// refused sends a refused sign-in back to the form with an error.
func (s *Server) refused(w http.ResponseWriter, r *http.Request, next string, err error) {
	s.d.AuthLog.Note(r, "web sign-in", err)
	http.Redirect(w, r, "/login?error=1&next="+url.QueryEscape(next), http.StatusSeeOther)
}

// logout ends the browser session on the server, so its id stops working
// in every browser that holds it, and drops the cookie.
func (s *Server) logout(w http.ResponseWriter, r *request) error {
	if err := s.d.BrowserSessions.End(r.Context(), r.session); err != nil {
		return err
	}
	http.SetCookie(w, expired(sessionCookie, "/"))
	http.Redirect(w, r.Request, "/login", http.StatusSeeOther)
	return nil
}

// background is a context for clean-up after a request ended, still
// carrying the caller's principal.
func background(r *request) context.Context {
	return desk.WithPrincipal(context.Background(), r.p)
}

// safeNext keeps a post-login redirect on desk's own pages (see package
// safenext, which fuzzes it).
func safeNext(raw string) string { return safenext.Path(raw) }
