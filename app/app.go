// Package app wires desk's services into one running server: it opens the
// store, runs startup recovery before anything is served, and builds the
// HTTP handler. cmd/desk keeps only flags; tests start the same App the
// binary does, so what they exercise is what ships.
package app

import (
	"context"
	"errors"
	"fmt"
	"github.com/desk-runtime/desk/blobs"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/absorb"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/agent/typescript"
	"github.com/desk-runtime/desk/applog"
	"github.com/desk-runtime/desk/archive"
	"github.com/desk-runtime/desk/connlimit"
	"github.com/desk-runtime/desk/conversation"
	"github.com/desk-runtime/desk/dispatch"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/files"
	"github.com/desk-runtime/desk/gateway"
	"github.com/desk-runtime/desk/gc"
	"github.com/desk-runtime/desk/httpapi"
	"github.com/desk-runtime/desk/inbox"
	"github.com/desk-runtime/desk/internal/httpdoor"
	"github.com/desk-runtime/desk/internal/sse"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/leader"
	"github.com/desk-runtime/desk/lifecycle"
	"github.com/desk-runtime/desk/loginlink"
	"github.com/desk-runtime/desk/mcpserver"
	"github.com/desk-runtime/desk/models"
	"github.com/desk-runtime/desk/oplog"
	"github.com/desk-runtime/desk/routine"
	"github.com/desk-runtime/desk/runtimehost"
	"github.com/desk-runtime/desk/runtimehost/acp"
	"github.com/desk-runtime/desk/runtimehost/claude"
	"github.com/desk-runtime/desk/runtimehost/codex"
	"github.com/desk-runtime/desk/runtimehost/wire"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/selection"
	"github.com/desk-runtime/desk/session"
	"github.com/desk-runtime/desk/store/postgres"
	"github.com/desk-runtime/desk/store/sqlite"
	"github.com/desk-runtime/desk/template"
	"github.com/desk-runtime/desk/transfer"
	"github.com/desk-runtime/desk/uistate"
	"github.com/desk-runtime/desk/web"
	"github.com/desk-runtime/desk/webhook"
	"github.com/desk-runtime/desk/workspace"
)

