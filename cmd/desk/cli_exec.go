package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// errTurnDone ends an event stream once the followed turn settled.
var errTurnDone = errors.New("turn done")

func sendCmd(g *globals) *cobra.Command {
	var in client.SubmitInput
	var noWait bool
	var thread string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "send SES TEXT...",
		Short: "Send a message to a session and print the reply as it streams",
		Long: `Send a message to a session. The message is queued durably before anything
runs; desk send then follows the session's events and prints the assistant's
text as it streams, until the turn ends. On stderr it says what the turn
waits on as it happens — queued behind another turn (its place and the
running execution), an approval, an answer or a plan decision, each with the
command that gives it — and how the turn ended.

Exit status: 0 the turn ended, 8 it failed, 9 it was interrupted, 10
--timeout passed before it settled (it goes on; the message says what it
waits on). --no-wait prints the queued row and returns at once (0).`,
		Args: usageArgs(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if timeout < 0 || (noWait && timeout > 0) {
				return usagef("--timeout must be positive, and follows the turn that --no-wait does not follow")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			in.Text = strings.Join(a[1:], " ")
			if thread != "" {
				if in.Surface, err = threadSurface(cmd.Context(), c, a[0], thread, in.Surface); err != nil {
					return err
				}
			}
			res, err := c.Send(cmd.Context(), a[0], in)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if noWait {
				return out(cmd, g, res, func(w io.Writer) {
					fmt.Fprintf(w, "queued %s (%s)", res.Item.ID, res.Item.Status)
					if res.ExecutionID != "" {
						fmt.Fprintf(w, " execution %s", res.ExecutionID)
					}
					fmt.Fprintln(w)
				})
			}
			f := &follower{c: c, ses: a[0], res: res, json: g.json, out: w, info: cmd.ErrOrStderr()}
			return f.follow(cmd.Context(), timeout)
		},
	}
	cmd.Flags().StringVar(&in.Surface, "surface", "", "surface to send to (default: the orchestrator)")
	cmd.Flags().StringVar(&thread, "thread", "", "send to this handler thread (thr_…) of the session: its surface answers")
	cmd.Flags().StringVar(&in.IdempotencyKey, "key", "", "idempotency key: a repeat returns the first row")
	cmd.Flags().StringVar(&in.Multitask, "multitask", "", "when busy: enqueue (default), reject or interrupt")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "print the queued row and return without following the turn")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "stop following after this long (exit 10 if the turn has not settled; it goes on)")
	return cmd
}

// messageCmd reads a session's transcript and edits a sent message.
func messageCmd(g *globals) *cobra.Command {
	cmd := noun("message", "Read a session's transcript and edit a message you sent", "msg")
	var branches, reasoning bool
	ls := &cobra.Command{
		Use:   "ls SES",
		Short: "List the transcript's active branch (--branches: every branch, each message with its parent)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ms, err := c.Transcript(cmd.Context(), a[0], client.TranscriptOptions{Branches: branches, Limit: 500})
			if err != nil {
				return err
			}
			return out(cmd, g, ms, func(w io.Writer) {
				t := newTable(w, "ID", "SEQ", "PARENT", "ROLE", "TEXT")
				for _, m := range ms {
					if reasoning {
						// The model's reasoning, labelled, on its own row
						// ahead of what it led to.
						for _, r := range m.Reasoning() {
							text := r.Text
							if r.Type == "redacted_thinking" {
								text = "(redacted by the provider)"
							}
							t.row("", "", "", "reasoning", clip(strings.Join(strings.Fields(text), " "), 120))
						}
					}
					t.row(m.ID, fmt.Sprint(m.Seq), orDash(m.ParentID), m.Role, messageText(m))
				}
				t.flush()
			})
		},
	}
	ls.Flags().BoolVar(&branches, "branches", false, "every branch of the transcript tree, not only the active one")
	ls.Flags().BoolVar(&reasoning, "reasoning", false, "show the model's reasoning (labelled rows) before the messages it led to")
	edit := &cobra.Command{
		Use:   "edit SES MSG TEXT...",
		Short: "Edit and resend a message you sent: the revision starts a new branch from its parent; the original branch stays",
		Args:  usageArgs(cobra.MinimumNArgs(3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.EditMessage(cmd.Context(), a[0], a[1], strings.Join(a[2:], " "))
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				fmt.Fprintf(w, "queued %s (%s) editing %s", res.Item.ID, res.Item.Status, a[1])
				if res.ExecutionID != "" {
					fmt.Fprintf(w, " execution %s", res.ExecutionID)
				}
				fmt.Fprintln(w)
			})
		},
	}
	cmd.AddCommand(ls, edit)
	return cmd
}

