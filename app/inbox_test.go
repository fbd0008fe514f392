package app_test

import (
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/routine"
)

// TestInboxAcrossSessions: GET /v1/inbox lists, for the admin, the
// approvals of two actors' sessions, a question and a plan of a third, and
// a routine whose run failed; each actor sees only its own session's
// approval, never the other's; a decided approval leaves the inbox.
func TestInboxAcrossSessions(t *testing.T) {
	apptest.Parallel(t)
	w := newWorldOn(t, app.Config{Routine: routine.Options{Manual: true}})
	_, aliceTok := w.newActor("alice")
	_, bobTok := w.newActor("bob")
	start := func(token string, call map[string]any) desk.Session {
		var x desk.Session
		r := w.Req("POST", "/v1/workspaces/"+w.ws.ID+"/sessions", token, map[string]any{"model": "script",
			"script": map[string]any{"steps": []map[string]any{{"tool_calls": []any{call}}, {"text": "done"}}}})
		if r.Status != 201 {
			t.Fatalf("create session: %d %s", r.Status, r.Body)
		}
		r.Decode(t, &x)
		if r := w.Req("POST", "/v1/sessions/"+x.ID+"/messages", token, map[string]string{"text": "go"}); r.Status != 202 {
			t.Fatalf("send: %d %s", r.Status, r.Body)
		}
		return x
	}
	exec := map[string]any{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}
	aliceSes := start(aliceTok, exec)
	bobSes := start(bobTok, exec)
	start(w.Token, map[string]any{"name": "request_user_input", "arguments": map[string]any{"questions": []map[string]any{
		{"question": "Which colour?", "options": []map[string]any{{"label": "red", "recommended": true}, {"label": "blue"}}}}}})
	start(w.Token, map[string]any{"name": "clarify", "arguments": map[string]any{"plan": map[string]any{"title": "Paint the shed", "steps": []string{"one"}}}})

	// A routine whose target session is gone: its run fails at start.
	var gone desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]string{"title": "gone"}, &gone)
	var rt desk.Routine
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/routines", map[string]any{"name": "nightly", "schedule": "@daily",
		"prompt": "p", "session_id": gone.ID}, &rt)
	w.Must(204, "DELETE", "/v1/sessions/"+gone.ID, nil, nil)
	w.Admin("POST", "/v1/workspaces/"+w.ws.ID+"/routines/"+rt.ID+"/run", nil)

	inbox := func(token string) desk.Inbox {
		var in desk.Inbox
		r := w.Req("GET", "/v1/inbox", token, nil)
		if r.Status != 200 {
			t.Fatalf("GET /v1/inbox: %d %s", r.Status, r.Body)
		}
		r.Decode(t, &in)
		return in
	}
	var all desk.Inbox
	waitFor(t, "the admin's inbox to fill", func() bool {
		all = inbox(w.Token)
		return all.Counts[desk.InboxApproval] == 2 && all.Counts[desk.InboxQuestion] == 1 && all.Counts[desk.InboxPlan] == 1 &&
			all.Counts[desk.InboxRoutineFailed] == 1
	})
	for i, it := range all.Items {
		if i > 0 && it.CreatedAt.Before(all.Items[i-1].CreatedAt) {
			t.Fatalf("inbox not oldest first: %+v", all.Items)
		}
		switch it.Kind {
		case desk.InboxQuestion:
			if it.Summary != "Which colour?" || it.Question == nil || it.SurfaceID == "" {
				t.Fatalf("question item %+v", it)
			}
		case desk.InboxPlan:
			if it.Summary != "Paint the shed" || it.Plan == nil {
				t.Fatalf("plan item %+v", it)
			}
		case desk.InboxRoutineFailed:
			if it.RoutineRun == nil || it.RoutineRun.RoutineID != rt.ID || it.WorkspaceID != w.ws.ID {
				t.Fatalf("routine item %+v", it)
			}
		}
	}

	only := func(token string, ses desk.Session, other desk.Session) *desk.InboxItem {
		in := inbox(token)
		if len(in.Items) != 1 || in.Items[0].Kind != desk.InboxApproval || in.Items[0].SessionID != ses.ID ||
			in.Items[0].Approval == nil || in.Items[0].Summary != "exec_command: echo hi" {
			t.Fatalf("inbox of %s's owner = %+v, want its one approval", ses.ID, in.Items)
		}
		for _, it := range in.Items {
			if it.SessionID == other.ID {
				t.Fatalf("the inbox shows another actor's session %s", other.ID)
			}
		}
		return in.Items[0]
	}
	aliceItem := only(aliceTok, aliceSes, bobSes)
	only(bobTok, bobSes, aliceSes)

	// Bob cannot decide Alice's approval; Alice can, and it leaves.
	if r := w.Req("POST", "/v1/approvals/"+aliceItem.ID, bobTok, map[string]string{"decision": "deny"}); r.Status != 404 {
		t.Fatalf("bob deciding alice's approval = %d", r.Status)
	}
	if r := w.Req("POST", "/v1/approvals/"+aliceItem.ID, aliceTok, map[string]string{"decision": "deny"}); r.Status != 200 {
		t.Fatalf("alice deciding her approval = %d %s", r.Status, r.Body)
	}
	if in := inbox(aliceTok); len(in.Items) != 0 {
		t.Fatalf("after the decision alice's inbox = %+v", in.Items)
	}
}
