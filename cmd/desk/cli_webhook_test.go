package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/webhook"
)

// TestCLIWebhook: the admin creates a webhook from the CLI (a URL that is
// not http(s) is refused naming url, and nothing is created), gets its
// secret once, runs a turn on a script session, and the receiver (on
// loopback, which this server allows) verifies the signed delivery with
// the Standard Webhooks library; deliveries, the attempt log, redelivery
// with the same id and rm work from the CLI; an actor's token is refused.
func TestCLIWebhook(t *testing.T) {
	t.Parallel()
	a, err := app.Open(context.Background(), app.Config{Home: t.TempDir(), Version: "test",
		Webhook: webhook.Options{AllowPrivate: true, Interval: 20 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler)
	t.Cleanup(func() { srv.Close(); a.Close(context.Background()) })
	c := &cli{t: t, url: srv.URL, token: a.AdminToken, app: a}

	var mu sync.Mutex
	var secret string
	var ids []string
	verified := 0
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		ids = append(ids, r.Header.Get("webhook-id"))
		if wh, err := standardwebhooks.NewWebhook(secret); err == nil && wh.Verify(body, r.Header) == nil {
			verified++
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()

	r := c.fail(exitInvalid, "webhook", "create", "ftp://example.com/x")
	if !strings.Contains(r.e.Error(), "url") {
		t.Fatalf("bad url error %v, want it to name url", r.e)
	}
	c.fail(exitInvalid, "webhook", "create", rcv.URL, "--events", "execution.ended,nonsense")
	var none []*desk.Webhook
	if c.json(&none, "webhook", "ls"); len(none) != 0 {
		t.Fatalf("refused creates left %d webhooks", len(none))
	}
	var h desk.WebhookCreated
	c.json(&h, "webhook", "create", rcv.URL+"/hook", "--events", "execution.ended")
	mu.Lock()
	secret = h.Secret
	mu.Unlock()
	if !strings.HasPrefix(h.Secret, "whsec_") {
		t.Fatalf("created %+v", h)
	}
	if out := c.ok("webhook", "show", h.ID); strings.Contains(out, h.Secret) || !strings.Contains(out, "every workspace") {
		t.Fatalf("webhook show = %q (the secret is shown once only)", out)
	}

	var ws desk.Workspace
	c.json(&ws, "workspace", "create", "hooks")
	script := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(script, []byte(`{"steps":[{"text":"done"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var ses desk.Session
	c.json(&ses, "session", "create", ws.ID, "--model", "script", "--script", script)
	c.ok("send", ses.ID, "go")

	var ds []*desk.WebhookDelivery
	testwait.Until(t, 30*time.Second, func() bool {
		c.json(&ds, "webhook", "deliveries", h.ID)
		return len(ds) == 1 && ds[0].Status == desk.WebhookDeliveryDelivered
	}, "the delivery")
	mu.Lock()
	if len(ids) != 1 || ids[0] != ds[0].ID || verified != 1 {
		t.Fatalf("receiver saw %v, %d verified; want %s once, verified", ids, verified, ds[0].ID)
	}
	mu.Unlock()
	if out := c.ok("webhook", "deliveries", h.ID, ds[0].ID); !strings.Contains(out, "204") || !strings.Contains(out, ses.ID) {
		t.Fatalf("delivery show = %q", out)
	}
	c.ok("webhook", "redeliver", h.ID, ds[0].ID)
	testwait.Until(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(ids) == 2 }, "the redelivery")
	mu.Lock()
	if ids[1] != ids[0] || verified != 2 {
		t.Fatalf("redelivered as %v (%d verified), want the same id", ids, verified)
	}
	mu.Unlock()

	// An actor's token may not manage webhooks.
	var actor struct{ Token string }
	c.json(&actor, "actor", "create", ws.ID, "alice")
	if actor.Token == "" {
		t.Fatal("actor create gave no token")
	}
	ac := &cli{t: t, url: srv.URL, token: actor.Token, app: a}
	ac.fail(exitAuth, "webhook", "ls")
	ac.fail(exitAuth, "webhook", "create", "https://example.com/")

	c.ok("webhook", "rm", h.ID)
	c.fail(exitNotFound, "webhook", "show", h.ID)
}
