package app_test

// The PawWork acceptance suite (seed 000_…, §7 "Acceptance invariants S-A …
// S-R" and §9 "NOT DONE IF"), driven through the HTTP API against the real
// agent with script sessions: every model answer is a scripted step, so what
// these tests assert is what the runtime did with it — the records it kept,
// the files it wrote or refused, what it collected and what it never sent to
// a model.
//
// The foundation tests (foundation_test.go, execution_test.go) already hold
// TestS_F_… TestS_L_, TestS_P_ and TestS_H_ names for the same invariants
// seen through the artifact and execution APIs; the tests here carry
// different suffixes and check the invariants with the agent doing the work.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/agent"
	"github.com/desk-runtime/desk/agent/tools"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/layout"
	"github.com/desk-runtime/desk/sandbox"
	"github.com/desk-runtime/desk/store/sqlstore"
)

// paw is a desk with one workspace whose sessions run scripts.
type paw struct {
	*apptest.Env
	t  *testing.T
	ws desk.Workspace
}

func newPaw(t *testing.T, cfg app.Config) *paw {
	t.Helper()
	if cfg.Execution.StopTimeout == 0 {
		cfg.Execution.StopTimeout = 10 * time.Second
	}
	p := &paw{Env: apptest.Start(t, cfg), t: t}
	p.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "pawwork"}, &p.ws)
	p.approvalMode(desk.ApprovalModeUser)
	return p
}

// pawSandbox skips a test whose commands need the bubblewrap sandbox on a
// machine that has none (CI installs it; desk never runs an agent's command
// outside it except in a full-access workspace).
func pawSandbox(t *testing.T) {
	t.Helper()
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no working command sandbox here: %v", err)
	}
}

// pawWait polls cond until it holds, failing after a deadline generous
// enough for a loaded two-CPU machine.
func pawWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 30*time.Second, cond, what)
}

// pawStep is one scripted model answer.
type pawStep = map[string]any

func pawSay(text string) pawStep { return pawStep{"text": text} }

// pawUse is a step that calls one tool.
func pawUse(name string, args map[string]any) pawStep {
	return pawStep{"tool_calls": []any{map[string]any{"name": name, "arguments": args}}}
}

// pawAll is a step whose tool calls run side by side.
func pawAll(calls ...pawStep) pawStep {
	var cs []any
	for _, c := range calls {
		cs = append(cs, c["tool_calls"].([]any)...)
	}
	return pawStep{"tool_calls": cs}
}

func (p *paw) approvalMode(mode string) {
	p.t.Helper()
	p.Must(200, "PATCH", "/v1/workspaces/"+p.ws.ID+"/agent", map[string]any{"approval_mode": mode}, nil)
}

// session creates a script session of the owner.
func (p *paw) session(steps ...pawStep) desk.Session {
	p.t.Helper()
	var x desk.Session
	p.Must(201, "POST", "/v1/workspaces/"+p.ws.ID+"/sessions", map[string]any{"model": "script", "script": map[string]any{"steps": steps}}, &x)
	return x
}

// start submits a message and returns the id of the execution that runs it,
// once one has claimed it.
func (p *paw) start(x desk.Session, text string) string {
	p.t.Helper()
	var res desk.SubmitResult
	p.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": text}, &res)
	id := res.ExecutionID
	pawWait(p.t, "the message to be claimed", func() bool {
		if id != "" {
			return true
		}
		var q struct{ Items []desk.QueueItem }
		p.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue?all=true", nil, &q)
		for _, it := range q.Items {
			if it.ID == res.Item.ID {
				id = it.ExecutionID
			}
		}
		return id != ""
	})
	return id
}

func (p *paw) execution(id string) desk.Execution {
	p.t.Helper()
	var x desk.Execution
	p.Must(200, "GET", "/v1/executions/"+id, nil, &x)
	return x
}

// settle waits until the execution is over and returns it.
func (p *paw) settle(id string) desk.Execution {
	p.t.Helper()
	var x desk.Execution
	pawWait(p.t, "execution "+id+" to settle", func() bool { x = p.execution(id); return !desk.PhaseActive(x.Phase) })
	return x
}

// send runs one message to its end and fails the test unless it ended well.
func (p *paw) send(x desk.Session, text string) desk.Execution {
	p.t.Helper()
	e := p.settle(p.start(x, text))
	if e.Phase != desk.PhaseEnded || e.Outcome != desk.OutcomeCompleted {
		p.t.Fatalf("execution %s = %s/%s (%s); want ended/completed", e.ID, e.Phase, e.Outcome, e.Reason)
	}
	return e
}

// runScript creates a script session and runs one message through it.
func (p *paw) runScript(message string, steps ...pawStep) (desk.Session, desk.Execution) {
	p.t.Helper()
	x := p.session(steps...)
	return x, p.send(x, message)
}

// transcript is the session's transcript (tool calls folded in).
func (p *paw) transcript(x desk.Session) []*desk.Message {
	p.t.Helper()
	var out struct{ Messages []*desk.Message }
	p.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages?limit=500", nil, &out)
	return out.Messages
}

// commands are the command records of an execution ("" for all), in call
// order.
func (p *paw) commands(x desk.Session, exe string) []*desk.Command {
	p.t.Helper()
	var out []*desk.Command
	for _, m := range p.transcript(x) {
		for _, c := range m.Commands {
			if exe == "" || c.ExecutionID == exe {
				out = append(out, c)
			}
		}
	}
	return out
}

// result is the JSON result a command's tool call handed the model (the
// tool message of the transcript, which the API folds away).
func (p *paw) result(x desk.Session, c *desk.Command) map[string]any {
	p.t.Helper()
	ms, err := p.App.Store.ListMessages(context.Background(), x.SurfaceID, 0, 0)
	if err != nil {
		p.t.Fatal(err)
	}
	for _, m := range ms {
		if m.Role == desk.RoleTool && m.ExecutionID == c.ExecutionID && m.ToolCallID == c.CallID {
			var v map[string]any
			if err := json.Unmarshal([]byte(m.Text), &v); err != nil {
				p.t.Fatalf("tool result of %s is not JSON: %q", c.Tool, m.Text)
			}
			return v
		}
	}
	p.t.Fatalf("no tool result for command %s (%s)", c.ID, c.Tool)
	return nil
}

// pawCode is the code of a failed tool result, or "".
func pawCode(v map[string]any) string {
	e, _ := v["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (p *paw) artifacts(x desk.Session) []desk.Artifact {
	p.t.Helper()
	var out struct{ Artifacts []desk.Artifact }
	p.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts", nil, &out)
	return out.Artifacts
}

func (p *paw) artifactBytes(x desk.Session, id string) []byte {
	p.t.Helper()
	return p.Must(200, "GET", "/v1/sessions/"+x.ID+"/artifacts/"+id+"/content", nil, nil).Body
}

// guestList lists a guest directory of a session as its executions see it.
func (p *paw) guestList(x desk.Session, dir string) []desk.GuestEntry {
	p.t.Helper()
	var g struct{ Entries []desk.GuestEntry }
	p.Must(200, "GET", "/v1/sessions/"+x.ID+"/guest/list?path="+dir, nil, &g)
	return g.Entries
}

// contextOf is GET /v1/sessions/{ses}/context, decoded and raw.
func (p *paw) contextOf(x desk.Session) (agent.ContextView, []byte) {
	p.t.Helper()
	var v agent.ContextView
	r := p.Must(200, "GET", "/v1/sessions/"+x.ID+"/context", nil, &v)
	return v, r.Body
}

// group creates a selection group with one text item per body.
func (p *paw) group(name string, bodies ...string) (desk.Group, []desk.Item) {
	p.t.Helper()
	var g desk.Group
	p.Must(201, "POST", "/v1/workspaces/"+p.ws.ID+"/groups", map[string]string{"name": name}, &g)
	var items []desk.Item
	for _, b := range bodies {
		items = append(items, p.addItem(g, b))
	}
	return g, items
}

func (p *paw) addItem(g desk.Group, body string) desk.Item {
	p.t.Helper()
	var it desk.Item
	p.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"text": body}, &it)
	return it
}

func (p *paw) bind(x desk.Session, groups ...desk.Group) {
	p.t.Helper()
	ids := []string{}
	for _, g := range groups {
		ids = append(ids, g.ID)
	}
	p.Must(200, "PUT", "/v1/sessions/"+x.ID+"/bindings", map[string]any{"group_ids": ids}, nil)
}

// pendingApproval waits for the session's gated call to ask for approval.
func (p *paw) pendingApproval(x desk.Session) desk.Approval {
	p.t.Helper()
	var got desk.Approval
	pawWait(p.t, "an approval request", func() bool {
		var out struct{ Approvals []desk.Approval }
		p.Must(200, "GET", "/v1/sessions/"+x.ID+"/approvals?pending=true", nil, &out)
		if len(out.Approvals) == 0 {
			return false
		}
		got = out.Approvals[0]
		return true
	})
	return got
}

func (p *paw) decide(a desk.Approval, decision string) {
	p.t.Helper()
	p.Must(200, "POST", "/v1/approvals/"+a.ID, map[string]string{"decision": decision}, nil)
}

