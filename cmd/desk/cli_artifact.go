package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

func artifactCmd(g *globals) *cobra.Command {
	cmd := noun("artifact", "Store, fetch, list, revert and delete a session's artifacts", "art")
	cmd.AddCommand(artifactPutCmd(g), artifactUpdateCmd(g), artifactGetCmd(g),
		&cobra.Command{
			Use:     "ls <ses>",
			Aliases: []string{"list"},
			Short:   "List a session's artifacts, oldest first",
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				as, err := c.ListArtifacts(cmd.Context(), a[0])
				if err != nil {
					return err
				}
				return out(cmd, g, nonNilList(as), func(o io.Writer) {
					t := newTable(o, "ID", "NAME", "SIZE", "KIND", "REV", "FLAGS", "UPDATED")
					for _, x := range as {
						t.row(x.ID, x.Name, fmtBytes(x.Size), x.Kind, fmt.Sprint(x.Revision), artifactFlags(x), fmtTime(x.UpdatedAt))
					}
					t.flush()
				})
			},
		},
		&cobra.Command{
			Use:   "show <ses> <art>",
			Short: "Show an artifact's metadata",
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				x, err := c.GetArtifact(cmd.Context(), a[0], a[1])
				if err != nil {
					return err
				}
				return out(cmd, g, x, func(o io.Writer) {
					fields(o, "id", x.ID, "session", x.SessionID, "workspace", x.WorkspaceID, "name", x.Name,
						"path", x.Path, "kind", x.Kind, "media type", x.MediaType,
						"size", fmt.Sprintf("%d (%s)", x.Size, fmtBytes(x.Size)), "sha256", x.SHA256,
						"revision", fmt.Sprint(x.Revision), "immutable", yesNo(x.Immutable), "missing", yesNo(x.Missing),
						"origin", fmt.Sprintf("%s by %s", x.Origin.Kind, x.Origin.Actor),
						"created", fmtTime(x.CreatedAt), "updated", fmtTime(x.UpdatedAt))
				})
			},
		},
		&cobra.Command{
			Use:     "rm <ses> <art>",
			Aliases: []string{"delete"},
			Short:   "Delete an artifact: its bytes, kept revision and metadata",
			Args:    usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				if err := c.DeleteArtifact(cmd.Context(), a[0], a[1]); err != nil {
					return err
				}
				return out(cmd, g, deleted{ID: a[1], Deleted: true}, func(o io.Writer) {
					fmt.Fprintf(o, "deleted artifact %s\n", a[1])
				})
			},
		},
		&cobra.Command{
			Use:   "revert <ses> <art>",
			Short: "Restore the previous revision's bytes as a new revision",
			Args:  usageArgs(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, a []string) error {
				c, err := g.client()
				if err != nil {
					return err
				}
				x, err := c.RevertArtifact(cmd.Context(), a[0], a[1])
				if err != nil {
					return err
				}
				return printArtifact(cmd, g, x, "reverted")
			},
		},
	)
	return cmd
}

func artifactPutCmd(g *globals) *cobra.Command {
	var name, mediaType string
	var immutable bool
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "put <ses> <file|->",
		Short: "Store a file (or stdin, with --name) as a new artifact of the session",
		Long: `Store a file as a new artifact of the session. The name defaults to the
file's base name; "-" reads standard input and needs --name. The bytes are
streamed, never held in memory, and the server decides the kind from them
(--media-type is only a hint, and a misleading one is refused).`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			src, err := openSource(cmd, a[1])
			if err != nil {
				return err
			}
			defer src.close()
			if name == "" {
				if a[1] == "-" {
					return usagef("reading standard input (-) needs --name")
				}
				name = filepath.Base(a[1])
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			bar := prog.start(cmd.ErrOrStderr(), src.size, "put "+name)
			x, err := c.PutArtifact(ctx, a[0], name, bar.reader(src.r), src.size, client.PutOptions{Immutable: immutable, MediaType: mediaType})
			bar.done(err)
			if err != nil {
				return err
			}
			return printArtifact(cmd, g, x, "stored")
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "artifact name (default: the file's base name; required with -)")
	cmd.Flags().BoolVar(&immutable, "immutable", false, "store under /artifacts/immutable, refusing later updates")
	cmd.Flags().StringVar(&mediaType, "media-type", "", "media type hint (the bytes decide)")
	prog.add(cmd)
	return cmd
}