// Config is everything desk needs to start.
type Config struct {
	Home     string // DESK_HOME
	Postgres string // DSN; SQLite in Home when empty
	// Blobs is the blob store's URL (--blobs, DESK_BLOBS; see
	// blobs.New): file:///dir or s3://BUCKET?...; empty means the
	// directory Home/blobs.
	Blobs string
	// SQLiteSynchronous is "full" (default) or "normal"
	// (DESK_SQLITE_SYNCHRONOUS); see sqlite.Options.
	SQLiteSynchronous string
	AdminToken        string           // DESK_ADMIN_TOKEN; generated into Home when empty
	LoginLinkTTL      time.Duration    // how long a login link's code is valid; 0 = loginlink.DefaultTTL
	LoginLinkClock    func() time.Time // the login links' clock (tests inject one); nil = time.Now
	// LeaderLease is the leader lease's length (DESK_LEADER_LEASE); 0 =
	// leader.DefaultTTL. See package leader.
	LeaderLease time.Duration
	// DrainTimeout is how long Serve, once told to stop, lets running
	// executions finish before it returns (and Close interrupts what
	// still runs); 0 drains nothing. DESK_DRAIN_TIMEOUT, 30s in desk serve.
	DrainTimeout time.Duration
	// BrowserSessionClock is the browser sessions' clock, which decides
	// their idle and absolute expiry (tests inject one); nil = time.Now.
	BrowserSessionClock func() time.Time
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
	// BodyIdleTimeout, BodyTimeout and BodyMinRate are the deadlines of
	// every request body (see httpapi.BodyLimits): each window of
	// BodyIdleTimeout must bring 64 KiB (DESK_BODY_IDLE_TIMEOUT; 0 = 30s),
	// and the whole body must arrive within BodyTimeout plus a second per
	// BodyMinRate bytes (DESK_BODY_TIMEOUT, 0 = 2m; DESK_BODY_MIN_RATE,
	// 0 = 1 MiB/s).
	BodyIdleTimeout time.Duration
	BodyTimeout     time.Duration
	BodyMinRate     int64
	// MaxConnsPerAddr caps the connections one client address may hold
	// open (DESK_MAX_CONNS_PER_ADDR); 0 means connlimit.DefaultMax, a
	// negative number no cap.
	MaxConnsPerAddr int
	// Execution tunes the execution model (timeouts, polling). Its Archive
	// and Logger are filled in by Open.
	Execution execution.Options
	// Executor, when set, runs the turns instead of the agent (tests plug
	// in their own).
	Executor execution.Executor
	// Lifecycle tunes the workspace lifecycle (tests inject failures
	// through it); its Guard, Sessions, Submit, Archive and Logger are
	// filled in by Open.
	Lifecycle lifecycle.Options
	// Templates and Absorb tune template upgrades and absorbs (tests
	// inject failures through their Hook); their Logger is filled in.
	Templates template.Options
	Absorb    absorb.Options
	// Routine tunes the routine scheduler (tests drive its clock and
	// ticks); its Submitter, Sessions, Archive and Logger are filled in.
	Routine routine.Options
	// Webhook tunes the completion webhooks' dispatcher (AllowPrivate is
	// DESK_WEBHOOK_ALLOW_PRIVATE); its Logger is filled in.
	Webhook webhook.Options
	// Model is the server's default model (DESK_MODEL): openai:<model>,
	// anthropic:<model>, openai-compatible:<base-url>#<model>; empty means
	// none (sessions may still choose their own, e.g. script).
	Model string
	// Models are the other models sessions may choose (DESK_MODELS; see
	// models.Split). A session's model must be Model, one of these or
	// script; an entry that does not parse stops Open, naming it.
	Models []string
	// TSC is the TypeScript 7 compiler of execute_typescript (DESK_TSC):
	// npm's node_modules/.bin/tsc or the native binary; empty looks for
	// tsc on PATH. Without it, or without node, the tool is absent.
	TSC string
	// Agent tunes the agent; its defaults are right for production.
	Agent agent.Options
	// Runtime tunes the runtime host; Transports maps each protocol to
	// the transport that speaks it. Its Store, Home, Archive and Logger
	// are filled in by Open.
	Runtime runtimehost.Options
	// WrapStore, when set, wraps the opened store; tests use it to inject
	// faults.
	WrapStore func(desk.Store) desk.Store
	Logger    *slog.Logger
	Version   string
	// MCPOrigins are browser origins allowed at /mcp besides loopback ones
	// (DESK_MCP_ORIGINS).
	MCPOrigins []string
	// MCPSessionsPerToken caps the MCP sessions one token keeps open at
	// /mcp (DESK_MCP_SESSIONS_PER_TOKEN; 0: mcpserver.DefaultSessionsPerToken).
	MCPSessionsPerToken int
}

