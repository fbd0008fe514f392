// Package gateway owns the loopback model endpoint runtime children use.
//
// A runtime child (Codex, Claude Code, any ACP agent) never holds the
// operator's provider key. desk gives each child an Endpoint of its own:
// a random credential made when the child starts (the child lives across
// turns, so the credential is per child and a new one is made on every
// restart) and a listener only that child is told of, serving the OpenAI
// Responses and Chat Completions APIs and the Anthropic Messages API
// (streaming and not). A request carrying the endpoint's credential (as
// `Authorization: Bearer` or `x-api-key`) is forwarded to the operator's
// provider (OPENAI_BASE_URL / ANTHROPIC_BASE_URL of desk's own
// environment, never anything the child says) with the operator's key
// (OPENAI_API_KEY / ANTHROPIC_API_KEY), the answer is streamed back
// unchanged, and the usage the provider reported is recorded as a model
// call of the session's current turn, where the workspace's token budget
// counts it.
//
// With the workspace's network off the child lives in a network namespace
// of its own where no host listener is reachable: the endpoint then listens
// on a unix socket in a directory of its own, bound into the sandbox, and
// a bridge (bridge.go, the desk binary itself) listens on the child's
// loopback and forwards to it. With the network on (and for a full-access
// child on the host) the endpoint listens on the host's loopback instead.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent/provider"
	"github.com/desk-runtime/desk/internal/ownerlock"
)

// Defaults.
const (
	// DefaultMaxBody bounds a request body the child sends.
	DefaultMaxBody = 32 << 20
	// DefaultOpenAIBase and DefaultAnthropicBase are the providers' own
	// APIs, used when desk's environment names no base URL.
	DefaultOpenAIBase    = "https://api.openai.com/v1"
	DefaultAnthropicBase = "https://api.anthropic.com"
	// SocketName is the endpoint's unix socket in its directory.
	SocketName = "gateway.sock"
	// dialTimeout bounds the connection to the provider, so an
	// unreachable one is a recorded failure within seconds.
	dialTimeout = 8 * time.Second
	// callTimeout bounds one model call, stream included.
	callTimeout = 30 * time.Minute
)

