package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

func logsCmd(g *globals) *cobra.Command {
	var levels, sources []string
	var text, session, workspace, minLevel string
	var follow bool
	var limit int
	var after int64
	cmd := &cobra.Command{
		Use:   "logs",
		Short: "Read the app log (admin): redacted entries with levels and sources; -f follows it",
		Long: `Read the app log, desk's own structured and redacted operational record.

  desk logs                     the newest 200 entries
  desk logs --level warn,error  only warnings and errors
  desk logs -f                  follow new entries as they are stored
  desk logs unread              unread warn and error counts
  desk logs seen                mark everything so far as seen`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			for _, l := range levels {
				q.Add("level", l)
			}
			for _, s := range sources {
				q.Add("source", s)
			}
			set := func(k, v string) {
				if v != "" {
					q.Set(k, v)
				}
			}
			set("min_level", minLevel)
			set("q", text)
			set("session", session)
			set("workspace", workspace)
			if limit > 0 {
				q.Set("limit", strconv.Itoa(limit))
			}
			if after > 0 {
				q.Set("after_seq", strconv.FormatInt(after, 10))
			}
			w := cmd.OutOrStdout()
			print := func(e *desk.LogEntry) error {
				if g.json {
					b, err := json.Marshal(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(w, "%s\n", b)
					return err
				}
				_, err := fmt.Fprintln(w, logLine(e))
				return err
			}
			page, err := c.Logs(cmd.Context(), q)
			if err != nil {
				return err
			}
			for _, e := range page.Entries {
				if err := print(e); err != nil {
					return err
				}
			}
			if !follow {
				return nil
			}
			q.Del("limit")
			q.Del("after_seq")
			last := page.LastSeq
			if n := len(page.Entries); n > 0 && page.Entries[n-1].Seq > last {
				last = page.Entries[n-1].Seq
			}
			return c.TailLogs(cmd.Context(), q, last, print)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&levels, "level", nil, "levels to show (debug, info, warn, error; repeat or comma-separate)")
	f.StringVar(&minLevel, "min-level", "", "the lowest level to show")
	f.StringSliceVar(&sources, "source", nil, "sources to show")
	f.StringVarP(&text, "query", "q", "", "only entries containing this text")
	f.StringVar(&session, "session", "", "only entries of this session")
	f.StringVar(&workspace, "workspace", "", "only entries of this workspace")
	f.IntVar(&limit, "limit", 0, "entries to show (default 200, at most 1000)")
	f.Int64Var(&after, "after", 0, "only entries after this seq")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing new entries")

	cmd.AddCommand(&cobra.Command{
		Use:   "unread",
		Short: "Show unread warn and error counts (info and debug never count)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			u, err := c.LogsUnread(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, u, func(w io.Writer) {
				fmt.Fprintf(w, "unread: %d error, %d warn (seen up to %d of %d)\n", u.Counts["error"], u.Counts["warn"], u.Seen, u.LastSeq)
			})
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "seen [SEQ]",
		Short: "Mark entries up to SEQ (default: all so far) as seen",
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var seq int64
			if len(a) == 1 {
				if seq, err = strconv.ParseInt(a[0], 10, 64); err != nil || seq < 0 {
					return usagef("SEQ %q must be a non-negative integer", a[0])
				}
			} else {
				u, err := c.LogsUnread(cmd.Context())
				if err != nil {
					return err
				}
				seq = u.LastSeq
			}
			u, err := c.LogsSeen(cmd.Context(), seq)
			if err != nil {
				return err
			}
			return out(cmd, g, u, func(w io.Writer) {
				fmt.Fprintf(w, "seen up to %d; unread: %d error, %d warn\n", u.Seen, u.Counts["error"], u.Counts["warn"])
			})
		},
	})
	return cmd
}

// logLine renders an entry on one line: seq, time, level, source, message
// and the fields as sorted key=value pairs.
func logLine(e *desk.LogEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-6d %s %-5s %-8s %s", e.Seq, e.At.Local().Format("2006-01-02 15:04:05.000"), strings.ToUpper(e.Level), e.Source, e.Message)
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, _ := json.Marshal(e.Fields[k])
		s := string(v)
		if u, err := strconv.Unquote(s); err == nil && !strings.ContainsAny(u, " \t\n\"") {
			s = u
		}
		fmt.Fprintf(&b, " %s=%s", k, s)
	}
	if e.SessionID != "" {
		fmt.Fprintf(&b, " session=%s", e.SessionID)
	}
	return b.String()
}

