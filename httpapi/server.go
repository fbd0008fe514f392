// Package httpapi owns desk's HTTP interface: the /v1 routes and the Wesclaw
// routes, bearer-token authentication, the JSON error contract
// ({"error":{"code","message"}}) and the OpenAPI document, which is built
// from the same route table the router is. It translates between HTTP and
// the services and holds no business rules of its own.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/fsjail"
)

// Reclaimer answers storage pressure.
type Reclaimer interface {
	Pressure(ctx context.Context, level string) (*desk.ReclaimReport, error)
}

// Server serves the HTTP API over the services it is given.
type Server struct {
	Workspaces desk.WorkspaceService
	Sessions   desk.SessionService
	Artifacts  desk.ArtifactService
	Selection  desk.SelectionService
	Reclaimer  Reclaimer
	Exec       Executions
	Agent      Agent
	AgentStore AgentStore
	Usage      Usage // usage sums; nil: the usage routes answer unavailable
	Files      desk.FileService
	Transfer   desk.TransferService
	Logs       AppLogs
	Archive    Archive
	LogQuery   LogQuery
	UI         UIState
	Lifecycle  Lifecycle
	Templates  Templates
	Absorb     Absorber
	Web        http.Handler // everything outside the API (the web UI at /); nil: JSON not-found
	Logger     *slog.Logger
	Version    string
}

// maxJSONBody bounds JSON request bodies; file bytes never travel as JSON.
const maxJSONBody = 4 << 20

// handlerFunc is a handler that reports failure by returning an error, so
// every error takes the one path to the JSON error contract.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handler returns the HTTP handler with every route registered.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
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
			if desk.ErrorCode(err) == desk.EINTERNAL {
				s.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			}
			var sw *fsjail.SwappedError
			if errors.As(err, &sw) {
				s.Logger.Warn("a declared host path was replaced after its declaration; refused", "host_path", sw.Guest, "found", sw.Why, "method", r.Method, "path", r.URL.Path)
			}
			writeError(w, err)
		}
		s.Logger.Debug("request", "method", r.Method, "path", r.URL.Path, "code", desk.ErrorCode(err), "took", time.Since(start))
	})
}

func (s *Server) authenticate(r *http.Request) (desk.Principal, error) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		if h == "" {
			return desk.Principal{}, desk.Errorf(desk.EUNAUTHORIZED, "missing Authorization: Bearer <token> header")
		}
		return desk.Principal{}, desk.Errorf(desk.EUNAUTHORIZED, "Authorization header must be \"Bearer <token>\"")
	}
	return s.Workspaces.Authenticate(r.Context(), strings.TrimSpace(tok))
}

// StatusOf maps an error code to its HTTP status. It is the only place that
// knows the mapping; the Go client maps statuses back through the code in
// the body, not the status.
func StatusOf(code string) int {
	switch code {
	case desk.EINVALID:
		return http.StatusBadRequest
	case desk.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case desk.EFORBIDDEN:
		return http.StatusForbidden
	case desk.ENOTFOUND:
		return http.StatusNotFound
	case desk.ECONFLICT, desk.EBUSY, desk.EBLOCKED, desk.ESTALEPLAN:
		return http.StatusConflict
	case desk.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case desk.EUNAVAILABLE:
		return http.StatusServiceUnavailable
	case desk.ENOSPACE:
		return http.StatusInsufficientStorage
	default:
		return http.StatusInternalServerError
	}
}

// ErrorBody is the JSON shape of every error response.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, err error) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = desk.ErrorCode(err), desk.ErrorMessage(err)
	// Headers set for a success (a file's length or type) must not leak
	// into the error.
	for _, h := range []string{"Content-Length", "Content-Range", "ETag", "Last-Modified", "Content-Disposition", "Content-Encoding"} {
		w.Header().Del(h)
	}
	writeJSON(w, StatusOf(b.Error.Code), b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// decode reads a JSON body strictly: unknown fields are refused so a typo
// never silently does nothing, and a body over maxJSONBody is too_large.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return desk.Errorf(desk.ETOOLARGE, "JSON body is larger than %d bytes", maxJSONBody)
		case errors.Is(err, io.EOF):
			return desk.Errorf(desk.EINVALID, "request body is empty; expected a JSON object")
		default:
			return desk.Errorf(desk.EINVALID, "invalid JSON body: %v", err)
		}
	}
	if dec.More() {
		return desk.Errorf(desk.EINVALID, "invalid JSON body: more than one JSON value")
	}
	return nil
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
