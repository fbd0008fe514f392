package e2e

// Black-box tests of desk over real model APIs: the real binary (this test
// binary run as desk) is started with a model in DESK_MODEL and the
// provider's base URL in its environment, pointing at the strict local
// servers of internal/modeltest/strict, which refuse any request the real
// APIs would refuse. Everything goes through the HTTP API.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
	"github.com/desk-runtime/desk/internal/testwait"
)

// modelDesk is a running desk binary and its strict model server.
type modelDesk struct {
	t   *testing.T
	c   *apptest.Client
	srv *strict.Server
	ses desk.Session
}

// newModelDesk starts desk with the environment env (startDesk), and a
// session in a new workspace.
func newModelDesk(t *testing.T, srv *strict.Server, env ...string) *modelDesk {
	t.Helper()
	// The parent's keys and base URLs must not leak into the child.
	env = append([]string{"OPENAI_API_KEY=", "OPENAI_BASE_URL=", "OPENAI_COMPATIBLE_API_KEY=", "ANTHROPIC_API_KEY=", "ANTHROPIC_BASE_URL="}, env...)
	dk := startDesk(t, deskOpts{Env: env})
	d := &modelDesk{t: t, c: &apptest.Client{BaseURL: dk.URL, Token: dk.Token}, srv: srv}
	var ws desk.Workspace
	d.c.Must(t, 201, "POST", "/v1/workspaces", map[string]string{"name": "models"}, &ws)
	d.c.Must(t, 201, "POST", "/v1/workspaces/"+ws.ID+"/sessions", map[string]string{"title": "models"}, &d.ses)
	return d
}

// turn sends a message and waits for its execution to settle.
func (d *modelDesk) turn(text string) desk.Execution {
	d.t.Helper()
	var res desk.SubmitResult
	d.c.Must(d.t, 202, "POST", "/v1/sessions/"+d.ses.ID+"/messages", map[string]string{"text": text}, &res)
	var x desk.Execution
	testwait.Until(d.t, 60*time.Second, func() bool {
		if res.ExecutionID == "" {
			var q struct{ Items []desk.QueueItem }
			d.c.Must(d.t, 200, "GET", "/v1/sessions/"+d.ses.ID+"/queue?all=true", nil, &q)
			for _, it := range q.Items {
				if it.ID == res.Item.ID {
					res.ExecutionID = it.ExecutionID
				}
			}
			return false
		}
		d.c.Must(d.t, 200, "GET", "/v1/executions/"+res.ExecutionID, nil, &x)
		return x.Terminal()
	}, fmt.Sprintf("the turn of %q to settle", text))
	return x
}

// reply is the session's last assistant text.
func (d *modelDesk) reply() string {
	d.t.Helper()
	var out struct{ Messages []desk.Message }
	d.c.Must(d.t, 200, "GET", "/v1/sessions/"+d.ses.ID+"/messages?limit=100", nil, &out)
	for i := len(out.Messages) - 1; i >= 0; i-- {
		if out.Messages[i].Role == desk.RoleAssistant {
			return out.Messages[i].Text
		}
	}
	return ""
}

// ended checks a settled turn and that the server accepted every request.
func (d *modelDesk) ended(x desk.Execution, requests int) []strict.Request {
	d.t.Helper()
	if x.Phase != desk.PhaseEnded {
		d.t.Fatalf("execution %s: %s (%s)", x.ID, x.Phase, x.Reason)
	}
	if rj := d.srv.Rejected(); len(rj) > 0 {
		d.t.Fatalf("the strict server refused: %d %s", rj[0].Status, rj[0].Error)
	}
	got := d.srv.Requests()
	if len(got) != requests {
		d.t.Fatalf("%d requests, want %d", len(got), requests)
	}
	for i, r := range got {
		if len(r.ToolNames()) < 10 || r.Exhausted {
			d.t.Fatalf("request %d: tools %v, exhausted %v", i, r.ToolNames(), r.Exhausted)
		}
	}
	return got
}

