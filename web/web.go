// Package web owns desk's web UI: server-rendered html/template pages made
// live with htmx and server-sent events, served by the same binary at "/"
// beside the API. Every asset is embedded (static/ and templates/), vendored
// htmx included, so there is no CDN and no build step.
//
// The UI is a thin door: it calls the same services the HTTP API does, with
// the caller's principal in the context, so every rule (who may see what,
// queue order, interrupts, approvals) is decided in one place. It owns only
// presentation: the login cookie, CSRF checks, the security headers, and
// turning domain events into HTML fragments.
//
// It must never render model or user text unescaped (Markdown is rendered
// without raw HTML), never serve an artifact's HTML on desk's own origin
// (previews are sandboxed with their own CSP), and never accept a
// state-changing request without the CSRF token.
package web

import (
	"context"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/httpdoor"
	"github.com/desk-runtime/desk/internal/sse"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Store is what the UI reads straight from the store: facts the services
// do not list, always about a session the caller was already allowed to
// see.
type Store interface {
	GetPlan(ctx context.Context, id string) (*desk.Plan, error)
	ListExecutions(ctx context.Context, sessionID string, limit int) ([]*desk.Execution, error)
	EventBounds(ctx context.Context) (min, max int64, err error)
	// GetRuntime reads the registered runtime a runtime-backed session
	// names (its protocol is shown in the session header).
	GetRuntime(ctx context.Context, name string) (*desk.Runtime, error)
}

// Deps are the services the UI is a door to.
type Deps struct {
	Workspaces desk.WorkspaceService
	Sessions   desk.SessionService
	Artifacts  desk.ArtifactService
	Files      desk.FileService
	Exec       desk.ExecutionService
	Agent      desk.AgentService
	// Conversation serves transcripts, approvals, questions, plan
	// cards, and handler threads with their episodes.
	Conversation desk.ConversationService
	Store        Store
	Logs         desk.AppLogService
	UI           desk.UIService
	// Models is the operator's model catalog the new-session form offers
	// (nil: the script model only).
	Models desk.ModelCatalog
	// Profiles are the workspaces' agent profiles the new-session form
	// offers (nil: none).
	Profiles desk.ProfileService
	// Catalog, when set, serves the workspace catalog page.
	Catalog desk.LifecycleService
	// Streams owns the page and log streams (shared with the API), so a
	// shutdown ends them; nil makes one of the UI's own.
	Streams *sse.Streams
	Logger  *slog.Logger
	Version string
	// AuthLog logs refused sign-ins (rate-limited, shared with the API);
	// nil logs none.
	AuthLog *httpdoor.AuthFailures
	// LoginLinks redeems the one-time codes of login links
	// (/login?code=…); nil refuses every code.
	LoginLinks LoginLinks
	// BrowserSessions signs browsers in: the session cookie holds a
	// browser session's id, never a token. nil signs no browser in.
	BrowserSessions desk.BrowserSessionService
	// Routines, when set, serves the workspace's Routines page.
	Routines desk.RoutineService
	// Inbox, when set, serves the Inbox page.
	Inbox desk.InboxService
}

// LoginLinks redeems a login link's one-time code for the token a
// browser session is started with (see package loginlink).
type LoginLinks interface {
	Redeem(ctx context.Context, code string) (token string, ok bool, err error)
}

// Server is the web UI.
type Server struct {
	d    Deps
	log  *slog.Logger
	tmpl *template.Template
	mux  *http.ServeMux
	// keepalive paces comments on idle event streams.
	keepalive time.Duration
}

// New parses the templates and builds the routes. It panics on a broken
// template: they are embedded, so that is a build mistake, not a runtime
// condition.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Streams == nil {
		d.Streams = sse.NewStreams()
	}
	s := &Server{d: d, log: d.Logger, keepalive: 15 * time.Second}
	s.tmpl = template.Must(template.New("").Funcs(funcs()).ParseFS(templateFiles, "templates/*.html"))
	s.routes()
	return s
}

// ServeHTTP sets the security headers every answer carries and routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	s.mux.ServeHTTP(w, r)
}

