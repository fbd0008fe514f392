package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/desk-runtime/desk/acpagent"
	"github.com/spf13/cobra"
)

// acpCmd serves the Agent Client Protocol over stdio for an editor that
// starts desk as its agent, talking to a running desk server with the
// usual address and token rules.
func acpCmd(g *globals) *cobra.Command {
	var workspace, model, scriptFile string
	cmd := &cobra.Command{
		Use:   "acp",
		Short: "Serve the Agent Client Protocol over stdio, for editors (Zed, …)",
		Long: `Serve ACP over stdin/stdout: an editor starts "desk acp" as its agent and speaks
JSON-RPC to it. session/new creates a desk session in --workspace (an id or a
name; without it the only workspace the token sees), session/load reopens an
existing one and replays its transcript, session/prompt queues the prompt as
an ordinary message and streams the turn back, session/cancel interrupts that
exact execution, and the turn's approvals are asked of the editor. Every call
goes to the running desk server named by --server (or DESK_SERVER, DESK_ADDR)
with the token from --token (or DESK_TOKEN, DESK_ADMIN_TOKEN,
DESK_HOME/admin.token). Nothing but protocol messages is written to stdout.
See docs/acp.md.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := acpagent.Options{Workspace: workspace, Model: model, Version: buildVersion()}
			if scriptFile != "" {
				b, err := os.ReadFile(scriptFile)
				if err != nil {
					return &usageError{fmt.Errorf("--script: %w", err)}
				}
				if !json.Valid(b) {
					return &usageError{fmt.Errorf("--script %s is not JSON", scriptFile)}
				}
				o.Script = b
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			c.UserAgent = "desk-acp/" + buildVersion()
			// Diagnostics go to stderr, which editors show in their agent
			// logs; stdout carries only the protocol.
			o.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			return acpagent.Run(cmd.Context(), c, cmd.InOrStdin(), cmd.OutOrStdout(), o)
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the workspace new sessions are created in (id or name)")
	cmd.Flags().StringVar(&model, "model", "", "the model of new sessions (default: the server's DESK_MODEL)")
	cmd.Flags().StringVar(&scriptFile, "script", "", "the script of new --model script sessions: a JSON file")
	return cmd
}