// Host locations behind the guest file system.
func (p *paw) artifactDir(x desk.Session) string {
	return p.App.Home.Abs(x.WorkspaceID, layout.SessionRel(x.Actor, x.ID))
}
func (p *paw) scratchDir(exe string) string { return p.App.Home.Abs(p.ws.ID, layout.ScratchRel(exe)) }
func (p *paw) itemFile(id string) string    { return p.App.Home.Abs(p.ws.ID, layout.ItemRel(id)) }

func pawExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// itemAlive reports whether an item's row and bytes are both there.
func (p *paw) itemAlive(id string) (row, file bool) {
	_, err := p.App.Store.GetItem(context.Background(), id)
	if err != nil && !desk.IsCode(err, desk.ENOTFOUND) {
		p.t.Fatal(err)
	}
	return err == nil, pawExists(p.itemFile(id))
}

// pawItemIDs are the ids of an inspect "group" result.
func pawItemIDs(v map[string]any) []string {
	var ids []string
	items, _ := v["items"].([]any)
	for _, it := range items {
		ids = append(ids, it.(map[string]any)["id"].(string))
	}
	slices.Sort(ids)
	return ids
}

func pawSortedIDs(items ...desk.Item) []string {
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	slices.Sort(ids)
	return ids
}

// --- S-A … S-R -----------------------------------------------------------

// TestS_A_DirectQuestionTextOnly: a direct question is answered with text
// only — no tool call, no command record, no artifact, nothing on disk.
func TestS_A_DirectQuestionTextOnly(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x, e := p.runScript("What is the capital of France?", pawSay("Paris."))

	ms := p.transcript(x)
	if len(ms) != 2 || ms[0].Role != desk.RoleUser || ms[1].Role != desk.RoleAssistant || ms[1].Text != "Paris." || len(ms[1].ToolCalls) != 0 {
		t.Fatalf("transcript = %+v", ms)
	}
	if cs := p.commands(x, ""); len(cs) != 0 {
		t.Fatalf("a direct question made %d command records: %+v", len(cs), cs[0])
	}
	if as := p.artifacts(x); len(as) != 0 {
		t.Fatalf("a direct question made artifacts: %+v", as)
	}
	for _, ev := range e.Events {
		if strings.HasPrefix(ev.Type, "tool.") {
			t.Fatalf("a direct question emitted %s", ev.Type)
		}
	}
	if ents := p.guestList(x, "/artifacts"); len(ents) != 0 {
		t.Fatalf("/artifacts after a direct question: %+v", ents)
	}
}

// TestS_B_UnrelatedQuestionNoInspect: with a 20-item group bound, an
// unrelated question makes no inspect and leases nothing, and the context
// the model gets names the group only as {id, name, item_count}.
func TestS_B_UnrelatedQuestionNoInspect(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	var bodies []string
	for i := range 20 {
		bodies = append(bodies, fmt.Sprintf("captured paragraph %02d about zebra-%02d migrations", i, i))
	}
	g, items := p.group("research", bodies...)
	x := p.session(pawSay("2 + 2 = 4."))
	p.bind(x, g)
	e := p.send(x, "What is 2 + 2?")

	if cs := p.commands(x, ""); len(cs) != 0 {
		t.Fatalf("an unrelated question ran tools: %+v", cs[0])
	}
	for _, it := range items {
		if held, err := p.App.Store.HasLease(t.Context(), it.ID, e.ID); err != nil || held {
			t.Fatalf("item %s leased by an execution that never inspected: %v %v", it.ID, held, err)
		}
	}
	v, raw := p.contextOf(x)
	want := []agent.WorldGroup{{ID: g.ID, Name: "research", ItemCount: 20}}
	if !reflect.DeepEqual(v.World.Groups, want) {
		t.Fatalf("world groups = %+v; want %+v", v.World.Groups, want)
	}
	// Exactly the three fields, in the block the model reads as well.
	var generic struct {
		World struct{ Groups []map[string]any }
	}
	json.Unmarshal(raw, &generic)
	for k := range generic.World.Groups[0] {
		if k != "id" && k != "name" && k != "item_count" {
			t.Fatalf("world group carries %q", k)
		}
	}
	if !strings.Contains(v.WorldBlock, `"item_count":20`) {
		t.Fatalf("world block = %s", v.WorldBlock)
	}
	for i, it := range items {
		if bytes.Contains(raw, []byte(bodies[i])) || bytes.Contains(raw, []byte("zebra")) || bytes.Contains(raw, []byte(it.ID)) {
			t.Fatalf("the context carries item %d: %s", i, raw)
		}
	}
	// The world block is attached per request, never stored.
	for _, m := range p.transcript(x) {
		if strings.Contains(m.Text, "<world>") {
			t.Fatalf("world block stored in the transcript: %q", m.Text)
		}
	}
}

// TestS_C_SelectedContextInspectAndAnswer: a question about the selection
// inspects it, reads an item and answers in text; no artifact is made.
func TestS_C_SelectedContextInspectAndAnswer(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, items := p.group("trip", "Flight LH400 leaves at 10:05", "Hotel check-in from 15:00", "Museum closed on Mondays")
	x := p.session(
		pawUse("inspect", map[string]any{"view": "groups"}),
		pawUse("inspect", map[string]any{"view": "group", "group_id": g.ID}),
		pawUse("inspect", map[string]any{"view": "item", "item_id": items[0].ID}),
		pawSay("Your flight leaves at 10:05."),
	)
	p.bind(x, g)
	p.send(x, "When does my flight leave?")

	cs := p.commands(x, "")
	if len(cs) != 3 {
		t.Fatalf("%d commands; want 3 inspects", len(cs))
	}
	for _, c := range cs {
		if c.Tool != "inspect" || c.Status != desk.CommandSucceeded {
			t.Fatalf("command %+v", c)
		}
	}
	if got := pawItemIDs(p.result(x, cs[1])); !reflect.DeepEqual(got, pawSortedIDs(items...)) {
		t.Fatalf("inspect group = %v", got)
	}
	if r := p.result(x, cs[2]); r["text"] != "Flight LH400 leaves at 10:05" || cs[2].Output != "Flight LH400 leaves at 10:05" {
		t.Fatalf("inspect item = %v (output %q)", r, cs[2].Output)
	}
	if as := p.artifacts(x); len(as) != 0 {
		t.Fatalf("answering from the selection made artifacts: %+v", as)
	}
	ms := p.transcript(x)
	if last := ms[len(ms)-1]; last.Text != "Your flight leaves at 10:05." {
		t.Fatalf("answer = %q", last.Text)
	}
}

// TestS_D_ArtifactRequestMakesOneArtifact: write_file to /artifacts makes
// exactly one artifact whose origin the server stamped with the execution
// and the command that wrote it.
func TestS_D_ArtifactRequestMakesOneArtifact(t *testing.T) {
	apptest.Parallel(t)
	pawSandbox(t)
	p := newPaw(t, app.Config{})
	report := "# Report\n\n| q | revenue |\n|---|---|\n| Q1 | 10 |\n"
	x, e := p.runScript("Write me a revenue report",
		pawUse("write_file", map[string]any{"path": "/artifacts/report.md", "content": report}),
		pawSay("Saved /artifacts/report.md."))

	as := p.artifacts(x)
	if len(as) != 1 {
		t.Fatalf("%d artifacts; want exactly 1: %+v", len(as), as)
	}
	a := as[0]
	cs := p.commands(x, e.ID)
	if len(cs) != 1 || cs[0].Tool != "write_file" || cs[0].Status != desk.CommandSucceeded || !slices.Equal(cs[0].Artifacts, []string{a.ID}) {
		t.Fatalf("command = %+v", cs)
	}
	want := desk.Origin{WorkspaceID: p.ws.ID, SessionID: x.ID, ExecutionID: e.ID, SurfaceID: x.SurfaceID, CommandID: cs[0].ID,
		Actor: x.Actor, Kind: desk.OriginAgent}
	if a.Origin != want {
		t.Fatalf("origin = %+v; want %+v", a.Origin, want)
	}
	if a.Path != "/artifacts/report.md" || a.Kind != "markdown" || a.Revision != 1 || a.SHA256 != sha([]byte(report)) {
		t.Fatalf("artifact = %+v", a)
	}
	if got := p.artifactBytes(x, a.ID); string(got) != report {
		t.Fatalf("content = %q", got)
	}
	if r := p.result(x, cs[0]); r["artifact_id"] != a.ID || r["created"] != true {
		t.Fatalf("tool result = %v", r)
	}

	// "run + durable artifact": a file a command leaves in /artifacts is
	// one artifact too, stamped with the execution and command that ran.
	p.approvalMode(desk.ApprovalModeAutoReview)
	y, ey := p.runScript("Compute a table",
		pawUse("exec_command", map[string]any{"command": "printf 'n,sq\\n2,4\\n3,9\\n' > /artifacts/squares.csv"}),
		pawSay("Saved /artifacts/squares.csv."))
	as = p.artifacts(y)
	cs = p.commands(y, ey.ID)
	if len(as) != 1 || len(cs) != 1 || cs[0].Status != desk.CommandSucceeded || !slices.Equal(cs[0].Artifacts, []string{as[0].ID}) {
		t.Fatalf("command artifact: %+v; commands %+v", as, cs)
	}
	want = desk.Origin{WorkspaceID: p.ws.ID, SessionID: y.ID, ExecutionID: ey.ID, SurfaceID: y.SurfaceID, CommandID: cs[0].ID,
		Actor: y.Actor, Kind: desk.OriginAgent}
	if as[0].Origin != want || as[0].Kind != "csv" || string(p.artifactBytes(y, as[0].ID)) != "n,sq\n2,4\n3,9\n" {
		t.Fatalf("command artifact = %+v; want origin %+v", as[0], want)
	}
}

