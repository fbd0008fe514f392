package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
)

func workspaceCmd(g *globals) *cobra.Command {
	cmd := noun("workspace", "Create, list and show workspaces", "ws")
	cmd.AddCommand(
		&cobra.Command{
			Use:   "create <name>",
			Short: "Create a workspace (admin); it starts with a human actor named owner",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				w, err := createWorkspace(cmd, c, a[0])
				if err != nil {
					return err
				}
				return out(cmd, g, w, func(o io.Writer) {
					fmt.Fprintf(o, "created workspace %s %q\n", w.ID, w.Name)
				})
			},
		},
		&cobra.Command{
			Use:     "list",
			Aliases: []string{"ls"},
			Short:   "List the workspaces the token can see",
			Args:    usageArgs(cobra.NoArgs),
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				ws, err := c.ListWorkspaces(cmd.Context())
				if err != nil {
					return err
				}
				return out(cmd, g, nonNilList(ws), func(o io.Writer) {
					t := newTable(o, "ID", "NAME", "STATE", "CREATED")
					for _, w := range ws {
						t.row(w.ID, w.Name, w.State, fmtTime(w.CreatedAt))
					}
					t.flush()
				})
			},
		},
		&cobra.Command{
			Use:   "show <ws>",
			Short: "Show a workspace",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				w, err := c.GetWorkspace(cmd.Context(), a[0])
				if err != nil {
					return err
				}
				return out(cmd, g, w, func(o io.Writer) {
					fields(o, "id", w.ID, "name", w.Name, "state", w.State,
						"created", fmtTime(w.CreatedAt), "updated", fmtTime(w.UpdatedAt))
				})
			},
		},
	)
	cmd.AddCommand(workspaceTransferCmds(g)...)
	cmd.AddCommand(workspaceLifecycleCmds(g)...)
	cmd.AddCommand(workspaceAbsorbCmd(g))
	addTemplateFlag(cmd)
	cmd.AddCommand(budgetCmd(g), agentSettingsCmd(g))
	return cmd
}

func actorCmd(g *globals) *cobra.Command {
	cmd := noun("actor", "Create and list a workspace's actors")
	var kind string
	create := &cobra.Command{
		Use:   "create <ws> <name>",
		Short: "Create an actor and its token (admin); the token is shown only once",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if kind != desk.ActorHuman && kind != desk.ActorAgent {
				return usagef("--kind must be %s or %s, not %q", desk.ActorHuman, desk.ActorAgent, kind)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			act, tok, err := c.CreateActor(cmd.Context(), a[0], a[1], kind)
			if err != nil {
				return err
			}
			return out(cmd, g, map[string]any{"actor": act, "token": tok}, func(o io.Writer) {
				fmt.Fprintf(o, "created %s actor %s %q in workspace %s\n", act.Kind, act.ID, act.Name, act.WorkspaceID)
				fmt.Fprintf(o, "token: %s\n", tok)
				fmt.Fprintln(o, "(the token is shown only this once; store it now)")
			})
		},
	}
	create.Flags().StringVar(&kind, "kind", desk.ActorAgent, "actor kind: human or agent")
	cmd.AddCommand(create, &cobra.Command{
		Use:     "list <ws>",
		Aliases: []string{"ls"},
		Short:   "List a workspace's actors",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			as, err := c.ListActors(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(as), func(o io.Writer) {
				t := newTable(o, "ID", "NAME", "KIND", "CREATED")
				for _, x := range as {
					t.row(x.ID, x.Name, x.Kind, fmtTime(x.CreatedAt))
				}
				t.flush()
			})
		},
	})
	return cmd
}

// nonNilList makes an empty list print as [] rather than null.
func nonNilList[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
