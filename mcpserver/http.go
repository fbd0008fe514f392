package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Path is where desk serves MCP over streamable HTTP.
const Path = "/mcp"

// MaxMessageBytes bounds one POSTed JSON-RPC message (or batch). A bigger
// one is refused with HTTP 413 and a JSON-RPC error before it is parsed.
const MaxMessageBytes = 4 << 20

// SessionTimeout closes an MCP session idle this long (no request from
// its host; an open GET stream alone does not count, as in the SDK): the
// host opens a new one (initialize again) when it comes back.
const SessionTimeout = 10 * time.Minute

// TransportOptions configure the streamable HTTP transport shared by desk's
// /mcp endpoint and the conformance fixture server.
type TransportOptions struct {
	// Verify checks a bearer token: nil when it is valid, an error
	// (EUNAUTHORIZED for a bad token) otherwise. Required.
	Verify func(ctx context.Context, token string) error
	// AllowedOrigins are the browser origins (scheme://host[:port]) allowed
	// besides loopback ones; see CheckOrigin.
	AllowedOrigins []string
	Logger         *slog.Logger
	// SessionsPerToken caps the MCP sessions one bearer token keeps open
	// (0: DefaultSessionsPerToken). See sessionTable.
	SessionsPerToken int
	// SessionTimeout closes a session idle this long (0: SessionTimeout).
	SessionTimeout time.Duration
}

// Endpoint is an MCP streamable HTTP endpoint (see Transport). Close ends
// every session it opened and waits for what it started.
type Endpoint struct {
	h        http.Handler
	sessions *sessionTable
}

func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { e.h.ServeHTTP(w, r) }

// Close refuses new sessions, closes the open ones and waits for their
// watchers; it is idempotent.
func (e *Endpoint) Close(ctx context.Context) error { return e.sessions.close(ctx) }

// Transport wraps the SDK's streamable HTTP handler (sessions, the
// Mcp-Session-Id and MCP-Protocol-Version rules, SSE streams and their
// resumption) with what desk adds in front of it, in this order:
//
//  1. Origin validation against DNS rebinding (403 for a foreign Origin);
//     the SDK also refuses a non-loopback Host on a loopback listener.
//  2. Bearer-token authentication (401 with WWW-Authenticate); a session is
//     bound to the token that opened it, so another token cannot use it.
//  3. The per-token session cap (sessionTable): a token opening one
//     session more than SessionsPerToken closes its least recently used
//     idle session, or is refused with 429 when none is idle.
//  4. For a POST, the message itself: more than MaxMessageBytes is 413,
//     bytes that are not JSON are -32700 (parse error), JSON that is not a
//     JSON-RPC 2.0 message is -32600 (invalid request), each a JSON-RPC
//     error body. Unknown methods (-32601) and bad params (-32602) are the
//     SDK's answers on the session's stream.
//
// getServer returns the MCP server for a request (the SDK asks on every
// request, not only for a new session): one server can serve every
// session, which is what keeps a session cheap.
func Transport(getServer func(*http.Request) *sdk.Server, o TransportOptions) *Endpoint {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Verify == nil {
		panic("mcpserver: TransportOptions.Verify is required")
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = SessionTimeout
	}
	streamable := sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		Logger:              o.Logger,
		SessionTimeout:      o.SessionTimeout,
		MaxRequestBodyBytes: MaxMessageBytes,
		// Streams a host lost can be resumed with Last-Event-ID.
		EventStore: sdk.NewMemoryEventStore(nil),
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if err := o.Verify(ctx, token); err != nil {
			if desk.ErrorCode(err) == desk.EUNAUTHORIZED {
				return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
			}
			return nil, err
		}
		// The session is bound to this exact token (by digest): a request
		// with another token, even of the same actor, is refused.
		// The token itself rides along for the server's tools, which call
		// desk as the caller (bearerToken).
		sum := sha256.Sum256([]byte(token))
		return &auth.TokenInfo{UserID: hex.EncodeToString(sum[:]), Extra: map[string]any{tokenExtra: token}}, nil
	}
	// The 2026-07-28 revision is stateless: each request carries its
	// protocol version (the MCP-Protocol-Version header mirrors the one in
	// _meta), nothing is kept between requests, and any desk node answers
	// any request. The SDK serves that revision only from a stateless
	// handler; both handlers share the one server.
	stateless := sdk.NewStreamableHTTPHandler(getServer, &sdk.StreamableHTTPOptions{
		Logger:              o.Logger,
		MaxRequestBodyBytes: MaxMessageBytes,
		Stateless:           true,
		// At 2026-07-28 the POST is the whole request: a client that
		// cancels a call drops it, and the call's context ends with it
		// (session_send with wait then interrupts exactly its execution).
		PropagateRequestCancellation: true,
	})
	sessions := newSessionTable(o.SessionsPerToken, getServer)
	legacy := sessions.wrap(streamable)
	routed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isStateless(r) {
			stateless.ServeHTTP(w, r)
			return
		}
		legacy.ServeHTTP(w, r)
	})
	authed := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(checkMessage(routed))
	allowed := map[string]bool{}
	for _, s := range o.AllowedOrigins {
		allowed[strings.TrimRight(strings.ToLower(s), "/")] = true
	}
	return &Endpoint{sessions: sessions, h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckOrigin(r, allowed); err != nil {
			o.Logger.Warn("mcp request refused", "origin", r.Header.Get("Origin"), "err", err)
			writeRPCError(w, http.StatusForbidden, jsonrpc.CodeInvalidRequest, err.Error())
			return
		}
		authed.ServeHTTP(challenge{w}, r)
	})}
}