// App is a running desk without its listener.
type App struct {
	Config     Config
	Home       layout.Home
	Store      desk.Store
	AdminToken string
	Workspaces desk.WorkspaceService
	Sessions   *session.Service
	Artifacts  *session.Artifacts
	// Blobs is the blob store Config.Blobs names, open while the app is.
	Blobs     blobs.Blobs
	Selection desk.SelectionService
	Collector *gc.Collector
	Logs      *applog.Service
	Archive   *archive.Archive
	Exec      *execution.Service
	Agent     *agent.Agent
	// Conversation owns a turn's records for both executors: the gate
	// the agent and the runtime host wait on a person through, and the
	// doors' decisions, answers and transcripts.
	Conversation *conversation.Service
	Quota        *files.Quota
	Files        *files.Service
	Transfer     *transfer.Service
	// Models is the operator's model catalog (Config.Model and Models).
	Models *models.Catalog
	// Lifecycle runs offboard, restore, purge and ask; Guard is its
	// operation guard (one lease per workspace), for other operations
	// that change a workspace's checkout.
	Lifecycle *lifecycle.Service
	Guard     *lifecycle.Guard
	Templates *template.Service
	Absorb    *absorb.Service
	// Routines fires the workspaces' scheduled routines.
	Routines *routine.Service
	// Dispatches are asks with reply ownership (POST /v1/ask, the ask
	// tool).
	Dispatches *dispatch.Service
	UI         *uistate.Service // drafts, open holds, unread
	// Webhooks delivers completion webhooks from the store's outbox.
	Webhooks *webhook.Service
	// Inbox lists what waits on a person across sessions.
	Inbox *inbox.Service
	// MCP serves /mcp.
	MCP *mcpserver.Handler
	// Runtimes is the operator's registry of external agent runtimes;
	// Host runs the turns of the sessions backed by one.
	Runtimes *runtimehost.Registry
	Host     *runtimehost.Host
	// LoginLinks issues the one-time codes of login links, which sign a
	// browser in as the admin (printed by desk serve, asked for by desk
	// login-link); they live only in this process's memory.
	LoginLinks *loginlink.Codes
	// Leader elects the node that runs the schedules (package leader).
	Leader *leader.Elector
	// BrowserSessions are the web UI's sign-ins, kept in the store; the
	// browser's cookie holds a session's id, never a token.
	BrowserSessions desk.BrowserSessionService
	// Streams owns the open event streams of the API and the web UI; a
	// shutdown ends them (see Serve).
	Streams *sse.Streams
	Handler http.Handler
	// Logger is desk's own logger: every record lands in the app log
	// (redacted) and goes on to Config.Logger.
	Logger *slog.Logger

	// closers is the cleanup stack: every component Open started, in
	// order; Close unwinds it in reverse.
	closers []closer
}

// closer is one entry of the cleanup stack.
type closer struct {
	name  string
	close func(ctx context.Context) error
}

// CloseTimeout bounds the cleanup when Open fails midway; App.Close takes
// its deadline from its caller.
const CloseTimeout = 30 * time.Second

