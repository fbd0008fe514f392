// Package webhook owns completion webhooks: URLs that receive a signed
// POST (Standard Webhooks: HMAC-SHA256 over id, timestamp and body) when
// a turn or a routine run finishes.
//
// Deliveries are an outbox in the store: the row is written in the
// transaction that settles the execution (or finishes the run), so an
// acknowledged event always has its delivery. A dispatcher claims due rows
// with a conditional UPDATE (the claim is a lease: a node that dies
// mid-attempt leaves it to expire and the row is tried again), posts them
// with bounded concurrency, and records every attempt. Delivery is at
// least once; the delivery id is the "webhook-id" header on every
// attempt, so receivers deduplicate with it. Nothing here runs on the
// turn's path: a slow or dead receiver delays only its own deliveries.
package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/desk-runtime/desk"
)

// Store is what the webhook service keeps and reads.
type Store interface {
	desk.WebhookStore
	GetWorkspace(ctx context.Context, id string) (*desk.Workspace, error)
	GetRoutine(ctx context.Context, id string) (*desk.Routine, error)
}

// Options tune the service; zero values take the defaults.
type Options struct {
	Logger *slog.Logger
	// Now is the clock; tests inject one.
	Now func() time.Time
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// metadata addresses (DESK_WEBHOOK_ALLOW_PRIVATE): for a receiver on
	// the same host or network, by the operator's choice.
	AllowPrivate bool
	// Concurrency bounds the attempts in flight on this node (default 8):
	// a flood of events with a dead receiver holds at most this many
	// goroutines and connections, and loads at most this many rows.
	Concurrency int
	// Timeout bounds one attempt, connect to last byte (default 10s).
	Timeout time.Duration
	// Backoff is the wait before each retry; after len(Backoff) retries
	// the delivery fails for good (default 5s, 30s, 2m, 10m, 30m, 1h, 2h,
	// 4h, 8h: ten attempts over about 16 hours).
	Backoff []time.Duration
	// Interval is how often the dispatcher looks for due deliveries
	// (default 1s).
	Interval time.Duration
	// Lease is how long a claimed attempt keeps other nodes off
	// (default Timeout + 30s).
	Lease time.Duration
	// UserAgent names desk in the requests.
	UserAgent string
}

var defaultBackoff = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour}

// maxURLBytes bounds a webhook's URL (and description).
const maxURLBytes = 2048

// maxDeliveriesListed bounds GET …/deliveries.
const maxDeliveriesListed = 500

// Service implements desk.WebhookService and runs the dispatcher.
type Service struct {
	store  Store
	opts   Options
	log    *slog.Logger
	client *http.Client
	sem    chan struct{}
	wake   chan struct{}

	mu     sync.Mutex
	opened bool
	closed bool
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ desk.WebhookService = (*Service)(nil)

// New returns a service; Open starts its dispatcher.
func New(store Store, o Options) *Service {
	if o.Now == nil {
		o.Now = desk.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Backoff == nil {
		o.Backoff = defaultBackoff
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Lease <= 0 {
		o.Lease = o.Timeout + 30*time.Second
	}
	if o.UserAgent == "" {
		o.UserAgent = "desk-webhooks"
	}
	dialer := &net.Dialer{Timeout: o.Timeout, Control: dialControl(o.AllowPrivate)}
	tr := &http.Transport{
		// No proxy: a proxy would make the connection, and the address
		// check below would see the proxy's address, not the receiver's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          o.Concurrency,
		MaxIdleConnsPerHost:   o.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.Timeout,
		ResponseHeaderTimeout: o.Timeout,
	}
	client := &http.Client{Transport: tr, Timeout: o.Timeout,
		// A redirect is an answer, not a delivery: following it would let a
		// receiver point desk at an address the check never saw by name.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Service{store: store, opts: o, log: o.Logger, client: client,
		sem: make(chan struct{}, o.Concurrency), wake: make(chan struct{}, 1)}
}

// Open starts the dispatcher.
func (s *Service) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opened || s.closed {
		return nil
	}
	s.opened = true
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Add(1)
	go s.loop(lctx)
	return nil
}

// Close stops the dispatcher and the attempts in flight, and waits for
// them. An interrupted attempt is not recorded: its lease expires and
// the delivery is tried again, with the same id.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); s.client.CloseIdleConnections(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Wake makes the dispatcher look for due deliveries now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Service) loop(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		s.dispatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
	}
}