// artifact reads the session's artifact by name through the API.
func (d *modelDesk) artifact(name string) string {
	d.t.Helper()
	var list struct{ Artifacts []desk.Artifact }
	d.c.Must(d.t, 200, "GET", "/v1/sessions/"+d.ses.ID+"/artifacts", nil, &list)
	for _, a := range list.Artifacts {
		if a.Name == name {
			req, _ := http.NewRequest("GET", d.c.BaseURL+"/v1/sessions/"+d.ses.ID+"/artifacts/"+a.ID+"/content", nil)
			req.Header.Set("Authorization", "Bearer "+d.c.Token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				d.t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			return string(b)
		}
	}
	d.t.Fatalf("no artifact %s in %+v", name, list.Artifacts)
	return ""
}

// The ways of reaching a model the binary is tested with.
var binaryModels = []struct {
	name  string
	start func(t *testing.T, replies ...strict.Reply) (*strict.Server, []string)
}{
	{"openai-compatible", func(t *testing.T, replies ...strict.Reply) (*strict.Server, []string) {
		srv := strict.NewOpenAI(t, replies...)
		return srv, []string{"DESK_MODEL=openai-compatible:" + srv.BaseURL() + "#m"}
	}},
	{"anthropic", func(t *testing.T, replies ...strict.Reply) (*strict.Server, []string) {
		srv := strict.NewAnthropic(t, replies...)
		srv.RequireKey("sk-ant-dummy-key-for-tests")
		return srv, []string{"DESK_MODEL=anthropic:claude-sonnet-4-5", "ANTHROPIC_BASE_URL=" + srv.BaseURL(), "ANTHROPIC_API_KEY=sk-ant-dummy-key-for-tests"}
	}},
}

// TestBinaryModelTurn: a message to the real binary is answered with the
// strict server's reply, from one accepted request carrying the message.
func TestBinaryModelTurn(t *testing.T) {
	t.Parallel()
	for _, m := range binaryModels {
		t.Run(m.name, func(t *testing.T) {
			srv, env := m.start(t, strict.Reply{Text: "Hello from the strict server.", Usage: strict.Usage{Input: 300, Output: 6, Cached: 128}})
			d := newModelDesk(t, srv, env...)
			reqs := d.ended(d.turn("hello, model"), 1)
			if got := d.reply(); got != "Hello from the strict server." {
				t.Fatalf("reply %q", got)
			}
			if ut := reqs[0].UserTexts(); len(ut) != 1 || !strings.HasPrefix(ut[0], "hello, model") {
				t.Fatalf("the server got user texts %q", ut)
			}
			if m.name == "anthropic" && reqs[0].Header.Get("anthropic-version") == "" {
				t.Fatal("no anthropic-version header")
			}
		})
	}
}

// TestBinaryWriteFileRoundTrip: the model's write_file call runs in the
// real binary, its result goes back in the next request, and the file is
// the session's artifact.
func TestBinaryWriteFileRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range binaryModels {
		t.Run(m.name, func(t *testing.T) {
			argsJSON, _ := json.Marshal(map[string]string{"path": "/artifacts/report.md", "content": "# Report\n\nall green\n"})
			srv, env := m.start(t,
				strict.Reply{Text: "Writing the report.", ToolCalls: []strict.Call{{Name: "write_file", Arguments: string(argsJSON)}}},
				strict.Reply{Text: "The report is in report.md."})
			d := newModelDesk(t, srv, env...)
			reqs := d.ended(d.turn("write the report"), 2)
			if got := d.reply(); got != "The report is in report.md." {
				t.Fatalf("reply %q", got)
			}
			if got := d.artifact("report.md"); got != "# Report\n\nall green\n" {
				t.Fatalf("artifact %q", got)
			}
			ids := reqs[1].ToolCallIDs()
			if len(ids) != 1 || reqs[1].ToolResults()[ids[0]] == "" || strings.Contains(reqs[1].ToolResults()[ids[0]], `"error"`) {
				t.Fatalf("the write's result sent back: %v", reqs[1].ToolResults())
			}
		})
	}
}
