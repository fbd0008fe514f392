// Package httpapi owns desk's HTTP interface: the /v1 routes and the Wesclaw
// routes, bearer-token authentication, the JSON error contract
// ({"error":{"code","message"}}) and the OpenAPI document, which is built
// from the same route table the router is. It translates between HTTP and
// the services and holds no business rules of its own.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/httpdoor"
	"github.com/desk-runtime/desk/internal/sse"
)

// Reclaimer answers storage pressure.
type Reclaimer interface {
	Pressure(ctx context.Context, level string) (*desk.ReclaimReport, error)
}

// LoginLinks issues the one-time codes of login links (see package
// loginlink).
type LoginLinks interface {
	Issue(ctx context.Context) (code string, expires time.Time, err error)
}

// Server serves the HTTP API over the services it is given.
type Server struct {
	Workspaces desk.WorkspaceService
	Sessions   desk.SessionService
	Artifacts  desk.ArtifactService
	Selection  desk.SelectionService
	Reclaimer  Reclaimer
	Exec       desk.ExecutionService
	Agent      desk.AgentService
	// Conversation serves transcripts, approvals, questions and plan
	// cards.
	Conversation desk.ConversationService
	AgentStore   AgentStore
	// Models is the operator's model catalog GET /v1/models lists (nil:
	// the script model only).
	Models     desk.ModelCatalog
	Usage      desk.UsageService // usage sums; nil: the usage routes answer unavailable
	Files      desk.FileService
	Transfer   desk.TransferService
	Logs       desk.AppLogService
	Archive    desk.ArchiveService
	LogQuery   LogQuery
	UI         desk.UIService
	Lifecycle  desk.LifecycleService
	Templates  desk.TemplateService
	Absorb     desk.AbsorbService
	Runtimes   desk.RuntimeService // nil: the runtime routes answer unavailable
	Profiles   desk.ProfileService // nil: the profile routes answer unavailable
	LoginLinks LoginLinks          // nil: login links answer unavailable
	Web        http.Handler        // everything outside the API (the web UI at /); nil: JSON not-found
	// Streams owns the open event streams, so a shutdown can end them;
	// nil makes one of the server's own.
	Streams *sse.Streams
	Logger  *slog.Logger
	Version string
	// AuthLog logs refused credentials, rate-limited per address; nil
	// makes one on the Logger.
	AuthLog *httpdoor.AuthFailures
	// BrowserSessions are the web UI's sign-ins; nil: revoking them
	// answers unavailable.
	BrowserSessions desk.BrowserSessionService
	// Routines are the workspaces' schedules; nil answers unavailable.
	Routines desk.RoutineService
	// Dispatches record asks with reply ownership; nil: /v1/ask only
	// queues the prompt and the dispatch routes answer unavailable.
	Dispatches desk.DispatchService
	// Webhooks are the completion webhooks; nil answers unavailable.
	Webhooks desk.WebhookService
	// Inbox lists what waits on the caller; nil answers unavailable.
	Inbox desk.InboxService
}

// maxJSONBody bounds JSON request bodies; file bytes never travel as JSON.
const maxJSONBody = 4 << 20

// handlerFunc is a handler that reports failure by returning an error, so
// every error takes the one path to the JSON error contract.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler returns the HTTP handler with every route registered. Serve it
// inside Guard, which holds request bodies to their deadlines.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Streams == nil {
		s.Streams = sse.NewStreams()
	}
	if s.AuthLog == nil {
		s.AuthLog = httpdoor.NewAuthFailures(s.Logger, 0, nil)
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		h := s.wrap(rt)
		mux.Handle(rt.Method+" "+rt.Path, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if s.Web != nil && !apiPath(r.URL.Path) {
			s.Web.ServeHTTP(w, r)
			return
		}
		writeError(w, desk.Errorf(desk.ENOTFOUND, "no route for %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// apiPath reports whether a path belongs to the API, whose unknown routes
// answer JSON errors rather than the web UI.
func apiPath(p string) bool {
	return p == "/v1" || strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/cells/") || p == "/healthz"
}

// wrap authenticates (unless the route is public), runs the handler and
// turns its error into the JSON error contract.
func (s *Server) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		if !rt.Public {
			p, err := s.authenticate(r)
			if err != nil {
				s.AuthLog.Note(r, "api", err)
				w.Header().Set("WWW-Authenticate", `Bearer realm="desk"`)
				writeError(w, err)
				return
			}
			r = r.WithContext(desk.WithPrincipal(r.Context(), p))
		}
		err := s.admit(rt, r)
		if err == nil {
			err = rt.handle(s, w, r)
		}
		if err != nil {
			// A full disk is the operator's to fix: it is logged too.
			if c := desk.ErrorCode(err); c == desk.EINTERNAL || c == desk.ENOSPACE {
				s.logFailure(r, "request failed", err, desk.LogMethod, r.Method, desk.LogPath, r.URL.Path)
			}
			var sw *desk.SwappedError
			if errors.As(err, &sw) {
				s.Logger.Warn("a declared host path was replaced after its declaration; refused", "host_path", sw.Guest, "found", sw.Why, "method", r.Method, "path", r.URL.Path)
			}
			writeError(w, err)
		}
		s.Logger.Debug("request", desk.LogMethod, r.Method, desk.LogPath, r.URL.Path, "code", desk.ErrorCode(err), "took", time.Since(start))
	})
}

func (s *Server) authenticate(r *http.Request) (desk.Principal, error) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	// The scheme is case-insensitive (RFC 9110 §11.1): "bearer x" is a
	// bearer token too.
	scheme, tok, ok := strings.Cut(h, " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	if !ok {
		if h == "" {
			return desk.Principal{}, desk.Errorf(desk.EUNAUTHORIZED, "missing Authorization: Bearer <token> header")
		}
		return desk.Principal{}, desk.Errorf(desk.EUNAUTHORIZED, "Authorization header must be \"Bearer <token>\"")
	}
	return s.Workspaces.Authenticate(r.Context(), strings.TrimSpace(tok))
}

