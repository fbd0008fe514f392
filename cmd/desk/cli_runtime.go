package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk/client"
)

// runtimeCmd registers the external agent runtimes sessions may run on
// (admin only; see docs/runtimes.md).
func runtimeCmd(g *globals) *cobra.Command {
	cmd := noun("runtime", "Register external agent runtimes (Codex, Claude Code, ACP agents) sessions can run on", "runtimes")
	var protocol string
	var env []string
	add := &cobra.Command{
		Use:   "add NAME --protocol P [--env VAR]... -- ARGV...",
		Short: "Register a runtime: its protocol (acp, codex-app-server, claude-stream-json) and the program to start",
		Args:  usageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if cmd.ArgsLenAtDash() != 1 {
				return usagef("give the runtime's name, then -- and its argv: desk runtime add NAME --protocol P -- ARGV...")
			}
			if protocol == "" {
				return usagef("--protocol is required (acp, codex-app-server or claude-stream-json)")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			x, err := c.AddRuntime(cmd.Context(), client.RuntimeAdd{Name: a[0], Protocol: protocol, Argv: a[1:], Env: env})
			if err != nil {
				return err
			}
			return out(cmd, g, x, func(o io.Writer) {
				fmt.Fprintf(o, "registered runtime %s (%s): %s\n", x.Name, x.Protocol, strings.Join(x.Argv, " "))
			})
		},
	}
	add.Flags().StringVar(&protocol, "protocol", "", "the wire protocol: acp, codex-app-server or claude-stream-json")
	add.Flags().StringArrayVar(&env, "env", nil, "the name of an environment variable to pass through to the runtime (repeatable; values are never stored; provider keys are refused: desk's model gateway serves the runtime's model calls)")
	cmd.AddCommand(add,
		&cobra.Command{
			Use:     "list",
			Aliases: []string{"ls"},
			Short:   "List the registered runtimes",
			Args:    usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				rs, err := c.ListRuntimes(cmd.Context())
				if err != nil {
					return err
				}
				return out(cmd, g, nonNilList(rs), func(o io.Writer) {
					t := newTable(o, "NAME", "PROTOCOL", "ARGV", "ENV")
					for _, x := range rs {
						t.row(x.Name, x.Protocol, strings.Join(x.Argv, " "), strings.Join(x.Env, ","))
					}
					t.flush()
				})
			},
		},
		&cobra.Command{
			Use:     "remove NAME",
			Aliases: []string{"rm"},
			Short:   "Remove a runtime's registration",
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				if err := c.RemoveRuntime(cmd.Context(), a[0]); err != nil {
					return err
				}
				return out(cmd, g, map[string]string{"removed": a[0]}, func(o io.Writer) { fmt.Fprintf(o, "removed runtime %s\n", a[0]) })
			},
		},
	)
	return cmd
}