// Open opens desk's components in dependency order, finishes whatever a
// crash interrupted, and returns an App ready to serve. Each component that
// was opened pushes its Close on the App's cleanup stack, which App.Close
// unwinds in reverse; when a step fails, what was already opened is closed
// the same way, in reverse, and Open returns the step's error joined with
// any error of that cleanup.
//
// The order is the dependency order, and it is what breaks the cycles
// between services without a setter: a service that others call back into
// is built before them and handed to their constructors as a small
// interface of the root package (desk.Submitter, desk.Waker,
// desk.SessionStopper); what it calls back into is built on top of it and
// given to its Open. The one such service is the execution service: the
// agent queues answer rows through it and the lifecycle queues ask prompts
// through it (and names its owner id in leases), while it runs the agent's
// turns and must run the lifecycle's startup recovery before it dispatches
// anything. So it is built first and opened last, with an execution.Run
// naming its executor and those recoverers.
func Open(ctx context.Context, cfg Config) (_ *App, err error) {
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
	// The models are the operator's declaration: a typo stops desk here,
	// naming the entry, before anything is opened.
	catalog, err := models.New(cfg.Model, cfg.Models)
	if err != nil {
		return nil, fmt.Errorf("desk cannot start: %w", err)
	}
	home := layout.Home{Root: cfg.Home}
	// A --blobs URL that does not parse or names an unknown scheme stops
	// desk here, naming it, before anything is opened or changed.
	blobStore, err := blobs.New(cfg.Blobs, filepath.Join(cfg.Home, "blobs"))
	if err != nil {
		return nil, fmt.Errorf("desk cannot start: --blobs/DESK_BLOBS: %w", err)
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("create home %s: %w", cfg.Home, err)
	}
	// Before anything runs: no file a sandbox made keeps a setuid or
	// setgid bit across a crash (see sweepSetid).
	sweepSetid(cfg.Logger.With("component", "sandbox"), home)
	token, err := adminToken(home, cfg.AdminToken)
	if err != nil {
		return nil, err
	}
	loc, err := archive.LoadLocation(cfg.ArchiveTZ)
	if err != nil {
		return nil, fmt.Errorf("DESK_ARCHIVE_TZ: %w", err)
	}
	a := &App{Config: cfg, Home: home, AdminToken: token, Models: catalog, Blobs: blobStore}
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CloseTimeout)
			defer cancel()
			err = errors.Join(err, a.Close(cctx))
		}
	}()

	if err := a.openStore(ctx); err != nil {
		return nil, err
	}
	a.LoginLinks = loginlink.New(a.Store, token, cfg.LoginLinkTTL, cfg.LoginLinkClock)
	// An unreachable bucket or wrong credential fails startup, not the
	// first upload.
	if err := a.open(ctx, "blobs "+blobStore.String(), blobStore); err != nil {
		return nil, err
	}
	if err := a.openLogs(ctx, loc); err != nil {
		return nil, err
	}
	a.buildServices()
	ao, err := a.openAgent(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.recoverStartup(ctx); err != nil {
		return nil, err
	}
	if err := a.openRuntimeHost(ctx, ao); err != nil {
		return nil, err
	}
	if err := a.openExecution(ctx); err != nil {
		return nil, err
	}
	if err := a.openBackground(ctx); err != nil {
		return nil, err
	}
	if err := a.openDoors(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// openStore opens the store (SQLite in Home, or Postgres) and wraps it
// when the config says so.
func (a *App) openStore(ctx context.Context) (err error) {
	cfg, home := a.Config, a.Home
	// The store: everything below keeps its rows there.
	var store desk.Store
	if cfg.Postgres != "" {
		store, err = postgres.Open(ctx, cfg.Postgres)
	} else {
		store, err = sqlite.OpenWith(ctx, home.DB(), sqlite.Options{Synchronous: cfg.SQLiteSynchronous})
	}
	if err != nil {
		return err
	}
	a.push("store", func(context.Context) error { return store.Close() })
	if cfg.WrapStore != nil {
		store = cfg.WrapStore(store)
	}
	a.Store = store
	return nil
}

// openLogs opens the app log, which becomes desk's logger, and the
// archive.
func (a *App) openLogs(ctx context.Context, loc *time.Location) (err error) {
	cfg, store, home, token := a.Config, a.Store, a.Home, a.AdminToken
	// The app log takes every record desk logs, redacts it (the admin token
	// included, whatever its shape) and passes it on to the configured
	// handler, so even stderr never shows a secret.
	a.Logs = applog.New(store, applog.Options{Next: cfg.Logger.Handler(), Secrets: []string{token}})
	if err := a.open(ctx, "app log", a.Logs); err != nil {
		return err
	}
	a.Logger = slog.New(a.Logs.Handler(applog.DefaultSource))
	a.Archive, err = archive.Open(home, archive.Options{Location: loc, Logger: a.Logger.With("component", "archive")})
	if err != nil {
		return fmt.Errorf("open archive: %w", err)
	}
	a.push("archive", a.Archive.Close)
	return nil
}

// buildServices builds the services that need no opening, in dependency
// order: the execution service first (see Open), then those built on it.
func (a *App) buildServices() {
	cfg, store, home, token := a.Config, a.Store, a.Home, a.AdminToken
	// The execution service is built first and opened last (see above).
	eo := cfg.Execution
	eo.Archive, eo.Logger = a.Archive, a.Logger.With("component", "execution")
	a.Exec = execution.New(store, home, eo)

	a.Workspaces = workspace.New(store, home, token)
	a.BrowserSessions = workspace.NewBrowserSessions(store, token, cfg.BrowserSessionClock)
	a.Sessions = session.New(store, home, a.Workspaces, a.Exec, a.Models)
	a.Sessions.SetToolNames(tools.Names())
	// The quota is shared by the artifact service and the file service:
	// artifacts live in the actor's file area, so the file quota holds for
	// them too.
	a.Quota = files.NewQuota(store, home, files.Options{QuotaBytes: cfg.ActorQuotaBytes})
	ao0 := session.ArtifactOptions{MaxBytes: cfg.MaxArtifactBytes}
	if cfg.ActorQuotaBytes > 0 {
		ao0.Admit = a.Quota.Admit
	}
	ao0.Blobs = a.Blobs
	a.Artifacts = session.NewArtifacts(store, home, ao0)
	a.Selection = selection.New(store, home, a.Workspaces)
	a.Runtimes = runtimehost.NewRegistry(store, runtimehost.RegistryOptions{Home: home})

	// Interrupted offboards, restores and purges are finished once this
	// process is an owner (the guard's leases name it) and before any
	// queued work is dispatched: the execution service runs them in Open.
	a.Guard = lifecycle.NewGuard(store, a.Exec.OwnerID(), lifecycle.GuardOptions{OwnerTTL: eo.OwnerTTL, Released: a.Exec})
	lo := cfg.Lifecycle
	lo.Guard, lo.Sessions, lo.Submit, lo.Archive, lo.Logger = a.Guard, a.Sessions, a.Exec, a.Archive, a.Logger.With("component", "lifecycle")
	// The runtime host's children are reached through the execution
	// service (execution.Run.Children), which is built first.
	lo.Children = a.Exec
	a.Lifecycle = lifecycle.New(store, home, lo)
	// Dispatches ask through the lifecycle's ask; the agent's ask tool
	// and POST /v1/ask record them. Their loop opens with the background
	// components.
	// One node of the database leads: the routine scheduler and the
	// dispatch follow-ups run there only (opened with them).
	a.Leader = leader.New(store, leader.Options{TTL: cfg.LeaderLease, Holder: a.Exec.OwnerID(), Logger: a.Logger.With("component", "leader")})
	a.Dispatches = dispatch.New(store, dispatch.Options{Asker: a.Lifecycle, Sessions: a.Sessions,
		Projection: filepath.Join(home.Root, "state", "agent-conversations.jsonl"), Logger: a.Logger.With("component", "dispatch"), Leader: a.Leader})
	to := cfg.Templates
	to.Logger = a.Logger.With("component", "template")
	a.Templates = template.New(store, home, a.Workspaces, a.Lifecycle, to)
	ab := cfg.Absorb
	ab.Logger = a.Logger.With("component", "absorb")
	ab.Children = a.Exec
	a.Absorb = absorb.New(store, home, a.Lifecycle, ab)

	a.Collector = &gc.Collector{Store: store, Home: home, Running: a.Exec.Running, Present: a.Artifacts.BytesPresent}
	a.Files = files.New(store, home, a.Workspaces, a.Artifacts, a.Collector, a.Quota)
	a.Transfer = transfer.New(store, home, a.Workspaces, transfer.Options{MaxImportBytes: cfg.ImportMaxBytes, MaxImportRatio: cfg.ImportMaxRatio, ActorQuotaBytes: cfg.ActorQuotaBytes})
}

// openAgent builds and opens the tool-loop agent with its model providers,
// sandbox and TypeScript compiler; the runtime host shares its sandbox.
func (a *App) openAgent(ctx context.Context) (ao agent.Options, err error) {
	cfg, store, home := a.Config, a.Store, a.Home
	ao = cfg.Agent
	ao.Models, ao.Archive, ao.Logger, ao.Submitter = a.Models, a.Archive, a.Logger.With("component", "agent"), a.Exec
	a.Conversation = conversation.New(store, conversation.Options{Archive: a.Archive, Submitter: a.Exec, Logger: a.Logger.With("component", "conversation")})
	ao.Conversation = a.Conversation
	ao.Dispatch = a.Dispatches
	if ao.Providers == nil {
		ps := &agent.Providers{}
		if err := a.open(ctx, "model providers", ps); err != nil {
			return ao, err
		}
		ao.Providers = ps.Get
	}
	if ao.Sandbox == nil {
		if sb, err := sandbox.Detect(); err == nil {
			ao.Sandbox = sb
		} else {
			a.Logger.Warn("no sandbox for commands: exec_command is unavailable except in full-access workspaces", "err", err)
		}
	}
	if ao.TypeScript == nil && ao.TypeScriptAbsent == "" {
		if tc, err := typescript.Detect(cfg.TSC); err == nil {
			ao.TypeScript = tc
		} else {
			ao.TypeScriptAbsent = err.Error()
			a.Logger.Info("execute_typescript is unavailable", "err", err)
		}
	}
	a.Agent = agent.New(store, home, a.Artifacts, a.Selection, ao)
	if err := a.open(ctx, "agent", a.Agent); err != nil {
		return ao, err
	}
	if a.Models.Default() == "" {
		a.Logger.Info("no default model: set DESK_MODEL (openai:<model>, anthropic:<model> or openai-compatible:<base-url>#<model>); script sessions still work")
	}
	a.Logger.Info("models offered", "models", strings.Join(a.Models.Models(), ", "))
	return ao, nil
}

// recoverStartup finishes what a crash interrupted in the services that
// recover on their own.
func (a *App) recoverStartup(ctx context.Context) error {
	// Recovery runs before the handler exists, so no request can observe a
	// half-finished delete or install; the collector then sweeps the
	// temporary files a crash left (after artifacts installed the ones
	// their rows claim).
	for _, r := range []desk.Recoverer{a.Sessions, a.Artifacts, a.Transfer, a.Collector} {
		if err := r.Recover(ctx); err != nil {
			return fmt.Errorf("startup recovery: %w", err)
		}
	}
	return nil
}

// openRuntimeHost opens the model gateway and the runtime host, which runs
// the turns of runtime-backed sessions.
func (a *App) openRuntimeHost(ctx context.Context, ao agent.Options) error {
	cfg, store, home := a.Config, a.Store, a.Home
	// Runtime-backed sessions run on the runtime host: one child per live
	// session, in the session's sandbox, speaking the transport of the
	// runtime's protocol (Config.Transports).
	ho := cfg.Runtime
	ho.Store, ho.Home, ho.Archive, ho.Logger = store, home, a.Archive, a.Logger.With("component", "runtimehost")
	ho.Conversation = a.Conversation
	// An ACP agent's fs/* writes artifacts like the file tools, and its
	// terminals run in the same sandbox as exec_command.
	ho.Paths = a.Artifacts
	if ho.Commands == nil {
		ho.Commands = ao.Sandbox
	}
	if ho.Transports == nil {
		// The three protocols desk speaks; the host picks by the
		// registered runtime's protocol, never by its name.
		ho.Transports = map[wire.Protocol]wire.Transport{
			wire.ACP:              acp.Transport{},
			wire.CodexAppServer:   codex.Transport{},
			wire.ClaudeStreamJSON: claude.Transport{},
		}
	}
	if ho.Spawner == nil {
		if _, err := sandbox.Detect(); err == nil {
			if p, err := exec.LookPath("bwrap"); err == nil {
				ho.Spawner = sandbox.BubblewrapSpawner(p)
			}
		}
	}
	// The runtimes' model gateway: a child never holds the operator's
	// key; its model calls go through desk, which counts them.
	if ho.Gateway == nil {
		gw := gateway.New(gateway.Options{Usage: store, Dir: filepath.Join(home.Root, "run", "gateway"), LookupEnv: ho.LookupEnv,
			Models: a.Models, Logger: a.Logger.With("component", "gateway")})
		if err := a.open(ctx, "model gateway", gw); err != nil {
			return err
		}
		ho.Gateway = gw
	}
	a.Host = runtimehost.New(ho)
	if err := a.open(ctx, "runtime host", a.Host); err != nil {
		return err
	}
	return nil
}

// openExecution opens the execution service last among the services:
// its Open runs the startup recovery it was given, then dispatches.
func (a *App) openExecution(ctx context.Context) error {
	cfg, store := a.Config, a.Store
	// The execution model recovers what dead owners left behind, then the
	// lifecycle, template upgrades and absorbs (in that order, so an absorb
	// finds its source's offboarding settled), before anything is
	// dispatched or served.
	rt := router{store: store, agent: a.Agent, host: a.Host}
	run := execution.Run{Executor: rt, Available: rt.Available,
		Recover: []desk.Recoverer{a.Lifecycle, a.Templates, a.Absorb}, Children: a.Host}
	if cfg.Executor != nil {
		run.Executor, run.Available = cfg.Executor, nil
	}
	if err := a.Exec.Open(ctx, run); err != nil {
		return err
	}
	a.push("execution", a.Exec.Close)
	// Title jobs a dead process left are retried once (in the background).
	if err := a.Agent.RecoverTitles(ctx); err != nil {
		a.Logger.Warn("recover title jobs", "err", err)
	}
	return nil
}

// openBackground starts the components that follow events: unread
// state, the operator log and the event streams.
func (a *App) openBackground(ctx context.Context) error {
	store := a.Store
	// Unread follows turns that finish from now on.
	a.UI = uistate.New(store, a.Sessions, a.Exec, uistate.Options{Logger: a.Logger.With("component", "uistate")})
	if err := a.open(ctx, "ui state", a.UI); err != nil {
		return err
	}
	// Operator-relevant events (failed turns, blocks, …) reach the app log.
	if err := a.open(ctx, "operator log", oplog.New(a.Exec, a.Logger, oplog.Options{})); err != nil {
		return err
	}
	// Routines submit through the execution service, so they start
	// after it and stop before it.
	ro := a.Config.Routine
	ro.Submitter, ro.Sessions, ro.Archive, ro.Logger = a.Exec, a.Sessions, a.Archive, a.Logger.With("component", "routine")
	ro.Leader = a.Leader
	if err := a.open(ctx, "leader election", a.Leader); err != nil {
		return err
	}
	a.Routines = routine.New(store, ro)
	if err := a.open(ctx, "routines", a.Routines); err != nil {
		return err
	}
	if err := a.open(ctx, "dispatches", a.Dispatches); err != nil {
		return err
	}
	// Webhooks read their outbox from the store: settles write it, so
	// this only has to be open for deliveries to go out.
	wo := a.Config.Webhook
	wo.Logger = a.Logger.With("component", "webhook")
	if wo.UserAgent == "" {
		wo.UserAgent = "desk-webhooks/" + a.Config.Version
	}
	a.Webhooks = webhook.New(store, wo)
	if err := a.open(ctx, "webhooks", a.Webhooks); err != nil {
		return err
	}
	// The event streams close first, so a shutdown does not wait on them.
	a.Streams = sse.NewStreams()
	if err := a.open(ctx, "event streams", a.Streams); err != nil {
		return err
	}
	return nil
}

// openDoors wires the doors: the HTTP API, the web UI and MCP, behind
// one handler with the request-body deadlines.
func (a *App) openDoors(ctx context.Context) error {
	cfg, store := a.Config, a.Store
	a.Inbox = inbox.New(store)
	api := &httpapi.Server{
		Workspaces: a.Workspaces, Sessions: a.Sessions, Artifacts: a.Artifacts, Selection: a.Selection,
		Reclaimer: a.Collector, Logs: a.Logs, Archive: a.Archive, Exec: a.Exec, Agent: a.Agent, Conversation: a.Conversation, AgentStore: store, Usage: a.Exec, Files: a.Files, Transfer: a.Transfer, Lifecycle: a.Lifecycle, Templates: a.Templates, Absorb: a.Absorb, Runtimes: a.Runtimes, Profiles: a.Sessions, LogQuery: func(r *http.Request) (desk.LogFilter, error) { return applog.ParseQuery(r.URL.Query()) },
		UI: a.UI, Streams: a.Streams, Logger: a.Logger.With("component", "http"), Version: cfg.Version,
		AuthLog: httpdoor.NewAuthFailures(a.Logger.With("component", "http"), 0, nil), LoginLinks: a.LoginLinks,
		BrowserSessions: a.BrowserSessions, Routines: a.Routines, Dispatches: a.Dispatches, Webhooks: a.Webhooks, Inbox: a.Inbox,
	}
	api.Models = a.Models
	// The web UI is served at / beside the API.
	api.Web = web.New(web.Deps{Workspaces: a.Workspaces, Sessions: a.Sessions, Profiles: a.Sessions, Artifacts: a.Artifacts, Files: a.Files,
		Exec: a.Exec, Agent: a.Agent, Conversation: a.Conversation, Store: store, Logs: a.Logs, UI: a.UI, Catalog: a.Lifecycle, Streams: a.Streams,
		Logger: a.Logger.With("component", "web"), Version: cfg.Version, AuthLog: api.AuthLog, LoginLinks: a.LoginLinks,
		Models: a.Models, BrowserSessions: a.BrowserSessions, Routines: a.Routines, Inbox: a.Inbox})
	// MCP is served at /mcp over the API handler itself, in process, with
	// the caller's own token (see package mcpserver).
	apiH := api.Handler()
	mux := http.NewServeMux()
	mcpH := mcpserver.NewHTTPHandler(apiH, mcpserver.HTTPOptions{Authenticate: a.Workspaces.Authenticate,
		AllowedOrigins: cfg.MCPOrigins, SessionsPerToken: cfg.MCPSessionsPerToken, Version: cfg.Version, Logger: a.Logger.With("component", "mcp")})
	// MCP sessions close first: they call into everything below.
	if err := a.open(ctx, "mcp", mcpH); err != nil {
		return err
	}
	a.MCP = mcpH
	mux.Handle(mcpserver.Path, mcpH)
	mux.Handle("/", apiH)
	// Every request body, on every door, has its deadlines, and a refusal
	// never waits for the body it refuses.
	a.Handler = httpapi.Guard(mux, httpapi.BodyLimits{Idle: cfg.BodyIdleTimeout, Total: cfg.BodyTimeout, MinRate: cfg.BodyMinRate})
	return nil
}

// open opens a component and pushes its Close on the cleanup stack.
func (a *App) open(ctx context.Context, name string, c desk.Component) error {
	if err := c.Open(ctx); err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	a.push(name, c.Close)
	return nil
}

// push puts a Close on the cleanup stack.
func (a *App) push(name string, close func(ctx context.Context) error) {
	a.closers = append(a.closers, closer{name, close})
}

// Close closes every component Open started, in reverse order, under ctx's
// deadline: the event streams end, the UI watcher stops, the execution
// service interrupts and settles this process's executions, the agent's
// background jobs stop, the archive and the app log are flushed, and the
// store is released. Every component is closed even when an earlier one
// fails; the errors are joined. Close is idempotent.
func (a *App) Close(ctx context.Context) error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		c := a.closers[i]
		if err := c.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", c.name, err))
		}
	}
	a.closers = nil
	return errors.Join(errs...)
}