// TestS_E_LaterTurnModifiesArtifact: later turns change the artifact in
// place — same id, next revision — with write_file and with edit_file.
func TestS_E_LaterTurnModifiesArtifact(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x := p.session(
		pawUse("write_file", map[string]any{"path": "/artifacts/plan.md", "content": "# Plan\n- step one\n"}),
		pawSay("Created."),
		pawUse("edit_file", map[string]any{"path": "/artifacts/plan.md", "old_text": "- step one\n", "new_text": "- step one\n- step two\n"}),
		pawSay("Added step two."),
		pawUse("write_file", map[string]any{"path": "/artifacts/plan.md", "content": "# Plan v3\n"}),
		pawSay("Rewritten."),
	)
	p.send(x, "Make a plan")
	first := p.artifacts(x)
	if len(first) != 1 {
		t.Fatalf("artifacts = %+v", first)
	}
	e2 := p.send(x, "Add a second step")
	second := p.artifacts(x)
	if len(second) != 1 || second[0].ID != first[0].ID || second[0].Revision != 2 {
		t.Fatalf("after edit: %+v (was %+v)", second, first)
	}
	if got := string(p.artifactBytes(x, first[0].ID)); got != "# Plan\n- step one\n- step two\n" {
		t.Fatalf("content after edit = %q", got)
	}
	if cs := p.commands(x, e2.ID); len(cs) != 1 || !slices.Equal(cs[0].Artifacts, []string{first[0].ID}) || p.result(x, cs[0])["created"] != false {
		t.Fatalf("edit command = %+v", cs)
	}
	p.send(x, "Rewrite it")
	third := p.artifacts(x)
	if len(third) != 1 || third[0].ID != first[0].ID || third[0].Revision != 3 || string(p.artifactBytes(x, first[0].ID)) != "# Plan v3\n" {
		t.Fatalf("after rewrite: %+v", third)
	}
}

// TestS_F_AgentSeesEmptyIsolatedGuestFS: a new session's agent finds an
// empty /artifacts and /scratch, whatever an older session of the same
// actor in the same workspace holds.
func TestS_F_AgentSeesEmptyIsolatedGuestFS(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	p.runScript("make notes",
		pawAll(pawUse("write_file", map[string]any{"path": "/artifacts/notes.md", "content": "old session"}),
			pawUse("write_file", map[string]any{"path": "/scratch/tmp.txt", "content": "old scratch"})),
		pawSay("done"))

	fresh, _ := p.runScript("what do I have?",
		pawAll(pawUse("list_files", map[string]any{"path": "/artifacts"}),
			pawUse("list_files", map[string]any{"path": "/scratch"}),
			pawUse("inspect", map[string]any{"view": "artifacts"}),
			pawUse("read_file", map[string]any{"path": "/artifacts/notes.md"})),
		pawSay("Nothing yet."))
	cs := p.commands(fresh, "")
	if len(cs) != 4 {
		t.Fatalf("commands = %+v", cs)
	}
	for _, c := range cs[:2] {
		if r := p.result(fresh, c); len(r["entries"].([]any)) != 0 {
			t.Fatalf("%s in a new session = %v", c.Arguments, r)
		}
	}
	if r := p.result(fresh, cs[2]); r["total"] != float64(0) {
		t.Fatalf("inspect artifacts in a new session = %v", r)
	}
	if r := p.result(fresh, cs[3]); pawCode(r) != tools.CodeNotFound {
		t.Fatalf("reading the older session's file by its name = %v", r)
	}
	if as := p.artifacts(fresh); len(as) != 0 {
		t.Fatalf("new session has artifacts: %+v", as)
	}
}

// TestS_G_AgentCannotReadOtherSession: no tool leads from one session into
// another's artifacts: not a guessed path, not a ../ escape, not a host
// path, not a command, not a symlink the agent plants.
func TestS_G_AgentCannotReadOtherSession(t *testing.T) {
	apptest.Parallel(t)
	pawSandbox(t)
	p := newPaw(t, app.Config{})
	const secret = "A-SECRET-4242"
	a, _ := p.runScript("keep this", pawUse("write_file", map[string]any{"path": "/artifacts/secret.md", "content": secret}), pawSay("kept"))
	host := filepath.Join(p.artifactDir(a), "secret.md")
	if b, err := os.ReadFile(host); err != nil || string(b) != secret {
		t.Fatalf("A's artifact on disk: %q %v", b, err)
	}
	p.approvalMode(desk.ApprovalModeAutoReview) // commands run, sandboxed
	reads := []string{
		"/artifacts/../" + a.ID + "/secret.md",
		"/artifacts/../../sessions/" + a.ID + "/secret.md",
		"/workspace/../workspace/" + a.Actor + "/sessions/" + a.ID + "/secret.md",
		host,
		"/" + a.ID + "/secret.md",
	}
	var readCalls []pawStep
	for _, r := range reads {
		readCalls = append(readCalls, pawUse("read_file", map[string]any{"path": r}))
	}
	b, _ := p.runScript("peek",
		pawAll(readCalls...),
		pawAll(pawUse("exec_command", map[string]any{"command": "cat " + host}),
			pawUse("exec_command", map[string]any{"command": "cat /artifacts/../" + a.ID + "/secret.md"}),
			pawUse("exec_command", map[string]any{"command": "find / -path /usr -prune -o -path /proc -prune -o -path /sys -prune -o \\( -name secret.md -o -name scratch \\) -print 2>/dev/null"})),
		pawUse("exec_command", map[string]any{"command": "ln -s " + host + " /artifacts/link.md"}),
		pawAll(pawUse("read_file", map[string]any{"path": "/artifacts/link.md"}),
			pawUse("exec_command", map[string]any{"command": "cat /artifacts/link.md"})),
		pawSay("I cannot see it."))

	cs := p.commands(b, "")
	if len(cs) != len(reads)+6 {
		t.Fatalf("%d commands", len(cs))
	}
	for _, c := range cs {
		r := p.result(b, c)
		raw, _ := json.Marshal(r)
		if strings.Contains(c.Output, secret) || bytes.Contains(raw, []byte(secret)) {
			t.Fatalf("%s %s leaked A's artifact: %s", c.Tool, c.Arguments, raw)
		}
		switch {
		case c.Tool == "read_file":
			if code := pawCode(r); code != tools.CodeDenied && code != tools.CodeNotFound {
				t.Errorf("read_file %s = %v; want FS_DENIED or ENOENT", c.Arguments, r)
			}
		case strings.Contains(string(c.Arguments), "ln -s"):
			if r["exit_code"] != float64(0) {
				t.Fatalf("planting a link failed: %v", r) // the link itself is allowed; following it is not
			}
		case strings.Contains(string(c.Arguments), "find /"):
			// The whole sandbox tree holds no secret.md: A's directory is not
			// there (and the search did run: it finds the guest's /scratch).
			if strings.TrimSpace(r["stdout"].(string)) != "/scratch" {
				t.Errorf("the sandbox shows a secret.md: %v", r)
			}
		default:
			if r["exit_code"] == float64(0) || pawCode(r) != "" {
				t.Errorf("%s = %v; want a failing command", c.Arguments, r)
			}
		}
	}
	for _, x := range p.artifacts(b) {
		if x.SHA256 == sha([]byte(secret)) {
			t.Fatalf("B holds a copy of A's secret: %+v", x)
		}
	}
}

