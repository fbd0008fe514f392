package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// filesCmd is the actor file area (Wesclaw workspace files).
func filesCmd(g *globals) *cobra.Command {
	cmd := noun("files", "List, fetch, store and delete the files of an actor's area; stats and GC")
	cmd.Long = `The files of an actor's durable area in a workspace (workspace/<actor>/ under
DESK_HOME). Paths are relative to the area, with a leading "/";
/sessions/<ses>/ is that session's artifact folder, so files stored there are
artifacts. --actor (an actor id or name) is honoured only for the admin token;
without it the admin works on the workspace owner's area and an actor token on
its own.

Exit codes: 0 ok, 2 usage, 3 invalid request, 4 not allowed, 5 not found,
6 conflict, 7 server unreachable, 11 too large or disk full, 1 anything else.`
	var actor string
	cmd.PersistentFlags().StringVar(&actor, "actor", "", "whose area: an actor id or name (admin token only; default: the owner, or the token's own actor)")
	target := func(ws string) client.FileTarget { return client.FileTarget{Workspace: ws, Actor: actor} }
	cmd.AddCommand(filesLsCmd(g, target), filesGetCmd(g, target), filesPutCmd(g, target),
		filesRmCmd(g, target), filesRmPrefixCmd(g, target), filesStatsCmd(g, target), filesGCCmd(g))
	return cmd
}

func filesLsCmd(g *globals, target func(string) client.FileTarget) *cobra.Command {
	var depth int
	cmd := &cobra.Command{
		Use:     "ls <ws> [path]",
		Aliases: []string{"list"},
		Short:   "List a folder of the area in path order (--depth 0 for everything)",
		Long: `List a folder (default /) of the area in path order, each folder followed by
its own entries. --depth 1 (the default) lists the folder's own entries, n
lists n levels and 0 everything. With --json each entry is printed as one JSON
object per line (NDJSON) as it arrives, so listings of any size stream.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if depth < 0 {
				return usagef("--depth must be 0 (no limit) or more, not %d", depth)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			p := ""
			if len(a) == 2 {
				p = a[1]
			}
			o := cmd.OutOrStdout()
			var t *table
			rows := 0
			if !g.json {
				t = newTable(o, "PATH", "TYPE", "SIZE", "MODIFIED", "ARTIFACT")
			}
			enc := json.NewEncoder(o)
			enc.SetEscapeHTML(false)
			_, err = c.ListFiles(cmd.Context(), target(a[0]), p, depth, func(e desk.FileEntry) error {
				if g.json {
					return enc.Encode(e)
				}
				size := fmtBytes(e.Size)
				if e.Type == desk.FileTypeDir {
					size = "-"
					e.Path += "/"
				}
				art := "-"
				if e.ArtifactID != "" {
					art = e.ArtifactID + " (" + e.Kind + ")"
				}
				t.row(e.Path, e.Type, size, fmtTime(e.Modified), art)
				// Columns are aligned per block, so a long listing prints as
				// it arrives instead of waiting for its last line.
				if rows++; rows%1000 == 0 {
					t.flush()
				}
				return nil
			})
			if t != nil {
				t.flush()
			}
			return err
		},
	}
	cmd.Flags().IntVar(&depth, "depth", 1, "levels to list: 1 the folder's own entries, 0 no limit")
	return cmd
}

// fileSaved is what --json prints for "files get" into a file.
type fileSaved struct {
	Path     string `json:"path"`
	SavedTo  string `json:"saved_to"`
	Size     int64  `json:"size"`
	Artifact string `json:"artifact_id,omitempty"`
}

func filesGetCmd(g *globals, target func(string) client.FileTarget) *cobra.Command {
	var output string
	var force bool
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "get <ws> <path>",
		Short: "Download a file (into the current directory, -o a file or folder, -o - for stdout)",
		Long: `Download a file of the area. By default it goes to a file of the same name in
the current directory; -o names another file or folder, and -o - writes to
standard output. An existing file is never overwritten without --force. The
bytes go to a temporary file beside the target and are renamed into place
only once complete, so an interrupted download never leaves a torn file.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			if output != "" && output != "-" && !force {
				if st, err := os.Stat(output); err == nil && !st.IsDir() {
					return refuseOverwrite(output)
				}
			}
			d, err := c.DownloadFile(ctx, target(a[0]), a[1])
			if err != nil {
				return err
			}
			defer d.Body.Close()
			if output == "-" {
				bar := prog.start(cmd.ErrOrStderr(), d.Size, "get "+path.Base(a[1]))
				_, err := io.Copy(cmd.OutOrStdout(), bar.reader(d.Body))
				bar.done(err)
				return transferErr(ctx, err)
			}
			dest, err := downloadTarget(output, path.Base(a[1]), "download")
			if err != nil {
				return err
			}
			if !force {
				if _, err := os.Lstat(dest); err == nil {
					return refuseOverwrite(dest)
				}
			}
			bar := prog.start(cmd.ErrOrStderr(), d.Size, "get "+filepath.Base(dest))
			n, err := saveFile(dest, force, bar.reader(d.Body), func([]byte) error { return nil })
			bar.done(err)
			if err != nil {
				return transferErr(ctx, err)
			}
			return out(cmd, g, fileSaved{Path: a[1], SavedTo: dest, Size: n, Artifact: d.ArtifactID}, func(o io.Writer) {
				fmt.Fprintf(o, "saved %s to %s (%s)\n", a[1], dest, fmtBytes(n))
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "file or folder to write to, or - for standard output (default: the file's name in the current directory)")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing file")
	prog.add(cmd)
	return cmd
}

func filesPutCmd(g *globals, target func(string) client.FileTarget) *cobra.Command {
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "put <ws> <local-file|-> <path>",
		Short: "Upload a file (or stdin) to path; a path ending in / takes the local file's name",
		Long: `Upload a local file, or standard input with -, to path in the area. A path
ending in "/" is a folder: the file keeps its own name there. Folders are
created as needed; an existing file is replaced whole (readers see the old
file or the new one, never a mixture). Under /sessions/<ses>/ the file becomes
that session's artifact.`,
		Args: usageArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			dest := a[2]
			if strings.HasSuffix(dest, "/") {
				if a[1] == "-" {
					return usagef("reading standard input (-) needs a file path, not the folder %s", dest)
				}
				dest += filepath.Base(a[1])
			}
			src, err := openSource(cmd, a[1])
			if err != nil {
				return err
			}
			defer src.close()
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			bar := prog.start(cmd.ErrOrStderr(), src.size, "put "+path.Base(dest))
			up, err := c.UploadFile(ctx, target(a[0]), dest, bar.reader(src.r), src.size)
			bar.done(err)
			if err != nil {
				return transferErr(ctx, err)
			}
			return out(cmd, g, up, func(o io.Writer) {
				verb := "replaced"
				if up.Created {
					verb = "stored"
				}
				fmt.Fprintf(o, "%s %s (%s)", verb, up.Path, fmtBytes(up.Size))
				if up.ArtifactID != "" {
					fmt.Fprintf(o, " as artifact %s (%s)", up.ArtifactID, up.Kind)
				}
				fmt.Fprintln(o)
			})
		},
	}
	prog.add(cmd)
	return cmd
}