func archiveCmd(g *globals) *cobra.Command {
	cmd := noun("archive", "Read a workspace's append-only archive (admin)")
	var day string
	cmd.AddCommand(&cobra.Command{
		Use:   "ls WS",
		Short: "List the days and files of the archive (one day's files with --day)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			days, files, err := c.ArchiveDays(cmd.Context(), a[0], day)
			if err != nil {
				return err
			}
			return out(cmd, g, map[string]any{"days": days, "files": files}, func(w io.Writer) {
				t := newTable(w, "DAY", "CHANNEL", "CONVERSATION", "SIZE", "FILE")
				for _, f := range files {
					t.row(f.Day, orDash(f.Channel), orDash(f.Conversation), fmtBytes(f.Size), f.File)
				}
				t.flush()
			})
		},
	})
	cmd.Commands()[0].Flags().StringVar(&day, "day", "", "only this day's files (YYYY-MM-DD)")

	var f archiveFlags
	cat := &cobra.Command{
		Use:   "cat WS",
		Short: "Print archive records as NDJSON, exactly as stored, in order",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			flt, err := f.filter()
			if err != nil {
				return err
			}
			rc, err := c.ReadArchive(cmd.Context(), a[0], flt)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(cmd.OutOrStdout(), rc)
			return err
		},
	}
	f.add(cat)
	var tf archiveFlags
	var follow bool
	var every time.Duration
	tail := &cobra.Command{
		Use:   "tail WS",
		Short: "Print the newest records; -f keeps printing new ones",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			flt, err := tf.filter()
			if err != nil {
				return err
			}
			if flt.From.IsZero() {
				flt.From = time.Now().Add(-24 * time.Hour)
			}
			return tailArchive(cmd, c, a[0], flt, follow, every)
		},
	}
	tf.add(tail)
	tail.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new records")
	tail.Flags().DurationVar(&every, "interval", time.Second, "how often -f looks for new records")
	cmd.AddCommand(cat, tail)
	return cmd
}

type archiveFlags struct{ channel, conversation, from, to string }

func (f *archiveFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.channel, "channel", "", "only this channel")
	cmd.Flags().StringVar(&f.conversation, "conversation", "", "only this conversation id")
	cmd.Flags().StringVar(&f.from, "from", "", "records at or after this time (RFC 3339 or YYYY-MM-DD)")
	cmd.Flags().StringVar(&f.to, "to", "", "records before this time (RFC 3339 or YYYY-MM-DD)")
}

func (f *archiveFlags) filter() (client.ArchiveFilter, error) {
	out := client.ArchiveFilter{Channel: f.channel, Conversation: f.conversation}
	var err error
	if out.From, err = parseWhen("--from", f.from); err != nil {
		return out, err
	}
	out.To, err = parseWhen("--to", f.to)
	return out, err
}

func parseWhen(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, time.DateOnly} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("%s %q must be an RFC 3339 time or a YYYY-MM-DD date", flag, v)
}

// tailArchive prints records from flt.From on and, with follow, polls for
// newer ones. Records are deduplicated by content among those sharing the
// newest timestamp, since the next poll starts at that timestamp.
func tailArchive(cmd *cobra.Command, c *client.Client, ws string, flt client.ArchiveFilter, follow bool, every time.Duration) error {
	w := cmd.OutOrStdout()
	seen := map[[32]byte]bool{}
	var newest time.Time
	for {
		rc, err := c.ReadArchive(cmd.Context(), ws, flt)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(rc)
		sc.Buffer(make([]byte, 64<<10), 32<<20)
		for sc.Scan() {
			line := sc.Bytes()
			var rec struct {
				At time.Time `json:"at"`
			}
			if json.Unmarshal(line, &rec) != nil {
				continue
			}
			sum := sha256.Sum256(line)
			if seen[sum] {
				continue
			}
			if rec.At.After(newest) {
				newest, seen = rec.At, map[[32]byte]bool{}
			}
			seen[sum] = true
			if _, err := fmt.Fprintf(w, "%s\n", line); err != nil {
				rc.Close()
				return err
			}
		}
		rc.Close()
		if err := sc.Err(); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		if !newest.IsZero() {
			flt.From = newest
		}
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(every):
		}
	}
}
