package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/search"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/models"
	"github.com/desk-runtime/desk/webhook"
)

// servedWith is the configuration a server runs with, as flags: every
// serve flag whose value (from the flag or, resolved, from the
// environment) differs from its default, the address as bound. The
// variables behind the flags hold the resolved values when this runs.
func servedWith(cmd *cobra.Command, bound, pg string, pid int) serveConfig {
	c := serveConfig{Store: "sqlite", Addr: bound, PID: pid, Args: []string{"--addr=" + bound}}
	if pg != "" {
		c.Store = "postgres"
	}
	// Serve's own flags only: the root's (--token, --server) are the
	// CLI's, and a token must never be written here.
	cmd.LocalNonPersistentFlags().VisitAll(func(f *pflag.Flag) {
		switch f.Name {
		case "addr", "home", "login-link", "help":
			return // the address as bound; the home is where this file is
		}
		if v := f.Value.String(); v != f.DefValue {
			c.Args = append(c.Args, "--"+f.Name+"="+v)
		}
	})
	return c
}

func serveCmd(g *globals) *cobra.Command {
	var addr, pg, blobURL string
	var printLink bool
	var bodyIdle, bodyTotal time.Duration
	var bodyRate int64
	var maxConns int
	var maxArtifact, actorQuota, importMax, importRatio, mcpSessions int64
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the desk server in the foreground",
		Long: `Run the desk server in the foreground until SIGINT or SIGTERM.

Every flag has an environment equivalent: --home DESK_HOME, --addr DESK_ADDR,
--postgres DESK_POSTGRES (SQLite in DESK_HOME when unset), --blobs DESK_BLOBS
(the blob store: file:///dir or s3://BUCKET?endpoint=...; DESK_HOME/blobs
when unset; see docs/configuration.md). The admin token is
DESK_ADMIN_TOKEN, or is generated once into DESK_HOME/admin.token (mode 0600).

The agent: DESK_MODEL is the default model (openai:<model>,
anthropic:<model>, openai-compatible:<base-url>#<model>) and DESK_MODELS,
comma-separated, the others a session may choose (GET /v1/models lists
them; any other model is refused, and a malformed entry stops desk serve);
base URLs come from OPENAI_BASE_URL, ANTHROPIC_BASE_URL or a declared
openai-compatible entry, never from a request. Keys come from
OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENAI_COMPATIBLE_API_KEY; DESK_MAX_STEPS
bounds the model calls of one turn (default 40); DESK_INPUT_WAIT is how long
a blocking request_user_input waits for an answer (default 5m; the deadline
survives a restart); DESK_SEARCH_URL points the
search tool at a SearXNG instance; DESK_TSC names the TypeScript 7 compiler
of execute_typescript (default: tsc on PATH; npm i -g typescript@7).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home := firstNonEmpty(g.home, os.Getenv("DESK_HOME"), defaultHome())
			addr = firstNonEmpty(addr, os.Getenv("DESK_ADDR"), defaultAddr)
			pg = firstNonEmpty(pg, os.Getenv("DESK_POSTGRES"))
			blobURL = firstNonEmpty(blobURL, os.Getenv("DESK_BLOBS"))
			for _, lim := range []struct {
				v   *int64
				env string
			}{{&maxArtifact, "DESK_MAX_ARTIFACT_BYTES"}, {&actorQuota, "DESK_ACTOR_QUOTA_BYTES"}, {&importMax, "DESK_IMPORT_MAX_BYTES"}, {&importRatio, "DESK_IMPORT_MAX_RATIO"}, {&mcpSessions, "DESK_MCP_SESSIONS_PER_TOKEN"}} {
				if *lim.v != 0 {
					continue
				}
				if v := os.Getenv(lim.env); v != "" {
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil || n < 0 {
						return &usageError{fmt.Errorf("%s=%q must be a non-negative integer", lim.env, v)}
					}
					*lim.v = n
				}
			}
			var leaderLease time.Duration
			drain := 30 * time.Second
			for _, lim := range []struct {
				v       *time.Duration
				env, eg string
			}{{&bodyIdle, "DESK_BODY_IDLE_TIMEOUT", "30s"}, {&bodyTotal, "DESK_BODY_TIMEOUT", "2m"}, {&leaderLease, "DESK_LEADER_LEASE", "15s"}, {&drain, "DESK_DRAIN_TIMEOUT", "30s"}} {
				if *lim.v != 0 && lim.v != &drain {
					continue
				}
				if v := os.Getenv(lim.env); v != "" {
					d, err := time.ParseDuration(v)
					if err != nil || d <= 0 {
						return &usageError{fmt.Errorf("%s=%q must be a positive duration such as %s", lim.env, v, lim.eg)}
					}
					*lim.v = d
				}
			}
			if v := os.Getenv("DESK_BODY_MIN_RATE"); bodyRate == 0 && v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil || n <= 0 {
					return &usageError{fmt.Errorf("DESK_BODY_MIN_RATE=%q must be a positive number of bytes per second such as 1048576", v)}
				}
				bodyRate = n
			}
			if bodyRate < 0 || bodyIdle < 0 || bodyTotal < 0 {
				return &usageError{fmt.Errorf("--body-idle-timeout, --body-timeout and --body-min-rate must not be negative")}
			}
			if v := os.Getenv("DESK_MAX_CONNS_PER_ADDR"); maxConns == 0 && v != "" {
				n, err := strconv.Atoi(v)
				if err != nil {
					return &usageError{fmt.Errorf("DESK_MAX_CONNS_PER_ADDR=%q must be an integer (-1 for no cap)", v)}
				}
				maxConns = n
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
			ao, err := agentOptions()
			if err != nil {
				return &usageError{err}
			}
			eo, err := executionOptions()
			if err != nil {
				return &usageError{err}
			}
			// One server per home: a second one would share the SQLite file,
			// the blob tree and the run files with the first.
			shared := os.Getenv(sharedHomeEnv) == "1"
			unlock, err := lockHome(home, shared)
			if err != nil {
				return err
			}
			defer unlock()

			// Webhooks may reach private addresses only when the operator
			// says so (SSRF; docs/automation.md).
			var hooks webhook.Options
			if v := os.Getenv("DESK_WEBHOOK_ALLOW_PRIVATE"); v != "" {
				if hooks.AllowPrivate, err = strconv.ParseBool(v); err != nil {
					return usagef("DESK_WEBHOOK_ALLOW_PRIVATE=%q: want true or false", v)
				}
			}

			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			a, err := app.Open(ctx, app.Config{
				Home: home, Postgres: pg, Blobs: blobURL, AdminToken: os.Getenv("DESK_ADMIN_TOKEN"),
				MaxArtifactBytes: maxArtifact, ActorQuotaBytes: actorQuota, ImportMaxBytes: importMax, ImportMaxRatio: importRatio, BodyIdleTimeout: bodyIdle, BodyTimeout: bodyTotal, BodyMinRate: bodyRate, MaxConnsPerAddr: maxConns, ArchiveTZ: os.Getenv("DESK_ARCHIVE_TZ"),
				SQLiteSynchronous: os.Getenv("DESK_SQLITE_SYNCHRONOUS"), Logger: log, Version: buildVersion(),
				Model: os.Getenv("DESK_MODEL"), Models: models.Split(os.Getenv("DESK_MODELS")), Agent: ao, TSC: os.Getenv("DESK_TSC"),
				MCPOrigins:          strings.FieldsFunc(os.Getenv("DESK_MCP_ORIGINS"), func(r rune) bool { return r == ',' || r == ' ' }),
				MCPSessionsPerToken: int(min(mcpSessions, 1<<20)),
				Execution:           eo,
				Webhook:             hooks,
				LeaderLease:         leaderLease,
				DrainTimeout:        drain,
			})
			if err != nil {
				return err
			}
			defer func() {
				// One deadline for the whole cleanup stack (app.App.Close).
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := a.Close(cctx); err != nil {
					log.Error("desk did not close cleanly", "err", err)
				}
			}()
			log = a.Logger
			store := "sqlite " + a.Home.DB()
			if pg != "" {
				store = "postgres"
			}
			tokenFrom := "DESK_ADMIN_TOKEN"
			if os.Getenv("DESK_ADMIN_TOKEN") == "" {
				tokenFrom = a.Home.AdminToken()
			}
			pid := os.Getpid()
			defer removeRunFiles(home, pid)
			err = a.Serve(ctx, addr, 30*time.Second, func(bound net.Addr) {
				url := "http://" + bound.String()
				switch {
				case shared && runningURL(home) != "":
					// A process sharing the home recorded itself first; its
					// files stay (desk status and desk stop follow it).
				default:
					if err := writeRunFiles(home, pid, url); err != nil {
						log.Warn("cannot write the pid file; desk status and desk stop will not find this server", desk.LogErr, err)
					}
					if err := writeServeConfig(home, servedWith(cmd, bound.String(), pg, pid)); err != nil {
						log.Warn("cannot record the serve configuration; desk restart will start with its own flags and environment", desk.LogErr, err)
					}
				}
				log.Info("desk serving", "url", url, "home", home, "store", store,
					"admin_token", tokenFrom, "version", buildVersion())
				// Straight to stdout, never through the logger: the link's
				// code is a credential for as long as it lives.
				o := cmd.OutOrStdout()
				fmt.Fprintf(o, "desk is serving the web UI at %s\n", url)
				if printLink {
					if code, exp, err := a.LoginLinks.Issue(ctx); err != nil {
						log.Warn("cannot issue a login link; run desk login-link for one", desk.LogErr, err)
					} else {
						fmt.Fprintf(o, "sign in (one-time link, until %s): %s\n", exp.Local().Format(time.Kitchen), desk.LoginLinkURL(url, code))
					}
				}
				fmt.Fprintf(o, "admin token: %s\n", tokenFrom)
			})
			if err != nil {
				return err
			}
			log.Info("desk stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "", "listen address (env DESK_ADDR; default "+defaultAddr+")")
	cmd.Flags().StringVar(&blobURL, "blobs", "", "blob store URL (env DESK_BLOBS): file:///dir or s3://BUCKET?endpoint=...&use_path_style=true&region=...; credentials from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; default DESK_HOME/blobs")
	cmd.Flags().StringVar(&pg, "postgres", "", "Postgres DSN (env DESK_POSTGRES); SQLite in DESK_HOME when unset")
	// desk start turns the link off: its output goes to desk.log, and the
	// starting terminal asks for a link of its own instead.
	cmd.Flags().BoolVar(&printLink, "login-link", true, "print a one-time login link for the web UI at startup")
	_ = cmd.Flags().MarkHidden("login-link")
	cmd.Flags().Int64Var(&maxArtifact, "max-artifact-bytes", 0, "refuse artifacts larger than this (env DESK_MAX_ARTIFACT_BYTES; 0 = no limit)")
	cmd.Flags().Int64Var(&actorQuota, "actor-quota-bytes", 0, "bound each actor's file area (env DESK_ACTOR_QUOTA_BYTES; 0 = unlimited)")
	cmd.Flags().Int64Var(&importMax, "import-max-bytes", 0, "refuse workspace imports larger than this, compressed or unpacked (env DESK_IMPORT_MAX_BYTES; 0 = 64 GiB)")
	cmd.Flags().DurationVar(&bodyIdle, "body-idle-timeout", 0, "cut off a request body that brings less than 64 KiB in this long (env DESK_BODY_IDLE_TIMEOUT; 0 = 30s)")
	cmd.Flags().Int64Var(&mcpSessions, "mcp-sessions-per-token", 0, "MCP sessions one token keeps open at /mcp; one more closes its least recently used idle one (env DESK_MCP_SESSIONS_PER_TOKEN; 0 = 32)")
	cmd.Flags().DurationVar(&bodyTotal, "body-timeout", 0, "the time every request body has to arrive, plus a second per --body-min-rate bytes of it (env DESK_BODY_TIMEOUT; 0 = 2m)")
	cmd.Flags().Int64Var(&bodyRate, "body-min-rate", 0, "bytes per second a large body's deadline grows by (env DESK_BODY_MIN_RATE; 0 = 1048576)")
	cmd.Flags().IntVar(&maxConns, "max-conns-per-addr", 0, "connections one client address may hold open; more are closed at once (env DESK_MAX_CONNS_PER_ADDR; 0 = 64, -1 = no cap)")
	cmd.Flags().Int64Var(&importRatio, "import-max-ratio", 0, "refuse workspace imports that unpack to more than this many times their compressed size (env DESK_IMPORT_MAX_RATIO; 0 = 100)")
	return cmd
}

func logLevel() slog.Level {
	switch strings.ToLower(os.Getenv("DESK_LOG_LEVEL")) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// agentOptions reads the agent's environment.
func agentOptions() (agent.Options, error) {
	var o agent.Options
	if v := os.Getenv("DESK_MAX_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return o, fmt.Errorf("DESK_MAX_STEPS=%q must be an integer from 1 to 1000", v)
		}
		o.MaxSteps = n
	}
	if v := os.Getenv("DESK_INPUT_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > 24*time.Hour {
			return o, fmt.Errorf("DESK_INPUT_WAIT=%q must be a duration from 1s to 24h (e.g. 5m)", v)
		}
		o.InputWait = d
	}
	if v := os.Getenv("DESK_SEARCH_URL"); v != "" {
		s, err := search.NewSearXNG(v, nil)
		if err != nil {
			return o, err
		}
		o.Search = s.Search
	}
	return o, nil
}
