package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
)

// inboxCmd is "desk inbox": everything waiting on the caller, with the
// command that answers each item.
func inboxCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inbox",
		Short: "List what waits on you across sessions: approvals, questions, plans, failed routines",
		Long: `List everything waiting on you across the sessions and routines your
token can see, oldest first: approvals of gated tool calls, questions the
agent asked, plans awaiting review, and routines whose latest run failed.
Each line ends with the command that answers it.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			in, err := c.Inbox(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, in, func(o io.Writer) {
				if len(in.Items) == 0 {
					fmt.Fprintln(o, "nothing waits on you")
					return
				}
				t := newTable(o, "KIND", "ID", "SESSION", "AGE", "SUMMARY", "ANSWER WITH")
				for _, it := range in.Items {
					ses := it.SessionID
					if it.SessionTitle != "" {
						ses += " (" + it.SessionTitle + ")"
					}
					t.row(it.Kind, it.ID, orDash(ses), fmtAge(it.AgeSeconds), it.Summary, answerWith(it))
				}
				t.flush()
			})
		},
	}
}

func answerWith(it *desk.InboxItem) string {
	switch it.Kind {
	case desk.InboxApproval:
		return "desk approve|deny " + it.ID
	case desk.InboxQuestion:
		return "desk answer " + it.ID + " ID=ANSWER"
	case desk.InboxPlan:
		return "desk plan approve|decline|revise " + it.ID
	case desk.InboxRoutineFailed:
		if it.RoutineRun != nil {
			return "desk routine runs " + it.WorkspaceID + " " + it.RoutineRun.RoutineID
		}
	}
	return "-"
}

func fmtAge(s int64) string {
	d := time.Duration(s) * time.Second
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", s)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
