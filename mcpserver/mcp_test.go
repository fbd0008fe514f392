package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/client"
	"github.com/desk-runtime/desk/internal/testwait"
	"github.com/desk-runtime/desk/mcpserver"
	"github.com/desk-runtime/desk/sandbox"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// world is a running desk with one workspace and two agent actors, a and
// b, each with its own token.
type world struct {
	env          *apptest.Env
	admin        *client.Client
	ws           string
	tokA, tokB   string
	actorA       string
	actorB       string
	clientA      *client.Client
	clientB      *client.Client
	mcpURL       string
	notes        chan string // progress messages, resource updates, logs
	notesMu      sync.Mutex
	progressSeen []string
	updates      []string
	logs         []string
}

func newWorld(t *testing.T) *world { return newWorldWith(t, app.Config{}) }

func newWorldWith(t testing.TB, cfg app.Config) *world {
	t.Helper()
	env := apptest.Start(t, cfg)
	ctx := context.Background()
	admin, err := client.New(env.Server.URL, env.Token)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := admin.CreateWorkspace(ctx, "mcp")
	if err != nil {
		t.Fatal(err)
	}
	w := &world{env: env, admin: admin, ws: ws.ID, mcpURL: env.Server.URL + mcpserver.Path}
	a, tokA, err := admin.CreateActor(ctx, ws.ID, "alice", "agent")
	if err != nil {
		t.Fatal(err)
	}
	b, tokB, err := admin.CreateActor(ctx, ws.ID, "bob", "agent")
	if err != nil {
		t.Fatal(err)
	}
	w.tokA, w.tokB, w.actorA, w.actorB = tokA, tokB, a.ID, b.ID
	w.clientA, _ = client.New(env.Server.URL, tokA)
	w.clientB, _ = client.New(env.Server.URL, tokB)
	return w
}

// bearer adds a token to every request, as an MCP host configured with
// an Authorization header does.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect opens an MCP session of the 2025-11-25 revision (initialize,
// Mcp-Session-Id, logging/setLevel, resources/subscribe) over streamable
// HTTP with the SDK's own client, as the given token.
func (w *world) connect(t *testing.T, token string) *sdk.ClientSession {
	t.Helper()
	return w.connectAt(t, token, "2025-11-25", w.mcpURL)
}

// connectAt connects the SDK's client at protocol version (2026-07-28:
// stateless, server/discover and no session) to the MCP endpoint url.
func (w *world) connectAt(t *testing.T, token, version, url string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "desk-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
			w.notesMu.Lock()
			w.progressSeen = append(w.progressSeen, r.Params.Message)
			w.notesMu.Unlock()
		},
		LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) {
			b, _ := json.Marshal(r.Params.Data)
			w.notesMu.Lock()
			w.logs = append(w.logs, string(r.Params.Level)+" "+string(b))
			w.notesMu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
			w.notesMu.Lock()
			w.updates = append(w.updates, r.Params.URI)
			w.notesMu.Unlock()
		},
	})
	hc := &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func (w *world) progress() []string {
	w.notesMu.Lock()
	defer w.notesMu.Unlock()
	return slices.Clone(w.progressSeen)
}

func (w *world) logLines() []string {
	w.notesMu.Lock()
	defer w.notesMu.Unlock()
	return slices.Clone(w.logs)
}

func (w *world) resourceUpdates() []string {
	w.notesMu.Lock()
	defer w.notesMu.Unlock()
	return slices.Clone(w.updates)
}

// call calls a tool and decodes its structured result into out; it fails
// the test on a protocol error or a tool error.
func call(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: decode %s: %v", name, b, err)
		}
	}
}

// callErr calls a tool that must be refused and returns the error text.
func callErr(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s: succeeded, want a tool error: %s", name, text(res))
	}
	if res.StructuredContent != nil {
		t.Fatalf("%s: a refused call carries data: %v", name, res.StructuredContent)
	}
	return text(res)
}

func text(res *sdk.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			sb.WriteString(tc.Text)
		}
	}
	return sb.String()
}

func script(steps ...map[string]any) map[string]any { return map[string]any{"steps": steps} }

// eventually is testwait.Until with a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 60*time.Second, cond, what)
}