func artifactUpdateCmd(g *globals) *cobra.Command {
	var mediaType string
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "update <ses> <art> <file|->",
		Short: "Replace an artifact's bytes: same id, next revision (the previous one is kept for revert)",
		Args:  usageArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			src, err := openSource(cmd, a[2])
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
			bar := prog.start(cmd.ErrOrStderr(), src.size, "update "+a[1])
			x, err := c.UpdateArtifact(ctx, a[0], a[1], bar.reader(src.r), src.size, mediaType)
			bar.done(err)
			if err != nil {
				return err
			}
			return printArtifact(cmd, g, x, "updated")
		},
	}
	cmd.Flags().StringVar(&mediaType, "media-type", "", "media type hint (the bytes decide)")
	prog.add(cmd)
	return cmd
}

// downloaded is what --json prints for "artifact get" into a file.
type downloaded struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func artifactGetCmd(g *globals) *cobra.Command {
	var output string
	var force bool
	var prog progressFlags
	cmd := &cobra.Command{
		Use:   "get <ses> <art>",
		Short: "Download an artifact's bytes into a file (or stdout with -o -)",
		Long: `Download an artifact's bytes. By default they go to a file named after the
artifact in the current directory; -o names another file or directory, and
-o - writes to standard output. An existing file is never overwritten
without --force. The bytes go to a temporary file beside the target, are
checked against the server's SHA-256 and only then renamed into place, so an
interrupted download never leaves a torn file.`,
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			if err := prog.check(); err != nil {
				return err
			}
			ses, art := a[0], a[1]
			c, err := g.client()
			if err != nil {
				return err
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()

			// Refuse an existing target before asking for any bytes, when
			// the target does not depend on the artifact's name.
			if output != "" && output != "-" && !force {
				if st, err := os.Stat(output); err == nil && !st.IsDir() {
					return refuseOverwrite(output)
				}
			}
			d, err := c.DownloadArtifact(ctx, ses, art)
			if err != nil {
				return err
			}
			defer d.Body.Close()

			if output == "-" {
				bar := prog.start(cmd.ErrOrStderr(), d.Size, "get "+art)
				h := sha256.New()
				_, err := io.Copy(io.MultiWriter(cmd.OutOrStdout(), h), bar.reader(d.Body))
				if err == nil {
					err = checkDigest(d, h.Sum(nil))
				}
				bar.done(err)
				return transferErr(ctx, err)
			}

			target, err := downloadTarget(output, d.Name, art)
			if err != nil {
				return err
			}
			if !force {
				if _, err := os.Lstat(target); err == nil {
					return refuseOverwrite(target)
				}
			}
			bar := prog.start(cmd.ErrOrStderr(), d.Size, "get "+filepath.Base(target))
			n, err := saveFile(target, force, bar.reader(d.Body), func(sum []byte) error { return checkDigest(d, sum) })
			bar.done(err)
			if err != nil {
				return transferErr(ctx, err)
			}
			res := downloaded{ID: art, Name: d.Name, Path: target, Size: n, SHA256: d.SHA256}
			return out(cmd, g, res, func(o io.Writer) {
				fmt.Fprintf(o, "saved %s to %s (%s)\n", art, target, fmtBytes(n))
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "file or directory to write to, or - for standard output (default: the artifact's name in the current directory)")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing file")
	prog.add(cmd)
	return cmd
}

func refuseOverwrite(path string) error {
	return desk.Errorf(desk.ECONFLICT, "%s already exists; pass --force to overwrite it", path)
}

// downloadTarget picks the file to write: output itself, or the artifact's
// base name inside output (when it is a directory) or the current directory.
func downloadTarget(output, name, art string) (string, error) {
	base := filepath.Base(filepath.FromSlash(name))
	if name == "" || base == "." || base == ".." || base == string(filepath.Separator) {
		base = art
	}
	if output == "" {
		return base, nil
	}
	if st, err := os.Stat(output); err == nil && st.IsDir() {
		return filepath.Join(output, base), nil
	}
	return output, nil
}

// checkDigest compares the received bytes' SHA-256 with the one the server
// announced for them.
func checkDigest(d *client.Download, sum []byte) error {
	if d.SHA256 == "" {
		return nil
	}
	if got := hex.EncodeToString(sum); !strings.EqualFold(got, d.SHA256) {
		return desk.Errorf(desk.EINTERNAL, "download corrupted: received bytes hash to %s, the server announced %s", got, d.SHA256)
	}
	return nil
}

// transferErr reports an interrupted transfer as such.
func transferErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return err
}

// saveFile streams r into a temporary file in target's directory, verifies
// it, makes it durable and only then moves it to target. Without force an
// existing target is never replaced, even one that appeared meanwhile.
func saveFile(target string, force bool, r io.Reader, verify func(sum []byte) error) (n int64, err error) {
	dir := filepath.Dir(target)
	f, err := os.CreateTemp(dir, ".desk-get-*.part")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		if tmp != "" {
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	if n, err = io.Copy(io.MultiWriter(f, h), r); err != nil {
		return n, err
	}
	if err := verify(h.Sum(nil)); err != nil {
		return n, err
	}
	perm := fs.FileMode(0o644)
	if st, err := os.Stat(target); err == nil {
		if st.IsDir() {
			return n, desk.Errorf(desk.ECONFLICT, "%s is a directory", target)
		}
		perm = st.Mode().Perm()
	}
	if err := f.Chmod(perm); err != nil {
		return n, err
	}
	if err := f.Sync(); err != nil {
		return n, err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return n, err
	}
	if force {
		err = os.Rename(tmp, target)
	} else {
		err = linkNoClobber(tmp, target)
	}
	if err != nil {
		return n, err
	}
	if !force {
		os.Remove(tmp)
	}
	tmp = ""
	syncDir(dir)
	return n, nil
}

// linkNoClobber puts tmp at target only if target does not exist. A hard
// link is atomic and fails on an existing target; where links are not
// supported it falls back to a check and a rename.
func linkNoClobber(tmp, target string) error {
	err := os.Link(tmp, target)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return refuseOverwrite(target)
	}
	if _, serr := os.Lstat(target); serr == nil {
		return refuseOverwrite(target)
	}
	return os.Rename(tmp, target)
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// source is the body of an upload: a file or standard input, with its size
// when known (-1 otherwise).
type source struct {
	r     io.Reader
	size  int64
	close func()
}

func openSource(cmd *cobra.Command, path string) (*source, error) {
	if path == "-" {
		in := cmd.InOrStdin()
		return &source{r: in, size: regularSize(in), close: func() {}}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, desk.Errorf(desk.ENOTFOUND, "%s: no such file", path)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, desk.Errorf(desk.EINVALID, "%s is a directory; artifacts are files", path)
	}
	size := int64(-1)
	if st.Mode().IsRegular() {
		size = st.Size()
	}
	return &source{r: f, size: size, close: func() { f.Close() }}, nil
}

// regularSize is the length of r when it is a regular file read from its
// start (stdin redirected from a file), or -1.
func regularSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return -1
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	pos, err := f.Seek(0, io.SeekCurrent)
	if err != nil || pos > st.Size() {
		return -1
	}
	return st.Size() - pos
}

// interruptible returns a context cancelled by SIGINT or SIGTERM, so a
// transfer stops cleanly and removes its temporary file.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func printArtifact(cmd *cobra.Command, g *globals, x *desk.Artifact, verb string) error {
	return out(cmd, g, x, func(o io.Writer) {
		fmt.Fprintf(o, "%s %s %s (%s, %s, revision %d", verb, x.ID, x.Name, fmtBytes(x.Size), x.Kind, x.Revision)
		if x.Immutable {
			fmt.Fprint(o, ", immutable")
		}
		fmt.Fprintf(o, ") at %s\n", x.Path)
	})
}

func artifactFlags(x *desk.Artifact) string {
	var f []string
	if x.Immutable {
		f = append(f, "immutable")
	}
	if x.Missing {
		f = append(f, "missing")
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ",")
}
