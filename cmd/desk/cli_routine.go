package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
)

// routineCmd is "desk routine": prompts a workspace submits on a
// schedule, without a person at the keyboard.
func routineCmd(g *globals) *cobra.Command {
	cmd := noun("routine", "Create, list, pause and run routines: prompts submitted on a schedule", "routines", "rtn")

	var in desk.RoutineCreate
	var paused bool
	var promptFile string
	create := &cobra.Command{
		Use:     "create <ws> <name> --schedule SPEC (--prompt TEXT | --prompt-file FILE)",
		Aliases: []string{"add"},
		Short:   "Create a routine in a workspace",
		Long: `Create a routine: a prompt submitted on a schedule to a session, or to
a new session per run when --session is not given.

--schedule is a five-field cron expression ("0 9 * * 1-5", read in
--tz, UTC by default), a descriptor ("@hourly", "@daily") or an interval
("@every 30s"). --overlap skip (the default) skips a tick while the
previous run is going; queue submits it anyway, behind the previous one.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			body := in
			body.Name = a[1]
			if body.Schedule == "" {
				return usagef("--schedule is required")
			}
			if promptFile != "" {
				if body.Prompt != "" {
					return usagef("--prompt and --prompt-file exclude each other")
				}
				var b []byte
				var err error
				if promptFile == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(promptFile)
				}
				if err != nil {
					return usagef("--prompt-file: %v", err)
				}
				body.Prompt = string(b)
			}
			if strings.TrimSpace(body.Prompt) == "" {
				return usagef("--prompt or --prompt-file is required")
			}
			if paused {
				f := false
				body.Enabled = &f
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.CreateRoutine(cmd.Context(), a[0], body)
			if err != nil {
				return err
			}
			return out(cmd, g, r, func(o io.Writer) {
				fmt.Fprintf(o, "created routine %s %q; next run %s\n", r.ID, r.Name, nextRun(r))
			})
		},
	}
	f := create.Flags()
	f.StringVar(&in.Schedule, "schedule", "", `when it runs: cron ("0 9 * * 1-5"), "@hourly" or "@every 30s" (required)`)
	f.StringVar(&in.TimeZone, "tz", "", "IANA time zone the cron expression is read in (default UTC)")
	f.StringVar(&in.Prompt, "prompt", "", "the prompt each run submits")
	f.StringVar(&promptFile, "prompt-file", "", "read the prompt from a file, or - for stdin")
	f.StringVar(&in.SessionID, "session", "", "submit every run to this session (default: a new session per run)")
	f.StringVar(&in.TitleTemplate, "title", "", "title template of the new session per run")
	f.StringVar(&in.Model, "model", "", "model of the new session per run")
	f.StringVar(&in.Runtime, "runtime", "", "runtime of the new session per run")
	f.StringVar(&in.Overlap, "overlap", "", "skip (default) or queue: what a tick does while the previous run is going")
	f.BoolVar(&paused, "paused", false, "create it paused (resume with desk routine resume)")

	list := &cobra.Command{
		Use:     "ls <ws>",
		Aliases: []string{"list"},
		Short:   "List a workspace's routines",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rs, err := c.ListRoutines(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(rs), func(o io.Writer) {
				t := newTable(o, "ID", "NAME", "SCHEDULE", "STATE", "NEXT RUN", "TARGET")
				for _, r := range rs {
					t.row(r.ID, r.Name, schedule(r), routineState(r), nextRun(r), routineTarget(r))
				}
				t.flush()
			})
		},
	}

	show := &cobra.Command{
		Use:   "show <ws> <rtn>",
		Short: "Show a routine and its latest runs",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.GetRoutine(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			return out(cmd, g, r, func(o io.Writer) {
				fields(o, "id", r.ID, "name", r.Name, "workspace", r.WorkspaceID,
					"schedule", schedule(r), "state", routineState(r), "next run", nextRun(r),
					"target", routineTarget(r), "overlap", r.Overlap, "actor", r.Actor,
					"created", fmtTime(r.CreatedAt), "updated", fmtTime(r.UpdatedAt))
				fmt.Fprintf(o, "prompt:\n%s\n", indent(r.Prompt))
			})
		},
	}

	setEnabled := func(use, short string, enabled bool) *cobra.Command {
		return &cobra.Command{
			Use:   use + " <ws> <rtn>",
			Short: short,
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				r, err := c.UpdateRoutine(cmd.Context(), a[0], a[1], desk.RoutineUpdate{Enabled: &enabled})
				if err != nil {
					return err
				}
				return out(cmd, g, r, func(o io.Writer) {
					if enabled {
						fmt.Fprintf(o, "resumed routine %s; next run %s\n", r.ID, nextRun(r))
					} else {
						fmt.Fprintf(o, "paused routine %s\n", r.ID)
					}
				})
			},
		}
	}

	run := &cobra.Command{
		Use:   "run <ws> <rtn>",
		Short: "Run a routine now, by hand (a paused one too; the overlap policy holds)",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			run, err := c.RunRoutine(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			return out(cmd, g, run, func(o io.Writer) {
				if run.Status == desk.RoutineRunSkipped {
					fmt.Fprintf(o, "run %s skipped: %s\n", run.ID, orDash(run.Error))
					return
				}
				fmt.Fprintf(o, "run %s %s in session %s\n", run.ID, run.Status, orDash(run.SessionID))
			})
		},
	}

	var limit int
	runs := &cobra.Command{
		Use:   "runs <ws> <rtn>",
		Short: "List a routine's runs, newest first",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rs, err := c.RoutineRuns(cmd.Context(), a[0], a[1], limit)
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(rs), func(o io.Writer) {
				t := newTable(o, "ID", "TRIGGER", "STATUS", "STARTED", "FINISHED", "SESSION", "ERROR")
				for _, r := range rs {
					fin := "-"
					if r.FinishedAt != nil {
						fin = fmtTime(*r.FinishedAt)
					}
					t.row(r.ID, r.Trigger, r.Status, fmtTime(r.StartedAt), fin, orDash(r.SessionID), orDash(r.Error))
				}
				t.flush()
			})
		},
	}
	runs.Flags().IntVar(&limit, "limit", 0, "at most this many runs (default 100)")

	rm := &cobra.Command{
		Use:     "rm <ws> <rtn>",
		Aliases: []string{"delete"},
		Short:   "Delete a routine and its run history (runs already submitted go on)",
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteRoutine(cmd.Context(), a[0], a[1]); err != nil {
				return err
			}
			return out(cmd, g, map[string]string{"deleted": a[1]}, func(o io.Writer) {
				fmt.Fprintf(o, "deleted routine %s\n", a[1])
			})
		},
	}

	cmd.AddCommand(create, list, show,
		setEnabled("pause", "Pause a routine: its schedule stops firing until resumed", false),
		setEnabled("resume", "Resume a paused routine from its next tick", true),
		run, runs, rm)
	return cmd
}

func schedule(r *desk.Routine) string {
	if r.TimeZone != "" && !strings.HasPrefix(r.Schedule, "@every") {
		return r.Schedule + " (" + r.TimeZone + ")"
	}
	return r.Schedule
}

func routineState(r *desk.Routine) string {
	if r.Enabled {
		return "enabled"
	}
	return "paused"
}

func nextRun(r *desk.Routine) string {
	if !r.Enabled {
		return "-"
	}
	return fmtTime(r.NextRunAt)
}

func routineTarget(r *desk.Routine) string {
	if r.SessionID != "" {
		return r.SessionID
	}
	return "new session per run"
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