// StatelessVersion is the first MCP revision without sessions.
const StatelessVersion = "2026-07-28"

// isStateless reports whether r speaks a stateless MCP revision
// (2026-07-28 or later): its MCP-Protocol-Version header says so. Versions
// are dates, so they compare as strings (as the SDK compares them). A
// request of an older revision, or one without the header (an initialize
// of 2025-06-18 or 2025-11-25), goes to the session-based handler.
func isStateless(r *http.Request) bool {
	return r.Header.Get("MCP-Protocol-Version") >= StatelessVersion
}

// tokenExtra is the TokenInfo.Extra key of the verified bearer token.
const tokenExtra = "desk.token"

// bearerToken is the verified bearer token a request over Transport
// carries, or "".
func bearerToken(extra *sdk.RequestExtra) string {
	if extra == nil || extra.TokenInfo == nil {
		return ""
	}
	tok, _ := extra.TokenInfo.Extra[tokenExtra].(string)
	return tok
}

// challenge adds the bearer challenge to a 401, as RFC 6750 requires.
type challenge struct{ http.ResponseWriter }

func (c challenge) WriteHeader(code int) {
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", `Bearer realm="desk"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c challenge) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c challenge) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// CheckOrigin allows a request without an Origin header (not a browser),
// or whose Origin is a loopback one (localhost, 127.0.0.0/8, [::1]) or in
// allowed (lower-case scheme://host[:port]). A page that a DNS-rebinding
// attack loaded from another name carries that name as its Origin and is
// refused, even though it reaches a loopback address.
func CheckOrigin(r *http.Request, allowed map[string]bool) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	if allowed[strings.TrimRight(strings.ToLower(o), "/")] {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" {
		return desk.Errorf(desk.EFORBIDDEN, "Origin %q is not allowed", o)
	}
	if isLoopbackHost(u.Hostname()) {
		return nil
	}
	return desk.Errorf(desk.EFORBIDDEN, "Origin %q is not allowed: only loopback origins and DESK_MCP_ORIGINS may call /mcp", o)
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// checkMessage refuses a POST whose body is too large, not JSON, or not a
// JSON-RPC 2.0 message, with the JSON-RPC error a client can read; a good
// body goes on to the SDK unchanged.
func checkMessage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxMessageBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("message too large: more than %d bytes", MaxMessageBytes))
				return
			}
			writeRPCError(w, http.StatusBadRequest, jsonrpc.CodeParseError, "could not read the message: "+err.Error())
			return
		}
		if code, msg := validMessage(body); code != 0 {
			writeRPCError(w, http.StatusBadRequest, code, msg)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rw := &rpcErrorWriter{ResponseWriter: w, id: requestID(body)}
		next.ServeHTTP(rw, r)
		rw.finish()
	})
}

// requestID returns the id of a single JSON-RPC request, or nil.
func requestID(body []byte) json.RawMessage {
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &env) != nil {
		return nil
	}
	return env.ID
}

// rpcErrorWriter turns the SDK's plain-text refusals of a POST (an
// unsupported method, a batch where none is allowed, a bad session) into
// JSON-RPC error bodies with the same HTTP status, so a client always gets
// a JSON-RPC error it can read: -32601 for a method the server does not
// handle, -32600 otherwise. Anything else passes through untouched.
type rpcErrorWriter struct {
	http.ResponseWriter
	id       json.RawMessage
	status   int
	captured *bytes.Buffer
}

