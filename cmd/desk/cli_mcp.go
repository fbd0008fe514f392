package main

import (
	"log/slog"

	"github.com/desk-runtime/desk/mcpserver"
	"github.com/spf13/cobra"
)

// mcpCmd serves MCP over stdio for a host that starts desk as a
// subprocess, talking to a running desk server with the usual address and
// token rules (--server/--token, DESK_SERVER, DESK_TOKEN, …).
func mcpCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the Model Context Protocol over stdio, for MCP hosts (Claude Code, Codex, …)",
		Long: `Serve MCP over stdin/stdout: an MCP host starts "desk mcp" as a subprocess and
speaks JSON-RPC to it; every tool call goes to the running desk server named
by --server (or DESK_SERVER, DESK_ADDR) with the token from --token (or
DESK_TOKEN, DESK_ADMIN_TOKEN, DESK_HOME/admin.token). An actor token sees
exactly what it sees over HTTP. Nothing but protocol messages is written to
stdout. A running desk also serves MCP over HTTP at /mcp; see docs/mcp.md.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			c.UserAgent = "desk-mcp/" + buildVersion()
			// Diagnostics go to stderr, which hosts show in their MCP logs;
			// stdout carries only the protocol.
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return mcpserver.RunStdio(cmd.Context(), c, cmd.InOrStdin(), cmd.OutOrStdout(), mcpserver.Options{Version: buildVersion(), Logger: log})
		},
	}
}
