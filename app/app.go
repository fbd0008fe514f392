// Package app wires desk's services into one running server: it opens the
// store, runs startup recovery before anything is served, and builds the
// HTTP handler. cmd/desk keeps only flags; tests start the same App the
// binary does, so what they exercise is what ships.
package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/absorb"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/sandbox"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/applog"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/files"
	"github.com/desk-runtime/desk/gc"
	"github.com/desk-runtime/desk/httpapi"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/lifecycle"
	"github.com/desk-runtime/desk/mcpserver"
	"github.com/desk-runtime/desk/selection"
	"github.com/desk-runtime/desk/session"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/template"
	"github.com/desk-runtime/desk/transfer"
	"github.com/desk-runtime/desk/uistate"
	"github.com/desk-runtime/desk/web"
	"github.com/desk-runtime/desk/workspace"
)

// Config is everything desk needs to start.
type Config struct {
	Home     string // DESK_HOME
	Postgres string // DSN; SQLite in Home when empty
	// SQLiteSynchronous is "full" (default) or "normal"
	// (DESK_SQLITE_SYNCHRONOUS); see sqlite.Options.
	SQLiteSynchronous string
	AdminToken        string // DESK_ADMIN_TOKEN; generated into Home when empty
	// MaxArtifactBytes refuses larger artifacts; 0 means no limit.
	MaxArtifactBytes int64
	// ArchiveTZ names the time zone that decides an archive record's day
	// (DESK_ARCHIVE_TZ); empty means UTC.
	ArchiveTZ string
	// ActorQuotaBytes bounds each actor's file area (DESK_ACTOR_QUOTA_BYTES);
	// 0 means unlimited.
	ActorQuotaBytes int64
	// ImportMaxBytes bounds a workspace import, compressed and unpacked
	// (DESK_IMPORT_MAX_BYTES); 0 means transfer.DefaultMaxImportBytes.
	ImportMaxBytes int64
	// ImportMaxRatio bounds how many times its compressed size an import
	// may unpack to (DESK_IMPORT_MAX_RATIO); 0 means
	// transfer.DefaultMaxImportRatio.
	ImportMaxRatio int64
	// BodyIdleTimeout cuts off a request body that stalls (see
	// httpapi.Server.BodyIdleTimeout); 0 means httpapi.DefaultBodyIdleTimeout.
	BodyIdleTimeout time.Duration
	// Execution tunes the execution model (timeouts, the executor). Its
	// Archive and Logger are filled in by Open.
	Execution execution.Options
	// Lifecycle tunes the workspace lifecycle (tests inject failures
	// through it); its Sessions, Submit, Archive and Logger are
	// filled in by Open.
	Lifecycle lifecycle.Options
	// Templates and Absorb tune template upgrades and absorbs (tests
	// inject failures through their Hook); their Logger is filled in.
	Templates template.Options
	Absorb    absorb.Options
	// Model is the server's default model (DESK_MODEL): openai:<model>,
	// anthropic:<model>, openai-compatible:<base-url>#<model>; empty means
	// none (sessions may still choose their own, e.g. script).
	Model string
	// Agent tunes the agent; its defaults are right for production.
	Agent agent.Options
	// WrapStore, when set, wraps the opened store; tests use it to inject
	// faults.
	WrapStore func(desk.Store) desk.Store
	Logger    *slog.Logger
	Version   string
	// MCPOrigins are browser origins allowed at /mcp besides loopback ones
	// (DESK_MCP_ORIGINS).
	MCPOrigins []string
}

