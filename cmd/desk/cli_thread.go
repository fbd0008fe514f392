package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// threadCmd reads a session's handler threads and their episodes (svvy).
// Threads are started, followed up and reported by the agent's thread
// tools; the CLI reads them and talks to a thread with desk send --thread.
func threadCmd(g *globals) *cobra.Command {
	cmd := noun("thread", "Read a session's handler threads and the episodes they reported", "thr")
	var group string
	ls := &cobra.Command{
		Use:     "ls SES",
		Aliases: []string{"list"},
		Short:   "List a session's handler threads: objective state and latest episode (never transcripts)",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ts, err := c.Threads(cmd.Context(), a[0], group)
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(ts), func(w io.Writer) {
				t := newTable(w, "ID", "TITLE", "STATE", "HISTORY", "GROUP", "EPISODES", "LATEST")
				for _, x := range ts {
					t.row(x.ID, clip(x.Title, 40), x.State, x.History, x.GroupID, fmt.Sprint(x.EpisodeCount), latest(x.LatestEpisode))
				}
				t.flush()
			})
		},
	}
	ls.Flags().StringVar(&group, "group", "", "only the threads of this thread group (tgr_…)")
	show := &cobra.Command{
		Use:   "show THR",
		Short: "Show one handler thread: objective, state, group, surface, latest episode and branch",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			x, err := c.Thread(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, x, func(w io.Writer) {
				fields(w, "id", x.ID, "session", x.SessionID, "surface", x.SurfaceID, "title", x.Title, "state", x.State,
					"history", x.History, "group", x.GroupID, "episodes", fmt.Sprint(x.EpisodeCount), "latest", latest(x.LatestEpisode),
					"created", fmtTime(x.CreatedAt), "updated", fmtTime(x.UpdatedAt))
				if x.Git != nil {
					fields(w, "worktree", orDash(x.Git.Worktree), "branch", gitHead(x.Git))
				}
				fmt.Fprintf(w, "\nobjective:\n%s\n", x.Objective)
			})
		},
	}
	episodes := &cobra.Command{
		Use:   "episodes THR",
		Short: "Print a thread's episodes in the order recorded, with their bodies",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			es, err := c.Episodes(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(es), func(w io.Writer) {
				if len(es) == 0 {
					fmt.Fprintf(w, "thread %s has reported no episodes yet\n", a[0])
					return
				}
				for i, e := range es {
					if i > 0 {
						fmt.Fprintln(w)
					}
					kind := e.Kind
					if e.Outcome != "" {
						kind += " (" + e.Outcome + ")"
					}
					fmt.Fprintf(w, "%s  %s  %s  %s\n%s\n", e.ID, fmtTime(e.CreatedAt), kind, e.Title, e.Body)
				}
			})
		},
	}
	cmd.AddCommand(ls, show, episodes)
	return cmd
}

// latest is an episode summary in one cell.
func latest(e *desk.EpisodeSummary) string {
	if e == nil {
		return "-"
	}
	s := e.Kind
	if e.Outcome != "" {
		s += "/" + e.Outcome
	}
	return s + ": " + clip(e.Title, 40)
}

// threadSurface resolves desk send's --thread to the thread's handler
// surface, refusing a thread of another session and a --surface that
// names a different one.
func threadSurface(ctx context.Context, c *client.Client, ses, thr, surface string) (string, error) {
	t, err := c.Thread(ctx, thr)
	if err != nil {
		return "", err
	}
	if t.SessionID != ses {
		return "", desk.Errorf(desk.EINVALID, "thread %s belongs to session %s, not %s", thr, t.SessionID, ses)
	}
	if surface != "" && surface != t.SurfaceID {
		return "", usagef("--thread %s is surface %s; --surface names %s", thr, t.SurfaceID, surface)
	}
	return t.SurfaceID, nil
}