// dispatch claims as many due deliveries as there are free attempt slots
// and starts them. Only this loop takes slots, so the count it reads
// cannot shrink under it.
func (s *Service) dispatch(ctx context.Context) {
	free := cap(s.sem) - len(s.sem)
	if free == 0 {
		return
	}
	now := s.opts.Now()
	due, err := s.store.DueWebhookDeliveries(ctx, now, free)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("webhook deliveries", "err", err)
		}
		return
	}
	for _, d := range due {
		ok, err := s.store.ClaimWebhookDelivery(ctx, d.ID, d.NextAttemptAt, now.Add(s.opts.Lease))
		if err != nil || !ok {
			if err != nil && ctx.Err() == nil {
				s.log.Warn("webhook claim", "delivery", d.ID, "err", err)
			}
			continue
		}
		s.sem <- struct{}{}
		s.wg.Add(1)
		go func() {
			defer func() { <-s.sem; s.wg.Done() }()
			s.attempt(ctx, d)
		}()
	}
}

// attempt posts one delivery once and records the outcome.
func (s *Service) attempt(ctx context.Context, d *desk.WebhookDelivery) {
	h, err := s.store.GetWebhook(ctx, d.WebhookID)
	if err != nil {
		// Deleted with its deliveries meanwhile: nothing to record.
		return
	}
	secret, err := s.store.WebhookSecret(ctx, d.WebhookID)
	if err != nil {
		return
	}
	start := s.opts.Now()
	code, aerr := s.post(ctx, h.URL, secret, d, start)
	if ctx.Err() != nil {
		// Shutting down: the attempt is not an outcome. The lease brings
		// the delivery back, with the same id.
		return
	}
	a := &desk.WebhookAttempt{DeliveryID: d.ID, N: d.Attempts + 1, At: start, StatusCode: code,
		DurationMS: time.Since(start).Milliseconds()}
	d.Attempts, d.LastStatus, d.LastError = a.N, code, ""
	now := s.opts.Now()
	switch {
	case aerr == nil:
		d.Status, d.FinishedAt = desk.WebhookDeliveryDelivered, &now
	case d.Attempts > len(s.opts.Backoff):
		a.Error, d.LastError = aerr.Error(), aerr.Error()
		d.Status, d.FinishedAt = desk.WebhookDeliveryFailed, &now
	default:
		a.Error, d.LastError = aerr.Error(), aerr.Error()
		d.NextAttemptAt = now.Add(jitter(s.opts.Backoff[d.Attempts-1]))
	}
	if err := s.store.RecordWebhookAttempt(context.WithoutCancel(ctx), d, a); err != nil {
		s.log.Warn("webhook attempt record", "delivery", d.ID, "err", err)
		return
	}
	if aerr != nil {
		s.log.Info("webhook attempt failed", "webhook", h.ID, "delivery", d.ID, "attempt", a.N, "status", d.Status, "err", aerr)
	}
}

// jitter spreads retries by up to a tenth, so receivers coming back are
// not hit by every delivery at once.
func jitter(d time.Duration) time.Duration {
	if d < 10 {
		return d
	}
	return d + mrand.N(d/10)
}

// post sends the signed request; a 2xx answer is success.
func (s *Service) post(ctx context.Context, target, secret string, d *desk.WebhookDelivery, at time.Time) (int, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return 0, fmt.Errorf("the webhook's secret: %w", err)
	}
	sig, err := wh.Sign(d.ID, at, d.Payload)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(d.Payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.opts.UserAgent)
	req.Header.Set(standardwebhooks.HeaderWebhookID, d.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	req.Header.Set("Idempotency-Key", d.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read a little of the answer for the attempt log; the rest is
	// drained (bounded) so the connection can be reused.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, nil
	}
	msg := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if t := strings.TrimSpace(strings.ToValidUTF8(string(head), "")); t != "" {
		msg += ": " + t
	}
	return resp.StatusCode, errors.New(msg)
}

// ---- the service ----

func admin(ctx context.Context) error {
	if p, ok := desk.PrincipalFrom(ctx); !ok || !p.Admin {
		return desk.Errorf(desk.EFORBIDDEN, "only the admin token may manage webhooks: their URLs reach the network from desk's host")
	}
	return nil
}

