package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// addTemplateFlag gives "workspace create" its --template and
// --allow-duplicate-name flags.
func addTemplateFlag(ws *cobra.Command) {
	for _, sub := range ws.Commands() {
		if sub.Name() == "create" {
			sub.Flags().String("template", "", "fill checkout/ from a registered template: name (its latest version) or name@version")
			sub.Flags().Bool("allow-duplicate-name", false, "create the workspace even when another workspace has this name")
		}
	}
}

// createWorkspace creates a workspace, from a template when --template
// names one.
func createWorkspace(cmd *cobra.Command, c *client.Client, name string) (*desk.Workspace, error) {
	in := client.WorkspaceCreate{WorkspaceCreate: desk.WorkspaceCreate{Name: name}}
	in.Template, _ = cmd.Flags().GetString("template")
	in.AllowDuplicateName, _ = cmd.Flags().GetBool("allow-duplicate-name")
	return c.CreateWorkspaceWith(cmd.Context(), in)
}

func templateCmd(g *globals) *cobra.Command {
	cmd := noun("template", "Register templates and upgrade workspaces created from them", "tpl")
	var version string
	add := &cobra.Command{
		Use:   "add <name> <dir>",
		Short: "Register the files under dir as a new version of a template (admin)",
		Long: `Register the files under dir as a new, immutable version of a template.
A workspace created with --template gets them in its checkout/; README.md,
AGENTS.md, CLAUDE.md, .agents/skills/** and .claude/skills/** are managed:
desk records them as the workspace's baseline and upgrades them later
without losing local edits. .git directories and symbolic links are skipped.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if version == "" {
				return usagef("--version is required")
			}
			files, err := readTemplateDir(a[1])
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			tv, err := c.AddTemplate(cmd.Context(), a[0], version, files)
			if err != nil {
				return err
			}
			return out(cmd, g, tv, func(o io.Writer) {
				managed := 0
				for _, f := range tv.Files {
					if f.Managed {
						managed++
					}
				}
				fmt.Fprintf(o, "registered template %s version %s: %d files, %d managed\n", tv.Name, tv.Version, len(tv.Files), managed)
			})
		},
	}
	add.Flags().StringVar(&version, "version", "", "the version to register (required; versions are immutable)")

	list := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List registered template versions (admin)",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			all, err := c.ListTemplates(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(all), func(o io.Writer) {
				t := newTable(o, "NAME", "VERSION", "FILES", "MANAGED", "REGISTERED")
				for _, tv := range all {
					managed := 0
					for _, f := range tv.Files {
						if f.Managed {
							managed++
						}
					}
					t.row(tv.Name, tv.Version, fmt.Sprint(len(tv.Files)), fmt.Sprint(managed), fmtTime(tv.CreatedAt))
				}
				t.flush()
			})
		},
	}
	cmd.AddCommand(add, list, templateUpgradeCmd(g))
	return cmd
}

// readTemplateDir reads every regular file under dir, skipping .git and
// symbolic links.
func readTemplateDir(dir string) ([]desk.TemplateFile, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, usagef("template directory: %v", err)
	}
	if !fi.IsDir() {
		return nil, usagef("%s is not a directory", dir)
	}
	var files []desk.TemplateFile
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, desk.TemplateFile{Path: filepath.ToSlash(rel), Content: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read template directory: %w", err)
	}
	if len(files) == 0 {
		return nil, usagef("%s has no files", dir)
	}
	return files, nil
}

// parseResolutions reads --resolve path=choice flags.
func parseResolutions(flags []string, allowed ...string) (map[string]string, error) {
	res := map[string]string{}
	for _, f := range flags {
		p, choice, ok := strings.Cut(f, "=")
		if !ok || p == "" {
			return nil, usagef("--resolve %q must be path=%s", f, strings.Join(allowed, "|"))
		}
		valid := false
		for _, a := range allowed {
			valid = valid || choice == a
		}
		if !valid {
			return nil, usagef("--resolve %s: %q must be one of %s", p, choice, strings.Join(allowed, ", "))
		}
		res[p] = choice
	}
	return res, nil
}

// interactive reports whether the command may ask questions: stdin and
// stdout are terminals and the output is not JSON.
func interactive(cmd *cobra.Command, g *globals) bool {
	in, ok := cmd.InOrStdin().(*os.File)
	return ok && !g.json && term.IsTerminal(int(in.Fd())) && isTerminal(cmd.OutOrStdout())
}

// ask prints a question and reads one answer line; io.EOF means the
// person left.
func ask(r *bufio.Reader, w io.Writer, q string) (string, error) {
	fmt.Fprint(w, q)
	line, err := r.ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// resolveConflicts fills in a resolution for every conflicting path: from
// the flags, then by asking on a terminal. Without a terminal, a missing
// resolution is a usage error that names the paths.
func resolveConflicts(cmd *cobra.Command, g *globals, conflicts []string, preview map[string]string, res map[string]string, choices []string) error {
	var missing []string
	for _, p := range conflicts {
		if res[p] == "" {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !interactive(cmd, g) {
		return usagef("%d conflicts need a resolution: pass --resolve <path>=%s for %s", len(missing), strings.Join(choices, "|"), strings.Join(missing, ", "))
	}
	r := bufio.NewReader(cmd.InOrStdin())
	w := cmd.OutOrStdout()
	keys := map[string]string{}
	var prompt []string
	for _, c := range choices {
		keys[c[:1]] = c
		keys[c] = c
		prompt = append(prompt, "["+c[:1]+"]"+c[1:])
	}
	for _, p := range missing {
		for res[p] == "" {
			a, err := ask(r, w, fmt.Sprintf("conflict %s: %s, [d]iff, [q]uit? ", p, strings.Join(prompt, ", ")))
			if err != nil {
				return usagef("no resolution for %s", p)
			}
			switch {
			case a == "q" || a == "quit":
				return usagef("stopped: nothing was changed")
			case a == "d" || a == "diff":
				if preview[p] != "" {
					fmt.Fprintln(w, preview[p])
				} else {
					fmt.Fprintln(w, "(no preview: one side deleted or added the file)")
				}
			case keys[a] != "":
				res[p] = keys[a]
			}
		}
	}
	return nil
}

// confirm asks before applying on a terminal unless --yes.
func confirm(cmd *cobra.Command, g *globals, yes bool, q string) error {
	if yes || !interactive(cmd, g) {
		return nil
	}
	a, err := ask(bufio.NewReader(cmd.InOrStdin()), cmd.OutOrStdout(), q+" [y/N] ")
	if err != nil || (a != "y" && a != "yes") {
		return usagef("stopped: nothing was changed")
	}
	return nil
}

func printUpgradePlan(w io.Writer, p *desk.UpgradePlan) {
	fmt.Fprintf(w, "template %s: %s -> %s (workspace %s)\n", p.Template, p.FromVersion, p.ToVersion, p.WorkspaceID)
	t := newTable(w, "PATH", "STATUS", "NOTE")
	for _, e := range p.Entries {
		note := ""
		if e.Merged {
			note = "three-way merge is clean"
		}
		t.row(e.Path, e.Status, note)
	}
	t.flush()
	var parts []string
	for _, s := range []string{desk.UpgradeReady, desk.UpgradeAdd, desk.UpgradeRemove, desk.UpgradeConflict, desk.UpgradePreserved, desk.UpgradeUnchanged} {
		if n := p.Summary[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	fmt.Fprintf(w, "%s; digest %s\n", orDash(strings.Join(parts, ", ")), p.Digest)
}

func templateUpgradeCmd(g *globals) *cobra.Command {
	var to string
	var resolve []string
	var yes, dry bool
	cmd := &cobra.Command{
		Use:   "upgrade <ws>",
		Short: "Upgrade a workspace's managed template files (admin): show the plan, resolve conflicts, apply",
		Long: `Show the plan of upgrading the workspace's managed template files to a
version of its template (--to; default the version registered last): per
path unchanged, ready, preserved, conflict, add or remove. Each conflict needs
a resolution: --resolve <path>=workspace keeps the workspace's file,
--resolve <path>=template takes the template's. On a terminal desk asks for
the missing ones and for confirmation (--yes skips it); otherwise missing
resolutions are an error. --dry-run only shows the plan.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			res, err := parseResolutions(resolve, desk.ResolveWorkspace, desk.ResolveTemplate)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			plan, err := c.PlanTemplateUpgrade(cmd.Context(), a[0], to)
			if err != nil {
				return err
			}
			if dry {
				return out(cmd, g, plan, func(o io.Writer) { printUpgradePlan(o, plan) })
			}
			if !g.json {
				printUpgradePlan(cmd.OutOrStdout(), plan)
			}
			var conflicts []string
			preview := map[string]string{}
			for _, e := range plan.Entries {
				if e.Status == desk.UpgradeConflict {
					conflicts = append(conflicts, e.Path)
					preview[e.Path] = e.ConflictPreview
				}
			}
			if err := resolveConflicts(cmd, g, conflicts, preview, res, []string{desk.ResolveWorkspace, desk.ResolveTemplate}); err != nil {
				return err
			}
			if err := confirm(cmd, g, yes, "apply this upgrade?"); err != nil {
				return err
			}
			r, err := c.ApplyTemplateUpgrade(cmd.Context(), a[0], to, desk.UpgradeApply{Digest: plan.Digest, Resolutions: res})
			if err != nil {
				return err
			}
			return out(cmd, g, r, func(o io.Writer) {
				fmt.Fprintf(o, "upgraded to %s %s: %d written, %d deleted", r.Plan.Template, r.Plan.ToVersion, len(r.Written), len(r.Deleted))
				if r.Commit != "" {
					fmt.Fprintf(o, ", commit %s", r.Commit)
				}
				fmt.Fprintln(o)
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the version to upgrade to (default: the version registered last)")
	cmd.Flags().StringArrayVar(&resolve, "resolve", nil, "resolve a conflict: <path>=workspace|template (repeatable)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "apply without asking for confirmation")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only show the plan")
	return cmd
}

func printAbsorbPlan(w io.Writer, p *desk.AbsorbPlan) {
	fmt.Fprintf(w, "absorb %s (%s) into %s\n", p.SourceName, p.SourceID, p.TargetID)
	t := newTable(w, "PATH", "STATUS", "NOTE")
	for _, e := range p.Entries {
		t.row(e.Path, e.Status, e.Note)
	}
	t.flush()
	if len(p.Excluded) > 0 {
		fmt.Fprintln(w, "left behind:")
		t := newTable(w, "PATH", "REASON")
		for _, x := range p.Excluded {
			t.row(x.Path, x.Reason)
		}
		t.flush()
	}
	fmt.Fprintf(w, "%d ready, %d duplicate, %d conflict, %d left behind; digest %s\n",
		p.Summary[desk.AbsorbReady], p.Summary[desk.AbsorbDuplicate], p.Summary[desk.AbsorbConflict], len(p.Excluded), p.Digest)
}

func workspaceAbsorbCmd(g *globals) *cobra.Command {
	var resolve []string
	var yes, dry bool
	cmd := &cobra.Command{
		Use:   "absorb <target> <source>",
		Short: "Fold the source workspace into the target (admin): copy its user files in, then offboard it",
		Long: `Show the plan of absorbing the source workspace into the target: each of the
source's user files (checkout/, skills/, knowledge/) is ready, a duplicate, or
a conflict; .git, desk state, managed template files, .env*, credentials and
caches are left behind. Each conflict needs --resolve <path>=target (keep the
target's), =source (use the source's) or =both (keep the target's and put the
source's under imports/<source>-<id>/). On a terminal desk asks for the missing
ones and for confirmation (--yes skips it). Applying copies the files,
commits them when the target's checkout is a git repository, offboards the
source intact and records absorbed_into in the catalog.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			res, err := parseResolutions(resolve, desk.AbsorbKeepTarget, desk.AbsorbUseSource, desk.AbsorbKeepBoth)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			plan, err := c.PlanAbsorb(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			if dry {
				return out(cmd, g, plan, func(o io.Writer) { printAbsorbPlan(o, plan) })
			}
			if !g.json {
				printAbsorbPlan(cmd.OutOrStdout(), plan)
			}
			var conflicts []string
			for _, e := range plan.Entries {
				if e.Status == desk.AbsorbConflict {
					conflicts = append(conflicts, e.Path)
				}
			}
			sort.Strings(conflicts)
			if err := resolveConflicts(cmd, g, conflicts, nil, res, []string{desk.AbsorbKeepTarget, desk.AbsorbUseSource, desk.AbsorbKeepBoth}); err != nil {
				return err
			}
			if err := confirm(cmd, g, yes, fmt.Sprintf("absorb %s into %s and offboard it?", a[1], a[0])); err != nil {
				return err
			}
			r, err := c.ApplyAbsorb(cmd.Context(), a[0], a[1], desk.AbsorbApply{Digest: plan.Digest, Resolutions: res})
			if err != nil {
				return err
			}
			return out(cmd, g, r, func(o io.Writer) {
				fmt.Fprintf(o, "absorbed %s into %s: %d files written", a[1], a[0], len(r.Written))
				if r.ImportCommit != "" {
					fmt.Fprintf(o, ", import commit %s", r.ImportCommit)
				}
				fmt.Fprintf(o, "; %s is %s\n", a[1], r.Source.State)
			})
		},
	}
	cmd.Flags().StringArrayVar(&resolve, "resolve", nil, "resolve a conflict: <path>=target|source|both (repeatable)")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "apply without asking for confirmation")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "only show the plan")
	return cmd
}