// pageCSP allows only desk's own scripts, styles and frames: no inline
// script, no eval, nothing from elsewhere, and no framing of desk itself.
const pageCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"frame-src 'self'; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFiles, "static")
	m.Handle("GET /static/", http.StripPrefix("/static/", cacheStatic(http.FileServerFS(static))))
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.Handle("POST /logout", s.auth(s.logout))
	m.Handle("GET /{$}", s.auth(s.home))
	m.Handle("POST /workspaces", s.auth(s.createWorkspace))

	m.Handle("GET /w/{ws}", s.auth(s.workspacePage))
	m.Handle("GET /w/{ws}/new", s.auth(s.newSessionPage))
	m.Handle("POST /w/{ws}/sessions", s.auth(s.createSession))
	m.Handle("GET /w/{ws}/sidebar", s.auth(s.sidebarFragment))
	m.Handle("GET /w/{ws}/stream", s.auth(s.stream))
	m.Handle("GET /w/{ws}/s/{ses}", s.auth(s.sessionPage))
	m.Handle("GET /w/{ws}/s/{ses}/t/{thr}", s.auth(s.threadPage))

	m.Handle("POST /s/{ses}/send", s.auth(s.send))
	m.Handle("PUT /s/{ses}/draft", s.auth(s.saveDraft))
	m.Handle("POST /s/{ses}/queue/{q}/{op}", s.auth(s.queueOp))
	m.Handle("POST /s/{ses}/stop/{exe}", s.auth(s.stop))
	m.Handle("POST /s/{ses}/update", s.auth(s.updateSession))
	m.Handle("POST /s/{ses}/agent", s.auth(s.switchAgent))
	m.Handle("POST /s/{ses}/delete", s.auth(s.deleteSession))
	m.Handle("GET /s/{ses}/older", s.auth(s.older))
	m.Handle("POST /approvals/{apr}", s.auth(s.decideApproval))
	m.Handle("POST /inputs/{inp}", s.auth(s.answerInput))
	m.Handle("POST /plans/{pln}", s.auth(s.decidePlan))

	m.Handle("GET /s/{ses}/shelf", s.auth(s.shelfFragment))
	m.Handle("POST /s/{ses}/artifacts", s.auth(s.uploadArtifact))
	m.Handle("GET /s/{ses}/a/{art}", s.auth(s.preview))
	m.Handle("GET /s/{ses}/a/{art}/raw", s.auth(s.artifactRaw))
	m.Handle("POST /s/{ses}/a/{art}/delete", s.auth(s.deleteArtifact))

	m.Handle("GET /w/{ws}/files", s.auth(s.filesPage))
	m.Handle("GET /w/{ws}/files/raw", s.auth(s.fileRaw))
	m.Handle("POST /w/{ws}/files/upload", s.auth(s.fileUpload))
	m.Handle("POST /w/{ws}/files/delete", s.auth(s.fileDelete))
	m.Handle("POST /w/{ws}/files/delete-prefix", s.auth(s.fileDeletePrefix))

	m.Handle("GET /w/{ws}/routines", s.auth(s.routinesPage))
	m.Handle("POST /w/{ws}/routines", s.auth(s.createRoutine))
	m.Handle("POST /w/{ws}/routines/{rtn}/{op}", s.auth(s.routineAction))

	m.Handle("GET /inbox", s.auth(s.inboxPage))
	m.Handle("POST /inbox/approvals/{apr}", s.auth(s.inboxDecide))
	m.Handle("GET /inbox/count", s.auth(s.inboxCount))

	m.Handle("GET /logs", s.auth(s.logsPage))
	m.Handle("GET /logs/stream", s.auth(s.logsStream))
	m.Handle("POST /logs/seen", s.auth(s.logsSeen))
	m.Handle("GET /nav/unread", s.auth(s.navUnread))

	m.Handle("GET /catalog", s.auth(s.catalogPage))
	m.Handle("POST /catalog/{ws}/{action}", s.auth(s.catalogAction))

	m.Handle("/", s.auth(func(w http.ResponseWriter, r *request) error {
		return desk.Errorf(desk.ENOTFOUND, "no page at %s", r.URL.Path)
	}))
	s.mux = m
}

// cacheStatic lets browsers keep the embedded assets for an hour; they
// change only with the binary.
func cacheStatic(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		h.ServeHTTP(w, r)
	})
}

// isHTMX reports whether htmx sent the request (it swaps the answer into
// the page rather than replacing the page).
func isHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// failSignedIn answers an error of a signed-in page inside the layout, so
// the navigation and sign-out stay; fragments and JSON answer as fail does.
func (s *Server) failSignedIn(w http.ResponseWriter, r *request, err error) {
	if isHTMX(r.Request) || strings.HasPrefix(r.Header.Get("Accept"), "application/json") ||
		errors.Is(err, context.Canceled) || httpdoor.ClientGone(r.Request, err) {
		s.fail(w, r.Request, err)
		return
	}
	code := desk.ErrorCode(err)
	if code == desk.EINTERNAL {
		s.log.Error("web request failed", desk.LogMethod, r.Method, desk.LogPath, r.URL.Path, desk.LogErr, err)
	}
	status := httpdoor.StatusOf(code)
	l, perr := s.page(r, nil, "", strconv.Itoa(status), "error-main",
		map[string]any{"Message": desk.ErrorMessage(err), "Code": code, "Status": status})
	if perr != nil {
		s.fail(w, r.Request, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	s.renderStatus(w, status, "layout", l)
}

// fail answers an error: a toast for htmx requests (retargeted so it never
// replaces the content the request aimed at), an error page otherwise.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) || httpdoor.ClientGone(r, err) {
		return // the client went away; nobody reads an answer
	}
	code := desk.ErrorCode(err)
	if code == desk.EINTERNAL {
		s.log.Error("web request failed", desk.LogMethod, r.Method, desk.LogPath, r.URL.Path, desk.LogErr, err)
	}
	msg := desk.ErrorMessage(err)
	status := httpdoor.StatusOf(code)
	w.Header().Set("Cache-Control", "no-store")
	if isHTMX(r) {
		w.Header().Set("HX-Retarget", "#toast")
		w.Header().Set("HX-Reswap", "innerHTML")
		s.renderStatus(w, status, "toast", map[string]string{"Message": msg, "Code": code})
		return
	}
	if strings.HasPrefix(r.Header.Get("Accept"), "application/json") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"code":` + jsonString(code) + `,"message":` + jsonString(msg) + `}}`))
		return
	}
	s.renderStatus(w, status, "error-page", map[string]any{"Message": msg, "Code": code, "Status": status})
}