// TestS_H_AgentScratchGoneAfterSettle: what the agent puts in /scratch is
// there while the execution runs and gone once it settles — ended,
// interrupted or failed.
func TestS_H_AgentScratchGoneAfterSettle(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x := p.session(
		pawUse("write_file", map[string]any{"path": "/scratch/work.txt", "content": "temporary"}),
		pawUse("exec_command", map[string]any{"command": "ls /scratch"}), // waits for approval
		pawSay("done"),
		pawUse("write_file", map[string]any{"path": "/scratch/slow.txt", "content": "temporary"}),
		pawStep{"text": "thinking for a long time", "delay_ms": 60000},
		pawUse("write_file", map[string]any{"path": "/scratch/fail.txt", "content": "temporary"}),
		// The script ends here: the next model call fails the execution.
	)
	check := func(exe, file string) {
		t.Helper()
		pawWait(t, "scratch file "+file, func() bool { return pawExists(filepath.Join(p.scratchDir(exe), file)) })
	}
	// Ended.
	id := p.start(x, "work")
	check(id, "work.txt")
	ap := p.pendingApproval(x)
	if b, err := os.ReadFile(filepath.Join(p.scratchDir(id), "work.txt")); err != nil || string(b) != "temporary" {
		t.Fatalf("scratch during the execution: %q %v", b, err)
	}
	p.decide(ap, "deny")
	if e := p.settle(id); e.Phase != desk.PhaseEnded {
		t.Fatalf("phase = %s", e.Phase)
	}
	if pawExists(p.scratchDir(id)) {
		t.Fatal("scratch survives an ended execution")
	}
	// Interrupted.
	id = p.start(x, "slow")
	check(id, "slow.txt")
	p.waitCursor(x, 5) // the slow step is streaming
	p.Must(200, "POST", "/v1/sessions/"+x.ID+"/executions/"+id+"/interrupt", nil, nil)
	if e := p.settle(id); e.Phase != desk.PhaseInterrupted {
		t.Fatalf("phase = %s", e.Phase)
	}
	if pawExists(p.scratchDir(id)) {
		t.Fatal("scratch survives an interrupted execution")
	}
	// Failed (the script is exhausted after the write).
	id = p.start(x, "fail")
	if e := p.settle(id); e.Phase != desk.PhaseFailed {
		t.Fatalf("phase = %s (%s)", e.Phase, e.Reason)
	}
	if cs := p.commands(x, id); len(cs) != 1 || cs[0].Status != desk.CommandSucceeded {
		t.Fatalf("the failing turn's write: %+v", cs)
	}
	if pawExists(p.scratchDir(id)) {
		t.Fatal("scratch survives a failed execution")
	}
	if as := p.artifacts(x); len(as) != 0 {
		t.Fatalf("scratch writes became artifacts: %+v", as)
	}
}

// TestS_I_AgentArtifactSurvivesSettle: the artifact the agent wrote is on
// disk and in the store after the execution settled, and the next turn
// reads it back.
func TestS_I_AgentArtifactSurvivesSettle(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	const body = "# Findings\nkept across turns\n"
	x := p.session(
		pawUse("write_file", map[string]any{"path": "/artifacts/findings.md", "content": body}),
		pawSay("saved"),
		pawUse("read_file", map[string]any{"path": "/artifacts/findings.md"}),
		pawSay("read it"),
	)
	e := p.send(x, "save findings")
	if pawExists(p.scratchDir(e.ID)) {
		t.Fatal("scratch survived the settle")
	}
	as := p.artifacts(x)
	if len(as) != 1 || as[0].SHA256 != sha([]byte(body)) {
		t.Fatalf("artifacts after settle: %+v", as)
	}
	if b, err := os.ReadFile(filepath.Join(p.artifactDir(x), "findings.md")); err != nil || string(b) != body {
		t.Fatalf("on disk: %q %v", b, err)
	}
	e2 := p.send(x, "read findings")
	if cs := p.commands(x, e2.ID); len(cs) != 1 || cs[0].Output != body {
		t.Fatalf("reading it back: %+v", cs)
	}
}

// TestS_J_AgentArtifactSurvivesRestart: after a desk restart the agent's
// artifact is the same row and bytes, and the session's next turn (its
// script cursor kept) reads it.
func TestS_J_AgentArtifactSurvivesRestart(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	body := "a,b\n1,2\n"
	x := p.session(
		pawUse("write_file", map[string]any{"path": "/artifacts/data.csv", "content": body}),
		pawSay("saved"),
		pawUse("read_file", map[string]any{"path": "/artifacts/data.csv"}),
		pawSay("still here"),
	)
	p.send(x, "save data")
	before := p.artifacts(x)

	p.Restart()

	after := p.artifacts(x)
	if !reflect.DeepEqual(before, after) || len(after) != 1 {
		t.Fatalf("artifacts changed across restart:\n%+v\n%+v", before, after)
	}
	if got := p.artifactBytes(x, after[0].ID); string(got) != body {
		t.Fatalf("content after restart = %q", got)
	}
	e := p.send(x, "read data")
	if cs := p.commands(x, e.ID); len(cs) != 1 || cs[0].Output != body {
		t.Fatalf("read after restart: %+v", cs)
	}
}

// TestS_K_DeleteSessionDeletesAgentArtifacts: deleting a session deletes
// the artifacts its agent made — rows and files — and nothing of a sibling.
func TestS_K_DeleteSessionDeletesAgentArtifacts(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x, _ := p.runScript("make two",
		pawAll(pawUse("write_file", map[string]any{"path": "/artifacts/one.md", "content": "one"}),
			pawUse("write_file", map[string]any{"path": "/artifacts/sub/two.csv", "content": "a\n1\n"})),
		pawSay("made"))
	sib, _ := p.runScript("make one", pawUse("write_file", map[string]any{"path": "/artifacts/one.md", "content": "sibling"}), pawSay("made"))
	made := p.artifacts(x)
	if len(made) != 2 {
		t.Fatalf("artifacts = %+v", made)
	}
	dir := p.artifactDir(x)

	p.Must(204, "DELETE", "/v1/sessions/"+x.ID, nil, nil)

	for _, a := range made {
		if _, err := p.App.Store.GetArtifact(t.Context(), a.ID); !desk.IsCode(err, desk.ENOTFOUND) {
			t.Fatalf("artifact row %s after session delete: %v", a.ID, err)
		}
	}
	if n, _ := p.App.Store.CountArtifacts(t.Context(), x.ID); n != 0 {
		t.Fatalf("%d artifact rows survive", n)
	}
	if pawExists(dir) {
		t.Fatalf("artifact directory %s survives", dir)
	}
	if as := p.artifacts(sib); len(as) != 1 || string(p.artifactBytes(sib, as[0].ID)) != "sibling" {
		t.Fatalf("sibling's artifacts = %+v", as)
	}
}

// TestS_L_DeleteSessionKeepsInspectedGroup: a group the deleted session
// bound and inspected stays, with its items, for the sessions still
// binding it.
func TestS_L_DeleteSessionKeepsInspectedGroup(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, items := p.group("shared", "first capture", "second capture")
	inspect := pawUse("inspect", map[string]any{"view": "group", "group_id": g.ID})
	x := p.session(inspect, pawSay("seen"))
	y := p.session(inspect, pawSay("seen too"))
	p.bind(x, g)
	p.bind(y, g)
	p.send(x, "look")

	p.Must(204, "DELETE", "/v1/sessions/"+x.ID, nil, nil)

	var got struct {
		desk.Group
		Items []desk.Item
	}
	p.Must(200, "GET", "/v1/groups/"+g.ID, nil, &got)
	if got.ItemCount != 2 || !reflect.DeepEqual(pawSortedIDs(got.Items...), pawSortedIDs(items...)) {
		t.Fatalf("group after session delete: %+v", got)
	}
	for _, it := range items {
		if row, file := p.itemAlive(it.ID); !row || !file {
			t.Fatalf("item %s after session delete: row %v file %v", it.ID, row, file)
		}
	}
	e := p.send(y, "look too")
	if cs := p.commands(y, e.ID); len(cs) != 1 || !reflect.DeepEqual(pawItemIDs(p.result(y, cs[0])), pawSortedIDs(items...)) {
		t.Fatalf("the sibling's inspect after the delete: %+v", cs)
	}
}

// TestS_M_GroupMutationVisibleToNextInspect: items added to and removed
// from a bound group show in the next turn's inspect and world block.
func TestS_M_GroupMutationVisibleToNextInspect(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, items := p.group("live", "alpha", "beta")
	inspect := pawUse("inspect", map[string]any{"view": "group", "group_id": g.ID})
	x := p.session(inspect, pawSay("two"), inspect, pawSay("changed"))
	p.bind(x, g)
	e1 := p.send(x, "look")
	if cs := p.commands(x, e1.ID); !reflect.DeepEqual(pawItemIDs(p.result(x, cs[0])), pawSortedIDs(items...)) {
		t.Fatalf("first inspect = %v", pawItemIDs(p.result(x, cs[0])))
	}

	gamma := p.addItem(g, "gamma")
	p.Must(204, "DELETE", "/v1/groups/"+g.ID+"/items/"+items[0].ID, nil, nil)
	if v, _ := p.contextOf(x); len(v.World.Groups) != 1 || v.World.Groups[0].ItemCount != 2 {
		t.Fatalf("world after the change: %+v", v.World)
	}
	// Nothing held the removed item: it is collected at once.
	if row, file := p.itemAlive(items[0].ID); row || file {
		t.Fatalf("removed item still stored: row %v file %v", row, file)
	}

	e2 := p.send(x, "look again")
	cs := p.commands(x, e2.ID)
	if got, want := pawItemIDs(p.result(x, cs[0])), pawSortedIDs(items[1], gamma); !reflect.DeepEqual(got, want) {
		t.Fatalf("second inspect = %v; want %v", got, want)
	}
}

// pawLeaseScript inspects a group, then waits on an approval (the test holds
// the execution there), then reads the first item again.
func pawLeaseScript(g desk.Group, item desk.Item) []pawStep {
	return []pawStep{
		pawUse("inspect", map[string]any{"view": "group", "group_id": g.ID}),
		pawUse("exec_command", map[string]any{"command": "true"}),
		pawUse("inspect", map[string]any{"view": "item", "item_id": item.ID}),
		pawSay("done"),
	}
}