// App is a running desk without its listener.
type App struct {
	Config     Config
	Home       layout.Home
	Store      desk.Store
	AdminToken string
	Workspaces desk.WorkspaceService
	Sessions   desk.SessionService
	Artifacts  desk.ArtifactService
	Selection  desk.SelectionService
	Collector  *gc.Collector
	Logs       *applog.Service
	Archive    *archive.Archive
	Exec       *execution.Service
	Agent      *agent.Agent
	Files      *files.Service
	Transfer   *transfer.Service
	// Lifecycle runs offboard, restore, purge and ask; Guard is its
	// operation guard (one lease per workspace), for other operations
	// that change a workspace's checkout.
	Lifecycle *lifecycle.Service
	Guard     *lifecycle.Guard
	Templates *template.Service
	Absorb    *absorb.Service
	UI        *uistate.Service // drafts, open holds, unread
	Handler   http.Handler
	// Logger is desk's own logger: every record lands in the app log
	// (redacted) and goes on to Config.Logger.
	Logger *slog.Logger
}

// recoverer is implemented by services that finish interrupted work.
type recoverer interface {
	Recover(ctx context.Context) error
}

// Open opens the store and services, finishes whatever a crash interrupted,
// and returns an App ready to serve.
func Open(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Home == "" {
		return nil, errors.New("app: Home is required")
	}
	// A tool schema that is not valid JSON Schema fails every real-model
	// turn before the provider is called: refuse to start instead.
	if err := tools.Check(); err != nil {
		return nil, fmt.Errorf("desk cannot start: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	home := layout.Home{Root: cfg.Home}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("create home %s: %w", cfg.Home, err)
	}
	token, err := adminToken(home, cfg.AdminToken)
	if err != nil {
		return nil, err
	}
	var store desk.Store
	if cfg.Postgres != "" {
		store, err = postgres.Open(ctx, cfg.Postgres)
	} else {
		store, err = sqlite.OpenWith(ctx, home.DB(), sqlite.Options{Synchronous: cfg.SQLiteSynchronous})
	}
	if err != nil {
		return nil, err
	}
	if cfg.WrapStore != nil {
		store = cfg.WrapStore(store)
	}
	a := &App{Config: cfg, Home: home, Store: store, AdminToken: token}
	// The app log takes every record desk logs, redacts it (the admin token
	// included, whatever its shape) and passes it on to the configured
	// handler, so even stderr never shows a secret.
	a.Logs = applog.New(store, applog.Options{Next: cfg.Logger.Handler(), Secrets: []string{token}})
	if err := a.Logs.Open(ctx); err != nil {
		store.Close()
		return nil, fmt.Errorf("open app log: %w", err)
	}
	a.Logger = slog.New(a.Logs.Handler(applog.DefaultSource))
	loc, err := archive.LoadLocation(cfg.ArchiveTZ)
	if err != nil {
		a.Logs.Close(ctx)
		store.Close()
		return nil, fmt.Errorf("DESK_ARCHIVE_TZ: %w", err)
	}
	a.Archive, err = archive.Open(home, archive.Options{Location: loc, Logger: a.Logger.With("component", "archive")})
	if err != nil {
		a.Logs.Close(ctx)
		store.Close()
		return nil, fmt.Errorf("open archive: %w", err)
	}
	a.Workspaces = workspace.New(store, home, token)
	a.Sessions = session.New(store, home, a.Workspaces)
	ao0 := session.ArtifactOptions{MaxBytes: cfg.MaxArtifactBytes}
	if cfg.ActorQuotaBytes > 0 {
		// Artifacts live in the actor's file area, so the file quota holds
		// for them too (a.Files exists by the time a request comes).
		ao0.Admit = func(ctx context.Context, ws, actor string, replaced, size int64) (func(), error) {
			return a.Files.Admit(ctx, ws, actor, replaced, size)
		}
	}
	a.Artifacts = session.NewArtifacts(store, home, ao0)
	a.Selection = selection.New(store, home, a.Workspaces)
	ao := cfg.Agent
	ao.DefaultModel, ao.Archive, ao.Logger = cfg.Model, a.Archive, a.Logger.With("component", "agent")
	if ao.Providers == nil {
		ps := &agent.Providers{}
		ao.Providers = ps.Get
	}
	if ao.Sandbox == nil {
		if sb, err := sandbox.Detect(); err == nil {
			ao.Sandbox = sb
		} else {
			a.Logger.Warn("no sandbox for commands: exec_command is unavailable except in full-access workspaces", "err", err)
		}
	}
	a.Agent = agent.New(store, home, a.Artifacts, a.Selection, ao)
	if m, err := a.Agent.DefaultModel(); m == "" {
		a.Logger.Info("no default model: set DESK_MODEL (openai:<model>, anthropic:<model> or openai-compatible:<base-url>#<model>); script sessions still work")
	} else if err != nil {
		a.Logger.Warn("DESK_MODEL is not usable", "err", err)
	}
	eo := cfg.Execution
	eo.Archive, eo.Logger = a.Archive, a.Logger.With("component", "execution")
	// The agent is the executor, unless a test plugs in its own.
	if eo.Executor == nil {
		eo.Executor, eo.Available = a.Agent, a.Agent.Available
	}
	lo := cfg.Lifecycle
	lo.Sessions, lo.Archive, lo.Logger = a.Sessions, a.Archive, a.Logger.With("component", "lifecycle")
	a.Lifecycle = lifecycle.New(store, home, lo)
	to := cfg.Templates
	to.Logger = a.Logger.With("component", "template")
	a.Templates = template.New(store, home, a.Workspaces, a.Lifecycle, to)
	ab := cfg.Absorb
	ab.Logger = a.Logger.With("component", "absorb")
	a.Absorb = absorb.New(store, home, a.Lifecycle, ab)
	// Interrupted offboards, restores and purges are finished once this
	// process is an owner (the guard's leases name it) and before any
	// queued work is dispatched.
	eo.BeforeDispatch = func(ctx context.Context) error {
		a.Guard = lifecycle.NewGuard(store, a.Exec.OwnerID())
		if eo.OwnerTTL > 0 {
			a.Guard.OwnerTTL = eo.OwnerTTL
		}
		a.Guard.Released = a.Exec.Wake
		a.Lifecycle.SetGuard(a.Guard)
		if err := a.Lifecycle.Recover(ctx); err != nil {
			return fmt.Errorf("startup recovery: %w", err)
		}
		// Template upgrades and absorbs come after the lifecycle, so an
		// absorb finds its source's offboarding already settled.
		if err := a.Templates.Recover(ctx); err != nil {
			return fmt.Errorf("startup recovery: %w", err)
		}
		if err := a.Absorb.Recover(ctx); err != nil {
			return fmt.Errorf("startup recovery: %w", err)
		}
		return nil
	}
	a.Exec = execution.New(store, home, eo)
	a.Lifecycle.SetSubmitter(a.Exec.Submit)
	a.Agent.SetSubmitter(a.Exec.Submit)
	a.Collector = &gc.Collector{Store: store, Home: home, Running: a.Exec.Running}
	session.SetBeforeDelete(a.Sessions, a.Exec.StopSession)
	a.Files = files.New(store, home, a.Workspaces, a.Artifacts.(desk.ArtifactPaths), a.Collector, files.Options{QuotaBytes: cfg.ActorQuotaBytes})
	a.Transfer = transfer.New(store, home, a.Workspaces, transfer.Options{MaxImportBytes: cfg.ImportMaxBytes, MaxImportRatio: cfg.ImportMaxRatio, ActorQuotaBytes: cfg.ActorQuotaBytes})

	// Recovery runs before the handler exists, so no request can observe a
	// half-finished delete or install.
	for _, r := range []any{a.Sessions, a.Artifacts, a.Transfer} {
		if rc, ok := r.(recoverer); ok {
			if err := rc.Recover(ctx); err != nil {
				a.Archive.Close(ctx)
				a.Logs.Close(ctx)
				store.Close()
				return nil, fmt.Errorf("startup recovery: %w", err)
			}
		}
	}
	// The execution model recovers what dead owners left behind before
	// anything is dispatched or served.
	if err := a.Exec.Open(ctx); err != nil {
		a.Archive.Close(ctx)
		a.Logs.Close(ctx)
		store.Close()
		return nil, err
	}
	// Title jobs a dead process left are retried once (in the background).
	if err := a.Agent.RecoverTitles(ctx); err != nil {
		a.Logger.Warn("recover title jobs", "err", err)
	}
	api := &httpapi.Server{
		Workspaces: a.Workspaces, Sessions: a.Sessions, Artifacts: a.Artifacts, Selection: a.Selection,
		Reclaimer: a.Collector, Logs: a.Logs, Archive: a.Archive, Exec: a.Exec, Agent: a.Agent, AgentStore: store, Usage: a.Exec, Files: a.Files, Transfer: a.Transfer, Lifecycle: a.Lifecycle, Templates: a.Templates, Absorb: a.Absorb, LogQuery: func(r *http.Request) (desk.LogFilter, error) { return applog.ParseQuery(r.URL.Query()) },
		Logger: a.Logger.With("component", "http"), Version: cfg.Version, BodyIdleTimeout: cfg.BodyIdleTimeout,
	}
	// Unread follows turns that finish from now on; the web UI is served
	// at / beside the API.
	a.UI = uistate.New(store, a.Sessions, a.Exec, uistate.Options{Logger: a.Logger.With("component", "uistate")})
	a.UI.Start()
	api.UI = a.UI
	api.Web = web.New(web.Deps{Workspaces: a.Workspaces, Sessions: a.Sessions, Artifacts: a.Artifacts, Files: a.Files,
		Exec: a.Exec, Agent: a.Agent, Store: store, Logs: a.Logs, UI: a.UI, Catalog: a.Lifecycle,
		Logger: a.Logger.With("component", "web"), Version: cfg.Version})
	// MCP is served at /mcp over the API handler itself, in process, with
	// the caller's own token (see package mcpserver).
	apiH := api.Handler()
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, mcpserver.NewHTTPHandler(apiH, mcpserver.HTTPOptions{Authenticate: a.Workspaces.Authenticate,
		AllowedOrigins: cfg.MCPOrigins, Version: cfg.Version, Logger: a.Logger.With("component", "mcp")}))
	mux.Handle("/", apiH)
	a.Handler = mux
	return a, nil
}

