package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

func usageCmd(g *globals) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "usage [SES] [--workspace WS]",
		Short: "Tokens the model calls used: of a session, or of a workspace with its budget",
		Long: `Print the tokens a session's model calls used (turn steps, auto-review and
title calls), as the providers reported them, per model and in total. With
--workspace, the workspace's sum (an actor token sees its own sessions only),
its token budget and the workspace-wide usage the budget counts.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			switch {
			case len(a) == 0 && ws == "":
				return &usageError{fmt.Errorf("name a session (desk usage SES) or a workspace (desk usage --workspace WS)")}
			case len(a) == 1 && ws != "":
				return &usageError{fmt.Errorf("name a session or --workspace WS, not both; usage: %s", cmd.UseLine())}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			if ws != "" {
				u, err := c.WorkspaceUsage(cmd.Context(), ws)
				if err != nil {
					return err
				}
				return out(cmd, g, u, func(w io.Writer) {
					usageTable(w, u.UsageSum)
					budget := "none"
					if u.TokenBudget > 0 {
						budget = strconv.FormatInt(u.TokenBudget, 10)
					}
					scope := "every session"
					if u.Scope == desk.UsageScopeActor {
						scope = "your sessions (" + u.ActorID + ")"
					}
					fmt.Fprintf(w, "\nscope: %s\ntoken budget: %s; workspace usage: %d\n", scope, budget, u.BudgetUsed)
				})
			}
			u, err := c.SessionUsage(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, u, func(w io.Writer) { usageTable(w, u.UsageSum) })
		},
	}
	cmd.Flags().StringVar(&ws, "workspace", "", "sum a workspace instead of a session")
	return cmd
}

func usageTable(w io.Writer, s desk.UsageSum) {
	t := newTable(w, "MODEL", "CALLS", "INPUT", "CACHED", "OUTPUT", "TOTAL")
	for _, m := range s.Models {
		t.row(m.Model, num(m.Calls), num(m.InputTokens), num(m.CachedTokens), num(m.OutputTokens), num(m.TotalTokens))
	}
	x := s.Total
	t.row("total", num(x.Calls), num(x.InputTokens), num(x.CachedTokens), num(x.OutputTokens), num(x.TotalTokens))
	t.flush()
}

func num(n int64) string { return strconv.FormatInt(n, 10) }

// budgetCmd sets a workspace's token budget.
func budgetCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "budget WS TOKENS",
		Short: "Set a workspace's token budget (0 clears it); raising it releases budget blocks",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			n, err := strconv.ParseInt(a[1], 10, 64)
			if err != nil {
				return &usageError{fmt.Errorf("TOKENS %q must be a whole number; usage: %s", a[1], cmd.UseLine())}
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			st, err := c.PatchAgentSettings(cmd.Context(), a[0], client.AgentSettingsPatch{TokenBudget: &n})
			if err != nil {
				return err
			}
			return out(cmd, g, st, func(w io.Writer) {
				if st.TokenBudget == 0 {
					fmt.Fprintf(w, "workspace %s has no token budget\n", a[0])
					return
				}
				fmt.Fprintf(w, "workspace %s token budget: %d\n", a[0], st.TokenBudget)
			})
		},
	}
}
