package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/desk-runtime/desk"
)

// webhookCmd is "desk webhook": completion webhooks (admin).
func webhookCmd(g *globals) *cobra.Command {
	cmd := noun("webhook", "Completion webhooks: signed POSTs when turns or routine runs finish (admin)", "webhooks", "whk")

	var in desk.WebhookCreate
	var events string
	create := &cobra.Command{
		Use:     "create <url>",
		Aliases: []string{"add"},
		Short:   "Create a webhook; its signing secret is printed this once",
		Long: `Create a webhook: desk POSTs a JSON event to url when a turn finishes
(execution.ended, execution.failed, execution.interrupted) or a routine
run does (routine.finished), signed per Standard Webhooks (headers
webhook-id, webhook-timestamp, webhook-signature). The secret that
verifies the signatures is printed now and never shown again.

Loopback, private, link-local and metadata addresses are refused unless
the server runs with DESK_WEBHOOK_ALLOW_PRIVATE=true.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			body := in
			body.URL = a[0]
			for _, e := range strings.FieldsFunc(events, func(r rune) bool { return r == ',' || r == ' ' }) {
				body.Events = append(body.Events, e)
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			h, err := c.CreateWebhook(cmd.Context(), body)
			if err != nil {
				return err
			}
			return out(cmd, g, h, func(o io.Writer) {
				fmt.Fprintf(o, "created webhook %s for %s\n", h.ID, strings.Join(h.Events, ", "))
				fmt.Fprintf(o, "secret (shown once; verify deliveries with it): %s\n", h.Secret)
			})
		},
	}
	f := create.Flags()
	f.StringVar(&events, "events", "", "comma-separated events (default the execution.* ones): "+strings.Join(desk.WebhookEvents, ", "))
	f.StringVar(&in.WorkspaceID, "workspace", "", "only this workspace's events (default every workspace)")
	f.StringVar(&in.RoutineID, "routine", "", "only this routine's routine.finished events")
	f.StringVar(&in.Description, "description", "", "a note for people")

	list := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the webhooks",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			hs, err := c.ListWebhooks(cmd.Context())
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(hs), func(o io.Writer) {
				t := newTable(o, "ID", "URL", "EVENTS", "SCOPE", "CREATED")
				for _, h := range hs {
					t.row(h.ID, h.URL, strings.Join(h.Events, ","), webhookScope(h), fmtTime(h.CreatedAt))
				}
				t.flush()
			})
		},
	}

	show := &cobra.Command{
		Use:   "show <whk>",
		Short: "Show a webhook",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			h, err := c.GetWebhook(cmd.Context(), a[0])
			if err != nil {
				return err
			}
			return out(cmd, g, h, func(o io.Writer) {
				fields(o, "id", h.ID, "url", h.URL, "events", strings.Join(h.Events, ", "), "scope", webhookScope(h),
					"description", orDash(h.Description), "created", fmtTime(h.CreatedAt))
			})
		},
	}

	rm := &cobra.Command{
		Use:     "rm <whk>",
		Aliases: []string{"delete"},
		Short:   "Delete a webhook and its deliveries",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteWebhook(cmd.Context(), a[0]); err != nil {
				return err
			}
			return out(cmd, g, map[string]string{"deleted": a[0]}, func(o io.Writer) {
				fmt.Fprintf(o, "deleted webhook %s\n", a[0])
			})
		},
	}

	var limit int
	deliveries := &cobra.Command{
		Use:   "deliveries <whk> [<whd>]",
		Short: "List a webhook's deliveries, or show one with its attempts",
		Args:  usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if len(a) == 2 {
				d, err := c.WebhookDelivery(cmd.Context(), a[0], a[1])
				if err != nil {
					return err
				}
				return out(cmd, g, d, func(o io.Writer) { printDelivery(o, d) })
			}
			ds, err := c.WebhookDeliveries(cmd.Context(), a[0], limit)
			if err != nil {
				return err
			}
			return out(cmd, g, nonNilList(ds), func(o io.Writer) {
				t := newTable(o, "ID", "EVENT", "STATUS", "ATTEMPTS", "LAST", "NEXT", "CREATED")
				for _, d := range ds {
					next := "-"
					if d.Status == desk.WebhookDeliveryPending {
						next = fmtTime(d.NextAttemptAt)
					}
					t.row(d.ID, d.Event, d.Status, fmt.Sprint(d.Attempts), lastOutcome(d), next, fmtTime(d.CreatedAt))
				}
				t.flush()
			})
		},
	}
	deliveries.Flags().IntVar(&limit, "limit", 0, "at most this many deliveries (default 100)")

	redeliver := &cobra.Command{
		Use:   "redeliver <whk> <whd>",
		Short: "Send a delivery again now, with the same id",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, a []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			d, err := c.RedeliverWebhook(cmd.Context(), a[0], a[1])
			if err != nil {
				return err
			}
			return out(cmd, g, d, func(o io.Writer) {
				fmt.Fprintf(o, "delivery %s is pending again\n", d.ID)
			})
		},
	}

	cmd.AddCommand(create, list, show, rm, deliveries, redeliver)
	return cmd
}

func webhookScope(h *desk.Webhook) string {
	switch {
	case h.RoutineID != "":
		return "routine " + h.RoutineID
	case h.WorkspaceID != "":
		return "workspace " + h.WorkspaceID
	}
	return "every workspace"
}

func lastOutcome(d *desk.WebhookDelivery) string {
	switch {
	case d.LastError != "":
		return d.LastError
	case d.LastStatus != 0:
		return fmt.Sprint(d.LastStatus)
	}
	return "-"
}

func printDelivery(o io.Writer, d *desk.WebhookDelivery) {
	fin := "-"
	if d.FinishedAt != nil {
		fin = fmtTime(*d.FinishedAt)
	}
	fields(o, "id", d.ID, "webhook", d.WebhookID, "event", d.Event, "event id", d.EventID, "status", d.Status,
		"attempts", fmt.Sprint(d.Attempts), "created", fmtTime(d.CreatedAt), "finished", fin)
	if len(d.AttemptLog) > 0 {
		t := newTable(o, "ATTEMPT", "AT", "STATUS", "MS", "ERROR")
		for _, a := range d.AttemptLog {
			code := "-"
			if a.StatusCode != 0 {
				code = fmt.Sprint(a.StatusCode)
			}
			t.row(fmt.Sprint(a.N), fmtTime(a.At), code, fmt.Sprint(a.DurationMS), orDash(a.Error))
		}
		t.flush()
	}
	fmt.Fprintf(o, "payload: %s\n", d.Payload)
}