func (w *rpcErrorWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	h := w.Header()
	if code >= 400 && strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		w.captured = &bytes.Buffer{}
		h.Del("Content-Length")
		h.Set("Content-Type", "application/json")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcErrorWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.captured != nil {
		return w.captured.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *rpcErrorWriter) Flush() {
	if w.captured == nil {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

func (w *rpcErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *rpcErrorWriter) finish() {
	if w.captured == nil {
		return
	}
	msg := strings.TrimSpace(w.captured.String())
	code := int64(jsonrpc.CodeInvalidRequest)
	if strings.Contains(msg, "not handled") || strings.Contains(msg, "unsupported") {
		code = jsonrpc.CodeMethodNotFound
	}
	id := any(nil)
	if len(w.id) > 0 {
		id = w.id
	}
	_ = json.NewEncoder(w.ResponseWriter).Encode(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// validMessage returns 0 for a body the SDK should see, or the JSON-RPC
// error code and message for one it should not.
func validMessage(body []byte) (int64, string) {
	t := bytes.TrimSpace(body)
	if len(t) == 0 {
		return jsonrpc.CodeInvalidRequest, "empty body: POST one JSON-RPC message"
	}
	if !json.Valid(t) {
		var v any
		err := json.Unmarshal(t, &v)
		return jsonrpc.CodeParseError, fmt.Sprintf("parse error: the body is not JSON (%v)", err)
	}
	msgs := []json.RawMessage{t}
	if t[0] == '[' {
		if err := json.Unmarshal(t, &msgs); err != nil || len(msgs) == 0 {
			return jsonrpc.CodeInvalidRequest, "invalid request: a batch must be a non-empty array of JSON-RPC messages"
		}
	}
	for _, m := range msgs {
		var env struct {
			JSONRPC *string         `json:"jsonrpc"`
			Method  json.RawMessage `json:"method"`
		}
		if err := json.Unmarshal(m, &env); err != nil {
			return jsonrpc.CodeInvalidRequest, "invalid request: a JSON-RPC message is an object"
		}
		if env.JSONRPC == nil || *env.JSONRPC != "2.0" {
			return jsonrpc.CodeInvalidRequest, `invalid request: "jsonrpc" must be "2.0"`
		}
		if len(env.Method) > 0 && env.Method[0] != '"' {
			return jsonrpc.CodeInvalidRequest, `invalid request: "method" must be a string`
		}
	}
	return 0, ""
}

func writeRPCError(w http.ResponseWriter, status int, code int64, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": msg},
	})
}

// HTTPOptions configure desk's /mcp endpoint.
type HTTPOptions struct {
	// Authenticate is desk's token check (WorkspaceService.Authenticate).
	Authenticate func(ctx context.Context, token string) (desk.Principal, error)
	// AllowedOrigins: see TransportOptions.
	AllowedOrigins []string
	// SessionsPerToken and SessionTimeout: see TransportOptions.
	SessionsPerToken int
	SessionTimeout   time.Duration
	Version          string
	Logger           *slog.Logger
}

// Handler is desk's /mcp endpoint. It is a component: Close ends every
// MCP session it opened (their streams, the SDK's reader goroutines and
// the resource followers) and refuses new ones, so a closing desk leaves
// nothing running.
type Handler struct {
	e *Endpoint
	b *backend
}

// NewHTTPHandler serves MCP at /mcp for desk. One server, built once,
// serves every MCP session: a request's tools call desk with a client
// that carries the request's own bearer token (the one that opened the
// session: the SDK refuses any other) and sends its requests to api,
// desk's HTTP handler, in process. A session therefore holds no desk
// state of its own beyond its subscriptions.
func NewHTTPHandler(api http.Handler, o HTTPOptions) *Handler {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	hc := &http.Client{Transport: handlerTransport{h: api, logger: o.Logger}}
	b := newBackend(func(extra *sdk.RequestExtra) *client.Client {
		tok := bearerToken(extra)
		if tok == "" {
			return nil
		}
		return &client.Client{BaseURL: "http://desk.in-process", Token: tok, HTTP: hc, UserAgent: "desk-mcp"}
	}, Options{Version: o.Version, Logger: o.Logger})
	e := Transport(func(*http.Request) *sdk.Server { return b.srv }, TransportOptions{
		Verify: func(ctx context.Context, token string) error {
			_, err := o.Authenticate(ctx, token)
			return err
		},
		AllowedOrigins:   o.AllowedOrigins,
		Logger:           o.Logger,
		SessionsPerToken: o.SessionsPerToken,
		SessionTimeout:   o.SessionTimeout,
	})
	return &Handler{e: e, b: b}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.e.ServeHTTP(w, r) }

// Open is a no-op: the handler is ready when made.
func (h *Handler) Open(context.Context) error { return nil }

// Close ends every live MCP session and waits for the goroutines that
// served them; it is idempotent.
func (h *Handler) Close(ctx context.Context) error {
	err := h.e.Close(ctx)
	return errors.Join(err, h.b.wait(ctx))
}

// Sessions is the number of open MCP sessions (for tests and benchmarks).
func (h *Handler) Sessions() int { return h.e.sessions.count("") }