// Provided are the variables the gateway gives a runtime child: the base
// URLs of its endpoint and its credential under the names the clients
// read. A registration may not pass desk's own values of these (nor of any
// other provider key) to a child.
var Provided = []string{"OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "DESK_GATEWAY_URL"}

// keyNames are provider credentials a child must never get from desk's
// environment, besides Provided.
var keyNames = []string{"OPENAI_COMPATIBLE_API_KEY", "CODEX_API_KEY", "ANTHROPIC_AUTH_TOKEN"}

// Refused says whether an environment variable of desk's may not be
// passed to a runtime child, and why.
func Refused(name string) (string, bool) {
	for _, n := range Provided {
		if name == n {
			return fmt.Sprintf("%s is given to every runtime child by desk's model gateway (a per-child credential and the gateway's URL); a runtime never holds the operator's provider key", name), true
		}
	}
	for _, n := range keyNames {
		if name == n {
			return fmt.Sprintf("%s is a provider credential; a runtime never holds one: desk's model gateway serves its model calls with the operator's key", name), true
		}
	}
	return "", false
}

// Options are the gateway's collaborators.
type Options struct {
	// Usage records each forwarded call's usage.
	Usage desk.UsageStore
	// Dir is the host directory the endpoints' socket directories are made
	// in (DESK_HOME/run/gateway; see Open).
	Dir string
	// LookupEnv reads the operator's base URLs and keys (os.LookupEnv
	// when nil); read at each call, so a rotated key takes effect.
	LookupEnv func(string) (string, bool)
	Logger    *slog.Logger
	// Transport reaches the providers (a default with bounded dial and
	// header times when nil).
	Transport http.RoundTripper
	MaxBody   int64
	// Models are the models the operator offers (DESK_MODEL and
	// DESK_MODELS). A call naming any other model is refused before it
	// leaves desk: the operator's key pays for the models the operator
	// chose, not for whatever a runtime (or the agent inside it) asks
	// for. Nil offers none, so every model call is refused.
	Models Models
}

// Models is the operator's model catalog as the gateway asks it
// (models.Catalog).
type Models interface {
	// Find returns the declared model of a provider by the name a client
	// of that provider's API sends.
	Find(providerName, model string) (provider.Spec, bool)
	// Models lists every model a session may choose, for the refusal.
	Models() []string
}

// Gateway makes endpoints. Open/Close: Close closes every endpoint.
type Gateway struct {
	o      Options
	client *http.Client

	mu        sync.Mutex
	endpoints map[*Endpoint]struct{}
	closed    bool
	run       string   // this process's socket directory (Open)
	lock      *os.File // holds run's owner lock while the gateway is open
}

// New returns a gateway.
func New(o Options) *Gateway {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Transport == nil {
		o.Transport = &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 10 * time.Minute,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		}
	}
	// Redirects are not followed: the provider's answer, whatever it is,
	// goes back to the child, and the key never follows a redirect.
	c := &http.Client{Transport: o.Transport, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Gateway{o: o, client: c, endpoints: map[*Endpoint]struct{}{}}
}

// Open makes the socket directory: one of this process's own under Dir
// (several desk processes may share a home), removed by Close. A unix
// socket's path is limited to 107 bytes: when Dir is too long for one (or
// empty), a private temporary directory serves instead.
func (g *Gateway) Open(context.Context) error {
	base := g.o.Dir
	if base == "" || len(base)+len("/desk-gw-0123456789/ep-0123456789/"+SocketName) > 104 {
		base = os.TempDir()
	}
	if err := os.MkdirAll(base, 0o700); err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	d, err := os.MkdirTemp(base, "desk-gw-")
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	lock, err := ownerlock.Hold(d)
	if err != nil {
		os.RemoveAll(d)
		return fmt.Errorf("gateway: lock its socket directory: %w", err)
	}
	g.run, g.lock = d, lock
	// The directories of desk processes that were killed before their
	// Close (their sockets dangle); a peer's is locked and left alone.
	if n := ownerlock.Sweep(base, "desk-gw-", d); n > 0 {
		g.o.Logger.Info("removed the model gateway socket directories of ended desk processes", "count", n)
	}
	return nil
}

// Close closes every endpoint and waits for their calls.
func (g *Gateway) Close(context.Context) error {
	g.mu.Lock()
	g.closed = true
	eps := g.endpoints
	g.endpoints = map[*Endpoint]struct{}{}
	g.mu.Unlock()
	for e := range eps {
		e.Close()
	}
	if g.run != "" {
		os.RemoveAll(g.run)
	}
	if g.lock != nil {
		g.lock.Close()
		g.lock = nil
	}
	return nil
}

// Turn is what a call is recorded against: the session's current (or
// last) turn. A child started for a turn makes its calls for that turn,
// and calls it makes between turns count against the last one.
type Turn struct {
	WorkspaceID, SessionID, SurfaceID, ExecutionID, ActorID string
	// Runtime names the runtime, for the log.
	Runtime string
}

// Listen says where an endpoint listens.
type Listen int

const (
	// UnixSocket: a socket in a directory of its own, to be bound into a
	// sandbox without network (and bridged to its loopback).
	UnixSocket Listen = iota
	// HostLoopback: a TCP port on the host's 127.0.0.1, for a child that
	// shares the host's network.
	HostLoopback
)

// Endpoint is one runtime child's model endpoint.
type Endpoint struct {
	g    *Gateway
	cred string
	dir  string // the socket's directory, when UnixSocket
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu    sync.Mutex
	turn  Turn
	calls uint64
	// inflight are the model calls under way, by their start.
	inflight map[uint64]time.Time
	lastOK   time.Time
	// streak is when the current run of failed calls began (zero after a
	// success); why is the newest failure's reason.
	streak   time.Time
	lastFail time.Time
	why      string
	closed   bool
}

// NewEndpoint starts an endpoint for a child.
func (g *Gateway) NewEndpoint(t Turn, l Listen) (*Endpoint, error) {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, desk.Errorf(desk.EUNAVAILABLE, "desk is shutting down")
	}
	g.mu.Unlock()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	e := &Endpoint{g: g, cred: "desk-gw-" + hex.EncodeToString(b[:]), turn: t, inflight: map[uint64]time.Time{}, done: make(chan struct{})}
	var err error
	switch l {
	case UnixSocket:
		if g.run == "" {
			return nil, fmt.Errorf("gateway: not opened")
		}
		e.dir, err = os.MkdirTemp(g.run, "ep-")
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		e.ln, err = net.Listen("unix", filepath.Join(e.dir, SocketName))
		if err != nil {
			os.RemoveAll(e.dir)
			return nil, fmt.Errorf("gateway: %w", err)
		}
	default:
		e.ln, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	e.srv = &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 5 * time.Minute,
		ErrorLog: slog.NewLogLogger(g.o.Logger.Handler(), slog.LevelDebug)}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		e.ln.Close()
		if e.dir != "" {
			os.RemoveAll(e.dir)
		}
		return nil, desk.Errorf(desk.EUNAVAILABLE, "desk is shutting down")
	}
	g.endpoints[e] = struct{}{}
	g.mu.Unlock()
	go func() {
		defer close(e.done)
		_ = e.srv.Serve(e.ln)
	}()
	return e, nil
}

// Credential is the child's credential.
func (e *Endpoint) Credential() string { return e.cred }

