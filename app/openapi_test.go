package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/layout"
)

// TestOpenAPIMatchesHandlers sends a request to every operation the served
// OpenAPI document lists, with fresh fixtures, and checks that the handler
// answers with the documented success status and that the body validates
// against the documented schema. A route missing from the router, a status
// that drifted or a field the document does not know all fail here.
func TestOpenAPIMatchesHandlers(t *testing.T) {
	apptest.Parallel(t)
	// The real agent runs, on script sessions.
	w := newWorldOn(t, app.Config{Execution: execution.Options{StopTimeout: 5 * time.Second}})
	// The checkout is a git repository, so sessions and threads carry their
	// git block and it is checked against the schema too.
	co := w.App.Home.Abs(w.ws.ID, layout.CheckoutDir)
	if err := os.WriteFile(filepath.Join(co, "README.md"), []byte("contract\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitInit(t, co)
	var doc map[string]any
	w.Must(200, "GET", "/v1/openapi.json", nil, &doc)
	if doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi = %v", doc["openapi"])
	}
	raw, _ := json.Marshal(doc)
	c := jsonschema.NewCompiler()
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("mem://openapi.json", parsed); err != nil {
		t.Fatal(err)
	}
	schema := func(ref string) *jsonschema.Schema {
		t.Helper()
		s, err := c.Compile("mem://openapi.json" + ref)
		if err != nil {
			t.Fatalf("compile %s: %v", ref, err)
		}
		return s
	}
	errSchema := schema("#/components/schemas/Error")

	paths := doc["paths"].(map[string]any)
	var keys []string
	for p := range paths {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	ops := 0
	for _, p := range keys {
		for method, raw := range paths[p].(map[string]any) {
			op := raw.(map[string]any)
			ops++
			name := strings.ToUpper(method) + " " + p
			fx := w.fixtures(t)
			if strings.Contains(p, "thread") {
				fx.thrSes, fx.thr = w.threadFixture(t)
			}
			url, body := fx.request(t, name, p, op)
			// docs/api.md: every JSON body accepts and ignores "origin".
			body = withOrigin(t, body)
			if isStream(op) {
				// A stream never ends by itself: check that it opens.
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var rb io.Reader
				if body != nil {
					b, _ := json.Marshal(body)
					rb = bytes.NewReader(b)
				}
				req, _ := http.NewRequestWithContext(ctx, strings.ToUpper(method), w.Server.URL+url, rb)
				req.Header.Set("Authorization", "Bearer "+w.Token)
				resp, err := w.Server.Client().Do(req)
				if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
					t.Errorf("%s: stream did not open: %v %v", name, err, resp)
				}
				if resp != nil {
					resp.Body.Close()
				}
				cancel()
				continue
			}
			r := w.Admin(strings.ToUpper(method), url, body)
			want := 0
			var respSchema string
			for code, rr := range op["responses"].(map[string]any) {
				if code == "default" {
					continue
				}
				want, _ = strconv.Atoi(code)
				if content, ok := rr.(map[string]any)["content"].(map[string]any); ok {
					if j, ok := content["application/json"].(map[string]any); ok {
						respSchema = j["schema"].(map[string]any)["$ref"].(string)
					}
				}
			}
			if r.Status != want {
				t.Errorf("%s (%s) = %d %s; documented %d", name, url, r.Status, r.Body, want)
				continue
			}
			if respSchema != "" {
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
				if err != nil {
					t.Errorf("%s: body is not JSON: %v", name, err)
					continue
				}
				if err := schema(respSchema).Validate(v); err != nil {
					t.Errorf("%s: response does not match %s: %v\n%s", name, respSchema, err, r.Body)
				}
			}
			// Path parameters are documented.
			for _, prm := range asList(op["parameters"]) {
				m := prm.(map[string]any)
				if m["in"] == "path" && m["description"] == "" {
					t.Errorf("%s: path parameter %v undocumented", name, m["name"])
				}
			}
		}
	}
	if ops < 30 {
		t.Fatalf("only %d operations documented", ops)
	}
	// Error bodies match the documented Error schema.
	r := w.Admin("GET", "/v1/sessions/ses_nope", nil)
	v, _ := jsonschema.UnmarshalJSON(bytes.NewReader(r.Body))
	if err := errSchema.Validate(v); err != nil {
		t.Fatalf("error body does not match Error: %v", err)
	}
}

func isStream(op map[string]any) bool {
	for _, rr := range op["responses"].(map[string]any) {
		if c, ok := rr.(map[string]any)["content"].(map[string]any); ok {
			if _, ok := c["text/event-stream"]; ok {
				return true
			}
		}
	}
	return false
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// fixtureSet is one fresh set of resources for one operation.
type fixtureSet struct {
	ws, ses, art, grp, item, file string
	srf, exe, q, blk, blkSes      string
	apr, inp, pln                 string
	rt                            string // a registered runtime
	msg                           string // the committed user message "first" of ses
	thrSes, thr                   string // a session with a reported handler thread, and the thread
	rtn                           string // a routine on ses, every hour
	dsp                           string // a dispatch (an ask of ses)
	whk, whd                      string // a webhook of ws and a delivery of it
	// idle is a workspace with nothing running (to offboard), departed
	// one already offboarded (to restore or purge).
	idle, departed string
	// tpl holds the template and absorb routes' own idle workspaces.
	tpl tplFixture
}

func (w *world) fixtures(t *testing.T) fixtureSet {
	slow := map[string]any{"steps": []map[string]any{{"text": "slow slow slow slow", "delay_ms": 60000}}}
	// A webhook of the workspace, before any turn ends, so the
	// interrupted turn below leaves it a delivery (to a name that never
	// resolves: it only ever retries).
	var whk desk.WebhookCreated
	w.Must(201, "POST", "/v1/webhooks", map[string]any{"url": "https://example.invalid/hook", "workspace_id": w.ws.ID}, &whk)
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": "fx", "model": "script", "script": slow}, &x)
	a := w.put(x.ID, "fx.md", []byte("# v1\n"))
	w.Must(200, "PUT", "/v1/sessions/"+x.ID+"/artifacts/"+a.ID+"/content", []byte("# v2\n"), nil)
	var g desk.Group
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/groups", map[string]string{"name": "fx"}, &g)
	var it desk.Item
	w.Must(201, "POST", "/v1/groups/"+g.ID+"/items", map[string]string{"text": "hello"}, &it)
	// A running execution (a script step streaming for a minute) and a row
	// queued behind it; and, in a second session, a user-cooldown block.
	var first, second desk.SubmitResult
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "first"}, &first)
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "second"}, &second)
	if first.ExecutionID == "" {
		t.Fatalf("the first message to an idle session answered no execution: %+v", first)
	}
	var msg string
	waitFor(t, "the first message to be committed", func() bool {
		var tr struct{ Messages []desk.Message }
		w.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages", nil, &tr)
		if len(tr.Messages) > 0 {
			msg = tr.Messages[0].ID
		}
		return msg != ""
	})
	var y desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"title": "fx2", "model": "script", "script": slow}, &y)
	var run desk.SubmitResult
	w.Must(202, "POST", "/v1/sessions/"+y.ID+"/messages", map[string]string{"text": "to interrupt"}, &run)
	if run.ExecutionID == "" {
		t.Fatalf("a message to an idle session answered no execution: %+v", run)
	}
	waitFor(t, "the turn to run", func() bool {
		var e desk.Execution
		w.Must(200, "GET", "/v1/executions/"+run.ExecutionID, nil, &e)
		return e.Phase == desk.PhaseRunning
	})
	w.Must(200, "POST", "/v1/sessions/"+y.ID+"/executions/"+run.ExecutionID+"/interrupt", nil, nil)
	var whd desk.WebhookDeliveryList
	waitFor(t, "the interrupted turn's webhook delivery", func() bool {
		w.Must(200, "GET", "/v1/webhooks/"+whk.ID+"/deliveries", nil, &whd)
		return len(whd.Deliveries) > 0
	})
	var bs struct{ Blocks []desk.Block }
	w.Must(200, "GET", "/v1/sessions/"+y.ID+"/blocks", nil, &bs)
	if first.ExecutionID == "" || second.ExecutionID != "" || len(bs.Blocks) != 1 {
		t.Fatalf("fixtures: first %+v second %+v blocks %+v", first, second, bs)
	}
	// An approval, an input request and a plan card, each from a script.
	apr := w.scripted(t, map[string]any{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}, "/approvals", "approvals")
	inp := w.scripted(t, map[string]any{"name": "request_user_input", "arguments": map[string]any{"questions": []map[string]any{
		{"question": "Which?", "options": []map[string]any{{"label": "a", "recommended": true}, {"label": "b"}}}}}}, "/input-requests", "input_requests")
	pln := w.scripted(t, map[string]any{"name": "clarify", "arguments": map[string]any{"plan": map[string]any{"title": "Do it", "steps": []string{"one"}}}}, "", "")
	var idle, departed desk.Workspace
	// Every operation gets fresh fixtures on the one server, so the names
	// repeat: allowed on purpose.
	w.Must(201, "POST", "/v1/workspaces", map[string]any{"name": "idle", "allow_duplicate_name": true}, &idle)
	w.Must(201, "POST", "/v1/workspaces", map[string]any{"name": "departed", "allow_duplicate_name": true}, &departed)
	w.Must(200, "POST", "/v1/workspaces/"+departed.ID+"/offboard", map[string]string{"reason": "fixture"}, nil)
	actorSeq++
	rt := fmt.Sprintf("fx%d", actorSeq)
	w.Must(201, "POST", "/v1/runtimes", map[string]any{"name": rt, "protocol": "acp", "argv": []string{"/bin/cat"}}, nil)
	// A profile of the same name, for the profile routes' {name}.
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/profiles", map[string]any{"name": rt, "runtime": rt}, nil)
	var rtn desk.Routine
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/routines", map[string]any{"name": "fx", "schedule": "@hourly", "session_id": x.ID, "prompt": "tick", "overlap": "queue"}, &rtn)
	var ask desk.AskResult
	w.Must(200, "POST", "/v1/ask", map[string]any{"target": map[string]string{"kind": "session", "id": x.ID}, "prompt": "fx", "subject": "fixture"}, &ask)
	return fixtureSet{dsp: ask.DispatchID, rtn: rtn.ID, whk: whk.ID, whd: whd.Deliveries[0].ID, rt: rt, ws: w.ws.ID, ses: x.ID, art: a.ID, grp: g.ID, item: it.ID, file: a.Path,
		srf: x.SurfaceID, exe: first.ExecutionID, q: second.Item.ID, blk: bs.Blocks[0].ID, blkSes: y.ID,
		apr: apr, inp: inp, pln: pln, msg: msg, idle: idle.ID, departed: departed.ID, tpl: w.templateFixtures(t)}
}

