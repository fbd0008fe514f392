package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// addClientCommands adds every command that talks to a desk server through
// the Go client: noun first, verb second ("desk session list WS").
func addClientCommands(root *cobra.Command, g *globals) {
	root.AddCommand(
		workspaceCmd(g),
		actorCmd(g),
		sessionCmd(g),
		artifactCmd(g),
		groupCmd(g),
		runtimeCmd(g),
		guestCmd(g),
		adminCmd(g),
		healthCmd(g),
		logsCmd(g),
		archiveCmd(g),
		sendCmd(g),
		messageCmd(g),
		profileCmd(g),
		threadCmd(g),
		queueCmd(g),
		interruptCmd(g),
		blocksCmd(g),
		executionsCmd(g),
		eventsCmd(g),
		watchCmd(g),
		filesCmd(g),
		askCmd(g),
		dispatchCmd(g),
		templateCmd(g),
		routineCmd(g),
		webhookCmd(g),
		inboxCmd(g),
		usageCmd(g),
		mcpCmd(g),
		acpCmd(g),
		loginLinkCmd(g),
		logoutAllCmd(g),
	)
	root.AddCommand(decideCommands(g)...)
}

// printJSON writes v as indented JSON and a newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// usageArgs wraps a cobra argument validator so that a wrong argument count is a
// usage error (exit status 2) rather than a generic failure.
func usageArgs(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := v(cmd, a); err != nil {
			return &usageError{fmt.Errorf("%w; usage: %s", err, cmd.UseLine())}
		}
		return nil
	}
}

// noun returns a command that only groups verbs. Called with an unknown verb
// it fails as a usage error instead of silently printing help.
func noun(use, short string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Short:   short,
		Aliases: aliases,
		RunE: func(cmd *cobra.Command, a []string) error {
			if len(a) > 0 {
				return &usageError{fmt.Errorf("unknown command %q for %q; see %s --help", a[0], cmd.CommandPath(), cmd.CommandPath())}
			}
			return cmd.Help()
		},
	}
}

// usagef returns a usage error (exit status 2).
func usagef(format string, a ...any) error {
	return &usageError{fmt.Errorf(format, a...)}
}

// out prints either the API object as JSON (--json) or the human form.
func out(cmd *cobra.Command, g *globals, v any, human func(w io.Writer)) error {
	w := cmd.OutOrStdout()
	if g.json {
		return printJSON(w, v)
	}
	human(w)
	return nil
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cols ...string) {
	for i, c := range cols {
		// Tabs and newlines in user text would break the columns.
		cols[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

func (t *table) flush() { _ = t.tw.Flush() }

// fields prints "key: value" lines, aligned.
func fields(w io.Writer, kv ...string) {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[i], kv[i+1])
	}
	_ = tw.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// fmtBytes renders a byte count for people: 512 B, 4.0 KiB, 1.5 GiB.
func fmtBytes(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), -1
	for v >= 1024 && unit < 5 {
		v /= 1024
		unit++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[unit])
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func healthCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Check that the server answers, and print its version",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			v, err := c.Health(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, map[string]string{"status": "ok", "server": c.BaseURL, "version": v}, func(w io.Writer) {
				fmt.Fprintf(w, "ok: desk %s at %s\n", v, c.BaseURL)
			})
		},
	}
}
