package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/lifecycle"
)

// workspaceLifecycleCmds are the workspace lifecycle verbs: offboard,
// restore, purge and catalog.
func workspaceLifecycleCmds(g *globals) []*cobra.Command {
	var in lifecycle.OffboardInput
	var notesFile string
	var successors []string
	offboard := &cobra.Command{
		Use:   "offboard WS --reason TEXT",
		Short: "Offboard a workspace (admin): handoff, retired sessions, directory moved to departed-workspaces/",
		Long: `Offboard a workspace: desk writes HANDOFF.md and offboarding.json, retires the
workspace's sessions (their identities stay) and moves its directory whole to
departed-workspaces/<ws>. It is refused while an
execution of the workspace runs (exit status 6, "blocked", naming the
executions). Offboarding a departed workspace changes
nothing. --successor SES=SES records which session carries a retired
session's work on; repeat it for several.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if strings.TrimSpace(in.Reason) == "" {
				return usagef("--reason is required: say why workspace %s leaves", a[0])
			}
			if notesFile != "" {
				b, err := os.ReadFile(notesFile)
				if err != nil {
					return usagef("--notes-file: %v", err)
				}
				in.Notes = string(b)
			}
			for _, s := range successors {
				from, to, ok := strings.Cut(s, "=")
				if !ok || from == "" || to == "" {
					return usagef("--successor %q must be SES=SES", s)
				}
				if in.Successors == nil {
					in.Successors = map[string]string{}
				}
				in.Successors[from] = to
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Offboard(cmd.Context(), a[0], in)
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				if !res.Changed {
					fmt.Fprintf(w, "workspace %s was already departed (%s)\n", a[0], res.Path)
					return
				}
				fmt.Fprintf(w, "offboarded workspace %s to %s; %d sessions retired\n", a[0], res.Path, len(res.Workspace.RetiredSessions))
			})
		},
	}
	offboard.Flags().StringVar(&in.Reason, "reason", "", "why the workspace leaves (required)")
	offboard.Flags().StringVar(&in.Notes, "notes", "", "notes for whoever picks the work up")
	offboard.Flags().StringVar(&notesFile, "notes-file", "", "read the notes from this file")
	offboard.Flags().StringArrayVar(&successors, "successor", nil, "SES=SES: the session that carries a retired session's work on")

	restore := &cobra.Command{
		Use:   "restore WS",
		Short: "Restore a departed workspace (admin) to its original place and recall its sessions",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Restore(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				if !res.Changed {
					fmt.Fprintf(w, "workspace %s is already active\n", a[0])
					return
				}
				fmt.Fprintf(w, "restored workspace %s to %s\n", a[0], res.Path)
			})
		},
	}

	var confirm string
	purge := &cobra.Command{
		Use:   "purge WS --confirm WS",
		Short: "Purge a departed workspace for good (admin); the catalog keeps its tombstone",
		Long: `Purge a departed workspace: its directory, transcripts, artifacts and queue
rows are deleted and cannot be brought back. The catalog row, the retired
session identities and the provenance stay, so follow-ups aimed into the
workspace answer "purged" rather than "unknown". --confirm must repeat the
workspace id.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if confirm != a[0] {
				return usagef("purging is irreversible: pass --confirm %s", a[0])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Purge(cmd.Context(), a[0], confirm)
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				if !res.Changed {
					fmt.Fprintf(w, "workspace %s was already purged\n", a[0])
					return
				}
				fmt.Fprintf(w, "purged workspace %s\n", a[0])
			})
		},
	}
	purge.Flags().StringVar(&confirm, "confirm", "", "the workspace id again")

	catalog := &cobra.Command{
		Use:   "catalog [WS]",
		Short: "List every workspace ever created with its lifecycle state, or show one with its handoff",
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if len(a) == 1 {
				e, err := c.CatalogEntry(cmd.Context(), a[0])
				if err != nil {
					return err
				}
				return out(cmd, g, e, func(w io.Writer) { showCatalogEntry(w, e) })
			}
			es, err := c.Catalog(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(es), func(w io.Writer) {
				t := newTable(w, "ID", "NAME", "STATE", "CREATED", "OFFBOARDED", "REASON", "ABSORBED INTO")
				for _, e := range es {
					t.row(e.WorkspaceID, e.Name, e.State, fmtTime(e.CreatedAt), fmtOptTime(e.OffboardedAt), e.Reason, e.AbsorbedInto)
				}
				t.flush()
			})
		},
	}
	return []*cobra.Command{offboard, restore, purge, catalog}
}

func fmtOptTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return fmtTime(*t)
}

func showCatalogEntry(w io.Writer, e *desk.CatalogEntry) {
	kv := []string{"id", e.WorkspaceID, "name", e.Name, "state", e.State, "created", fmtTime(e.CreatedAt)}
	if e.OffboardedAt != nil {
		kv = append(kv, "offboarded", fmtTime(*e.OffboardedAt))
	}
	if e.RestoredAt != nil {
		kv = append(kv, "restored", fmtTime(*e.RestoredAt))
	}
	if e.PurgedAt != nil {
		kv = append(kv, "purged", fmtTime(*e.PurgedAt))
	}
	if e.Reason != "" {
		kv = append(kv, "reason", e.Reason)
	}
	if e.AbsorbedInto != "" {
		kv = append(kv, "absorbed into", e.AbsorbedInto)
	}
	if e.ImportCommit != "" {
		kv = append(kv, "import commit", e.ImportCommit)
	}
	keys := make([]string, 0, len(e.Successors))
	for k := range e.Successors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv = append(kv, "successor", k+" → "+e.Successors[k])
	}
	fields(w, kv...)
	if e.Handoff != "" {
		fmt.Fprintf(w, "\n%s", e.Handoff)
	}
}

