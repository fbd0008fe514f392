package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk/internal/npmbin"
)

// aguiReport is what testdata/agui_client.mjs saw.
type aguiReport struct {
	Invalid []json.RawMessage  `json:"invalid"`
	Runs    map[string]aguiRun `json:"runs"`
	Pending []struct {
		ID, Reason, Message string
		Options             int
	} `json:"pending"`
	Dropped           bool   `json:"dropped"`
	LastID            int64  `json:"lastId"`
	JoinedEqualsWhole bool   `json:"joinedEqualsWhole"`
	JoinedCount       int    `json:"joinedCount"`
	WholeCount        int    `json:"wholeCount"`
	Duplicates        int    `json:"duplicates"`
	ClientText        string `json:"clientText"`
	Plan              struct {
		First   aguiRun `json:"first"`
		Resumed aguiRun `json:"resumed"`
		Pending []struct{ ID, Reason, Message string }
	} `json:"plan"`
	Bad struct {
		Status int `json:"status"`
		Body   struct {
			Error struct{ Code, Message string }
		} `json:"body"`
	} `json:"bad"`
}

// aguiRun summarises the frames of one connection.
type aguiRun struct {
	Types    []string         `json:"types"`
	Text     string           `json:"text"`
	Args     string           `json:"args"`
	Tools    []string         `json:"tools"`
	Results  []string         `json:"results"`
	Finished []map[string]any `json:"finished"`
}

// TestAGUIClient: the official AG-UI client (@ag-ui/client 1.0.0's
// HttpAgent) runs a desk turn over POST /v1/sessions/{ses}/agui: text and
// a command call stream, the command's approval ends the run as an
// interrupt, a run with the resume entry approves it and goes on, a
// connection dropped in the middle of the reply is picked up with
// Last-Event-ID through the client's connectAgent, and the two
// connections together carry exactly the events of the whole run, none
// twice and none missing. Every frame validates against @ag-ui/core's
// EventSchema; a plan card waiting for review is an interrupt that a
// resumed run approves; an interrupt desk did not raise is a 400.
func TestAGUIClient(t *testing.T) {
	t.Parallel()
	npmBin := filepath.Dir(npmbin.Find(t, "tsc", "the npm counterparts"))
	if _, err := os.Stat(filepath.Join(npmBin, "..", "@ag-ui", "client")); err != nil {
		t.Skipf("@ag-ui/client is not installed beside %s (.ci/run installs .ci/npm): %v", npmBin, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	d := startDesk(t, deskOpts{})
	ws := d.workspace("agui", false)
	reply := "It ran and printed from-agui. This reply is long enough to arrive over the stream in many pieces, so the client can drop its connection in the middle of it and pick the run up again."
	ses := d.scriptSession(ws,
		`{"text":"Let me run it. ","tool_calls":[{"name":"exec_command","arguments":{"command":"echo from-agui"}}]}`,
		`{"text":`+mustQuote(reply)+`,"delay_ms":2000}`)

	planned := d.scriptSession(ws, planStep("Tidy the desk", "sort", "file"), textStep("Planned and done."))

	cmd := exec.Command(node, filepath.Join("testdata", "agui_client.mjs"))
	cmd.Env = append(os.Environ(), "DESK_URL="+d.URL, "DESK_TOKEN="+d.Token, "DESK_SES="+ses, "DESK_SES2="+planned, "DESK_NPM_BIN="+npmBin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node agui_client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var r aguiReport
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("the program's report %q: %v\nstderr: %s", stdout.String(), err, stderr.String())
	}
	if len(r.Invalid) > 0 {
		t.Fatalf("frames @ag-ui/core's EventSchema refuses: %s", r.Invalid)
	}

	first := r.Runs["first"]
	if len(first.Types) < 3 || first.Types[0] != "RUN_STARTED" || first.Types[1] != "STATE_SNAPSHOT" || first.Types[len(first.Types)-1] != "RUN_FINISHED" {
		t.Fatalf("the first run's events: %v", first.Types)
	}
	if first.Text != "Let me run it. " || len(first.Tools) != 1 || first.Tools[0] != "exec_command" || !strings.Contains(first.Args, "echo from-agui") {
		t.Fatalf("the first run streamed text %q, tools %v, arguments %q", first.Text, first.Tools, first.Args)
	}
	if len(first.Finished) != 1 || first.Finished[0]["type"] != "interrupt" {
		t.Fatalf("the first run finished with %v; want an interrupt", first.Finished)
	}
	if len(r.Pending) != 1 || !strings.HasPrefix(r.Pending[0].ID, "approval:") || r.Pending[0].Reason != "tool_approval" ||
		!strings.Contains(r.Pending[0].Message, "echo from-agui") {
		t.Fatalf("the client's pending interrupts: %+v", r.Pending)
	}
	// The same runId again is the same run, not a second prompt.
	if rep := r.Runs["repeated"]; rep.Text != first.Text || len(rep.Finished) != 1 || rep.Finished[0]["type"] != "interrupt" {
		t.Fatalf("the repeated run: %+v", rep)
	}

	if !r.Dropped || r.LastID == 0 {
		t.Fatalf("the resumed run was not dropped mid-reply (dropped %v, last id %d)", r.Dropped, r.LastID)
	}
	after := r.Runs["resumedAfter"]
	if len(after.Types) == 0 || after.Types[0] != "RUN_STARTED" || after.Finished == nil || after.Finished[0]["type"] != "success" {
		t.Fatalf("the re-subscribed connection: %v %v", after.Types, after.Finished)
	}
	if !r.JoinedEqualsWhole || r.Duplicates != 0 || r.JoinedCount != r.WholeCount {
		t.Fatalf("the two connections carried %d events (%d twice), the whole run %d; equal: %v", r.JoinedCount, r.Duplicates, r.WholeCount, r.JoinedEqualsWhole)
	}
	whole := r.Runs["whole"]
	if whole.Text != reply || len(whole.Results) != 1 || !strings.Contains(whole.Results[0], "from-agui") {
		t.Fatalf("the whole resumed run: text %q, results %v", whole.Text, whole.Results)
	}
	if !strings.Contains(r.ClientText, "pick the run up again") {
		t.Fatalf("the client's messages after connectAgent: %q", r.ClientText)
	}
	if len(r.Plan.Pending) != 1 || !strings.HasPrefix(r.Plan.Pending[0].ID, "plan:") || r.Plan.Pending[0].Reason != "plan_review" ||
		!strings.Contains(r.Plan.Pending[0].Message, "Tidy the desk") {
		t.Fatalf("the plan run's interrupts: %+v (%v)", r.Plan.Pending, r.Plan.First.Types)
	}
	if res := r.Plan.Resumed; len(res.Finished) != 1 || res.Finished[0]["type"] != "success" || !strings.Contains(res.Text, "Planned and done.") {
		t.Fatalf("the approved plan's run: %+v", res)
	}
	if r.Bad.Status != 400 || !strings.Contains(r.Bad.Body.Error.Message, "apv_nothere") {
		t.Fatalf("an unknown interrupt: %+v", r.Bad)
	}
	// desk ran the approved command once.
	if out := d.ok("message", "ls", ses); strings.Count(out, "from-agui") < 1 {
		t.Fatalf("the transcript:\n%s", out)
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