// Close stops this process's executions, flushes the archive and the app
// log, and releases the store.
func (a *App) Close(ctx context.Context) error {
	uerr := a.UI.Close(ctx)
	eerr := a.Exec.Close(ctx)
	a.Agent.Close()
	aerr := a.Archive.Close(ctx)
	lerr := a.Logs.Close(ctx)
	if err := a.Store.Close(); err != nil {
		return err
	}
	for _, err := range []error{eerr, aerr, lerr} {
		if err != nil {
			return err
		}
	}
	return uerr
}

// Serve listens on addr until ctx is cancelled, then shuts down gracefully,
// letting in-flight requests finish for up to grace. ready, if not nil, is
// called with the bound address once the listener is open.
func (a *App) Serve(ctx context.Context, addr string, grace time.Duration, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	if ready != nil {
		ready(ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// adminToken returns the configured token, or the one stored in the home,
// generating and storing it (mode 0600) on first start.
func adminToken(home layout.Home, configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	p := home.AdminToken()
	b, err := os.ReadFile(p)
	if err == nil {
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("admin token file %s is empty; delete it to generate a new token", p)
		}
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read admin token: %w", err)
	}
	tok := workspace.NewAdminToken()
	f, err := os.CreateTemp(filepath.Dir(p), ".admin.token-*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("write admin token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	// Link instead of rename so two processes starting at once agree on
	// one token: the loser finds the winner's file and uses it.
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return adminToken(home, "")
		}
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return tok, nil
}
