package agui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

func TestValidateNamesTheField(t *testing.T) {
	t.Parallel()
	ok := RunAgentInput{ThreadID: "ses_1", RunID: "r1"}
	for _, c := range []struct {
		name string
		edit func(*RunAgentInput)
		want string
	}{
		{"no thread", func(in *RunAgentInput) { in.ThreadID = "" }, "threadId"},
		{"no run", func(in *RunAgentInput) { in.RunID = "" }, "runId"},
		{"long run id", func(in *RunAgentInput) { in.RunID = strings.Repeat("r", maxRunID+1) }, "runId"},
		{"other protocol", func(in *RunAgentInput) { in.ProtocolVersion = "2.0" }, "protocolVersion"},
		{"resume without id", func(in *RunAgentInput) { in.Resume = []Resume{{Status: "resolved"}} }, "resume[0].interruptId"},
		{"resume status", func(in *RunAgentInput) { in.Resume = []Resume{{InterruptID: "x", Status: "maybe"}} }, "resume[0].status"},
	} {
		in := ok
		c.edit(&in)
		err := in.Validate()
		if !desk.IsCode(err, desk.EINVALID) || !strings.Contains(desk.ErrorMessage(err), c.want) {
			t.Errorf("%s: %v; want an invalid error naming %s", c.name, err, c.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good input: %v", err)
	}
}

func TestPromptIsTheNewestUserMessage(t *testing.T) {
	t.Parallel()
	in := RunAgentInput{Messages: []Msg{
		{ID: "1", Role: "user", Content: json.RawMessage(`"old"`)},
		{ID: "2", Role: "assistant", Content: json.RawMessage(`"answer"`)},
		{ID: "3", Role: "user", Content: json.RawMessage(`[{"type":"text","text":"new"},{"type":"text","text":"line"}]`)},
	}, Context: []Ctx{{Description: "page", Value: "/settings"}}}
	got, err := in.prompt()
	if err != nil || !strings.HasSuffix(got, "new\nline") || !strings.Contains(got, "- page: /settings") {
		t.Fatalf("prompt %q, %v", got, err)
	}
	in.Messages[2].Content = json.RawMessage(`[{"type":"image","source":{"type":"url","value":"x"}}]`)
	if _, err := in.prompt(); !desk.IsCode(err, desk.EINVALID) || !strings.Contains(desk.ErrorMessage(err), "image") {
		t.Fatalf("an image part: %v", err)
	}
	in.Messages = in.Messages[1:2]
	if got, err := in.prompt(); got != "" || err != nil {
		t.Fatalf("no user message: %q, %v", got, err)
	}
}

func TestInterruptIDs(t *testing.T) {
	t.Parallel()
	id := interruptID(kindApproval, "apr_1", 42)
	kind, x, seq, err := parseInterruptID(id)
	if err != nil || kind != kindApproval || x != "apr_1" || seq != 42 {
		t.Fatalf("%s: %s %s %d %v", id, kind, x, seq, err)
	}
	for _, bad := range []string{"", "apr_1", "approval:apr_1", "approval:apr_1:-1", "approval:apr_1:x", "shell:rm:1", "a:b:c:d"} {
		if _, _, _, err := parseInterruptID(bad); !desk.IsCode(err, desk.EINVALID) {
			t.Errorf("%q: %v; want invalid", bad, err)
		}
	}
}

func TestCheckPayload(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		kind, payload string
		ok            bool
	}{
		{kindApproval, `{"decision":"approve"}`, true},
		{kindApproval, `{"option_id":"allow-always"}`, true},
		{kindApproval, `{}`, false},
		{kindApproval, `{"decision":"approve","extra":1}`, false},
		{kindApproval, ``, false},
		{kindInput, `{"answers":{"q1":"yes"}}`, true},
		{kindInput, `{"answer":"yes"}`, false},
	} {
		err := checkPayload(c.kind, Resume{Status: "resolved", Payload: json.RawMessage(c.payload)})
		if (err == nil) != c.ok {
			t.Errorf("%s %s: %v", c.kind, c.payload, err)
		}
	}
	if err := checkPayload(kindApproval, Resume{Status: "cancelled"}); err != nil {
		t.Fatalf("a cancelled entry needs no payload: %v", err)
	}
}
