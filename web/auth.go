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

	"github.com/desk-runtime/desk"
)

// Cookie names. The token cookie holds the bearer token the person pasted:
// HttpOnly so no script reads it, SameSite=Strict so no other site's page
// sends it. The login cookie is the double-submit secret of the login form,
// which has no token to derive a CSRF token from yet.
const (
	tokenCookie = "desk_token"
	loginCookie = "desk_login"
	csrfHeader  = "X-CSRF-Token"
	csrfField   = "csrf"
)

// tokenMaxAge keeps a login for 30 days: paste the token once.
const tokenMaxAge = 30 * 24 * 3600

// request is what an authenticated handler gets.
type request struct {
	*http.Request
	p     desk.Principal
	token string
	csrf  string
}

type handler func(w http.ResponseWriter, r *request) error

// csrfFor derives the CSRF token of a login from its bearer token: a page
// of desk can show it, another site cannot compute it, and it needs no
// server-side state, so it survives restarts like the cookie does.
func csrfFor(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("desk web ui csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// auth authenticates the cookie, checks the CSRF token of every
// state-changing request, and runs h with the caller's principal in the
// request context.
func (s *Server) auth(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(tokenCookie)
		var p desk.Principal
		if err == nil && c.Value != "" {
			p, err = s.d.Workspaces.Authenticate(r.Context(), c.Value)
		} else {
			err = desk.Errorf(desk.EUNAUTHORIZED, "not signed in")
		}
		if err != nil {
			s.toLogin(w, r)
			return
		}
		rq := &request{Request: r.WithContext(desk.WithPrincipal(r.Context(), p)), p: p, token: c.Value, csrf: csrfFor(c.Value)}
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

// safeNext keeps a post-login redirect on desk's own pages.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
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

// loginLink exchanges a login link's one-time code for the session
// cookie the token form sets, then sends the browser to / so the code
// leaves the address bar and the history. The code never reaches a log:
// a refusal is noted by path only, and the redactor knows its shape.
func (s *Server) loginLink(w http.ResponseWriter, r *http.Request) {
	var tok string
	ok := s.d.LoginLinks != nil
	if ok {
		tok, ok = s.d.LoginLinks.Redeem(r.URL.Query().Get("code"))
	}
	if !ok {
		s.d.AuthLog.Note(r, "web login link", desk.Errorf(desk.EUNAUTHORIZED, "login link used, expired or unknown"))
		s.renderLogin(w, r, http.StatusUnauthorized, "/",
			"This login link was already used, has expired or is unknown. Run desk login-link for a new one, or sign in with a token.")
		return
	}
	s.setSession(w, r, tok)
	s.log.Info("signed in with a login link", desk.LogRemote, remoteHost(r))
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// setSession sets the session cookie and drops the login form's secret.
func (s *Server) setSession(w http.ResponseWriter, r *http.Request, tok string) {
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/login", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: tok, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: tokenMaxAge})
	w.Header().Set("Cache-Control", "no-store")
}

func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// login checks the pasted token and sets the cookie. The form is guarded by
// the double-submit login cookie, so another site cannot log a browser in
// with the attacker's token.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
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
	if _, err := s.d.Workspaces.Authenticate(r.Context(), tok); tok == "" || err != nil {
		if err == nil {
			err = desk.Errorf(desk.EUNAUTHORIZED, "no token was given")
		}
		s.d.AuthLog.Note(r, "web sign-in", err)
		http.Redirect(w, r, "/login?error=1&next="+url.QueryEscape(next), http.StatusSeeOther)
		return
	}
	s.setSession(w, r, tok)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *request) error {
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r.Request, "/login", http.StatusSeeOther)
	return nil
}

// background is a context for clean-up after a request ended, still
// carrying the caller's principal.
func background(r *request) context.Context {
	return desk.WithPrincipal(context.Background(), r.p)
}