// checkURL refuses what is not an http(s) URL, and an address literal
// in a refused range (names are checked at connect time, every time).
func (s *Service) checkURL(raw string) error {
	if len(raw) > maxURLBytes {
		return desk.Errorf(desk.EINVALID, "url is %d bytes; at most %d", len(raw), maxURLBytes)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || raw == "" {
		return desk.Errorf(desk.EINVALID, "url %q is not a URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return desk.Errorf(desk.EINVALID, "url %q must be http or https", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return desk.Errorf(desk.EINVALID, "url %q has no host", raw)
	}
	if u.User != nil {
		return desk.Errorf(desk.EINVALID, "url must not carry credentials; deliveries are signed with the webhook's secret")
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !s.opts.AllowPrivate {
		if why := refusedAddr(ip); why != "" {
			return desk.Errorf(desk.EINVALID, "url: %s", why)
		}
	}
	return nil
}

// newSecret is a Standard Webhooks secret: whsec_ and 32 random bytes.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

func (s *Service) Create(ctx context.Context, in desk.WebhookCreate) (*desk.WebhookCreated, error) {
	if err := admin(ctx); err != nil {
		return nil, err
	}
	if err := s.checkURL(in.URL); err != nil {
		return nil, err
	}
	if len(in.Description) > maxURLBytes {
		return nil, desk.Errorf(desk.EINVALID, "description is %d bytes; at most %d", len(in.Description), maxURLBytes)
	}
	events := in.Events
	if len(events) == 0 {
		events = []string{desk.WebhookExecutionEnded, desk.WebhookExecutionFailed, desk.WebhookExecutionInterrupted}
	}
	for _, e := range events {
		if !slices.Contains(desk.WebhookEvents, e) {
			return nil, desk.Errorf(desk.EINVALID, "events: %q is not one of %s", e, strings.Join(desk.WebhookEvents, ", "))
		}
	}
	slices.Sort(events)
	events = slices.Compact(events)
	if in.WorkspaceID != "" {
		if _, err := s.store.GetWorkspace(ctx, in.WorkspaceID); err != nil {
			return nil, desk.Errorf(desk.EINVALID, "workspace_id: %v", err)
		}
	}
	if in.RoutineID != "" {
		r, err := s.store.GetRoutine(ctx, in.RoutineID)
		if err != nil {
			return nil, desk.Errorf(desk.EINVALID, "routine_id: %v", err)
		}
		if in.WorkspaceID != "" && r.WorkspaceID != in.WorkspaceID {
			return nil, desk.Errorf(desk.EINVALID, "routine_id: routine %s is not in workspace %s", r.ID, in.WorkspaceID)
		}
		in.WorkspaceID = r.WorkspaceID
		if !slices.Contains(events, desk.WebhookRoutineFinished) {
			return nil, desk.Errorf(desk.EINVALID, "events: a webhook of one routine receives %s only; ask for it", desk.WebhookRoutineFinished)
		}
	}
	h := &desk.Webhook{ID: desk.NewID(desk.PrefixWebhook), WorkspaceID: in.WorkspaceID, RoutineID: in.RoutineID,
		URL: strings.TrimSpace(in.URL), Events: events, Description: in.Description, CreatedAt: s.opts.Now()}
	secret := newSecret()
	if err := s.store.CreateWebhook(ctx, h, secret); err != nil {
		return nil, err
	}
	return &desk.WebhookCreated{Webhook: *h, Secret: secret}, nil
}

func (s *Service) Get(ctx context.Context, id string) (*desk.Webhook, error) {
	if err := admin(ctx); err != nil {
		return nil, err
	}
	return s.store.GetWebhook(ctx, id)
}

func (s *Service) List(ctx context.Context) ([]*desk.Webhook, error) {
	if err := admin(ctx); err != nil {
		return nil, err
	}
	return s.store.ListWebhooks(ctx)
}

func (s *Service) Delete(ctx context.Context, id string) error {
	if err := admin(ctx); err != nil {
		return err
	}
	return s.store.DeleteWebhook(ctx, id)
}

func (s *Service) Deliveries(ctx context.Context, webhookID string, limit int) ([]*desk.WebhookDelivery, error) {
	if _, err := s.Get(ctx, webhookID); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > maxDeliveriesListed {
		limit = 100
	}
	return s.store.ListWebhookDeliveries(ctx, webhookID, limit)
}

// delivery reads a delivery of the webhook; one of another webhook is
// not found.
func (s *Service) delivery(ctx context.Context, webhookID, deliveryID string) (*desk.WebhookDelivery, error) {
	if _, err := s.Get(ctx, webhookID); err != nil {
		return nil, err
	}
	d, err := s.store.GetWebhookDelivery(ctx, deliveryID)
	if err != nil {
		return nil, err
	}
	if d.WebhookID != webhookID {
		return nil, desk.Errorf(desk.ENOTFOUND, "webhook delivery %s not found", deliveryID)
	}
	return d, nil
}

func (s *Service) Delivery(ctx context.Context, webhookID, deliveryID string) (*desk.WebhookDelivery, error) {
	d, err := s.delivery(ctx, webhookID, deliveryID)
	if err != nil {
		return nil, err
	}
	if d.AttemptLog, err = s.store.ListWebhookAttempts(ctx, d.ID); err != nil {
		return nil, err
	}
	return d, nil
}

func (s *Service) Redeliver(ctx context.Context, webhookID, deliveryID string) (*desk.WebhookDelivery, error) {
	if _, err := s.delivery(ctx, webhookID, deliveryID); err != nil {
		return nil, err
	}
	if err := s.store.RedeliverWebhookDelivery(ctx, deliveryID, s.opts.Now()); err != nil {
		return nil, err
	}
	s.Wake()
	return s.Delivery(ctx, webhookID, deliveryID)
}
