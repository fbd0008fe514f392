package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
)

func groupCmd(g *globals) *cobra.Command {
	cmd := noun("group", "Manage selection groups: ambient context a session can bind", "grp")

	add := groupAddCmd(g)
	cmd.AddCommand(
		&cobra.Command{
			Use:   "create <ws> <name>",
			Short: "Create a selection group in a workspace",
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				x, err := c.CreateGroup(cmd.Context(), a[0], a[1])
				if err != nil {
					return err
				}
				return out(cmd, g, x, func(o io.Writer) {
					fmt.Fprintf(o, "created group %s %q in workspace %s\n", x.ID, x.Name, x.WorkspaceID)
				})
			},
		},
		&cobra.Command{
			Use:     "list <ws>",
			Aliases: []string{"ls"},
			Short:   "List a workspace's selection groups",
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				gs, err := c.ListGroups(cmd.Context(), a[0])
				if err != nil {
					return err
				}
				return out(cmd, g, nonNilList(gs), func(o io.Writer) {
					t := newTable(o, "ID", "NAME", "ITEMS", "UPDATED")
					for _, x := range gs {
						t.row(x.ID, x.Name, fmt.Sprint(x.ItemCount), fmtTime(x.UpdatedAt))
					}
					t.flush()
				})
			},
		},
		&cobra.Command{
			Use:   "show <grp>",
			Short: "Show a group with its items",
			Args:  usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				x, items, err := c.GetGroup(cmd.Context(), a[0])
				if err != nil {
					return err
				}
				v := struct {
					*desk.Group
					Items []*desk.Item `json:"items"`
				}{x, nonNilList(items)}
				return out(cmd, g, v, func(o io.Writer) {
					fields(o, "id", x.ID, "workspace", x.WorkspaceID, "name", x.Name,
						"items", fmt.Sprint(len(items)), "created", fmtTime(x.CreatedAt), "updated", fmtTime(x.UpdatedAt))
					if len(items) == 0 {
						return
					}
					fmt.Fprintln(o)
					t := newTable(o, "ITEM", "KIND", "NAME", "SIZE", "URL")
					for _, it := range items {
						t.row(it.ID, it.Kind, it.Name, fmtBytes(it.Size), orDash(it.URL))
					}
					t.flush()
				})
			},
		},
		add,
		&cobra.Command{
			Use:   "rm-item <grp> <item>",
			Short: "Remove an item from a group",
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				if err := c.RemoveItem(cmd.Context(), a[0], a[1]); err != nil {
					return err
				}
				return out(cmd, g, deleted{ID: a[1], Deleted: true}, func(o io.Writer) {
					fmt.Fprintf(o, "removed item %s from group %s\n", a[1], a[0])
				})
			},
		},
		&cobra.Command{
			Use:     "delete <grp>",
			Aliases: []string{"rm"},
			Short:   "Delete a group; its bindings go, and items nothing else holds are collected",
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				if err := c.DeleteGroup(cmd.Context(), a[0]); err != nil {
					return err
				}
				return out(cmd, g, deleted{ID: a[0], Deleted: true}, func(o io.Writer) {
					fmt.Fprintf(o, "deleted group %s\n", a[0])
				})
			},
		},
	)
	return cmd
}