// TestS_N_LeaseProtectsItemInUse: an item the running execution inspected
// survives its removal from the group — row, bytes, and the agent can still
// read it — until the execution settles.
func TestS_N_LeaseProtectsItemInUse(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, items := p.group("evidence", "the quote we rely on", "another capture")
	x := p.session(pawLeaseScript(g, items[0])...)
	p.bind(x, g)
	id := p.start(x, "use the evidence")
	ap := p.pendingApproval(x) // the inspect is done; the execution waits

	p.Must(204, "DELETE", "/v1/groups/"+g.ID+"/items/"+items[0].ID, nil, nil)
	var got struct{ Items []desk.Item }
	p.Must(200, "GET", "/v1/groups/"+g.ID, nil, &got)
	if len(got.Items) != 1 {
		t.Fatalf("the item is still in the group: %+v", got.Items)
	}
	if row, file := p.itemAlive(items[0].ID); !row || !file {
		t.Fatalf("a leased item was collected while its execution runs: row %v file %v", row, file)
	}
	p.decide(ap, "deny")
	p.settle(id)
	cs := p.commands(x, id)
	if len(cs) != 3 {
		t.Fatalf("commands = %+v", cs)
	}
	if r := p.result(x, cs[2]); r["text"] != "the quote we rely on" {
		t.Fatalf("reading the leased item after its removal = %v", r)
	}
}

// TestS_O_ReleasedItemCollected: once the execution that leased it settles,
// the removed item is unreachable and collected — row and bytes — and a
// later turn cannot read it.
func TestS_O_ReleasedItemCollected(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, items := p.group("evidence", "soon unreachable", "stays")
	x := p.session(append(pawLeaseScript(g, items[0]),
		pawUse("inspect", map[string]any{"view": "item", "item_id": items[0].ID}), pawSay("gone"))...)
	p.bind(x, g)
	id := p.start(x, "use the evidence")
	ap := p.pendingApproval(x)
	p.Must(204, "DELETE", "/v1/groups/"+g.ID+"/items/"+items[0].ID, nil, nil)
	if row, _ := p.itemAlive(items[0].ID); !row {
		t.Fatal("collected while leased")
	}
	p.decide(ap, "deny")
	p.settle(id)

	if row, file := p.itemAlive(items[0].ID); row || file {
		t.Fatalf("released unreachable item not collected: row %v file %v", row, file)
	}
	if row, file := p.itemAlive(items[1].ID); !row || !file {
		t.Fatalf("the item still in the group was collected: row %v file %v", row, file)
	}
	e := p.send(x, "read it again")
	if cs := p.commands(x, e.ID); len(cs) != 1 || pawCode(p.result(x, cs[0])) != tools.CodeNotFound {
		t.Fatalf("reading a collected item: %+v", cs)
	}
}

// TestS_P_AgentArtifactsSurvivePressure: under storage pressure (the
// admin's reclaim at both levels and the workspace GC) and against the
// artifact size limit and the actor's quota, the agent's artifacts stay
// byte for byte; what is reclaimed is only what nothing owns (an
// unreachable item, a settled execution's leftovers), the running
// execution keeps its scratch and its leased item, and a write that does
// not fit is refused instead of making room.
func TestS_P_AgentArtifactsSurvivePressure(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{MaxArtifactBytes: 4096, ActorQuotaBytes: 6000})
	g, items := p.group("bound", "leased capture")
	other, orphans := p.group("other", "nobody holds me")
	x := p.session(
		pawAll(pawUse("write_file", map[string]any{"path": "/artifacts/a.md", "content": "# a\n"}),
			pawUse("write_file", map[string]any{"path": "/artifacts/b.csv", "content": "x,y\n1,2\n"}),
			pawUse("write_file", map[string]any{"path": "/artifacts/c.json", "content": `{"k":1}`})),
		pawSay("three artifacts"),
		pawAll(pawUse("write_file", map[string]any{"path": "/artifacts/huge.md", "content": strings.Repeat("x", 5000)}),
			pawUse("write_file", map[string]any{"path": "/scratch/big.bin", "content": strings.Repeat("s", 8192)}),
			pawUse("inspect", map[string]any{"view": "group", "group_id": g.ID}),
			pawUse("write_file", map[string]any{"path": "/artifacts/fill.md", "content": strings.Repeat("f", 3500)})),
		pawUse("write_file", map[string]any{"path": "/artifacts/more.md", "content": strings.Repeat("m", 3500)}), // over the quota
		pawUse("exec_command", map[string]any{"command": "true"}),                                                // holds the execution
		pawSay("done"),
	)
	p.bind(x, g)
	p.send(x, "make artifacts")
	kept := p.artifacts(x)
	if len(kept) != 3 {
		t.Fatalf("artifacts = %+v", kept)
	}
	// An item nothing references (its removal left in the store only, as a
	// crash would leave it) for pressure to collect.
	if err := p.App.Store.RemoveGroupItem(t.Context(), other.ID, orphans[0].ID); err != nil {
		t.Fatal(err)
	}
	id := p.start(x, "under pressure")
	ap := p.pendingApproval(x)
	p.Must(204, "DELETE", "/v1/groups/"+g.ID+"/items/"+items[0].ID, nil, nil)

	cs := p.commands(x, id)
	if len(cs) != 6 || pawCode(p.result(x, cs[0])) != tools.CodeTooLarge || cs[3].Status != desk.CommandSucceeded {
		t.Fatalf("the oversized write was not refused: %+v", cs)
	}
	if r := p.result(x, cs[4]); pawCode(r) != tools.CodeTooLarge || !strings.Contains(r["error"].(map[string]any)["message"].(string), "quota") {
		t.Fatalf("the write over the quota = %v", r)
	}
	kept = p.artifacts(x) // the three and fill.md
	if len(kept) != 4 || pawExists(filepath.Join(p.artifactDir(x), "more.md")) || pawExists(filepath.Join(p.artifactDir(x), "huge.md")) {
		t.Fatalf("artifacts after the refused writes: %+v", kept)
	}
	scratchFile := filepath.Join(p.scratchDir(id), "big.bin")
	for _, level := range []string{desk.PressureSoft, desk.PressureCritical} {
		var rep desk.ReclaimReport
		p.Must(200, "POST", "/v1/admin/storage-pressure", map[string]string{"level": level}, &rep)
		for _, a := range rep.Actions {
			for _, k := range kept {
				if strings.Contains(a.Target, k.ID) || strings.Contains(a.Target, x.ID) {
					t.Fatalf("%s pressure touched an artifact: %+v", level, a)
				}
			}
			if strings.Contains(a.Target, id) || a.Target == items[0].ID {
				t.Fatalf("%s pressure took what the running execution holds: %+v", level, a)
			}
		}
		if level == desk.PressureSoft {
			found := false
			for _, a := range rep.Actions {
				found = found || (a.Kind == "item" && a.Target == orphans[0].ID)
			}
			if !found {
				t.Fatalf("soft pressure did not collect the unreachable item: %+v", rep)
			}
		}
	}
	var gc desk.GCReport
	p.Must(200, "POST", "/v1/workspaces/"+p.ws.ID+"/gc", nil, &gc)
	for _, a := range gc.Actions {
		if a.ArtifactID != "" || strings.Contains(a.Target, id) {
			t.Fatalf("workspace GC under a running execution: %+v", a)
		}
	}
	if !pawExists(scratchFile) {
		t.Fatal("pressure deleted the running execution's scratch")
	}
	if row, file := p.itemAlive(items[0].ID); !row || !file {
		t.Fatal("pressure collected a leased item")
	}
	p.decide(ap, "deny")
	p.settle(id)

	after := p.artifacts(x)
	if len(after) != len(kept) {
		t.Fatalf("%d artifacts after pressure; want %d", len(after), len(kept))
	}
	for i, a := range kept {
		if after[i].ID != a.ID || after[i].Revision != a.Revision || sha(p.artifactBytes(x, a.ID)) != a.SHA256 {
			t.Fatalf("artifact %s changed under pressure: %+v", a.Path, after[i])
		}
	}
	var rep desk.ReclaimReport
	p.Must(200, "POST", "/v1/admin/storage-pressure", map[string]string{"level": desk.PressureCritical}, &rep)
	if len(p.artifacts(x)) != len(kept) {
		t.Fatal("critical pressure after the settle deleted artifacts")
	}
}