func TestEveryToolResourceAndPrompt(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cs := w.connect(t, w.tokA)
	ctx := context.Background()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"workspaces_list", "sessions_list", "session_create", "session_send", "session_transcript", "session_interrupt",
		"artifacts_list", "artifact_read", "artifact_write", "files_list", "file_read", "file_write",
		"approvals_list", "approval_answer", "input_requests_list", "input_answer", "threads_list", "thread_episodes",
		"routines_list", "routine_create", "routine_update", "routine_run", "routine_runs", "routine_delete",
		"profiles_list", "profile_put", "profile_delete", "session_set"}
	var got []string
	for _, tl := range tools.Tools {
		got = append(got, tl.Name)
		for what, sch := range map[string]any{"input": tl.InputSchema, "output": tl.OutputSchema} {
			b, _ := json.Marshal(sch)
			var s struct {
				Type any `json:"type"`
			}
			if json.Unmarshal(b, &s); s.Type != "object" {
				t.Errorf("%s's %s schema has type %v, want object", tl.Name, what, s.Type)
			}
		}
		if tl.Name == "session_send" {
			b, _ := json.Marshal(tl.InputSchema)
			var s struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			}
			json.Unmarshal(b, &s)
			slices.Sort(s.Required)
			if !slices.Equal(s.Required, []string{"session_id", "text"}) || s.Properties["wait"] == nil || s.Properties["surface"] == nil {
				t.Errorf("session_send schema = %s", b)
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("tools = %v, want %v", got, want)
	}

	var wss struct{ Workspaces []*desk.Workspace }
	call(t, cs, "workspaces_list", nil, &wss)
	if len(wss.Workspaces) != 1 || wss.Workspaces[0].ID != w.ws {
		t.Fatalf("workspaces_list = %+v", wss.Workspaces)
	}
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "title": "from mcp", "model": "script",
		"script": script(map[string]any{"text": "hello from desk"}, map[string]any{"text": "second reply"})}, &ses)
	if ses.Actor != w.actorA || ses.Title != "from mcp" {
		t.Fatalf("session_create = %+v, want actor %s", ses, w.actorA)
	}
	var ss struct{ Sessions []*desk.Session }
	call(t, cs, "sessions_list", map[string]any{"workspace_id": w.ws}, &ss)
	if len(ss.Sessions) != 1 || ss.Sessions[0].ID != ses.ID {
		t.Fatalf("sessions_list = %+v", ss.Sessions)
	}

	// session_send with wait: the reply comes back, and progress was
	// notified (and, at the level set, logged) while the turn ran.
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, func() *sdk.CallToolParams {
		p := &sdk.CallToolParams{Name: "session_send", Arguments: map[string]any{"session_id": ses.ID, "text": "hi", "wait": true}}
		p.SetProgressToken("send-1")
		return p
	}())
	if err != nil || res.IsError {
		t.Fatalf("session_send: %v %s", err, text(res))
	}
	var sent struct {
		ExecutionID string `json:"execution_id"`
		Outcome     string `json:"outcome"`
		Reply       string `json:"reply"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &sent)
	if sent.Reply != "hello from desk" || sent.Outcome != desk.OutcomeCompleted || sent.ExecutionID == "" {
		t.Fatalf("session_send = %s", b)
	}
	eventually(t, "progress notifications", func() bool { return len(w.progress()) >= 2 })
	eventually(t, "the turn logged", func() bool {
		return slices.ContainsFunc(w.logLines(), func(l string) bool {
			return strings.Contains(l, "turn started") && strings.Contains(l, sent.ExecutionID)
		})
	})
	if p := w.progress(); !slices.ContainsFunc(p, func(s string) bool { return strings.Contains(s, sent.ExecutionID) }) {
		t.Errorf("no progress names the execution %s: %q", sent.ExecutionID, p)
	}
	// Without wait: queued, nothing awaited.
	var queued struct {
		QueuedItem *desk.QueueItem `json:"queued_item"`
		Reply      string          `json:"reply"`
	}
	call(t, cs, "session_send", map[string]any{"session_id": ses.ID, "text": "again"}, &queued)
	if queued.QueuedItem == nil || queued.Reply != "" {
		t.Fatalf("session_send without wait = %+v", queued)
	}

	var tr struct{ Messages []*desk.Message }
	call(t, cs, "session_transcript", map[string]any{"session_id": ses.ID}, &tr)
	if !slices.ContainsFunc(tr.Messages, func(m *desk.Message) bool { return m.Role == desk.RoleUser && m.Text == "hi" }) ||
		!slices.ContainsFunc(tr.Messages, func(m *desk.Message) bool { return m.Text == "hello from desk" }) {
		t.Fatalf("session_transcript = %+v", tr.Messages)
	}

	// Artifacts: write, write again (next revision of the same artifact),
	// list, read; the resource is the same bytes with the media type.
	var art desk.Artifact
	call(t, cs, "artifact_write", map[string]any{"session_id": ses.ID, "name": "notes.md", "content": "# one\n"}, &art)
	var art2 desk.Artifact
	call(t, cs, "artifact_write", map[string]any{"session_id": ses.ID, "name": "notes.md", "content": "# two\n"}, &art2)
	if art2.ID != art.ID || art2.Revision != art.Revision+1 {
		t.Fatalf("second write = %+v, first %+v", art2, art)
	}
	var arts struct{ Artifacts []*desk.Artifact }
	call(t, cs, "artifacts_list", map[string]any{"session_id": ses.ID}, &arts)
	if len(arts.Artifacts) != 1 || arts.Artifacts[0].ID != art.ID {
		t.Fatalf("artifacts_list = %+v", arts.Artifacts)
	}
	var read struct {
		Artifact *desk.Artifact
		Text     string
	}
	call(t, cs, "artifact_read", map[string]any{"session_id": ses.ID, "artifact_id": art.ID}, &read)
	if read.Text != "# two\n" || read.Artifact.ID != art.ID {
		t.Fatalf("artifact_read = %+v", read)
	}
	// A binary artifact travels as a blob.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82")
	bin, err := w.clientA.PutArtifact(ctx, ses.ID, "dot.png", strings.NewReader(string(png)), int64(len(png)), client.PutOptions{MediaType: "image/png"})
	if err != nil {
		t.Fatal(err)
	}

	var binRead struct {
		Text          string `json:"text"`
		ContentBase64 []byte `json:"content_base64"`
	}
	call(t, cs, "artifact_read", map[string]any{"session_id": ses.ID, "artifact_id": bin.ID}, &binRead)
	if string(binRead.ContentBase64) != string(png) || binRead.Text != "" {
		t.Fatalf("artifact_read of a PNG = %+v", binRead)
	}

	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var uris []string
	for _, r := range rl.Resources {
		uris = append(uris, r.URI)
	}
	artURI := "desk://sessions/" + ses.ID + "/artifacts/" + art.ID
	binURI := "desk://sessions/" + ses.ID + "/artifacts/" + bin.ID
	trURI := "desk://sessions/" + ses.ID + "/transcript"
	for _, u := range []string{artURI, binURI, trURI} {
		if !slices.Contains(uris, u) {
			t.Errorf("resources/list lacks %s: %v", u, uris)
		}
	}
	rt, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tmpls []string
	for _, r := range rt.ResourceTemplates {
		tmpls = append(tmpls, r.URITemplate)
	}
	if !slices.Contains(tmpls, "desk://sessions/{ses}/artifacts/{art}") || !slices.Contains(tmpls, "desk://sessions/{ses}/transcript") {
		t.Fatalf("templates = %v", tmpls)
	}
	rr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: artURI})
	if err != nil {
		t.Fatal(err)
	}
	if c := rr.Contents[0]; c.Text != "# two\n" || !strings.HasPrefix(c.MIMEType, "text/") || c.Blob != nil {
		t.Fatalf("artifact resource = %+v", c)
	}
	rb, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: binURI})
	if err != nil {
		t.Fatal(err)
	}
	if c := rb.Contents[0]; string(c.Blob) != string(png) || c.MIMEType != "image/png" || c.Text != "" {
		t.Fatalf("blob resource = %q %q", c.MIMEType, c.Text)
	}
	rtr, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: trURI})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rtr.Contents[0].Text, "hello from desk") || rtr.Contents[0].MIMEType != "text/markdown" {
		t.Fatalf("transcript resource = %+v", rtr.Contents[0])
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "desk://sessions/" + ses.ID + "/artifacts/art_nope"}); err == nil {
		t.Fatal("reading a missing artifact succeeded")
	}

	// Subscribe: a change of the artifact (through any door) is notified.
	if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: artURI}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "artifact change notified", func() bool {
		// The follower starts at "now": keep changing until one lands.
		if slices.Contains(w.resourceUpdates(), artURI) {
			return true
		}
		_, err := w.clientA.UpdateArtifact(ctx, ses.ID, art.ID, strings.NewReader("# three\n"), 8, "text/markdown")
		if err != nil {
			t.Fatal(err)
		}
		// Give this change's notification a moment before making another.
		return testwait.Poll(time.Second, func() bool { return slices.Contains(w.resourceUpdates(), artURI) })
	})
	if err := cs.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: artURI}); err != nil {
		t.Fatal(err)
	}

	// Files of the caller's own area.
	var up desk.FileUpload
	call(t, cs, "file_write", map[string]any{"workspace_id": w.ws, "path": "/notes/todo.txt", "content": "buy milk"}, &up)
	if up.Path != "/notes/todo.txt" || up.Size != 8 {
		t.Fatalf("file_write = %+v", up)
	}
	var fl struct {
		Entries []desk.FileEntry
	}
	call(t, cs, "files_list", map[string]any{"workspace_id": w.ws, "path": "/notes"}, &fl)
	if !slices.ContainsFunc(fl.Entries, func(e desk.FileEntry) bool { return e.Path == "/notes/todo.txt" }) {
		t.Fatalf("files_list = %+v", fl.Entries)
	}
	var fr struct{ Text string }
	call(t, cs, "file_read", map[string]any{"workspace_id": w.ws, "path": "/notes/todo.txt"}, &fr)
	if fr.Text != "buy milk" {
		t.Fatalf("file_read = %+v", fr)
	}

	// Approvals and questions: the lists, and answers refused for ids that
	// do not exist (desk's not_found, as a tool error).
	var apr struct{ Approvals []*desk.Approval }
	call(t, cs, "approvals_list", map[string]any{"session_id": ses.ID}, &apr)
	if apr.Approvals == nil || len(apr.Approvals) != 0 {
		t.Fatalf("approvals_list = %+v", apr)
	}
	var inp struct {
		InputRequests []*desk.InputRequest `json:"input_requests"`
	}
	call(t, cs, "input_requests_list", map[string]any{"session_id": ses.ID}, &inp)
	if inp.InputRequests == nil || len(inp.InputRequests) != 0 {
		t.Fatalf("input_requests_list = %+v", inp)
	}
	if msg := callErr(t, cs, "approval_answer", map[string]any{"approval_id": "apr_nope", "decision": "approve"}); !strings.Contains(msg, "not_found") {
		t.Errorf("approval_answer on a missing approval: %s", msg)
	}
	if msg := callErr(t, cs, "input_answer", map[string]any{"input_request_id": "inp_nope", "answers": map[string]string{"q": "a"}}); !strings.Contains(msg, "not_found") {
		t.Errorf("input_answer on a missing request: %s", msg)
	}

	// Completion of the templates' session and artifact ids.
	cr, err := cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: "desk://sessions/{ses}/artifacts/{art}"},
		Argument: sdk.CompleteParamsArgument{Name: "ses", Value: ses.ID[:6]}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cr.Completion.Values, ses.ID) {
		t.Fatalf("completion of ses = %v", cr.Completion.Values)
	}
	cr, err = cs.Complete(ctx, &sdk.CompleteParams{Ref: &sdk.CompleteReference{Type: "ref/resource", URI: "desk://sessions/{ses}/artifacts/{art}"},
		Argument: sdk.CompleteParamsArgument{Name: "art", Value: ""}, Context: &sdk.CompleteContext{Arguments: map[string]string{"ses": ses.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(cr.Completion.Values) != 2 || !slices.Contains(cr.Completion.Values, art.ID) {
		t.Fatalf("completion of art = %v", cr.Completion.Values)
	}

	// The delegate prompt.
	pr, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "delegate", Arguments: map[string]string{"task": "write the report", "workspace_id": w.ws}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := pr.Messages[0].Content.(*sdk.TextContent); !ok || !strings.Contains(tc.Text, "write the report") || !strings.Contains(tc.Text, w.ws) {
		t.Fatalf("delegate = %+v", pr.Messages[0].Content)
	}
	if _, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "delegate"}); err == nil || !strings.Contains(err.Error(), "task") {
		t.Fatalf("delegate without a task: %v", err)
	}
}

func TestSessionInterruptTool(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cs := w.connect(t, w.tokA)
	ctx := context.Background()
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script",
		"script": script(map[string]any{"text": strings.Repeat("slow ", 200), "delay_ms": 30000})}, &ses)
	call(t, cs, "session_send", map[string]any{"session_id": ses.ID, "text": "go"}, nil)
	var exe string
	eventually(t, "the execution to run", func() bool {
		xs, err := w.clientA.Executions(ctx, ses.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(xs) == 1 && xs[0].Phase == desk.PhaseRunning {
			exe = xs[0].ID
			return true
		}
		return false
	})
	var ir desk.InterruptResult
	call(t, cs, "session_interrupt", map[string]any{"session_id": ses.ID, "execution_id": exe}, &ir)
	if !ir.Stopped || ir.Execution.ID != exe {
		t.Fatalf("session_interrupt = %+v", ir)
	}
	x, err := w.clientA.Execution(ctx, exe)
	if err != nil {
		t.Fatal(err)
	}
	if x.Outcome != desk.OutcomeAborted {
		t.Fatalf("outcome after interrupt = %s", x.Outcome)
	}
}

// An actor token cannot list or read another actor's sessions or
// artifacts through MCP: the refusal is a tool error naming why, and the
// resources are not found.
func TestActorScoping(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	bs, err := w.clientB.CreateSession(ctx, w.ws, client.SessionCreate{Title: "bob's secret"})
	if err != nil {
		t.Fatal(err)
	}
	ba, err := w.clientB.PutArtifact(ctx, bs.ID, "secret.md", strings.NewReader("bob's secret text"), -1, client.PutOptions{MediaType: "text/markdown"})
	if err != nil {
		t.Fatal(err)
	}
	cs := w.connect(t, w.tokA)
	var ss struct{ Sessions []*desk.Session }
	call(t, cs, "sessions_list", map[string]any{"workspace_id": w.ws}, &ss)
	for _, x := range ss.Sessions {
		if x.ID == bs.ID {
			t.Fatal("alice lists bob's session")
		}
	}
	for name, args := range map[string]map[string]any{
		"artifact_read":      {"session_id": bs.ID, "artifact_id": ba.ID},
		"artifacts_list":     {"session_id": bs.ID},
		"session_transcript": {"session_id": bs.ID},
		"session_send":       {"session_id": bs.ID, "text": "let me in"},
		"artifact_write":     {"session_id": bs.ID, "name": "x.md", "content": "x"},
		"file_read":          {"workspace_id": w.ws, "path": "/sessions/" + bs.ID + "/secret.md", "actor": w.actorB},
	} {
		msg := callErr(t, cs, name, args)
		if strings.Contains(msg, "bob's secret text") {
			t.Errorf("%s leaked the data: %s", name, msg)
		}
		if !strings.Contains(msg, "not_found") && !strings.Contains(msg, "forbidden") {
			t.Errorf("%s: the refusal does not say why: %q", name, msg)
		}
	}
	rl, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rl.Resources {
		if strings.Contains(r.URI, bs.ID) {
			t.Fatalf("alice lists bob's resource %s", r.URI)
		}
	}
	for _, uri := range []string{"desk://sessions/" + bs.ID + "/artifacts/" + ba.ID, "desk://sessions/" + bs.ID + "/transcript"} {
		if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri}); err == nil {
			t.Fatalf("alice read %s", uri)
		}
		if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: uri}); err == nil {
			t.Fatalf("alice subscribed to %s", uri)
		}
	}
	// Bob sees his own through the same endpoint.
	csB := w.connect(t, w.tokB)
	var read struct{ Text string }
	call(t, csB, "artifact_read", map[string]any{"session_id": bs.ID, "artifact_id": ba.ID}, &read)
	if read.Text != "bob's secret text" {
		t.Fatalf("bob's own read = %+v", read)
	}
	// One server serves both sessions: alice's calls still run as alice.
	if msg := callErr(t, cs, "artifact_read", map[string]any{"session_id": bs.ID, "artifact_id": ba.ID}); strings.Contains(msg, "bob's secret text") || !strings.Contains(msg, "not_found") {
		t.Fatalf("alice's read beside bob's session: %s", msg)
	}
	// A session is bound to the token that opened it.
	resp := rawPost(t, w.mcpURL, w.tokB, csHeaders(cs), `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if resp.StatusCode < 400 {
		t.Fatalf("bob used alice's MCP session: %d", resp.StatusCode)
	}
}

