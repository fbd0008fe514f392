package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testWebhooks: a webhook round-trips with its secret; settling an
// execution writes, in the settle, one pending delivery per matching
// webhook (the workspace's and the all-workspace one, not another
// workspace's, not one that wants other events) sharing one event id; of
// two claims of one attempt exactly one wins; an attempt is recorded with
// the delivery's new state; a routine run's final status writes
// routine.finished for a webhook of that routine; delete takes the
// deliveries.
func testWebhooks(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	other, _ := fixture(t, s, "beta")
	now := desk.Now().Truncate(time.Millisecond)
	mk := func(ws, rtn string, events ...string) *desk.Webhook {
		h := &desk.Webhook{ID: desk.NewID(desk.PrefixWebhook), WorkspaceID: ws, RoutineID: rtn, URL: "https://example.com/hook",
			Events: events, CreatedAt: now}
		must(t, s.CreateWebhook(ctx, h, "whsec_"+h.ID))
		return h
	}
	mine := mk(w.ID, "", desk.WebhookExecutionEnded, desk.WebhookExecutionFailed)
	all := mk("", "", desk.WebhookExecutionEnded)
	theirs := mk(other.ID, "", desk.WebhookExecutionEnded)
	failuresOnly := mk(w.ID, "", desk.WebhookExecutionFailed)
	got, err := s.GetWebhook(ctx, mine.ID)
	if err != nil || got.URL != mine.URL || len(got.Events) != 2 || got.WorkspaceID != w.ID {
		t.Fatalf("GetWebhook: %+v %v", got, err)
	}
	if _, err := s.GetWebhook(ctx, "whk_nothere"); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("GetWebhook of an unknown id: %v", err)
	}
	if sec, err := s.WebhookSecret(ctx, mine.ID); err != nil || sec != "whsec_"+mine.ID {
		t.Fatalf("WebhookSecret: %q %v", sec, err)
	}
	if hs, err := s.ListWebhooks(ctx); err != nil || len(hs) != 4 {
		t.Fatalf("ListWebhooks: %d %v", len(hs), err)
	}

	x := newSession(t, s, w, owner, "s")
	enqueue(t, s, x, "go", desk.PriorityNormal, desk.QueueUserMessage)
	_, exe := claim(t, s, x.SurfaceID, "own_1")
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_1", Phase: desk.PhaseEnded,
		ItemStatus: desk.QueueStatusDelivered, Now: now}); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueWebhookDeliveries(ctx, now, 100)
	if err != nil || len(due) != 2 {
		t.Fatalf("DueWebhookDeliveries after one settle: %d %v, want 2 (the workspace's and the all-workspace webhook)", len(due), err)
	}
	hooks := map[string]bool{}
	for _, d := range due {
		hooks[d.WebhookID] = true
		if d.EventID != due[0].EventID || d.Event != desk.WebhookExecutionEnded || d.Status != desk.WebhookDeliveryPending {
			t.Fatalf("delivery %+v", d)
		}
		var ev struct {
			ID   string
			Type string
			Data desk.WebhookExecutionData
		}
		if err := json.Unmarshal(d.Payload, &ev); err != nil || ev.ID != d.EventID || ev.Data.ExecutionID != exe.ID || ev.Data.Phase != desk.PhaseEnded {
			t.Fatalf("payload %s: %v", d.Payload, err)
		}
	}
	if !hooks[mine.ID] || !hooks[all.ID] || hooks[theirs.ID] || hooks[failuresOnly.ID] {
		t.Fatalf("deliveries went to %v", hooks)
	}
	if d, err := s.DueWebhookDeliveries(ctx, now.Add(-time.Second), 100); err != nil || len(d) != 0 {
		t.Fatalf("due before their time: %d %v", len(d), err)
	}

	d := due[0]
	lease := now.Add(time.Minute)
	wonA, err := s.ClaimWebhookDelivery(ctx, d.ID, d.NextAttemptAt, lease)
	must(t, err)
	wonB, err := s.ClaimWebhookDelivery(ctx, d.ID, d.NextAttemptAt, lease)
	must(t, err)
	if !wonA || wonB {
		t.Fatalf("two claims of one attempt: %v %v, want exactly the first", wonA, wonB)
	}
	if left, _ := s.DueWebhookDeliveries(ctx, now, 100); len(left) != 1 {
		t.Fatalf("a leased delivery is still due: %d", len(left))
	}
	d.Attempts, d.LastStatus, d.LastError, d.NextAttemptAt = 1, 500, "HTTP 500", now.Add(5*time.Second)
	must(t, s.RecordWebhookAttempt(ctx, d, &desk.WebhookAttempt{DeliveryID: d.ID, N: 1, At: now, StatusCode: 500, Error: "HTTP 500", DurationMS: 3}))
	fin := now.Add(6 * time.Second)
	d.Attempts, d.Status, d.LastStatus, d.LastError, d.FinishedAt = 2, desk.WebhookDeliveryDelivered, 204, "", &fin
	must(t, s.RecordWebhookAttempt(ctx, d, &desk.WebhookAttempt{DeliveryID: d.ID, N: 2, At: fin, StatusCode: 204, DurationMS: 1}))
	stale := *d
	stale.Status, stale.FinishedAt, stale.LastStatus = desk.WebhookDeliveryFailed, &fin, 500
	if err := s.RecordWebhookAttempt(ctx, &stale, &desk.WebhookAttempt{DeliveryID: d.ID, N: 2, At: fin}); !desk.IsCode(err, desk.ECONFLICT) {
		t.Fatalf("recording attempt 2 twice: %v", err)
	}
	gone := &desk.WebhookDelivery{ID: "whd_gone", Status: desk.WebhookDeliveryDelivered}
	if err := s.RecordWebhookAttempt(ctx, gone, &desk.WebhookAttempt{DeliveryID: gone.ID, N: 1, At: fin}); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("recording an attempt of a deleted delivery: %v", err)
	}
	got2, err := s.GetWebhookDelivery(ctx, d.ID)
	if err != nil || got2.Status != desk.WebhookDeliveryDelivered || got2.Attempts != 2 || got2.LastStatus != 204 || got2.FinishedAt == nil {
		t.Fatalf("GetWebhookDelivery: %+v %v", got2, err)
	}
	as, err := s.ListWebhookAttempts(ctx, d.ID)
	if err != nil || len(as) != 2 || as[0].StatusCode != 500 || as[0].DurationMS != 3 || as[1].N != 2 {
		t.Fatalf("ListWebhookAttempts: %+v %v", as, err)
	}
	must(t, s.RedeliverWebhookDelivery(ctx, d.ID, now))
	if got2, _ = s.GetWebhookDelivery(ctx, d.ID); got2.Status != desk.WebhookDeliveryPending || got2.FinishedAt != nil {
		t.Fatalf("after redeliver: %+v", got2)
	}
	if err := s.RedeliverWebhookDelivery(ctx, "whd_nothere", now); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("redeliver of an unknown id: %v", err)
	}

	// A routine run's final status writes routine.finished for the
	// routine's webhook, and nothing for another routine's.
	r := &desk.Routine{ID: desk.NewID(desk.PrefixRoutine), WorkspaceID: w.ID, Name: "n", Schedule: "@hourly", Prompt: "p",
		Overlap: desk.RoutineOverlapSkip, Enabled: true, Actor: owner.ID, NextRunAt: now, CreatedAt: now, UpdatedAt: now}
	must(t, s.CreateRoutine(ctx, r))
	forRoutine := mk(w.ID, r.ID, desk.WebhookRoutineFinished)
	forOther := mk(w.ID, "rtn_other", desk.WebhookRoutineFinished)
	run := &desk.RoutineRun{ID: desk.NewID(desk.PrefixRoutineRun), RoutineID: r.ID, WorkspaceID: w.ID, Trigger: desk.RoutineTriggerManual,
		ScheduledFor: now, Status: desk.RoutineRunRunning, StartedAt: now}
	if ok, err := s.ClaimRoutineRun(ctx, r.ID, nil, now, run); err != nil || !ok {
		t.Fatalf("ClaimRoutineRun: %v %v", ok, err)
	}
	run.Status, run.FinishedAt = desk.RoutineRunSucceeded, &fin
	if ok, err := s.UpdateRoutineRun(ctx, run, desk.RoutineRunRunning, nil); err != nil || !ok {
		t.Fatalf("UpdateRoutineRun: %v %v", ok, err)
	}
	if ds, err := s.ListWebhookDeliveries(ctx, forRoutine.ID, 10); err != nil || len(ds) != 1 || ds[0].Event != desk.WebhookRoutineFinished {
		t.Fatalf("the routine's webhook deliveries: %+v %v", ds, err)
	}
	if ds, _ := s.ListWebhookDeliveries(ctx, forOther.ID, 10); len(ds) != 0 {
		t.Fatalf("another routine's webhook got %d deliveries", len(ds))
	}

	must(t, s.DeleteWebhook(ctx, mine.ID))
	if ds, err := s.ListWebhookDeliveries(ctx, mine.ID, 10); err != nil || len(ds) != 0 {
		t.Fatalf("deliveries after DeleteWebhook: %d %v", len(ds), err)
	}
	if err := s.DeleteWebhook(ctx, mine.ID); !desk.IsCode(err, desk.ENOTFOUND) {
		t.Fatalf("deleting twice: %v", err)
	}
}
