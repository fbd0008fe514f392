package storetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// testAgent covers the agent's records: transcripts, command records,
// approvals, input requests, plans, item leases, the session's agent
// settings and the workspace's.
func testAgent(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	exe := "exe_agent"

	// Messages are numbered per surface, each linked to the one before.
	var first []*desk.Message
	for i, role := range []string{desk.RoleUser, desk.RoleAssistant} {
		m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe, Role: role, Text: "m", CreatedAt: desk.Now()}
		must(t, s.AppendMessage(ctx, m))
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d got seq %d", i, m.Seq)
		}
		first = append(first, m)
	}
	if first[0].ParentID != "" || first[1].ParentID != first[0].ID {
		t.Fatalf("parents: %q %q, want root then %s", first[0].ParentID, first[1].ParentID, first[0].ID)
	}
	if n, err := s.CountMessages(ctx, x.SurfaceID); err != nil || n != 2 {
		t.Fatalf("count messages = %d %v, want 2", n, err)
	}
	// An edit starts a new branch from the original's parent (here a new
	// root); what follows it links to it, and the active branch is the
	// one holding the newest message. The original branch stays whole.
	ed := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: "exe_edit", Role: desk.RoleUser,
		Text: "m2", EditOf: first[0].ID, ParentID: first[0].ParentID, CreatedAt: desk.Now()}
	must(t, s.AppendMessage(ctx, ed))
	reply := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: "exe_edit", Role: desk.RoleAssistant, Text: "a2", CreatedAt: desk.Now()}
	must(t, s.AppendMessage(ctx, reply))
	if ed.Seq != 3 || ed.ParentID != "" || reply.ParentID != ed.ID {
		t.Fatalf("edit seq %d parent %q, answer parent %q", ed.Seq, ed.ParentID, reply.ParentID)
	}
	active, err := s.ListMessages(ctx, x.SurfaceID, 0, 0)
	must(t, err)
	if len(active) != 2 || active[0].ID != ed.ID || active[0].EditOf != first[0].ID || active[1].ID != reply.ID {
		t.Fatalf("active branch: %+v", active)
	}
	if ms, _ := s.ListMessages(ctx, x.SurfaceID, reply.Seq, 10); len(ms) != 1 || ms[0].ID != ed.ID {
		t.Fatalf("active branch before seq %d: %+v", reply.Seq, ms)
	}
	tree, err := s.ListMessageTree(ctx, x.SurfaceID)
	must(t, err)
	if len(tree) != 4 || tree[0].ID != first[0].ID || tree[1].ParentID != first[0].ID || tree[3].ID != reply.ID {
		t.Fatalf("tree: %+v", tree)
	}
	gm, err := s.GetMessage(ctx, first[1].ID)
	must(t, err)
	if gm.Text != "m" || gm.ParentID != first[0].ID || gm.Role != desk.RoleAssistant {
		t.Fatalf("get message: %+v", gm)
	}
	_, err = s.GetMessage(ctx, "msg_nope")
	wantCode(t, err, desk.ENOTFOUND)
	if n, err := s.CountMessages(ctx, "srf_nope"); err != nil || n != 0 {
		t.Fatalf("count messages of an unknown surface = %d %v", n, err)
	}

	// Commands: created, updated, listed by execution.
	c := &desk.Command{ID: desk.NewID("cmd"), ExecutionID: exe, SessionID: x.ID, SurfaceID: x.SurfaceID, CallID: "call_1",
		Tool: "exec_command", Arguments: json.RawMessage(`{"cmd":"ls"}`), Status: desk.CommandRequested, CreatedAt: desk.Now()}
	must(t, s.CreateCommand(ctx, c))
	started := desk.Now()
	c.Status, c.StartedAt, c.Output, c.Artifacts = desk.CommandSucceeded, &started, "a.txt\n", []string{"art_1"}
	c.Arguments = json.RawMessage(`{"cmd":"ls -l"}`)
	must(t, s.UpdateCommand(ctx, c))
	other := &desk.Command{ID: desk.NewID("cmd"), ExecutionID: "exe_other", SessionID: x.ID, SurfaceID: x.SurfaceID, CallID: "call_2",
		Tool: "read_file", Arguments: json.RawMessage(`{}`), Status: desk.CommandRequested, CreatedAt: desk.Now()}
	must(t, s.CreateCommand(ctx, other))
	cs, err := s.ListCommands(ctx, []string{exe})
	must(t, err)
	if len(cs) != 1 || cs[0].ID != c.ID || cs[0].Status != desk.CommandSucceeded || cs[0].Output != "a.txt\n" || string(cs[0].Arguments) != `{"cmd":"ls -l"}` ||
		len(cs[0].Artifacts) != 1 || cs[0].StartedAt == nil || !cs[0].StartedAt.Equal(started) {
		t.Fatalf("commands of %s: %+v", exe, cs)
	}
	if cs, _ := s.ListCommands(ctx, []string{exe, "exe_other"}); len(cs) != 2 {
		t.Fatalf("commands of two executions: %d, want 2", len(cs))
	}
	missing := *c
	missing.ID = "cmd_nope"
	wantCode(t, s.UpdateCommand(ctx, &missing), desk.ENOTFOUND)

	// Approvals: decided once.
	ap := &desk.Approval{ID: desk.NewID("apr"), SessionID: x.ID, ExecutionID: exe, CommandID: c.ID, Tool: "exec_command",
		Summary: "ls", Status: desk.ApprovalPending, CreatedAt: desk.Now(),
		ApprovalRequest: desk.ApprovalRequest{What: "ls -la", Cwd: "/workspace", Why: "to look", Options: []desk.ApprovalOption{
			{ID: "accept", Kind: desk.OptionAllowOnce, Label: "Allow once"}, {ID: "acceptForSession", Kind: desk.OptionAllowAlways, Label: "Allow for this session"}}}}
	must(t, s.CreateApproval(ctx, ap))
	if got, err := s.GetApproval(ctx, ap.ID); err != nil || got.Summary != "ls" || got.Status != desk.ApprovalPending ||
		got.What != "ls -la" || got.Cwd != "/workspace" || got.Why != "to look" || len(got.Options) != 2 || got.Options[1].Kind != desk.OptionAllowAlways {
		t.Fatalf("get approval: %+v %v", got, err)
	}
	if ps, _ := s.ListApprovals(ctx, x.ID, true); len(ps) != 1 {
		t.Fatalf("pending approvals: %d, want 1", len(ps))
	}
	at := desk.Now()
	dec, err := s.DecideApproval(ctx, ap.ID, desk.ApprovalApproved, "acceptForSession", "admin", "fine", at)
	if err != nil || dec.Status != desk.ApprovalApproved || dec.DecidedBy != "admin" || dec.DecidedAt == nil || dec.OptionID != "acceptForSession" {
		t.Fatalf("decide: %+v %v", dec, err)
	}
	_, err = s.DecideApproval(ctx, ap.ID, desk.ApprovalDenied, "", "admin", "", at)
	wantCode(t, err, desk.ECONFLICT)
	if ps, _ := s.ListApprovals(ctx, x.ID, true); len(ps) != 0 {
		t.Fatalf("pending approvals after the decision: %d", len(ps))
	}
	if all, _ := s.ListApprovals(ctx, x.ID, false); len(all) != 1 || all[0].Status != desk.ApprovalApproved || all[0].Reason != "fine" || all[0].OptionID != "acceptForSession" {
		t.Fatalf("all approvals: %+v", all)
	}
	_, err = s.GetApproval(ctx, "apr_nope")
	wantCode(t, err, desk.ENOTFOUND)

	// Input requests: answered once.
	in := &desk.InputRequest{ID: desk.NewID("inp"), SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe, CommandID: c.ID,
		Questions: []desk.InputQuestion{{ID: "q1", Question: "which?", Options: []desk.InputOption{{Label: "a", Recommended: true}, {Label: "b"}}, Default: "a"}},
		Blocking:  true, Status: desk.InputPending, CreatedAt: desk.Now()}
	must(t, s.CreateInputRequest(ctx, in))
	if got, err := s.GetInputRequest(ctx, in.ID); err != nil || len(got.Questions) != 1 || len(got.Questions[0].Options) != 2 || !got.Blocking {
		t.Fatalf("get input request: %+v %v", got, err)
	}
	ans, err := s.AnswerInputRequest(ctx, in.ID, desk.InputAnswered, map[string]string{"q1": "b"}, desk.Now())
	if err != nil || ans.Status != desk.InputAnswered || ans.Answers["q1"] != "b" || ans.AnsweredAt == nil {
		t.Fatalf("answer: %+v %v", ans, err)
	}
	_, err = s.AnswerInputRequest(ctx, in.ID, desk.InputDefaulted, nil, desk.Now())
	wantCode(t, err, desk.ECONFLICT)
	if rs, err := s.ListInputRequests(ctx, x.ID); err != nil || len(rs) != 1 || rs[0].Answers["q1"] != "b" {
		t.Fatalf("input requests: %+v %v", rs, err)
	}
	_, err = s.GetInputRequest(ctx, "inp_nope")
	wantCode(t, err, desk.ENOTFOUND)

	// Plans: decided once.
	p := &desk.Plan{ID: desk.NewID("pln"), SessionID: x.ID, ExecutionID: exe, CommandID: c.ID,
		Card: json.RawMessage(`{"title":"t","steps":["a"]}`), Status: desk.PlanProposed, CreatedAt: desk.Now()}
	must(t, s.CreatePlan(ctx, p))
	if got, err := s.GetPlan(ctx, p.ID); err != nil || got.Status != desk.PlanProposed || string(got.Card) != string(p.Card) {
		t.Fatalf("get plan: %+v %v", got, err)
	}
	dp, err := s.DecidePlan(ctx, p.ID, desk.PlanRevised, "shorter", desk.Now())
	if err != nil || dp.Status != desk.PlanRevised || dp.Notes != "shorter" || dp.DecidedAt == nil {
		t.Fatalf("decide plan: %+v %v", dp, err)
	}
	_, err = s.DecidePlan(ctx, p.ID, desk.PlanApproved, "", desk.Now())
	wantCode(t, err, desk.ECONFLICT)
	_, err = s.GetPlan(ctx, "pln_nope")
	wantCode(t, err, desk.ENOTFOUND)

	// Item leases: idempotent, released per execution.
	must(t, s.LeaseItem(ctx, "itm_1", exe))
	must(t, s.LeaseItem(ctx, "itm_1", exe))
	must(t, s.LeaseItem(ctx, "itm_1", "exe_other"))
	if ok, err := s.HasLease(ctx, "itm_1", exe); err != nil || !ok {
		t.Fatalf("has lease = %v %v", ok, err)
	}
	must(t, s.ReleaseLeases(ctx, exe))
	if ok, _ := s.HasLease(ctx, "itm_1", exe); ok {
		t.Fatal("lease survives its release")
	}
	if ok, _ := s.HasLease(ctx, "itm_1", "exe_other"); !ok {
		t.Fatal("releasing one execution's leases released another's")
	}

	// The session's agent: model, script and its cursor, title source.
	sa, err := s.GetSessionAgent(ctx, x.ID)
	must(t, err)
	if sa.TitleSource != "auto" {
		t.Fatalf("a new session's title source is %q, want auto", sa.TitleSource)
	}
	if ok, err := s.SetAutoTitle(ctx, x.ID, "auto title"); err != nil || !ok {
		t.Fatalf("auto title on an auto-titled session: %v %v", ok, err)
	}
	if got, _ := s.GetSession(ctx, x.ID); got.Title != "auto title" {
		t.Fatalf("title = %q", got.Title)
	}
	must(t, s.SetSessionAgent(ctx, x.ID, &desk.SessionAgent{Model: "script", Script: json.RawMessage(`[{"reply":"a"},{"reply":"b"}]`),
		TitleSource: "manual", Focus: json.RawMessage(`{"url":"https://example.com"}`)}))
	sa, err = s.GetSessionAgent(ctx, x.ID)
	if err != nil || sa.Model != "script" || sa.TitleSource != "manual" || string(sa.Focus) != `{"url":"https://example.com"}` || sa.ScriptCursor != 0 {
		t.Fatalf("session agent: %+v %v", sa, err)
	}
	for want := range 3 {
		if got, err := s.NextScriptStep(ctx, x.ID); err != nil || got != want {
			t.Fatalf("script step = %d %v, want %d", got, err, want)
		}
	}
	if sa, _ := s.GetSessionAgent(ctx, x.ID); sa.ScriptCursor != 3 {
		t.Fatalf("script cursor = %d, want 3", sa.ScriptCursor)
	}
	if ok, err := s.SetAutoTitle(ctx, x.ID, "ignored"); err != nil || ok {
		t.Fatalf("auto title on a renamed session: %v %v", ok, err)
	}
	if got, _ := s.GetSession(ctx, x.ID); got.Title != "auto title" {
		t.Fatalf("an auto title replaced a manual one: %q", got.Title)
	}
	_, err = s.NextScriptStep(ctx, "ses_nope")
	wantCode(t, err, desk.ENOTFOUND)
	wantCode(t, s.SetSessionAgent(ctx, "ses_nope", &desk.SessionAgent{}), desk.ENOTFOUND)
	_, err = s.GetSessionAgent(ctx, "ses_nope")
	wantCode(t, err, desk.ENOTFOUND)

	// Workspace settings.
	must(t, s.SetAgentSettings(ctx, w.ID, &desk.AgentSettings{ApprovalMode: desk.ApprovalModeAutoReview, Network: true, BlockingInput: true}))
	as, err := s.GetAgentSettings(ctx, w.ID)
	if err != nil || as.ApprovalMode != desk.ApprovalModeAutoReview || !as.Network || !as.BlockingInput {
		t.Fatalf("agent settings: %+v %v", as, err)
	}
	wantCode(t, s.SetAgentSettings(ctx, "ws_nope", as), desk.ENOTFOUND)
	_, err = s.GetAgentSettings(ctx, "ws_nope")
	wantCode(t, err, desk.ENOTFOUND)
}

