package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

func sessionCmd(g *globals) *cobra.Command {
	cmd := noun("session", "Create, list, organise and delete sessions", "ses")

	var actor, title, model, scriptFile, runtimeName, profile, effort string
	create := &cobra.Command{
		Use:   "create <ws>",
		Short: "Create a session in a workspace",
		Long: `Create a session in a workspace. --actor names the owning actor by id or
name; without it the session belongs to the caller's own actor (the
workspace owner, for the admin token). --model picks the session's own model
among those the server offers (GET /v1/models: its DESK_MODEL, the
DESK_MODELS the operator declared, and script; any other is refused);
without it the session runs the server's DESK_MODEL. A script
session takes its script from --script FILE ("-" for stdin): {"steps":[…]}.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			in := client.SessionCreate{Actor: actor, Title: title, Model: model, Runtime: runtimeName, Profile: profile, ReasoningEffort: effort}
			if scriptFile != "" {
				var b []byte
				if scriptFile == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(scriptFile)
				}
				if err != nil {
					return &usageError{fmt.Errorf("--script: %w", err)}
				}
				if !json.Valid(b) {
					return &usageError{fmt.Errorf("--script %s is not JSON", scriptFile)}
				}
				in.Script = b
			}
			s, err := c.CreateSession(cmd.Context(), a[0], in)
			if err != nil {
				return err
			}
			return printSession(cmd, g, s, "created session")
		},
	}
	create.Flags().StringVar(&actor, "actor", "", "owning actor (id or name); default the caller's own")
	create.Flags().StringVar(&title, "title", "", "session title")
	create.Flags().StringVar(&model, "model", "", "the session's own model (default: the server's DESK_MODEL)")
	create.Flags().StringVar(&runtimeName, "runtime", "", "a registered runtime (desk runtime ls) that runs the session's turns instead of desk's agent")
	create.Flags().StringVar(&profile, "profile", "", "a profile of the workspace (desk profile ls) the session is made from")
	create.Flags().StringVar(&effort, "reasoning-effort", "", "low, medium or high (a model declared as reasoning only)")
	create.Flags().StringVar(&scriptFile, "script", "", "the script of a --model script session: a JSON file, or - for stdin")

	var pinned, archived, all bool
	list := &cobra.Command{
		Use:     "list <ws>",
		Aliases: []string{"ls"},
		Short:   "List sessions, most recently updated first (archived ones only with --archived or --all)",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if archived && all {
				return usagef("--archived and --all contradict each other: --archived lists only archived sessions, --all lists every session")
			}
			var f client.SessionFilter
			if pinned {
				f.Pinned = ptr(true)
			}
			if !all {
				f.Archived = ptr(archived)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			xs, err := c.ListSessions(cmd.Context(), a[0], f)
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(xs), func(o io.Writer) {
				t := newTable(o, "ID", "TITLE", "ACTOR", "FLAGS", "UPDATED")
				for _, s := range xs {
					t.row(s.ID, orDash(s.Title), s.Actor, sessionFlags(s), fmtTime(s.UpdatedAt))
				}
				t.flush()
			})
		},
	}
	list.Flags().BoolVar(&pinned, "pinned", false, "only pinned sessions")
	list.Flags().BoolVar(&archived, "archived", false, "only archived sessions")
	list.Flags().BoolVar(&all, "all", false, "archived and active sessions alike")

	show := &cobra.Command{
		Use:   "show <ses>",
		Short: "Show a session",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			s, err := c.GetSession(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, s, func(o io.Writer) {
				// Who answers: a registered runtime, or desk's agent on a
				// model (the desk's default when the session names none).
				runs := "model " + firstNonEmpty(s.Model, "(the desk's default)")
				if s.Runtime != "" {
					runs = "runtime " + s.Runtime
				}
				if s.ReasoningEffort != "" {
					runs += ", reasoning " + s.ReasoningEffort
				}
				if s.Profile != "" {
					runs += " (profile " + s.Profile + ")"
				}
				fields(o, "id", s.ID, "signature", s.Signature, "workspace", s.WorkspaceID, "actor", s.Actor,
					"agent", runs, "title", orDash(s.Title), "pinned", yesNo(s.Pinned), "archived", yesNo(s.Archived),
					"unread", yesNo(s.Unread), "lifecycle", s.Lifecycle,
					"created", fmtTime(s.CreatedAt), "updated", fmtTime(s.UpdatedAt))
				if s.Git != nil {
					fields(o, "worktree", orDash(s.Git.Worktree), "branch", gitHead(s.Git))
				}
			})
		},
	}

	rename := &cobra.Command{
		Use:   "rename <ses> <title>",
		Short: "Set a session's title",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			return patchSession(cmd, g, a[0], client.SessionPatch{Title: &a[1]}, "renamed session")
		},
	}

	worktree := &cobra.Command{
		Use:   "worktree <ses> [<name>]",
		Short: "Bind a session to a git worktree of the checkout (made with git worktree add when missing); without a name, back to the checkout",
		Args:  usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			name, verb := "", "unbound session"
			if len(a) == 2 {
				name, verb = a[1], "bound session"
			}
			return patchSession(cmd, g, a[0], client.SessionPatch{Worktree: &name}, verb)
		},
	}

	var setProfile, setModel, setEffort string
	set := &cobra.Command{
		Use:   "set <ses> [--profile P] [--model M] [--reasoning-effort E]",
		Short: "Change a session's profile, model or reasoning effort from its next turn on (recorded in the transcript)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			var p client.SessionPatch
			fl := cmd.Flags()
			if fl.Changed("profile") {
				p.Profile = &setProfile
			}
			if fl.Changed("model") {
				p.Model = &setModel
			}
			if fl.Changed("reasoning-effort") {
				p.ReasoningEffort = &setEffort
			}
			if p.Profile == nil && p.Model == nil && p.ReasoningEffort == nil {
				return usagef("give --profile, --model or --reasoning-effort")
			}
			return patchSession(cmd, g, a[0], p, "session set (from the next turn)")
		},
	}
	set.Flags().StringVar(&setProfile, "profile", "", "a profile of the session's workspace")
	set.Flags().StringVar(&setModel, "model", "", "a model the server offers (desk models)")
	set.Flags().StringVar(&setEffort, "reasoning-effort", "", `low, medium, high, or "" for the model's default`)

	flag := func(use, short, verb string, p func() client.SessionPatch) *cobra.Command {
		return &cobra.Command{
			Use:   use + " <ses>",
			Short: short,
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				return patchSession(cmd, g, a[0], p(), verb)
			},
		}
	}

	del := &cobra.Command{
		Use:     "delete <ses>",
		Aliases: []string{"rm"},
		Short:   "Delete a session with its artifacts, bindings and scratch (selection groups stay)",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSession(cmd.Context(), a[0]); err != nil {
				return err
			}
			return out(cmd, g, deleted{ID: a[0], Deleted: true}, func(o io.Writer) {
				fmt.Fprintf(o, "deleted session %s\n", a[0])
			})
		},
	}

	bind := &cobra.Command{
		Use:   "bind <ses> [grp...]",
		Short: "Replace the selection groups a session binds (no groups clears them)",
		Args:  usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			gs, err := c.SetBindings(cmd.Context(), a[0], a[1:])
			if err != nil {
				return err
			}
			return printBindings(cmd, g, a[0], gs)
		},
	}

	bindings := &cobra.Command{
		Use:   "bindings <ses>",
		Short: "List the selection groups a session binds",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			gs, err := c.Bindings(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return printBindings(cmd, g, a[0], gs)
		},
	}

	cmd.AddCommand(create, list, show, rename, worktree, set,
		flag("pin", "Pin a session", "pinned session", func() client.SessionPatch { return client.SessionPatch{Pinned: ptr(true)} }),
		flag("unpin", "Unpin a session", "unpinned session", func() client.SessionPatch { return client.SessionPatch{Pinned: ptr(false)} }),
		flag("archive", "Archive a session (hidden from session list by default)", "archived session", func() client.SessionPatch { return client.SessionPatch{Archived: ptr(true)} }),
		flag("unarchive", "Bring an archived session back", "unarchived session", func() client.SessionPatch { return client.SessionPatch{Archived: ptr(false)} }),
		del, bind, bindings)
	return cmd
}

