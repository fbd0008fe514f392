package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

// loginLinkCmd asks a running server for a fresh one-time login link, for
// whoever lost the one desk serve printed.
func loginLinkCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "login-link",
		Short: "Print a fresh one-time link that signs a browser into the web UI (admin token)",
		Long: `Ask the running desk for a one-time login link. Opening it signs the browser in
as the admin and lands on the web UI; the link works once and expires after 10
minutes. It never contains the token, and the server keeps its code only in
memory, so a restart forgets every link.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.LoginLink(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, l, func(w io.Writer) {
				fmt.Fprintf(w, "%s\n(one-time, valid until %s)\n", l.URL, l.ExpiresAt.Local().Format(time.Kitchen))
			})
		},
	}
}

// logoutAllCmd ends browser sessions on the server: a lost laptop or a
// shared browser is signed out without waiting for the sessions to expire.
func logoutAllCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "logout-all",
		Short: "Sign every browser out of the web UI (admin token: all browsers; actor token: its own)",
		Long: `End browser sessions of the web UI on the server, at once: with the admin token
every browser session, with an actor token the actor's own. A browser that was
signed in goes back to the sign-in form on its next request. Tokens are not
affected: they keep working for the API, the CLI and new sign-ins.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.RevokeBrowserSessions(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, r, func(w io.Writer) {
				fmt.Fprintf(w, "signed out %d browser session(s)\n", r.Revoked)
			})
		},
	}
}