// ErrorBody is the JSON shape of every error response.
type ErrorBody = desk.ErrorBody

func writeError(w http.ResponseWriter, err error) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = desk.ErrorCode(err), desk.ErrorMessage(err)
	// Headers set for a success (a file's length or type) must not leak
	// into the error.
	for _, h := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified", "Content-Disposition", "Content-Encoding"} {
		w.Header().Del(h)
	}
	writeJSON(w, httpdoor.StatusOf(b.Error.Code), b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a JSON body strictly, for every route: field names match
// exactly (encoding/json would take "Text" for "text"), unknown fields,
// duplicate keys, invalid UTF-8 and trailing data are refused with a 400
// naming the problem, so a typo or a smuggled second value never silently
// does something else; a body over maxJSONBody is too_large.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return desk.Errorf(desk.EINVALID, "request body is empty; expected a JSON object")
	}
	return decodeJSON(b, v)
}

// readJSONBody reads a JSON request body whole, bounded by maxJSONBody.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
	b, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	var de *desk.Error
	switch {
	case err == nil:
		return b, nil
	case errors.As(err, &tooBig):
		return nil, desk.Errorf(desk.ETOOLARGE, "JSON body is larger than %d bytes", maxJSONBody)
	case errors.As(err, &de):
		return nil, err
	}
	return nil, desk.Errorf(desk.EINVALID, "read the request body: %v", err)
}

// decodeJSON is the one strict JSON decoding of request bodies (JSON v2
// semantics: exact names, no duplicates, valid UTF-8 only).
func decodeJSON(b []byte, v any) error {
	err := jsonv2.Unmarshal(b, v, jsonv2.RejectUnknownMembers(true))
	if err == nil {
		return nil
	}
	var se *jsonv2.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return desk.Errorf(desk.EINVALID, "invalid JSON body: a key appears twice (%s)", jsonDetail(err))
	case errors.Is(err, jsonv2.ErrUnknownName):
		return desk.Errorf(desk.EINVALID, "invalid JSON body: unknown field (names match exactly, case included): %s", jsonDetail(err))
	case !utf8.Valid(b):
		return desk.Errorf(desk.EINVALID, "invalid JSON body: it is not valid UTF-8 (%s)", jsonDetail(err))
	case errors.As(err, &se):
		return desk.Errorf(desk.EINVALID, "invalid JSON body: %s", jsonDetail(err))
	}
	return desk.Errorf(desk.EINVALID, "invalid JSON body: %s", jsonDetail(err))
}

func jsonDetail(err error) string {
	msg := err.Error()
	for _, p := range []string{"json: ", "jsontext: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// boolParam parses an optional boolean query parameter.
func boolParam(r *http.Request, name string) (*bool, error) {
	v := r.URL.Query().Get(name)
	switch v {
	case "":
		return nil, nil
	case "true", "1":
		t := true
		return &t, nil
	case "false", "0":
		f := false
		return &f, nil
	}
	return nil, desk.Errorf(desk.EINVALID, "query parameter %s=%q must be true or false", name, v)
}

// pathID returns a path parameter after checking its id shape, so garbage
// never reaches the store and the error names the parameter.
func pathID(r *http.Request, name, prefix string) (string, error) {
	v := r.PathValue(name)
	if !desk.HasPrefix(v, prefix) {
		return "", desk.Errorf(desk.ENOTFOUND, "%s %q not found", strings.TrimSuffix(name, "_id"), v)
	}
	return v, nil
}

func noContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func fmtETag(sha string) string { return fmt.Sprintf("%q", sha) }