// testExecutionRecords covers the execution store's remaining reads and
// writes: surfaces, queue rows by id, dispatch candidates, lease renewal,
// stop errors, execution lists, blocks by id and the event log's append
// and prune.
func testExecutionRecords(t *testing.T, s desk.Store) {
	w, owner := fixture(t, s, "alpha")
	x := newSession(t, s, w, owner, "s")
	y := newSession(t, s, w, owner, "t")

	srfs, err := s.ListSurfaces(ctx, x.ID)
	if err != nil || len(srfs) != 1 || srfs[0].ID != x.SurfaceID {
		t.Fatalf("surfaces: %+v %v", srfs, err)
	}
	until := desk.Now().Add(time.Minute)
	srf, err := s.AttachSurface(ctx, x.SurfaceID, until)
	if err != nil || !srf.AttachedUntil.Equal(until) {
		t.Fatalf("attach: %+v %v", srf, err)
	}
	_, err = s.AttachSurface(ctx, "srf_nope", until)
	wantCode(t, err, desk.ENOTFOUND)

	a := enqueue(t, s, x, "a", desk.PriorityNormal, desk.QueueUserMessage)
	enqueue(t, s, y, "b", desk.PriorityNormal, desk.QueueUserMessage)
	if got, err := s.GetQueueItem(ctx, a.ID); err != nil || got.Text != "a" || got.Status != desk.QueueStatusQueued {
		t.Fatalf("queue item: %+v %v", got, err)
	}
	_, err = s.GetQueueItem(ctx, "q_nope")
	wantCode(t, err, desk.ENOTFOUND)
	cand, err := s.SurfacesWithQueuedWork(ctx, 10)
	if err != nil || len(cand) != 2 {
		t.Fatalf("surfaces with queued work: %v %v, want both", cand, err)
	}

	// A claimed surface is no candidate; its lease is renewed by owner.
	it, exe := claim(t, s, x.SurfaceID, "own_1")
	if it == nil || it.ID != a.ID {
		t.Fatalf("claim: %+v", it)
	}
	enqueue(t, s, x, "a2", desk.PriorityNormal, desk.QueueUserMessage)
	if cand, _ := s.SurfacesWithQueuedWork(ctx, 10); len(cand) != 1 || cand[0] != y.SurfaceID {
		t.Fatalf("candidates while %s runs: %v, want only %s", x.SurfaceID, cand, y.SurfaceID)
	}
	later := desk.Now().Add(time.Hour)
	must(t, s.ExtendLeases(ctx, "own_1", later))
	if got, _ := s.GetQueueItem(ctx, a.ID); got.LeaseExpiresAt == nil || !got.LeaseExpiresAt.Equal(later) {
		t.Fatalf("lease after renewal: %v, want %v", got.LeaseExpiresAt, later)
	}
	must(t, s.ExtendLeases(ctx, "own_other", desk.Now()))
	if got, _ := s.GetQueueItem(ctx, a.ID); !got.LeaseExpiresAt.Equal(later) {
		t.Fatal("another owner's renewal moved the lease")
	}

	if act, err := s.ListActiveExecutions(ctx); err != nil || len(act) != 1 || act[0].ID != exe.ID {
		t.Fatalf("active executions: %+v %v", act, err)
	}
	se, err := s.SetStopError(ctx, exe.ID, "the executor did not stop")
	if err != nil || se.StopError != "the executor did not stop" {
		t.Fatalf("stop error: %+v %v", se, err)
	}
	stopUntil := desk.Now().Add(time.Minute)
	_, blk, err := s.RequestStop(ctx, exe.ID, desk.Interruption{By: "admin", At: desk.Now(), Reason: "user"}, &stopUntil)
	if err != nil || blk == nil {
		t.Fatalf("stop: %+v %v", blk, err)
	}
	if got, err := s.GetBlock(ctx, blk.ID, desk.Now()); err != nil || got.Kind != desk.BlockUserCooldown || !got.Active {
		t.Fatalf("block: %+v %v", got, err)
	}
	if got, _ := s.GetBlock(ctx, blk.ID, stopUntil.Add(time.Second)); got.Active {
		t.Fatal("a cooldown block is active after it expired")
	}
	_, err = s.GetBlock(ctx, "blk_nope", desk.Now())
	wantCode(t, err, desk.ENOTFOUND)
	if _, _, err := s.Settle(ctx, desk.SettleRequest{ExecutionID: exe.ID, Owner: "own_1", Phase: desk.PhaseInterrupted, Reason: "user",
		ItemStatus: desk.QueueStatusDelivered, Now: desk.Now()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.SetStopError(ctx, exe.ID, "late"); got.StopError != "the executor did not stop" {
		t.Fatalf("a settled execution's stop error changed to %q", got.StopError)
	}
	if act, _ := s.ListActiveExecutions(ctx); len(act) != 0 {
		t.Fatalf("active executions after the settle: %d", len(act))
	}
	if xs, err := s.ListExecutions(ctx, x.ID, 10); err != nil || len(xs) != 1 || xs[0].ID != exe.ID || xs[0].Phase != desk.PhaseInterrupted {
		t.Fatalf("executions: %+v %v", xs, err)
	}
	if xs, _ := s.ListExecutions(ctx, y.ID, 10); len(xs) != 0 {
		t.Fatalf("executions of an idle session: %d", len(xs))
	}

	// Appended events take the next seqs; prune drops the old ones only.
	_, max, err := s.EventBounds(ctx)
	must(t, err)
	old := desk.Now().Add(-48 * time.Hour)
	es := []*desk.Event{
		{At: old, Type: "execution.output", WorkspaceID: w.ID, SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe.ID, Data: json.RawMessage(`{"n":1}`)},
		{At: desk.Now(), Type: "execution.output", WorkspaceID: w.ID, SessionID: x.ID, SurfaceID: x.SurfaceID, ExecutionID: exe.ID, Data: json.RawMessage(`{"n":2}`)},
	}
	must(t, s.AppendEvents(ctx, es))
	if es[0].Seq != max+1 || es[1].Seq != max+2 {
		t.Fatalf("appended seqs %d %d after %d", es[0].Seq, es[1].Seq, max)
	}
	got, err := s.ListEvents(ctx, desk.EventFilter{SessionID: x.ID, Limit: 1000})
	must(t, err)
	if last := got[len(got)-1]; last.Seq != es[1].Seq || string(last.Data) != `{"n":2}` || last.ActorID != owner.ID {
		t.Fatalf("last event: %+v", last)
	}
	n, err := s.PruneEvents(ctx, desk.Now().Add(-24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("pruned %d %v, want the one old event", n, err)
	}
	after, _ := s.ListEvents(ctx, desk.EventFilter{SessionID: x.ID, Limit: 1000})
	if len(after) != len(got)-1 {
		t.Fatalf("%d events after pruning one of %d", len(after), len(got))
	}
	for _, e := range after {
		if e.Seq == es[0].Seq {
			t.Fatal("the old event survived the prune")
		}
	}
}