// deleted is what --json prints for a delete, which has no API object.
type deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

func patchSession(cmd *cobra.Command, g *globals, id string, p client.SessionPatch, verb string) error {
	c, err := g.client()
	if err != nil {
		return err
	}
	s, err := c.UpdateSession(cmd.Context(), id, p)
	if err != nil {
		return err
	}
	return printSession(cmd, g, s, verb)
}

func printSession(cmd *cobra.Command, g *globals, s *desk.Session, verb string) error {
	return out(cmd, g, s, func(o io.Writer) {
		fmt.Fprintf(o, "%s %s %s", verb, s.ID, s.Signature)
		if s.Title != "" {
			fmt.Fprintf(o, " %q", s.Title)
		}
		if f := sessionFlags(s); f != "-" {
			fmt.Fprintf(o, " [%s]", f)
		}
		if s.Git != nil && s.Git.Worktree != "" {
			fmt.Fprintf(o, " worktree %s", s.Git.Worktree)
		}
		if s.Git != nil && s.Git.Branch != "" {
			fmt.Fprintf(o, " on %s", s.Git.Branch)
		}
		fmt.Fprintln(o)
	})
}

func printBindings(cmd *cobra.Command, g *globals, ses string, gs []*desk.Group) error {
	return out(cmd, g, nonNilList(gs), func(o io.Writer) {
		if len(gs) == 0 {
			fmt.Fprintf(o, "session %s binds no groups\n", ses)
			return
		}
		t := newTable(o, "ID", "NAME", "ITEMS")
		for _, x := range gs {
			t.row(x.ID, x.Name, fmt.Sprint(x.ItemCount))
		}
		t.flush()
	})
}

func sessionFlags(s *desk.Session) string {
	var f []string
	if s.Pinned {
		f = append(f, "pinned")
	}
	if s.Archived {
		f = append(f, "archived")
	}
	if s.Unread {
		f = append(f, "unread")
	}
	if s.Lifecycle != "" && s.Lifecycle != desk.SessionActive {
		f = append(f, s.Lifecycle)
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ",")
}

func ptr[T any](v T) *T { return &v }

// gitHead is the branch a /workspace has checked out, or the commit it is
// detached at.
func gitHead(g *desk.GitInfo) string {
	if g.Detached {
		return "detached at " + g.Commit
	}
	return g.Branch
}