// Cancelling a waiting session_send interrupts exactly the execution it
// waits for; another session's execution runs on.
func TestCancellationInterruptsTheExactExecution(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	cs := w.connect(t, w.tokA)
	ctx := context.Background()
	slow := script(map[string]any{"text": strings.Repeat("slowly ", 100), "delay_ms": 40000})
	var s1, s2 desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script", "script": slow}, &s1)
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script",
		"script": script(map[string]any{"text": "other done", "delay_ms": 3000})}, &s2)
	other, err := w.clientA.Send(ctx, s2.ID, client.SubmitInput{Text: "keep going"})
	if err != nil {
		t.Fatal(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		p := &sdk.CallToolParams{Name: "session_send", Arguments: map[string]any{"session_id": s1.ID, "text": "take your time", "wait": true}}
		p.SetProgressToken("slow")
		_, err := cs.CallTool(cctx, p)
		done <- err
	}()
	var exe string
	eventually(t, "the waited-for execution to run", func() bool {
		xs, err := w.clientA.Executions(ctx, s1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(xs) == 1 && xs[0].Phase == desk.PhaseRunning {
			exe = xs[0].ID
			return true
		}
		return false
	})
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled call returned a result")
	}
	eventually(t, "the cancelled execution to stop", func() bool {
		x, err := w.clientA.Execution(ctx, exe)
		if err != nil {
			t.Fatal(err)
		}
		return x.Terminal()
	})
	x, _ := w.clientA.Execution(ctx, exe)
	if x.Outcome != desk.OutcomeAborted {
		t.Fatalf("cancelled execution ended %s (%s), want aborted", x.Outcome, x.Reason)
	}
	// The other session's turn was not touched.
	eventually(t, "the other execution to complete", func() bool {
		xs, err := w.clientA.Executions(ctx, s2.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(xs) == 1 && xs[0].QueueItemID == other.Item.ID && xs[0].Terminal()
	})
	xs, _ := w.clientA.Executions(ctx, s2.ID)
	if xs[0].Outcome != desk.OutcomeCompleted {
		t.Fatalf("the other execution ended %s, want completed", xs[0].Outcome)
	}
}

func TestStdio(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		_ = mcpserver.RunStdio(ctx, w.clientA, inR, outW, mcpserver.Options{Version: "test"})
		outW.Close()
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ServerInfo.Name; got != "desk" {
		t.Fatalf("server name %q", got)
	}
	// The SDK's client speaks the stateless revision over stdio too
	// (server/discover, no initialize).
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("stdio negotiated %q, want 2026-07-28", v)
	}
	var ses desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "title": "over stdio"}, &ses)
	if ses.Actor != w.actorA {
		t.Fatalf("stdio session actor = %s, want %s", ses.Actor, w.actorA)
	}
}