// messageText is a transcript row's text as a person reads it: a tool
// step (an assistant message of tool calls only) as its calls' lines, as
// desk watch shows them; a tool result as what it answered.
func messageText(m *desk.Message) string {
	var parts []string
	if m.Text != "" {
		parts = append(parts, clip(m.Text, 60))
	}
	if len(m.Commands) > 0 {
		t := newTrace(io.Discard, false)
		for _, c := range m.Commands {
			parts = append(parts, strings.TrimSpace(t.commandLine(c)))
		}
	} else if len(m.ToolCalls) > 0 {
		var ns []string
		for _, c := range m.ToolCalls {
			ns = append(ns, c.Name)
		}
		parts = append(parts, "calls "+strings.Join(ns, ", "))
	}
	if m.Role == desk.RoleTool {
		return clip("→ "+firstNonEmpty(m.ToolName, "tool")+": "+m.Text, 60)
	}
	if in := m.Interrupted(); in != nil {
		// Said after the clipped text, so a long partial reply cannot
		// hide that it is one.
		return clip(strings.Join(parts, " · "), 90) + " [interrupted: " + desk.StoppedBy(in) + "]"
	}
	return clip(strings.Join(parts, " · "), 120)
}

func queueCmd(g *globals) *cobra.Command {
	cmd := noun("queue", "Look at and steer a session's queue")
	var all bool
	ls := &cobra.Command{
		Use:   "ls SES",
		Short: "List queued and dispatching rows in dispatch order (--all adds finished ones)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			items, err := c.Queue(cmd.Context(), a[0], all)
			if err != nil {
				return err
			}
			return out(cmd, g, items, func(w io.Writer) {
				t := newTable(w, "ID", "STATUS", "PRIO", "KIND", "EXECUTION", "TEXT")
				for _, it := range items {
					t.row(it.ID, it.Status, fmt.Sprint(it.Priority), it.Kind, orDash(it.ExecutionID), clip(it.Text, 60))
				}
				t.flush()
			})
		},
	}
	ls.Flags().BoolVar(&all, "all", false, "include delivered, failed and cancelled rows")
	cmd.AddCommand(ls)
	for _, op := range []struct{ name, short string }{
		{"steer", "Deliver a queued row next"},
		{"cancel", "Cancel a row before it is claimed"},
		{"approve", "Let a row from another origin run on an attached surface"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   op.name + " SES Q",
			Short: op.short,
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				it, err := c.QueueOp(cmd.Context(), a[0], a[1], op.name)
				if err != nil {
					return err
				}
				return out(cmd, g, it, func(w io.Writer) { fmt.Fprintf(w, "%s %s (priority %d)\n", it.ID, it.Status, it.Priority) })
			},
		})
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "move SES Q front|back",
		Short: "Move a queued row to the front or back of its priority class",
		Args:  usageArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if a[2] != "front" && a[2] != "back" {
				return usagef("position %q must be front or back", a[2])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			it, err := c.QueueMove(cmd.Context(), a[0], a[1], a[2])
			if err != nil {
				return err
			}
			return out(cmd, g, it, func(w io.Writer) { fmt.Fprintf(w, "%s moved to the %s\n", it.ID, a[2]) })
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "resume SES [SURFACE]",
		Short: "Resume a queue held after a block release",
		Args:  usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			srf := ""
			if len(a) == 2 {
				srf = a[1]
			}
			s, err := c.ResumeQueue(cmd.Context(), a[0], srf)
			if err != nil {
				return err
			}
			return out(cmd, g, s, func(w io.Writer) { fmt.Fprintf(w, "resumed %s\n", s.ID) })
		},
	})
	return cmd
}

func interruptCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "interrupt [SES] EXE",
		Short: "Interrupt the exact execution and wait until its executor stopped",
		Long: `Interrupt the exact execution and wait until its executor stopped. The
execution id names its session; give SES too only to check that it is that
session's (a mismatch is refused and stops nothing).`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ses, exe := "", a[len(a)-1]
			if len(a) == 2 {
				ses = a[0]
			} else {
				x, err := c.Execution(cmd.Context(), exe)
				if err != nil {
					return err
				}
				ses = x.SessionID
			}
			res, err := c.Interrupt(cmd.Context(), ses, exe)
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				switch {
				case res.Stopped:
					fmt.Fprintf(w, "stopped %s (%s)\n", res.Execution.ID, res.Execution.Phase)
				case res.Pending:
					fmt.Fprintf(w, "%s is still stopping: %s\n", res.Execution.ID, res.Execution.StopError)
				default:
					fmt.Fprintf(w, "%s had already finished (%s)\n", res.Execution.ID, res.Execution.Phase)
				}
			})
		},
	}
}

func blocksCmd(g *globals) *cobra.Command {
	cmd := noun("blocks", "List and release a session's admission blocks")
	cmd.AddCommand(&cobra.Command{
		Use:   "ls SES",
		Short: "List admission blocks, newest first",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			bs, err := c.Blocks(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, bs, func(w io.Writer) {
				t := newTable(w, "ID", "KIND", "ACTIVE", "CREATED", "REASON")
				for _, b := range bs {
					t.row(b.ID, b.Kind, yesNo(b.Active), fmtTime(b.CreatedAt), b.Reason)
				}
				t.flush()
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "release SES BLK",
		Short: "Release a block; queued work resumes at the next send or queue resume",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			b, err := c.ReleaseBlock(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			return out(cmd, g, b, func(w io.Writer) { fmt.Fprintf(w, "released %s (%s)\n", b.ID, b.Kind) })
		},
	})
	return cmd
}

func executionsCmd(g *globals) *cobra.Command {
	cmd := noun("exec", "List and show executions", "executions")
	cmd.AddCommand(&cobra.Command{
		Use:   "ls SES",
		Short: "List a session's executions, newest first",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			xs, err := c.Executions(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, xs, func(w io.Writer) {
				t := newTable(w, "ID", "PHASE", "REQUESTED", "REASON")
				for _, x := range xs {
					t.row(x.ID, x.Phase, fmtTime(x.RequestedAt), orDash(x.Reason))
				}
				t.flush()
			})
		},
	})
	var events bool
	show := &cobra.Command{
		Use:   "show EXE",
		Short: "Show an execution: its reply, each tool call as one line, its decisions and outcome (--events: the raw event list)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			x, err := c.Execution(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, x, func(w io.Writer) {
				fields(w, "id", x.ID, "session", x.SessionID, "surface", x.SurfaceID, "phase", x.Phase, "reason", orDash(x.Reason),
					"requested", fmtTime(x.RequestedAt), "events", fmt.Sprint(len(x.Events)))
				if events {
					for _, e := range x.Events {
						fmt.Fprintf(w, "  %d %s %s\n", e.Seq, e.At.Local().Format("15:04:05.000"), e.Type)
					}
					return
				}
				// The turn as desk watch shows it (settled lines only).
				fmt.Fprintln(w)
				t := newTrace(w, false)
				for i := range x.Events {
					t.event(eventOf(x, &x.Events[i]))
				}
				if t.final == nil && x.Terminal() {
					t.outcome(x)
				}
				if !t.col0 {
					fmt.Fprintln(w)
				}
			})
		},
	}
	show.Flags().BoolVar(&events, "events", false, "list the raw events (seq, time, type) instead of the trace")
	cmd.AddCommand(show)
	return cmd
}

func eventsCmd(g *globals) *cobra.Command {
	var f client.EventFilter
	var after int64
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Follow live events (queue, execution, artifact, block); resumes without gaps",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			return c.Events(cmd.Context(), f, after, func(e *desk.Event) error {
				if g.json {
					b, _ := json.Marshal(e)
					_, err := fmt.Fprintf(w, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintf(w, "%d %s %-22s session=%s execution=%s\n", e.Seq, e.At.Local().Format("15:04:05.000"), e.Type, orDash(e.SessionID), orDash(e.ExecutionID))
				return err
			})
		},
	}
	cmd.Flags().StringVar(&f.Workspace, "workspace", "", "only this workspace")
	cmd.Flags().StringVar(&f.Session, "session", "", "only this session")
	cmd.Flags().StringVar(&f.Execution, "execution", "", "only this execution")
	cmd.Flags().Int64Var(&after, "after", -1, "start after this event id (0: from the oldest kept; default: from now)")
	return cmd
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
