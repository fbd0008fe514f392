package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// profileCmd manages a workspace's agent profiles (docs/profiles.md).
func profileCmd(g *globals) *cobra.Command {
	cmd := noun("profile", "Manage a workspace's agent profiles: executor, model, reasoning effort, approval mode, instructions, tools")
	var spec desk.ProfileSpec
	var replace bool
	create := &cobra.Command{
		Use:   "create <ws> <name>",
		Short: "Create an agent profile (--replace: replace the profile of that name, or a default)",
		Long: `Create an agent profile of a workspace. --model picks one of the models the
server offers (desk models) for desk's agent, or --runtime a registered
runtime (desk runtime ls); --reasoning-effort low|medium|high needs a model
the operator declared as reasoning (";reasoning" in DESK_MODEL or
DESK_MODELS). --tools limits the agent to the named tools (comma-separated;
none: all). --thread-profile names the profile handler threads run.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var p *desk.Profile
			if replace {
				p, err = c.PutProfile(cmd.Context(), a[0], a[1], client.ProfileCreate{ProfileSpec: spec})
			} else {
				p, err = c.CreateProfile(cmd.Context(), a[0], client.ProfileCreate{Name: a[1], ProfileSpec: spec})
			}
			if err != nil {
				return err
			}
			return out(cmd, g, p, func(o io.Writer) { fmt.Fprintf(o, "profile %s: %s\n", p.Name, profileRuns(p)) })
		},
	}
	f := create.Flags()
	f.StringVar(&spec.Model, "model", "", "a declared model for desk's agent (default: the server's DESK_MODEL)")
	f.StringVar(&spec.Runtime, "runtime", "", "a registered runtime that runs the turns instead of desk's agent")
	f.StringVar(&spec.ReasoningEffort, "reasoning-effort", "", "low, medium or high (a reasoning model only)")
	f.StringVar(&spec.ApprovalMode, "approval-mode", "", "user, auto-review or full-access (default: the workspace's)")
	f.StringVar(&spec.Instructions, "instructions", "", "text appended to the agent's system prompt")
	f.StringSliceVar(&spec.Tools, "tools", nil, "the only tools offered, comma-separated (default: all)")
	f.StringVar(&spec.ThreadProfile, "thread-profile", "", "the profile handler threads (thread_start) run")
	f.BoolVar(&replace, "replace", false, "replace an existing profile of that name")

	ls := &cobra.Command{
		Use:     "list <ws>",
		Aliases: []string{"ls"},
		Short:   "List a workspace's profiles, desk's defaults included",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ps, err := c.ListProfiles(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(ps), func(o io.Writer) {
				t := newTable(o, "NAME", "RUNS", "EFFORT", "APPROVAL", "TOOLS")
				for _, p := range ps {
					name := p.Name
					if p.Builtin {
						name += " (default)"
					}
					t.row(name, profileRuns(p), orDash(p.ReasoningEffort), orDash(p.ApprovalMode), firstNonEmpty(strings.Join(p.Tools, ","), "all"))
				}
				t.flush()
			})
		},
	}
	show := &cobra.Command{
		Use:   "show <ws> <name>",
		Short: "Show a profile",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.GetProfile(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			return out(cmd, g, p, func(o io.Writer) {
				fields(o, "name", p.Name, "runs", profileRuns(p), "reasoning effort", orDash(p.ReasoningEffort),
					"approval mode", firstNonEmpty(p.ApprovalMode, "(the workspace's)"), "tools", firstNonEmpty(strings.Join(p.Tools, ","), "all"),
					"thread profile", firstNonEmpty(p.ThreadProfile, "(this one)"), "instructions", orDash(p.Instructions))
			})
		},
	}
	rm := &cobra.Command{
		Use:     "remove <ws> <name>",
		Aliases: []string{"rm"},
		Short:   "Remove a profile (sessions made from it keep their snapshot)",
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteProfile(cmd.Context(), a[0], a[1]); err != nil {
				return err
			}
			return out(cmd, g, map[string]string{"removed": a[1]}, func(o io.Writer) { fmt.Fprintf(o, "removed profile %s\n", a[1]) })
		},
	}
	cmd.AddCommand(create, ls, show, rm)
	return cmd
}

// profileRuns says who runs a profile's turns.
func profileRuns(p *desk.Profile) string {
	if p.Runtime != "" {
		return "runtime " + p.Runtime
	}
	return "model " + firstNonEmpty(p.Model, "(the desk's default)")
}