func askCmd(g *globals) *cobra.Command {
	var in lifecycle.AskInput
	var session, artifact, workspace, inWS, subject, reply, from string
	cmd := &cobra.Command{
		Use:   "ask (--session SES | --artifact ART | --workspace WS) PROMPT...",
		Short: "Ask across workspaces: resolve the target and queue the prompt on the session it resolves to",
		Long: `Ask a session, the session behind an artifact, or a workspace. desk resolves
the target as follow-ups are resolved: a usable session gets the prompt with
your origin (exact); a retired, departed or purged one gets nothing and the
answer says why (unavailable); an unknown target in a known workspace gets a
new session labelled reconstructed. --reconstruct prefixes the prompt of a
reconstructed target with a preamble telling the new worker it rebuilds
someone else's work. --in names the workspace to reconstruct an unknown
session or artifact in.

Every ask is recorded as a dispatch (desk dispatch ls). With --reply caller
and --from SES, the target's answer comes back to that session as a
dispatch_reply message; --subject says what the ask is about.`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			n := 0
			for kind, id := range map[string]string{"session": session, "artifact": artifact, "workspace": workspace} {
				if id != "" {
					n++
					in.Target.Kind, in.Target.ID = kind, id
				}
			}
			if n != 1 {
				return usagef("name exactly one target: --session, --artifact or --workspace")
			}
			in.Target.WorkspaceID = inWS
			in.Prompt = strings.Join(a, " ")
			in.Subject, in.Reply, in.FromSession = subject, reply, from
			c, err := g.client()
			if err != nil {
				return err
			}
			res, err := c.Ask(cmd.Context(), in)
			if err != nil {
				return err
			}
			return out(cmd, g, res, func(w io.Writer) {
				if res.Status == lifecycle.AskUnavailable {
					fmt.Fprintf(w, "unavailable (%s): nothing was sent\n", res.Reason)
					return
				}
				fmt.Fprintf(w, "%s: queued %s on session %s %s\n", res.Resolution, res.QueuedItemID, res.SessionID, res.Signature)
				if res.DispatchID != "" {
					fmt.Fprintf(w, "dispatch %s (desk dispatch show %s)\n", res.DispatchID, res.DispatchID)
				}
			})
		},
	}
	cmd.Flags().StringVar(&session, "session", "", "the session to ask")
	cmd.Flags().StringVar(&artifact, "artifact", "", "ask the session that made this artifact")
	cmd.Flags().StringVar(&workspace, "workspace", "", "ask a new session of this workspace")
	cmd.Flags().StringVar(&inWS, "in", "", "the workspace to reconstruct an unknown session or artifact in")
	cmd.Flags().BoolVar(&in.Reconstruct, "reconstruct", false, "prefix a reconstructed target's prompt with the reconstruction preamble")
	cmd.Flags().StringVar(&subject, "subject", "", "one line saying what the ask is about")
	cmd.Flags().StringVar(&reply, "reply", "", "who gets the target's answer: caller (needs --from) or none (the default)")
	cmd.Flags().StringVar(&from, "from", "", "the session the answer comes back to with --reply caller")
	return cmd
}

func dispatchCmd(g *globals) *cobra.Command {
	cmd := noun("dispatch", "Asks and their replies: who asked whom about what, and what came back", "dispatches")
	var session, workspace string
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List dispatches, newest first",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ds, err := c.Dispatches(cmd.Context(), session, workspace)
			if err != nil {
				return err
			}
			return out(cmd, g, desk.DispatchList{Dispatches: ds}, func(w io.Writer) {
				if len(ds) == 0 {
					fmt.Fprintln(w, "no dispatches")
					return
				}
				for _, d := range ds {
					from := d.Caller.SessionID
					if from == "" {
						from = d.Caller.Actor
					}
					fmt.Fprintf(w, "%s  %-10s  %s -> %s  reply %s  %s\n", d.ID, d.Status, from, d.TargetSessionID, d.Reply, d.Subject)
				}
			})
		},
	}
	ls.Flags().StringVar(&session, "session", "", "only dispatches this session asked or answered")
	ls.Flags().StringVar(&workspace, "workspace", "", "only dispatches of this workspace")
	show := &cobra.Command{
		Use:   "show DSP",
		Short: "Show one dispatch: its snapshot and what became of it",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			d, err := c.Dispatch(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, d, func(w io.Writer) {
				fields(w, "id", d.ID, "status", d.Status, "created", d.CreatedAt.Format(time.RFC3339),
					"caller", strings.TrimSpace(d.Caller.Kind+" "+d.Caller.Actor+" "+d.Caller.SessionID+" "+d.Caller.ExecutionID),
					"target", d.Target.Kind+" "+d.Target.ID, "target session", d.TargetSessionID, "subject", d.Subject,
					"reply", d.Reply, "queued", d.QueueItemID, "execution", d.ExecutionID, "reply row", d.ReplyItemID, "error", d.Error)
				fmt.Fprintf(w, "\n%s\n", d.Text)
				if d.ReplyText != "" {
					fmt.Fprintf(w, "\nreply:\n%s\n", d.ReplyText)
				}
			})
		},
	}
	cmd.AddCommand(ls, show)
	return cmd
}