// Approvals and questions answered through MCP, as an agent host would
// on its user's behalf.
func TestApprovalAndQuestionAnswered(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	cs := w.connect(t, w.tokA)

	// A question: non-blocking, so the turn goes on with the recommended
	// answer and the real answer is queued as its own turn.
	question := map[string]any{"questions": []map[string]any{{"id": "color", "question": "Which color?",
		"options": []map[string]any{{"label": "red", "recommended": true}, {"label": "blue"}}}}}
	var qs desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script", "script": script(
		map[string]any{"tool_calls": []map[string]any{{"name": "request_user_input", "arguments": question}}},
		map[string]any{"text": "red for now"}, map[string]any{"text": "blue then"})}, &qs)
	var sent struct {
		Outcome string `json:"outcome"`
	}
	call(t, cs, "session_send", map[string]any{"session_id": qs.ID, "text": "paint it", "wait": true}, &sent)
	var inp struct {
		InputRequests []*desk.InputRequest `json:"input_requests"`
	}
	call(t, cs, "input_requests_list", map[string]any{"session_id": qs.ID}, &inp)
	if len(inp.InputRequests) != 1 || inp.InputRequests[0].Status != desk.InputPending {
		t.Fatalf("input_requests_list = %+v", inp.InputRequests)
	}
	var ans client.InputAnswered
	call(t, cs, "input_answer", map[string]any{"input_request_id": inp.InputRequests[0].ID, "answers": map[string]string{"color": "blue"}}, &ans)
	if ans.InputRequest.Status != desk.InputAnswered || ans.InputRequest.Answers["color"] != "blue" || ans.QueuedItem == nil {
		t.Fatalf("input_answer = %+v", ans)
	}
	// A bad answer is desk's invalid, as a tool error.
	if msg := callErr(t, cs, "input_answer", map[string]any{"input_request_id": inp.InputRequests[0].ID, "answers": map[string]string{"size": "L"}}); !strings.Contains(msg, "invalid") && !strings.Contains(msg, "conflict") {
		t.Errorf("a bad answer: %s", msg)
	}

	// An approval: exec_command in the user approval mode waits for it.
	if _, err := sandbox.Detect(); err != nil {
		t.Skipf("no command sandbox here, so no exec_command to approve: %v", err)
	}
	if err := w.admin.Do(ctx, "PATCH", "/v1/workspaces/"+w.ws+"/agent", strings.NewReader(`{"approval_mode":"user"}`), "application/json", nil); err != nil {
		t.Fatal(err)
	}
	var as desk.Session
	call(t, cs, "session_create", map[string]any{"workspace_id": w.ws, "model": "script", "script": script(
		map[string]any{"tool_calls": []map[string]any{{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}}},
		map[string]any{"text": "ran it"})}, &as)
	var q struct {
		QueuedItem *desk.QueueItem `json:"queued_item"`
	}
	call(t, cs, "session_send", map[string]any{"session_id": as.ID, "text": "run it"}, &q)
	var apr struct{ Approvals []*desk.Approval }
	eventually(t, "the approval request", func() bool {
		call(t, cs, "approvals_list", map[string]any{"session_id": as.ID, "pending": true}, &apr)
		return len(apr.Approvals) == 1
	})
	if apr.Approvals[0].Tool != "exec_command" || !strings.Contains(apr.Approvals[0].Summary, "echo hi") {
		t.Fatalf("approvals_list = %+v", apr.Approvals[0])
	}
	var decided desk.Approval
	call(t, cs, "approval_answer", map[string]any{"approval_id": apr.Approvals[0].ID, "decision": "deny", "reason": "not today"}, &decided)
	if decided.Status != desk.ApprovalDenied || decided.Reason != "not today" {
		t.Fatalf("approval_answer = %+v", decided)
	}
	if msg := callErr(t, cs, "approval_answer", map[string]any{"approval_id": apr.Approvals[0].ID, "decision": "approve"}); !strings.Contains(msg, "conflict") {
		t.Errorf("answering twice: %s", msg)
	}
}

