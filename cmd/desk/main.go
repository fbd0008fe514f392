// Command desk is both the desk server (desk serve) and its command-line
// client. This package holds flags and wiring only; everything else lives in
// the packages it calls.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// Exit codes scripts can rely on, the same for every command (documented
// in docs/troubleshooting.md, "Exit statuses"). Each error code of the API
// has its own exit status so a script can tell "not found" from "refused",
// and a turn that failed (8) from a server that is down (7). desk status
// alone keeps the LSB init-script statuses (0, 1, 3).
const (
	exitOK          = 0
	exitError       = 1 // internal or unexpected
	exitUsage       = 2 // bad flags or arguments
	exitInvalid     = 3
	exitAuth        = 4 // unauthorized or forbidden
	exitNotFound    = 5
	exitConflict    = 6  // conflict or busy
	exitUnavailable = 7  // server unreachable or unavailable
	exitTurnFailed  = 8  // the turn desk send followed failed
	exitInterrupted = 9  // the turn desk send followed was interrupted
	exitWaiting     = 10 // the turn has not settled: it waits on a person, or is queued or running
	exitTooLarge    = 11 // too large or insufficient storage
	exitRefused     = 12 // desk start or restart refused background mode (a managed AI environment)
)

// codedError is a failure with its own exit status and message.
type codedError struct {
	code int
	msg  string
}

func (e *codedError) Error() string { return e.msg }

func exitCode(err error) int {
	var se *statusExit
	if errors.As(err, &se) {
		return se.code
	}
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	var re *refusedError
	if errors.As(err, &re) {
		return exitRefused
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	switch desk.ErrorCode(err) {
	case desk.EINVALID:
		return exitInvalid
	case desk.EUNAUTHORIZED, desk.EFORBIDDEN:
		return exitAuth
	case desk.ENOTFOUND:
		return exitNotFound
	case desk.ECONFLICT, desk.EBUSY, desk.EBLOCKED, desk.ESTALEPLAN:
		return exitConflict
	case desk.EUNAVAILABLE:
		return exitUnavailable
	case desk.ETOOLARGE, desk.ENOSPACE:
		return exitTooLarge
	}
	return exitError
}

type usageError struct{ error }

// globals are the flags every client command shares.
type globals struct {
	server string
	token  string
	home   string
	json   bool
}

// client builds the API client from flags, then the environment, then the
// files the running server keeps in DESK_HOME: the server's address is
// --server, DESK_SERVER, DESK_ADDR, DESK_HOME/desk.url, then the default;
// the token is --token, DESK_TOKEN, DESK_ADMIN_TOKEN, then
// DESK_HOME/admin.token.
func (g *globals) client() (*client.Client, error) {
	home := firstNonEmpty(g.home, os.Getenv("DESK_HOME"), defaultHome())
	server := firstNonEmpty(g.server, os.Getenv("DESK_SERVER"), os.Getenv("DESK_ADDR"), runningURL(home), defaultAddr)
	token := firstNonEmpty(g.token, os.Getenv("DESK_TOKEN"), os.Getenv("DESK_ADMIN_TOKEN"))
	if token == "" {
		b, err := os.ReadFile(filepath.Join(home, "admin.token"))
		if err != nil {
			return nil, &usageError{fmt.Errorf("no token: pass --token, set DESK_TOKEN, or run on the machine whose DESK_HOME (%s) holds admin.token", home)}
		}
		token = string(trimSpace(b))
	}
	return client.New(server, token)
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

const defaultAddr = "127.0.0.1:7777"

func defaultHome() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "desk")
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ".desk"
	}
	return filepath.Join(h, ".local", "share", "desk")
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "desk",
		Short:         "desk is a durable workspace runtime for AI agents: server and client in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.server, "server", "", "desk server address or URL (env DESK_SERVER, then DESK_ADDR, then DESK_HOME/desk.url; default "+defaultAddr+")")
	root.PersistentFlags().StringVar(&g.token, "token", "", "bearer token (env DESK_TOKEN, then DESK_ADMIN_TOKEN, then DESK_HOME/admin.token)")
	root.PersistentFlags().StringVar(&g.home, "home", "", "desk home directory (env DESK_HOME; default ~/.local/share/desk)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return &usageError{err} })
	// Cobra reports an unknown top-level command as a plain error (exit 1);
	// taking the arguments here makes a mistyped command a usage error
	// (exit 2), with cobra's suggestions.
	root.Args = cobra.ArbitraryArgs
	root.SuggestionsMinimumDistance = 2
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return &usageError{fmt.Errorf("%s; see desk --help", msg)}
	}
	root.AddCommand(serveCmd(g), versionCmd(g), startCmd(g), stopCmd(g), statusCmd(g), restartCmd(g))
	addClientCommands(root, g)
	return root
}

func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print desk's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.json {
				return printJSON(cmd.OutOrStdout(), map[string]string{"version": buildVersion()})
			}
			fmt.Fprintln(cmd.OutOrStdout(), "desk", buildVersion())
			return nil
		},
	}
}

func main() {
	root := newRoot()
	if err := root.ExecuteContext(context.Background()); err != nil {
		if msg := errText(err); msg != "" {
			fmt.Fprintln(os.Stderr, "desk:", msg)
		}
		os.Exit(exitCode(err))
	}
}

// errText prints API errors as "code: message" and anything else as is.
func errText(err error) string {
	var e *desk.Error
	if errors.As(err, &e) {
		return e.Code + ": " + e.Message
	}
	return err.Error()
}