// scripted runs a script session whose one step makes the given tool call
// and returns the id of what it left waiting: the first row of the list at
// path (approvals, input requests), or the plan (from the events).
func (w *world) scripted(t *testing.T, call map[string]any, path, key string) string {
	t.Helper()
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": []map[string]any{{"tool_calls": []any{call}}, {"text": "done"}}}}, &x)
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	id := ""
	waitFor(t, "the scripted call to leave something waiting", func() bool {
		if path == "" {
			var ex struct{ Executions []desk.Execution }
			w.Must(200, "GET", "/v1/sessions/"+x.ID+"/executions", nil, &ex)
			if len(ex.Executions) == 0 {
				return false
			}
			var e desk.Execution
			w.Must(200, "GET", "/v1/executions/"+ex.Executions[0].ID, nil, &e)
			for _, ev := range e.Events {
				if ev.Type == "plan.proposed" {
					var p desk.Plan
					json.Unmarshal(ev.Data, &p)
					id = p.ID
					return true
				}
			}
			return false
		}
		var m map[string][]map[string]any
		w.Must(200, "GET", "/v1/sessions/"+x.ID+path, nil, &m)
		if len(m[key]) > 0 {
			id = m[key][0]["id"].(string)
			return true
		}
		return false
	})
	return id
}