// TestS_Q_ManyArtifactsNotInContext: the context the model gets counts the
// session's artifacts and never lists them: none of 50 names, ids or
// bodies is in it, and with 5,000 it is the same bytes but for the count.
func TestS_Q_ManyArtifactsNotInContext(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{SQLiteSynchronous: "normal"})
	x := p.session(pawSay("You have many artifacts."), pawSay("Still many."))
	var made []desk.Artifact
	for i := range 50 {
		made = append(made, p.put50(x, i))
	}
	p.send(x, "How many artifacts do I have?")

	v50, raw50 := p.contextOf(x)
	if v50.World.Artifacts != 50 {
		t.Fatalf("artifact_count = %d", v50.World.Artifacts)
	}
	for _, a := range made {
		for _, s := range []string{a.ID, a.Name, "body-of-artifact"} {
			if bytes.Contains(raw50, []byte(s)) {
				t.Fatalf("the context carries %q", s)
			}
		}
	}
	for _, m := range p.transcript(x) {
		if strings.Contains(m.Text, "body-of-artifact") || strings.Contains(m.Text, made[0].ID) {
			t.Fatalf("an artifact reached the transcript: %q", m.Text)
		}
	}

	// 4,950 more rows, straight into the store: the context reads only
	// their count.
	ctx := t.Context()
	now := desk.Now()
	for i := 50; i < 5000; i++ {
		a := &desk.Artifact{ID: desk.NewID(desk.PrefixArtifact), SessionID: x.ID, WorkspaceID: x.WorkspaceID, ActorID: x.Actor,
			Name: fmt.Sprintf("bulk-%04d.md", i), RelPath: fmt.Sprintf("bulk-%04d.md", i), Kind: "markdown", MediaType: "text/markdown; charset=utf-8",
			Size: 1, SHA256: sha([]byte("x")), Revision: 1, Origin: desk.Origin{WorkspaceID: x.WorkspaceID, SessionID: x.ID, Actor: x.Actor, Kind: desk.OriginUser},
			CreatedAt: now, UpdatedAt: now}
		if err := p.App.Store.CreateArtifact(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	v5k, raw5k := p.contextOf(x)
	if v5k.World.Artifacts != 5000 {
		t.Fatalf("artifact_count = %d", v5k.World.Artifacts)
	}
	if bytes.Contains(raw5k, []byte("bulk-")) {
		t.Fatal("the context lists artifacts")
	}
	count := regexp.MustCompile(`(artifact_count\\?":)\d+`)
	norm := func(v agent.ContextView) string {
		v.World.Artifacts = 0
		v.WorldBlock = count.ReplaceAllString(v.WorldBlock, "${1}N")
		v.Budget = agent.Budget{}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if a, b := norm(v50), norm(v5k); a != b {
		t.Fatalf("the context differs beyond the count:\n50:   %s\n5000: %s", a, b)
	}
	if d := len(raw5k) - len(raw50); d < 0 || d > 8 {
		t.Fatalf("context grew by %d bytes from 50 to 5000 artifacts", d)
	}
	if d := v5k.Budget.UsedTokens - v50.Budget.UsedTokens; d < 0 || d > 1 {
		t.Fatalf("token estimate grew by %d", d)
	}
	// The next real turn runs the same way.
	p.send(x, "And now?")
}

// put50 stores the i-th of the S-Q artifacts through the API.
func (p *paw) put50(x desk.Session, i int) desk.Artifact {
	p.t.Helper()
	var a desk.Artifact
	p.Must(201, "POST", fmt.Sprintf("/v1/sessions/%s/artifacts?name=quarterly-note-%02d.md", x.ID, i),
		[]byte(fmt.Sprintf("# body-of-artifact %d\n", i)), &a)
	return a
}

// pawTableCounts counts the rows of every table of the SQLite store.
func pawTableCounts(t *testing.T, p *paw) map[string]int {
	t.Helper()
	db := p.App.Store.(*sqlstore.DB).SQL()
	rows, err := db.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		names = append(names, n)
	}
	rows.Close()
	out := map[string]int{}
	for _, n := range names {
		var c int
		if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM "`+n+`"`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

// TestS_R_NoTaskObjectPerMessage: a normal message leaves exactly a queue
// row, an execution, its messages and its events (plus the command record
// of a tool call) — no task table, no task row — and every message is
// offered the same prompt and the same full tool set.
func TestS_R_NoTaskObjectPerMessage(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x := p.session(pawSay("first"), pawSay("plain answer"),
		pawUse("write_file", map[string]any{"path": "/artifacts/out.md", "content": "# out"}), pawSay("wrote it"))
	p.send(x, "hello") // the first message also titles the session
	ctx1, _ := p.contextOf(x)

	before := pawTableCounts(t, p)
	for name := range before {
		if strings.Contains(strings.ToLower(name), "task") {
			t.Fatalf("the store has a task table: %s", name)
		}
	}
	p.send(x, "what is a normal question?")
	after := pawTableCounts(t, p)
	ctx2, _ := p.contextOf(x)
	grew := map[string]int{}
	for name, n := range after {
		if d := n - before[name]; d != 0 {
			grew[name] = d
		}
	}
	// model_usage is accounting, one row per model call, not a task.
	if grew["queue_items"] != 1 || grew["executions"] != 1 || grew["messages"] != 2 || grew["events"] < 1 || grew["model_usage"] != 1 {
		t.Fatalf("rows made by a normal message: %v", grew)
	}
	for name := range grew {
		switch name {
		case "queue_items", "executions", "messages", "events", "app_logs", "model_usage":
		default:
			t.Fatalf("a normal message made rows in %s: %v", name, grew)
		}
	}

	// A message that writes an artifact adds only the command and artifact
	// it asked for.
	before = after
	p.send(x, "please write out.md")
	after = pawTableCounts(t, p)
	ctx3, _ := p.contextOf(x)
	for name, n := range after {
		d := n - before[name]
		switch name {
		case "queue_items", "executions", "commands", "artifacts":
			if d != 1 {
				t.Fatalf("%s grew by %d", name, d)
			}
		case "messages":
			if d != 4 { // user, assistant with the call, tool result, assistant
				t.Fatalf("messages grew by %d", d)
			}
		case "model_usage":
			if d != 2 { // the step with the call, the answer
				t.Fatalf("model_usage grew by %d", d)
			}
		case "events", "app_logs":
		default:
			if d != 0 {
				t.Fatalf("a tool-using message made rows in %s (%d)", name, d)
			}
		}
	}

	all := []string{"acquire", "apply_patch", "artifacts", "ask", "clarify", "delete_file", "edit_file", "exec_command", "inspect", "list_extensions", "list_files",
		"load_extension", "read_file", "request_user_input", "thread_episodes", "thread_followup", "thread_list", "thread_request_report", "thread_start",
		"write_file", "write_stdin"}
	for i, c := range []agent.ContextView{ctx1, ctx2, ctx3} {
		if !slices.Equal(c.Tools, all) {
			t.Fatalf("tools offered before message %d = %v; want %v", i+2, c.Tools, all)
		}
		if c.SystemPrompt != ctx1.SystemPrompt {
			t.Fatalf("the system prompt changed with message %d", i+2)
		}
	}
}

// --- NOT DONE IF ---------------------------------------------------------

// TestNotDoneIf_WorkspaceOwnedPerMessage: the session, not the message, owns
// the workspace: every message of a session runs in the same /artifacts,
// sees what earlier messages left there, and gets only its own scratch.
func TestNotDoneIf_WorkspaceOwnedPerMessage(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x := p.session(
		pawAll(pawUse("write_file", map[string]any{"path": "/artifacts/shared.md", "content": "from message one"}),
			pawUse("write_file", map[string]any{"path": "/scratch/mine.txt", "content": "one"})),
		pawSay("one"),
		pawAll(pawUse("read_file", map[string]any{"path": "/artifacts/shared.md"}),
			pawUse("list_files", map[string]any{"path": "/scratch"})),
		pawSay("two"),
	)
	e1 := p.send(x, "message one")
	e2 := p.send(x, "message two")
	if e1.SessionID != x.ID || e2.SessionID != x.ID || e1.ID == e2.ID {
		t.Fatalf("executions %+v %+v", e1, e2)
	}
	cs := p.commands(x, e2.ID)
	if cs[0].Output != "from message one" {
		t.Fatalf("message two does not see message one's artifact: %+v", cs[0])
	}
	if r := p.result(x, cs[1]); len(r["entries"].([]any)) != 0 {
		t.Fatalf("message two sees message one's scratch: %v", r)
	}
	as := p.artifacts(x)
	if len(as) != 1 || as[0].SessionID != x.ID || as[0].Origin.SessionID != x.ID || as[0].Origin.ExecutionID != e1.ID {
		t.Fatalf("artifacts = %+v", as)
	}
}

// TestNotDoneIf_SelectionAutoInspect: binding groups and capturing items
// starts nothing: no queue row, no execution, no command, no lease.
func TestNotDoneIf_SelectionAutoInspect(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, _ := p.group("captures", "one", "two")
	x := p.session(pawSay("unused"))
	p.bind(x, g)
	it := p.addItem(g, "captured after binding")
	p.Must(200, "PUT", "/v1/sessions/"+x.ID+"/focus", map[string]string{"url": "https://example.com/page", "title": "Page"}, nil)

	var q struct{ Items []desk.QueueItem }
	p.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue?all=true", nil, &q)
	var ex struct{ Executions []desk.Execution }
	p.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
	if len(q.Items) != 0 || len(ex.Executions) != 0 {
		t.Fatalf("selection changes started work: queue %+v executions %+v", q.Items, ex.Executions)
	}
	if ms := p.transcript(x); len(ms) != 0 {
		t.Fatalf("selection changes wrote to the transcript: %+v", ms)
	}
	counts := pawTableCounts(t, p)
	if counts["item_leases"] != 0 || counts["commands"] != 0 {
		t.Fatalf("selection changes leased or ran something: %v", counts)
	}
	if row, _ := p.itemAlive(it.ID); !row {
		t.Fatal("the captured item is not stored")
	}
}

// TestNotDoneIf_AnswerFileForShow: an ordinary question leaves no file
// anywhere — no answer.md among the artifacts, in the actors' file areas,
// the workspace's checkout or scratch.
func TestNotDoneIf_AnswerFileForShow(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x, _ := p.runScript("Explain recursion in one sentence.", pawSay("A function that calls itself on a smaller problem."))
	if as := p.artifacts(x); len(as) != 0 {
		t.Fatalf("artifacts = %+v", as)
	}
	var files []string
	for _, dir := range []string{layout.ActorsDir, layout.CheckoutDir, layout.ScratchDir} {
		filepath.WalkDir(p.App.Home.Abs(p.ws.ID, dir), func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
	}
	if len(files) != 0 {
		t.Fatalf("an ordinary question left files: %v", files)
	}
}

// TestNotDoneIf_ChatVsRunModes: one session takes a plain question, a tool
// turn and a plain question again, with the same one-field message body; a
// body that tries to pick a mode is refused as an unknown field.
func TestNotDoneIf_ChatVsRunModes(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x := p.session(pawSay("chat answer"),
		pawUse("write_file", map[string]any{"path": "/artifacts/run.md", "content": "ran"}), pawSay("ran"),
		pawSay("chat again"))
	p.send(x, "hi")
	p.send(x, "make run.md")
	p.send(x, "thanks")
	if cs := p.commands(x, ""); len(cs) != 1 || cs[0].Tool != "write_file" {
		t.Fatalf("commands = %+v", cs)
	}
	if r := p.Admin("POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "x", "mode": "run"}); r.Status != 400 {
		t.Fatalf("a mode field = %d %s; want 400", r.Status, r.Body)
	}
	var s map[string]any
	p.Must(200, "GET", "/v1/sessions/"+x.ID, nil, &s)
	for k := range s {
		if k != "model" && strings.Contains(strings.ToLower(k), "mode") {
			t.Fatalf("the session carries a mode: %v", s)
		}
	}
}

// TestNotDoneIf_ExecutionReadinessRequired: no tool schema requires or even
// offers a readiness report, the prompt never asks for one, and a turn that
// just answers completes.
func TestNotDoneIf_ExecutionReadinessRequired(t *testing.T) {
	apptest.Parallel(t)
	for _, tool := range tools.All() {
		if s := strings.ToLower(string(tool.Schema()) + tool.Description()); strings.Contains(s, "readiness") || strings.Contains(s, "ready") {
			t.Fatalf("tool %s mentions readiness: %s", tool.Name(), tool.Schema())
		}
	}
	p := newPaw(t, app.Config{})
	x, _ := p.runScript("hello", pawSay("hi"))
	v, _ := p.contextOf(x)
	if strings.Contains(strings.ToLower(v.SystemPrompt), "readiness") {
		t.Fatalf("the prompt asks for readiness: %s", v.SystemPrompt)
	}
}

// TestNotDoneIf_ToolsNeedFreeze: the very first model step of a new session
// may call any tool — write an artifact, write scratch, run a command — with
// no freeze, commit or plan before it.
func TestNotDoneIf_ToolsNeedFreeze(t *testing.T) {
	apptest.Parallel(t)
	pawSandbox(t)
	p := newPaw(t, app.Config{})
	p.approvalMode(desk.ApprovalModeAutoReview)
	x, e := p.runScript("go",
		pawAll(pawUse("write_file", map[string]any{"path": "/artifacts/first.md", "content": "# first"}),
			pawUse("exec_command", map[string]any{"command": "echo ok > /scratch/x && cat /scratch/x"}),
			pawUse("artifacts", map[string]any{"action": "create", "name": "empty.md"})),
		pawSay("done"))
	cs := p.commands(x, e.ID)
	if len(cs) != 3 {
		t.Fatalf("commands = %+v", cs)
	}
	for _, c := range cs {
		if c.Status != desk.CommandSucceeded {
			t.Fatalf("%s on the first step = %s %s", c.Tool, c.Status, c.Error)
		}
	}
	if strings.TrimSpace(cs[1].Output) != "ok" {
		t.Fatalf("command output = %q", cs[1].Output)
	}
	if len(p.artifacts(x)) != 2 {
		t.Fatalf("artifacts = %+v", p.artifacts(x))
	}
}

// TestNotDoneIf_ArtifactsDeletedPerTurn: an artifact stays through turns
// that ignore it, a failed turn and an interrupted one.
func TestNotDoneIf_ArtifactsDeletedPerTurn(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	x := p.session(
		pawUse("write_file", map[string]any{"path": "/artifacts/keep.md", "content": "# keep"}), pawSay("made"),
		pawSay("unrelated answer"),
		pawStep{"text": "slow", "delay_ms": 60000},
		pawUse("list_files", map[string]any{"path": "/artifacts"}),
		// exhausted: the next model call fails the turn
	)
	p.send(x, "make it")
	a := p.artifacts(x)
	if len(a) != 1 {
		t.Fatalf("artifacts = %+v", a)
	}
	check := func(after string) {
		t.Helper()
		got := p.artifacts(x)
		if len(got) != 1 || got[0].ID != a[0].ID || got[0].SHA256 != a[0].SHA256 || !pawExists(filepath.Join(p.artifactDir(x), "keep.md")) {
			t.Fatalf("artifact after %s: %+v", after, got)
		}
	}
	p.send(x, "something else")
	check("an unrelated turn")
	id := p.start(x, "slow one")
	p.waitCursor(x, 4) // the slow step is streaming
	p.Must(200, "POST", "/v1/sessions/"+x.ID+"/executions/"+id+"/interrupt", nil, nil)
	if e := p.settle(id); e.Phase != desk.PhaseInterrupted {
		t.Fatalf("phase = %s", e.Phase)
	}
	check("an interrupted turn")
	id = p.start(x, "failing one")
	if e := p.settle(id); e.Phase != desk.PhaseFailed {
		t.Fatalf("phase = %s", e.Phase)
	}
	check("a failed turn")
}

// waitCursor waits until the session's script has handed out n steps.
func (p *paw) waitCursor(x desk.Session, n int) {
	p.t.Helper()
	pawWait(p.t, fmt.Sprintf("script step %d to be taken", n), func() bool {
		sa, err := p.App.Store.GetSessionAgent(p.t.Context(), x.ID)
		if err != nil {
			p.t.Fatal(err)
		}
		return sa.ScriptCursor >= n
	})
}

// rescript replaces a session's script before its first message, for steps
// that must name ids made after the session.
func (p *paw) rescript(x desk.Session, steps ...pawStep) {
	p.t.Helper()
	sa, err := p.App.Store.GetSessionAgent(p.t.Context(), x.ID)
	if err != nil {
		p.t.Fatal(err)
	}
	sa.Script, _ = json.Marshal(map[string]any{"steps": steps})
	if err := p.App.Store.SetSessionAgent(p.t.Context(), x.ID, sa); err != nil {
		p.t.Fatal(err)
	}
}

// TestNotDoneIf_AgentDeletesImmutableArtifact: the agent cannot delete,
// overwrite or edit an immutable artifact through any of its tools, not
// even with a command; it may still delete an ordinary artifact when asked.
func TestNotDoneIf_AgentDeletesImmutableArtifact(t *testing.T) {
	apptest.Parallel(t)
	pawSandbox(t)
	p := newPaw(t, app.Config{})
	p.approvalMode(desk.ApprovalModeAutoReview)
	x := p.session(pawSay("placeholder"))
	var sealed, plain desk.Artifact
	p.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=contract.md&immutable=true", []byte("# signed contract\n"), &sealed)
	p.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name=draft.md", []byte("# draft\n"), &plain)
	if !sealed.Immutable || sealed.Path != "/artifacts/immutable/contract.md" {
		t.Fatalf("sealed = %+v", sealed)
	}
	p.rescript(x,
		pawAll(pawUse("delete_file", map[string]any{"path": sealed.Path}),
			pawUse("artifacts", map[string]any{"action": "delete", "id": sealed.ID}),
			pawUse("write_file", map[string]any{"path": sealed.Path, "content": "forged"}),
			pawUse("edit_file", map[string]any{"path": sealed.Path, "old_text": "signed", "new_text": "forged"})),
		pawAll(pawUse("exec_command", map[string]any{"command": "rm -f " + sealed.Path}),
			pawUse("exec_command", map[string]any{"command": "echo forged > " + sealed.Path})),
		pawUse("artifacts", map[string]any{"action": "delete", "id": plain.ID}),
		pawSay("done"))
	e := p.send(x, "clean up everything")

	cs := p.commands(x, e.ID)
	if len(cs) != 7 {
		t.Fatalf("commands = %+v", cs)
	}
	for _, c := range cs[:4] {
		if r := p.result(x, c); pawCode(r) == "" {
			t.Fatalf("%s on an immutable artifact succeeded: %v", c.Tool, r)
		}
	}
	// delete_file meets the read-only mount of /artifacts/immutable before
	// it looks at the row; either refusal names why.
	if r := p.result(x, cs[0]); pawCode(r) != tools.CodeImmutable && pawCode(r) != tools.CodeDenied {
		t.Fatalf("delete_file = %v", r)
	}
	if r := p.result(x, cs[1]); pawCode(r) != tools.CodeImmutable {
		t.Fatalf("artifacts delete = %v", r)
	}
	// A command meets the read-only mount: a sandbox denial (issue 13).
	for _, c := range cs[4:6] {
		if r := p.result(x, c); r["exit_code"] == float64(0) || (pawCode(r) != "" && pawCode(r) != tools.CodeSandboxDenied) {
			t.Fatalf("%s: the command changed the immutable area: %v", c.Arguments, r)
		}
	}
	if cs[6].Status != desk.CommandSucceeded {
		t.Fatalf("deleting an ordinary artifact on request: %+v", cs[6])
	}
	as := p.artifacts(x)
	if len(as) != 1 || as[0].ID != sealed.ID || as[0].Revision != 1 || string(p.artifactBytes(x, sealed.ID)) != "# signed contract\n" {
		t.Fatalf("artifacts after the attempts: %+v", as)
	}
}

// TestNotDoneIf_SessionsOpenEachOthersScratch: while one session's
// execution holds a file in its scratch, another session's agent cannot
// reach it by guest path, escape, host path, command or listing.
func TestNotDoneIf_SessionsOpenEachOthersScratch(t *testing.T) {
	apptest.Parallel(t)
	pawSandbox(t)
	p := newPaw(t, app.Config{})
	const secret = "SCRATCH-SECRET-77"
	a := p.session(
		pawUse("write_file", map[string]any{"path": "/scratch/secret.txt", "content": secret}),
		pawUse("exec_command", map[string]any{"command": "true"}), // holds A's execution (user approval mode)
		pawSay("done"))
	ida := p.start(a, "hold a secret in scratch")
	apA := p.pendingApproval(a)
	host := filepath.Join(p.scratchDir(ida), "secret.txt")
	if b, err := os.ReadFile(host); err != nil || string(b) != secret {
		t.Fatalf("A's scratch: %q %v", b, err)
	}
	p.approvalMode(desk.ApprovalModeAutoReview) // B's commands run, sandboxed

	reads := []string{
		"/scratch/../" + ida + "/secret.txt",
		"/scratch/../../.scratch/" + ida + "/secret.txt",
		"/artifacts/../../../../.scratch/" + ida + "/secret.txt",
		"/workspace/../.scratch/" + ida + "/secret.txt",
		host,
	}
	var calls []pawStep
	for _, r := range reads {
		calls = append(calls, pawUse("read_file", map[string]any{"path": r}))
	}
	calls = append(calls, pawUse("list_files", map[string]any{"path": "/scratch"}))
	b, eb := p.runScript("peek at A",
		pawAll(calls...),
		pawAll(pawUse("exec_command", map[string]any{"command": "cat " + host}),
			pawUse("exec_command", map[string]any{"command": "cat /scratch/../" + ida + "/secret.txt"}),
			pawUse("exec_command", map[string]any{"command": "grep -rs --exclude-dir=usr --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev " + secret + " / ; echo searched"})),
		pawSay("nothing"))
	p.decide(apA, "deny")
	p.settle(ida)

	cs := p.commands(b, eb.ID)
	if len(cs) != len(reads)+4 {
		t.Fatalf("commands = %d", len(cs))
	}
	for _, c := range cs {
		r := p.result(b, c)
		raw, _ := json.Marshal(r)
		if bytes.Contains(raw, []byte(secret+"\n")) || strings.Contains(c.Output, secret+"\n") || bytes.Contains(raw, []byte(`"`+secret+`"`)) {
			t.Fatalf("%s %s reached A's scratch: %s", c.Tool, c.Arguments, raw)
		}
		switch c.Tool {
		case "read_file":
			if code := pawCode(r); code != tools.CodeDenied && code != tools.CodeNotFound {
				t.Errorf("read_file %s = %v", c.Arguments, r)
			}
		case "list_files":
			if len(r["entries"].([]any)) != 0 {
				t.Errorf("B's /scratch lists %v", r)
			}
		case "exec_command":
			if strings.Contains(string(c.Arguments), "grep") {
				if out, _ := r["stdout"].(string); strings.TrimSpace(out) != "searched" {
					t.Errorf("searching B's sandbox found: %q", out)
				}
			} else if r["exit_code"] == float64(0) {
				t.Errorf("%s = %v", c.Arguments, r)
			}
		}
	}
}

// TestNotDoneIf_SystemPromptScenarioPatches: the system prompt does not
// depend on what the user says — a question, a Chinese 「这页」 request, an
// artifact request, with and without bound groups — and it is exactly the
// composed parts the agent package builds, plus the session's identity
// (the only thing in it that differs from session to session).
func TestNotDoneIf_SystemPromptScenarioPatches(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, _ := p.group("ctx", "something")
	messages := []string{"What is 2+2?", "总结一下这页", "Make me a spreadsheet of Q1 revenue", "Search the web for desk runtimes"}
	for i, m := range messages {
		x := p.session(pawSay("ok"))
		want := agent.SystemPrompt(agent.Binding{Identity: tools.IdentityOf(&x, x.SurfaceID)})
		if i%2 == 1 {
			p.bind(x, g)
		}
		p.send(x, m)
		v, _ := p.contextOf(x)
		if v.SystemPrompt != want {
			t.Fatalf("system prompt after %q differs:\n%s\n---\n%s", m, v.SystemPrompt, want)
		}
		if strings.Contains(v.SystemPrompt, m) {
			t.Fatalf("the prompt quotes the message %q", m)
		}
	}
	// Readable parts: paragraphs, each saying one thing, none of them a
	// scenario branch keyed on the message.
	want := agent.SystemPrompt(agent.Binding{})
	parts := strings.Split(want, "\n\n")
	if len(parts) < 3 {
		t.Fatalf("the prompt is not composed of parts: %q", want)
	}
	for _, part := range parts {
		if len(part) > 1200 {
			t.Fatalf("a prompt part is a wall of text (%d bytes): %q", len(part), part)
		}
	}
}

// TestNotDoneIf_ZipPdfOpenedAsText: read_file and inspect describe a ZIP,
// an XLSX and a PDF by their magic bytes — even under a misleading name —
// and never hand their bytes to the model as text.
func TestNotDoneIf_ZipPdfOpenedAsText(t *testing.T) {
	apptest.Parallel(t)
	p := newPaw(t, app.Config{})
	g, _ := p.group("docs")
	var pdfItem desk.Item
	p.Must(201, "POST", "/v1/groups/"+g.ID+"/items?name=paper.pdf", pdfBytes(), &pdfItem)
	x := p.session(pawSay("placeholder"))
	p.bind(x, g)
	put := func(name string, body []byte) {
		p.Must(201, "POST", "/v1/sessions/"+x.ID+"/artifacts?name="+name, body, nil)
	}
	put("archive.zip", zipWith(t, "a.txt", "b.txt"))
	put("sheet.xlsx", xlsxBytes(t))
	put("paper.pdf", pdfBytes())
	// A ZIP under a text name: the bytes decide, not the name.
	if err := os.WriteFile(filepath.Join(p.artifactDir(x), "disguised.txt"), zipWith(t, "x.xml"), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := []string{"/artifacts/archive.zip", "/artifacts/sheet.xlsx", "/artifacts/paper.pdf", "/artifacts/disguised.txt", "/context/" + g.ID + "/" + pdfItem.ID + "-" + pdfItem.Name}
	kinds := []string{"zip", "xlsx", "pdf", "zip", "pdf"}
	var calls []pawStep
	for _, pth := range paths {
		calls = append(calls, pawUse("read_file", map[string]any{"path": pth}))
	}
	calls = append(calls, pawUse("inspect", map[string]any{"view": "item", "item_id": pdfItem.ID}))
	p.rescript(x, pawAll(calls...), pawSay("described"))
	e := p.send(x, "open them")

	cs := p.commands(x, e.ID)
	if len(cs) != len(paths)+1 {
		t.Fatalf("commands = %+v", cs)
	}
	for i, c := range cs {
		r := p.result(x, c)
		raw, _ := json.Marshal(r)
		for _, magic := range []string{"PK\x03\x04", "PK\\u0003", "%PDF", "obj<<"} {
			if strings.Contains(string(raw), magic) || strings.Contains(c.Output, magic) {
				t.Fatalf("%s %s handed bytes as text: %s", c.Tool, c.Arguments, raw)
			}
		}
		if c.Status != desk.CommandSucceeded {
			t.Fatalf("%s %s = %s %s", c.Tool, c.Arguments, c.Status, c.Error)
		}
		note, _ := r["note"].(string)
		if c.Tool == "read_file" {
			if r["kind"] != kinds[i] || r["text"] != nil || !strings.Contains(note, "not shown as text") {
				t.Fatalf("read_file %s = %v; want kind %s described", paths[i], r, kinds[i])
			}
		} else if r["text"] != "" || !strings.Contains(note, "PDF") {
			t.Fatalf("inspect of a PDF item = %v", r)
		}
	}
}