func groupAddCmd(g *globals) *cobra.Command {
	var text, rawURL, title, file, name string
	cmd := &cobra.Command{
		Use:   "add <grp> (--text T | --url U [--title T] | --file F) [--name N]",
		Short: "Add a text, a URL or a file (- for stdin) to a group",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			set := 0
			for _, f := range []string{"text", "url", "file"} {
				if cmd.Flags().Changed(f) {
					set++
				}
			}
			if set != 1 {
				return usagef("give exactly one of --text, --url or --file")
			}
			if title != "" && !cmd.Flags().Changed("url") {
				return usagef("--title goes with --url")
			}
			if cmd.Flags().Changed("url") && name != "" {
				return usagef("--name goes with --text or --file")
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			var it *desk.Item
			switch {
			case cmd.Flags().Changed("text"):
				it, err = c.AddTextItem(cmd.Context(), a[0], name, text)
			case cmd.Flags().Changed("url"):
				it, err = c.AddURLItem(cmd.Context(), a[0], rawURL, title)
			default:
				if file == "-" && name == "" {
					return usagef("--file - (standard input) needs --name")
				}
				if name == "" {
					name = filepath.Base(file)
				}
				src, serr := openSource(cmd, file)
				if serr != nil {
					return serr
				}
				defer src.close()
				it, err = c.AddFileItem(cmd.Context(), a[0], name, src.r, src.size)
			}
			if err != nil {
				return err
			}
			return out(cmd, g, it, func(o io.Writer) {
				fmt.Fprintf(o, "added %s item %s %q (%s) to group %s\n", it.Kind, it.ID, it.Name, fmtBytes(it.Size), a[0])
			})
		},
	}
	cmd.Flags().StringVar(&text, "text", "", "add this text")
	cmd.Flags().StringVar(&rawURL, "url", "", "add this URL")
	cmd.Flags().StringVar(&title, "title", "", "title of the URL")
	cmd.Flags().StringVar(&file, "file", "", "add this file's bytes (- for standard input)")
	cmd.Flags().StringVar(&name, "name", "", "item name (default: the file's base name)")
	return cmd
}

func guestCmd(g *globals) *cobra.Command {
	cmd := noun("guest", "Look at a session's guest file system, as its executions see it")
	cmd.AddCommand(
		&cobra.Command{
			Use:     "ls <ses> [path]",
			Aliases: []string{"list"},
			Short:   "List a guest directory (default /)",
			Args:    usageArgs(cobra.RangeArgs(1, 2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				p := "/"
				if len(a) == 2 {
					p = a[1]
				}
				c, err := g.client()
				if err != nil {
					return err
				}
				ents, err := c.GuestList(cmd.Context(), a[0], p)
				if err != nil {
					return err
				}
				return out(cmd, g, nonNilList(ents), func(o io.Writer) {
					t := newTable(o, "TYPE", "SIZE", "MODIFIED", "MODE", "PATH")
					for _, e := range ents {
						size, mode := fmtBytes(e.Size), "rw"
						if e.Type == "dir" {
							size = "-"
						}
						if e.ReadOnly {
							mode = "ro"
						}
						t.row(e.Type, size, fmtTime(e.Modified), mode, e.Path)
					}
					t.flush()
				})
			},
		},
		&cobra.Command{
			Use:   "cat <ses> <path>",
			Short: "Write a guest file to standard output",
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				ctx, stop := interruptible(cmd.Context())
				defer stop()
				body, err := c.GuestFile(ctx, a[0], a[1])
				if err != nil {
					return err
				}
				defer body.Close()
				_, err = io.Copy(cmd.OutOrStdout(), body)
				return transferErr(ctx, err)
			},
		},
	)
	return cmd
}

func adminCmd(g *globals) *cobra.Command {
	cmd := noun("admin", "Administrative operations (admin token only)")
	var level string
	sp := &cobra.Command{
		Use:   "storage-pressure",
		Short: "Reclaim unowned space: scratch, abandoned temporary files, unreachable items (never artifacts)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if level != desk.PressureSoft && level != desk.PressureCritical {
				return usagef("--level must be %s or %s, not %q", desk.PressureSoft, desk.PressureCritical, level)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			rep, err := c.StoragePressure(cmd.Context(), level)
			if err != nil {
				return err
			}
			return out(cmd, g, rep, func(o io.Writer) {
				fmt.Fprintf(o, "reclaimed %s (%d bytes) at level %s in %d actions\n", fmtBytes(rep.ReclaimedBytes), rep.ReclaimedBytes, rep.Level, len(rep.Actions))
				if len(rep.Actions) == 0 {
					return
				}
				t := newTable(o, "KIND", "WORKSPACE", "TARGET", "BYTES")
				for _, x := range rep.Actions {
					t.row(x.Kind, x.WorkspaceID, x.Target, fmt.Sprint(x.Bytes))
				}
				t.flush()
			})
		},
	}
	sp.Flags().StringVar(&level, "level", desk.PressureSoft, "soft, or critical to reclaim harder (shorter grace for temporary files)")
	cmd.AddCommand(sp)
	return cmd
}