// SocketDir is the host directory holding the endpoint's SocketName
// (UnixSocket endpoints), to be bound into the child's sandbox.
func (e *Endpoint) SocketDir() string { return e.dir }

// Addr is the host loopback address of a HostLoopback endpoint.
func (e *Endpoint) Addr() string {
	if e.dir != "" {
		return ""
	}
	return e.ln.Addr().String()
}

// Env is what the child's environment gets for an endpoint it reaches
// at addr (host:port on the child's loopback): the base URLs the clients
// read and the credential under the key names they read.
func (e *Endpoint) Env(addr string) map[string]string {
	base := "http://" + addr
	return map[string]string{
		"DESK_GATEWAY_URL":   base,
		"OPENAI_BASE_URL":    base + "/v1",
		"OPENAI_API_KEY":     e.cred,
		"ANTHROPIC_BASE_URL": base,
		"ANTHROPIC_API_KEY":  e.cred,
	}
}

// SetTurn sets the turn the next calls are recorded against.
func (e *Endpoint) SetTurn(t Turn) {
	e.mu.Lock()
	e.turn = t
	e.mu.Unlock()
}

// Failing reports whether the child's model calls are failing: a call
// failed since the last one that succeeded, and no call begun before that
// failure is still under way (a long answer in progress may yet succeed).
// since is when the run of failures began; why the newest failure's
// reason.
func (e *Endpoint) Failing() (since time.Time, why string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.streak.IsZero() {
		return time.Time{}, "", false
	}
	for _, at := range e.inflight {
		if at.Before(e.streak) {
			return time.Time{}, "", false
		}
	}
	return e.streak, e.why, true
}

// FailedSince returns the newest failure's reason when a call failed at
// or after t.
func (e *Endpoint) FailedSince(t time.Time) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lastFail.IsZero() || e.lastFail.Before(t) {
		return "", false
	}
	return e.why, true
}

// Close stops the endpoint: its listener and socket go, calls under way
// end, and its credential is never accepted again.
func (e *Endpoint) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	e.g.mu.Lock()
	delete(e.g.endpoints, e)
	e.g.mu.Unlock()
	_ = e.srv.Close()
	<-e.done
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

func (e *Endpoint) begin() (uint64, Turn) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	e.inflight[e.calls] = time.Now()
	return e.calls, e.turn
}

// end settles a model call: why is empty on success.
func (e *Endpoint) end(id uint64, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.inflight, id)
	now := time.Now()
	if why == "" {
		e.lastOK, e.streak = now, time.Time{}
		return
	}
	if e.streak.IsZero() {
		e.streak = now
	}
	e.lastFail, e.why = now, why
}

// authorized checks the request's credential in constant time.
func (e *Endpoint) authorized(r *http.Request) bool {
	got := r.Header.Get("x-api-key")
	if a := r.Header.Get("Authorization"); got == "" && len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		got = strings.TrimSpace(a[7:])
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(e.cred)) == 1
}

// route is where a path of the endpoint goes.
type route struct {
	provider string // openai or anthropic
	path     string // appended to the provider's base URL
	model    bool   // a model call (usage recorded, failures counted)
}

// routeOf maps the child's request onto the provider's API. Only these
// paths exist; the base URL is always the operator's.
func routeOf(r *http.Request) (route, bool) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		return route{"openai", "/responses", true}, true
	case r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions":
		return route{"openai", "/chat/completions", true}, true
	case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
		return route{"openai", "/models", false}, true
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		return route{"anthropic", "/v1/messages", true}, true
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		return route{"anthropic", "/v1/messages/count_tokens", false}, true
	}
	return route{}, false
}

// upstream is the operator's base URL and key of a provider.
func (g *Gateway) upstream(provider string) (base, key, keyName string, err error) {
	baseName, def := "OPENAI_BASE_URL", DefaultOpenAIBase
	keyName = "OPENAI_API_KEY"
	if provider == "anthropic" {
		baseName, def, keyName = "ANTHROPIC_BASE_URL", DefaultAnthropicBase, "ANTHROPIC_API_KEY"
	}
	base = def
	if v, ok := g.o.LookupEnv(baseName); ok && strings.TrimSpace(v) != "" {
		base = strings.TrimSpace(v)
	}
	u, perr := url.Parse(base)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", keyName, fmt.Errorf("desk's %s is not an http(s) URL", baseName)
	}
	key, _ = g.o.LookupEnv(keyName)
	if key == "" {
		return "", "", keyName, fmt.Errorf("desk has no %s: the operator must set it for runtimes to reach %s", keyName, provider)
	}
	return strings.TrimRight(base, "/"), key, keyName, nil
}

// errorJSON answers in the shape both providers use.
func errorJSON(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q}}`+"\n", typ, msg)
}