// At 2026-07-28 there is no session to bind a caller to: each request is
// its own token's, and alice's stateless requests cannot read bob's data.
func TestStatelessActorScoping(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	bs, err := w.clientB.CreateSession(ctx, w.ws, client.SessionCreate{Title: "bob's secret"})
	if err != nil {
		t.Fatal(err)
	}
	ba, err := w.clientB.PutArtifact(ctx, bs.ID, "secret.md", strings.NewReader("bob's secret text"), -1, client.PutOptions{MediaType: "text/markdown"})
	if err != nil {
		t.Fatal(err)
	}
	cs := w.connectAt(t, w.tokA, "2026-07-28", w.mcpURL)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" || cs.ID() != "" {
		t.Fatalf("negotiated %q with session %q, want 2026-07-28 and none", v, cs.ID())
	}
	msg := callErr(t, cs, "artifact_read", map[string]any{"session_id": bs.ID, "artifact_id": ba.ID})
	if strings.Contains(msg, "bob's secret text") || !strings.Contains(msg, "not_found") && !strings.Contains(msg, "forbidden") {
		t.Fatalf("artifact_read of bob's artifact as alice: %q", msg)
	}
	if _, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "desk://sessions/" + bs.ID + "/artifacts/" + ba.ID}); err == nil {
		t.Fatal("alice read bob's artifact resource")
	}
	// Bob, statelessly too, reads his own.
	csB := w.connectAt(t, w.tokB, "2026-07-28", w.mcpURL)
	rr, err := csB.ReadResource(ctx, &sdk.ReadResourceParams{URI: "desk://sessions/" + bs.ID + "/artifacts/" + ba.ID})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "bob's secret text" || rr.CacheScope != "private" {
		t.Fatalf("bob's own read: %+v, %v", rr, err)
	}
}