// deletion is what --json prints for rm and rm-prefix.
type deletion struct {
	Deleted []desk.FileEntry `json:"deleted"`
	*desk.DeleteSummary
}

func runDelete(cmd *cobra.Command, g *globals, del func(fn func(desk.FileEntry) error) (*desk.DeleteSummary, error)) error {
	o := cmd.OutOrStdout()
	res := deletion{Deleted: []desk.FileEntry{}}
	sum, err := del(func(e desk.FileEntry) error {
		if g.json {
			res.Deleted = append(res.Deleted, e)
			return nil
		}
		fmt.Fprintf(o, "deleted %s\n", e.Path)
		return nil
	})
	if sum == nil {
		sum = &desk.DeleteSummary{}
	}
	res.DeleteSummary = sum
	if g.json {
		if perr := printJSON(o, res); perr != nil {
			return perr
		}
	} else if err == nil {
		fmt.Fprintf(o, "%d files and %d folders deleted (%s)\n", sum.Files, sum.Dirs, fmtBytes(sum.Bytes))
	}
	return err
}

func filesRmCmd(g *globals, target func(string) client.FileTarget) *cobra.Command {
	return &cobra.Command{
		Use:     "rm <ws> <path>",
		Aliases: []string{"delete"},
		Short:   "Delete a file or an empty folder (an artifact goes with its row and revisions)",
		Args:    usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return runDelete(cmd, g, func(fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
				return c.DeleteFile(cmd.Context(), target(a[0]), a[1], fn)
			})
		},
	}
}