// Serve listens on addr until ctx is cancelled, then shuts down gracefully:
// open event streams are told to end at once (they would otherwise hold the
// shutdown for the whole grace), and in-flight requests may finish for up
// to grace. ready, if not nil, is called with the bound address once the
// listener is open.
func (a *App) Serve(ctx context.Context, addr string, grace time.Duration, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	ln = a.Listener(ln)
	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.Logger.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(a.Streams.Shutdown)
	if ready != nil {
		ready(ln.Addr())
	}
	// desk's copy of the sandbox's /etc is built once serving, not before
	// (it was most of the start-up time); the first command finds it made.
	warmed := make(chan struct{})
	go func() { defer close(warmed); sandbox.Warm() }()
	defer func() { <-warmed }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.drain()
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

// drain lets running executions finish, up to Config.DrainTimeout, while
// the server still answers (a turn's stream goes on to its end); this
// node claims nothing more meanwhile, so queued work goes to its peers.
func (a *App) drain() {
	if a.Config.DrainTimeout <= 0 || a.Exec == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.Config.DrainTimeout)
	defer cancel()
	start := time.Now()
	a.Logger.Info("draining: claiming no more work, letting running turns finish", "timeout", a.Config.DrainTimeout)
	if n, err := a.Exec.Drain(ctx); err != nil {
		a.Logger.Warn("drain timed out: interrupting the turns still running", "running", n, "took", time.Since(start))
		return
	}
	a.Logger.Info("drained", "took", time.Since(start))
}

// Listener wraps ln with the per-address connection cap
// (Config.MaxConnsPerAddr); refusals are logged at most once a minute.
// Serve uses it; tests that serve the handler themselves should too.
func (a *App) Listener(ln net.Listener) net.Listener {
	log := a.Logger.With("component", "http")
	return connlimit.New(ln, a.Config.MaxConnsPerAddr, connlimit.RefusalLog(time.Minute, func(ip string, open, refused int) {
		log.Warn("connections refused: the client address holds the most connections allowed (DESK_MAX_CONNS_PER_ADDR)", "addr", ip, "open", open, "refused", refused)
	}))
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