var actorSeq int

func (f fixtureSet) request(t *testing.T, name, p string, op map[string]any) (string, any) {
	url := strings.NewReplacer("{ws}", f.ws, "{id}", f.ws, "{ses}", f.ses, "{art}", f.art, "{grp}", f.grp, "{item}", f.item,
		"{srf}", f.srf, "{exe}", f.exe, "{q}", f.q, "{blk}", f.blk, "{apr}", f.apr, "{inp}", f.inp, "{pln}", f.pln, "{name}", f.rt, "{msg}", f.msg, "{rtn}", f.rtn,
		"{dsp}", f.dsp, "{whk}", f.whk, "{whd}", f.whd).Replace(p)
	if strings.Contains(p, "{blk}") || strings.HasSuffix(p, "/retire") || strings.HasSuffix(p, "/recall") {
		// The block lives in the second fixture session.
		url = strings.Replace(url, "/sessions/"+f.ses+"/", "/sessions/"+f.blkSes+"/", 1)
	}
	// The fixture workspace runs work, which blocks offboarding.
	switch {
	case strings.HasSuffix(p, "/offboard"):
		url = strings.Replace(url, f.ws, f.idle, 1)
	case strings.HasSuffix(p, "/restore"), strings.HasSuffix(p, "/purge"):
		url = strings.Replace(url, f.ws, f.departed, 1)
	}
	url = f.tpl.rewrite(p, url, f.ws)
	url = strings.NewReplacer("{thr}", f.thr, "/sessions/"+f.ses+"/thread", "/sessions/"+f.thrSes+"/thread").Replace(url)
	var q []string
	for _, prm := range asList(op["parameters"]) {
		m := prm.(map[string]any)
		if m["in"] == "query" && m["required"] == true {
			switch m["name"] {
			case "name":
				q = append(q, "name=new.md")
			case "path":
				if isFileAPI(p) {
					// The fixture artifact, as the owner's file area holds it.
					q = append(q, "path=/sessions/"+f.ses+"/fx.md")
				} else {
					q = append(q, "path="+f.file)
				}
			case "prefix":
				q = append(q, "prefix=/sessions/"+f.ses+"/")
			case "source":
				q = append(q, "source="+f.tpl.source)
			default:
				t.Fatalf("%s: no fixture for required query %v", name, m["name"])
			}
		}
	}
	if len(q) > 0 {
		url += "?" + strings.Join(q, "&")
	}
	rb, ok := op["requestBody"].(map[string]any)
	if !ok {
		return url, nil
	}
	content := rb["content"].(map[string]any)
	if name == "POST /v1/workspaces/import" {
		return url, exportFixture(t)
	}
	if _, ok := content["application/octet-stream"]; ok {
		return url, []byte("# bytes\n")
	}
	ref := content["application/json"].(map[string]any)["schema"].(map[string]any)["$ref"].(string)
	if b, ok := f.tpl.body(strings.TrimPrefix(ref, "#/components/schemas/")); ok {
		return url, b
	}
	switch strings.TrimPrefix(ref, "#/components/schemas/") {
	case "WorkspaceCreate", "GroupCreate":
		return url, map[string]string{"name": "made"}
	case "ActorCreate":
		actorSeq++
		return url, map[string]string{"name": fmt.Sprintf("actor%d", actorSeq), "kind": "agent"}
	case "SessionCreate":
		return url, map[string]string{"title": "made"}
	case "RuntimeCreate":
		actorSeq++
		return url, map[string]any{"name": fmt.Sprintf("made%d", actorSeq), "protocol": "acp", "argv": []string{"/bin/cat"}}
	case "ProfileCreate":
		if strings.HasSuffix(p, "/profiles") {
			actorSeq++
			return url, map[string]any{"name": fmt.Sprintf("made%d", actorSeq), "instructions": "Be brief.", "tools": []string{"list_files"}}
		}
		return url, map[string]any{"instructions": "Be briefer."}
	case "SessionPatch":
		return url, map[string]any{"pinned": true}
	case "ItemCreate":
		return url, map[string]string{"text": "an item"}
	case "BindingsPut":
		return url, map[string]any{"group_ids": []string{f.grp}}
	case "MessageSubmit":
		return url, map[string]string{"text": "hello"}
	case "MessageEdit":
		return url, map[string]string{"text": "first, revised"}
	case "QueueMove":
		return url, map[string]string{"to": "front"}
	case "QueueResume", "Interrupt":
		return url, map[string]string{}
	case "OffboardRequest":
		return url, map[string]string{"reason": "contract test"}
	case "PurgeRequest":
		return url, map[string]string{"confirm": f.departed}
	case "AskRequest":
		return url, map[string]any{"target": map[string]string{"kind": "session", "id": f.ses}, "prompt": "hello"}
	case "ResolveRequest":
		return url, map[string]any{"target": map[string]string{"kind": "session", "id": f.ses}}
	case "ApprovalDecision":
		return url, map[string]string{"decision": "approve"}
	case "InputAnswer":
		return url, map[string]any{"answers": map[string]string{"q1": "b"}}
	case "PlanDecision":
		if strings.HasSuffix(p, "/revise") {
			return url, map[string]string{"notes": "shorter"}
		}
		return url, map[string]string{}
	case "Focus":
		return url, map[string]string{"url": "https://example.com", "title": "Example"}
	case "AgentSettingsPatch":
		return url, map[string]any{"blocking_input": false}
	case "LogSeen":
		return url, map[string]int{"seq": 0}
	case "DraftPut":
		return url, map[string]string{"text": "a draft"}
	case "SessionView":
		return url, map[string]string{"viewer": "contract-test"}
	case "PressureRequest":
		return url, map[string]string{"level": "soft"}
	case "AGUIRunInput":
		return url, map[string]any{"threadId": f.ses, "runId": "contract-" + desk.NewID("run"),
			"messages": []map[string]string{{"id": "m1", "role": "user", "content": "hello"}}}
	case "RoutineCreate":
		return url, map[string]any{"name": "made", "schedule": "0 9 * * 1-5", "time_zone": "Europe/Paris", "prompt": "the daily summary"}
	case "RoutineUpdate":
		return url, map[string]any{"enabled": false}
	case "WebhookCreate":
		return url, map[string]any{"url": "https://example.invalid/made", "events": []string{"execution.ended"}}
	case "WorkspacePatch":
		return url, map[string]string{"primary_root": "/artifacts"}
	}
	t.Fatalf("%s: no fixture body for %s", name, ref)
	return "", nil
}

// isFileAPI reports whether a route is one of the actor file area's, whose
// path parameter is relative to the area.
func isFileAPI(p string) bool {
	return strings.HasPrefix(p, "/cells/") || p == "/v1/workspaces/{ws}/file" || p == "/v1/workspaces/{ws}/upload"
}

// exportFixture is an export of a fresh workspace on another server, so
// importing it here does not collide with an existing id.
func exportFixture(t *testing.T) []byte {
	e := apptest.Start(t, app.Config{})
	var ws desk.Workspace
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "exported"}, &ws)
	r := e.Must(200, "GET", "/v1/workspaces/"+ws.ID+"/export", nil, nil)
	return r.Body
}