func filesRmPrefixCmd(g *globals, target func(string) client.FileTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "rm-prefix <ws> <prefix>",
		Short: "Delete every path starting with prefix: /temp/ empties that folder, /temp is a string prefix",
		Long: `Delete every path of the area that starts with prefix. A prefix ending in "/"
is a folder: everything in it goes and the folder stays. Any other prefix is a
plain string prefix ("/temp" matches /temp, /temp/x and /temp-old.txt). "/"
alone is refused. Each deleted path is printed as the server deletes it.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			return runDelete(cmd, g, func(fn func(desk.FileEntry) error) (*desk.DeleteSummary, error) {
				return c.DeleteByPrefix(cmd.Context(), target(a[0]), a[1], fn)
			})
		},
	}
}

func filesStatsCmd(g *globals, target func(string) client.FileTarget) *cobra.Command {
	return &cobra.Command{
		Use:   "stats <ws>",
		Short: "Measure the area: files, folders, bytes, artifacts, per top-level folder, quota",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			st, err := c.FileStats(cmd.Context(), target(a[0]))
			if err != nil {
				return err
			}
			return out(cmd, g, st, func(o io.Writer) {
				quota := "unlimited"
				if st.QuotaBytes > 0 {
					quota = fmt.Sprintf("%s (%s available)", fmtBytes(st.QuotaBytes), fmtBytes(st.AvailableBytes))
				}
				fields(o, "actor", st.ActorID, "files", fmt.Sprint(st.Files), "folders", fmt.Sprint(st.Dirs),
					"bytes", fmt.Sprintf("%d (%s)", st.Bytes, fmtBytes(st.Bytes)), "artifacts", fmt.Sprint(st.Artifacts), "quota", quota)
				if len(st.Folders) > 0 {
					fmt.Fprintln(o)
					t := newTable(o, "FOLDER", "FILES", "SIZE")
					for _, f := range st.Folders {
						t.row(f.Path, fmt.Sprint(f.Files), fmtBytes(f.Bytes))
					}
					t.flush()
				}
			})
		},
	}
}

func filesGCCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "gc <ws>",
		Short: "Collect what nothing owns in the workspace (admin); never deletes an artifact or a user file",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			rep, err := c.WorkspaceGC(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, rep, func(o io.Writer) {
				if len(rep.Actions) == 0 {
					fmt.Fprintln(o, "nothing to collect")
					return
				}
				t := newTable(o, "ACTION", "TARGET", "SIZE", "DETAIL")
				for _, x := range rep.Actions {
					t.row(x.Kind, x.Target, fmtBytes(x.Bytes), orDash(x.Detail))
				}
				t.flush()
				kinds := make([]string, 0, len(rep.Counts))
				for k := range rep.Counts {
					kinds = append(kinds, k)
				}
				sort.Strings(kinds)
				var parts []string
				for _, k := range kinds {
					parts = append(parts, fmt.Sprintf("%s %d", k, rep.Counts[k]))
				}
				fmt.Fprintf(o, "reclaimed %s (%s)", fmtBytes(rep.ReclaimedBytes), strings.Join(parts, ", "))
				if rep.Truncated {
					fmt.Fprint(o, "; more actions than listed")
				}
				fmt.Fprintln(o)
			})
		},
	}
}

// workspaceTransferCmds are "desk workspace export|import|paths".
func workspaceTransferCmds(g *globals) []*cobra.Command {
	return []*cobra.Command{workspaceExportCmd(g), workspaceImportCmd(g), workspacePathsCmd(g)}
}

// exported is what --json prints for an export saved to a file.
type exported struct {
	Workspace string `json:"workspace"`
	SavedTo   string `json:"saved_to"`
	Size      int64  `json:"size"`
}

// unknownSizeBar shows a bar on a terminal even when the size is unknown
// (an export): bytes and rate are still worth seeing.
func unknownSizeBar(p progressFlags, w io.Writer) progressFlags {
	if !p.off && isTerminal(w) {
		p.on = true
	}
	return p
}

func workspaceExportCmd(g *globals) *cobra.Command {
	var output string
	var force, skip bool
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "export <ws>",
		Short: "Save the workspace as a tar.gz (admin): files, archive and rows; never scratch or host paths",
		Long: `Save the workspace as one tar.gz: the actors' areas (workspace/), checkout/,
skills/, knowledge/, conversations/, the archive, items, groups and revisions,
plus its rows as NDJSON under meta/. Never .scratch/, host paths or tokens.
The default file is <ws>.tar.gz in the current directory; -o - writes to
standard output. Two exports of an unchanged workspace are byte-identical.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			dest := output
			if dest == "" {
				dest = a[0] + ".tar.gz"
			}
			if dest != "-" && !force {
				if _, err := os.Lstat(dest); err == nil {
					return refuseOverwrite(dest)
				}
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			body, err := c.ExportWorkspace(ctx, a[0], skip)
			if err != nil {
				return err
			}
			defer body.Close()
			pf := unknownSizeBar(prog, cmd.ErrOrStderr())
			bar := pf.start(cmd.ErrOrStderr(), -1, "export "+a[0])
			if dest == "-" {
				_, err := io.Copy(cmd.OutOrStdout(), bar.reader(body))
				bar.done(err)
				return transferErr(ctx, err)
			}
			n, err := saveFile(dest, force, bar.reader(body), func([]byte) error { return nil })
			bar.done(err)
			if err != nil {
				return transferErr(ctx, err)
			}
			return out(cmd, g, exported{Workspace: a[0], SavedTo: dest, Size: n}, func(o io.Writer) {
				fmt.Fprintf(o, "exported %s to %s (%s)\n", a[0], dest, fmtBytes(n))
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write, or - for standard output (default <ws>.tar.gz)")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing file")
	cmd.Flags().BoolVar(&skip, "skip-workspace", false, "leave the actors' file areas (workspace/) out")
	prog.add(cmd)
	return cmd
}

func workspaceImportCmd(g *globals) *cobra.Command {
	var newTokens bool
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "import <file.tar.gz|->",
		Short: "Recreate a workspace from an export (admin), with the same id",
		Long: `Recreate a workspace from an export, with the same id and all its rows. A
workspace with that id must not exist here. Exports carry no tokens:
--new-tokens mints one for every actor and prints them once. An unsafe or
damaged archive is refused and nothing of it is kept.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			src, err := openSource(cmd, a[0])
			if err != nil {
				return err
			}
			defer src.close()
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			bar := prog.start(cmd.ErrOrStderr(), src.size, "import")
			res, err := c.ImportWorkspace(ctx, bar.reader(src.r), src.size, newTokens)
			bar.done(err)
			if err != nil {
				return transferErr(ctx, err)
			}
			return out(cmd, g, res, func(o io.Writer) {
				fmt.Fprintf(o, "imported workspace %s %q: %d files (%s)\n", res.Workspace.ID, res.Workspace.Name, res.Files, fmtBytes(res.Bytes))
				for _, t := range res.Tokens {
					fmt.Fprintf(o, "token of %s (%s): %s\n", t.Actor.Name, t.Actor.ID, t.Token)
				}
				if len(res.Tokens) > 0 {
					fmt.Fprintln(o, "(the tokens are shown only this once; store them now)")
				}
			})
		},
	}
	cmd.Flags().BoolVar(&newTokens, "new-tokens", false, "mint a fresh token for every imported actor")
	prog.add(cmd)
	return cmd
}

func workspacePathsCmd(g *globals) *cobra.Command {
	var hostPaths []string
	var primaryRoot string
	var clear bool
	cmd := &cobra.Command{
		Use:   "paths <ws>",
		Short: "Show or set the workspace's host paths and primary root (setting: admin)",
		Long: `Show the host paths and primary root, or set them. --host-path PATH[:ro|rw]
(repeatable; ro by default) replaces the declared host paths; --clear-host-paths
removes them all. --primary-root sets the guest directory commands start in
(within a host path, /artifacts or /workspace; "" clears it). desk only checks
a host path's boundary: it never creates, changes, collects or exports it.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			var p client.WorkspacePatch
			if clear && len(hostPaths) > 0 {
				return usagef("--clear-host-paths and --host-path contradict each other")
			}
			if clear || len(hostPaths) > 0 {
				hps := []desk.HostPath{}
				for _, h := range hostPaths {
					hp := desk.HostPath{Path: h, Mode: desk.HostPathRO}
					if i := strings.LastIndexByte(h, ':'); i > 0 && (h[i+1:] == desk.HostPathRO || h[i+1:] == desk.HostPathRW) {
						hp.Path, hp.Mode = h[:i], h[i+1:]
					}
					hps = append(hps, hp)
				}
				p.HostPaths = &hps
			}
			if cmd.Flags().Changed("primary-root") {
				p.PrimaryRoot = &primaryRoot
			}
			var w *desk.Workspace
			if p.HostPaths == nil && p.PrimaryRoot == nil {
				w, err = c.GetWorkspace(cmd.Context(), a[0])
			} else {
				w, err = c.PatchWorkspace(cmd.Context(), a[0], p)
			}
			if err != nil {
				return err
			}
			return out(cmd, g, map[string]any{"host_paths": nonNilList(w.HostPaths), "primary_root": w.PrimaryRoot}, func(o io.Writer) {
				fields(o, "primary root", orDash(w.PrimaryRoot))
				t := newTable(o, "HOST PATH", "MODE")
				for _, hp := range w.HostPaths {
					t.row(hp.Path, hp.Mode)
				}
				t.flush()
			})
		},
	}
	cmd.Flags().StringArrayVar(&hostPaths, "host-path", nil, "a host directory, PATH[:ro|rw] (repeatable; replaces the declared ones)")
	cmd.Flags().StringVar(&primaryRoot, "primary-root", "", "the guest directory commands start in (\"\" clears it)")
	cmd.Flags().BoolVar(&clear, "clear-host-paths", false, "remove every declared host path")
	return cmd
}
