package tools

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
)

// examples are valid arguments for every tool.
var examples = map[string][]string{
	"acquire":               {`{"action":"search","query":"desk runtime","limit":3}`, `{"action":"note","text":"x","title":"t.md","group_id":"grp_1"}`},
	"artifacts":             {`{"action":"list","offset":3,"limit":10}`, `{"action":"create","name":"r.md","path":"/scratch/r.md","immutable":true}`},
	"clarify":               {`{"plan":{"title":"Ship","steps":["build","test"],"notes":"risky"}}`, `{"questions":[{"question":"Name?","default":"desk"}]}`},
	"delete_file":           {`{"path":"/scratch/x"}`},
	"edit_file":             {`{"path":"/artifacts/a.md","old_text":"a","new_text":"","replace_all":true}`},
	"apply_patch":           {`{"patch":"*** Begin Patch\n*** Add File: /scratch/a.txt\n+a\n*** End Patch"}`},
	"exec_command":          {`{"command":"ls","cwd":"/scratch","timeout_seconds":1800}`},
	"write_stdin":           {`{"session_id":1,"chars":"y\n","yield_time_ms":500}`},
	"execute_typescript":    {`{"code":"console.log(1 + 1)"}`, `{"code":"const x: number = 2;","timeout_seconds":30}`},
	"inspect":               {`{"view":"group","group_id":"grp_1","offset":5,"limit":100}`},
	"list_files":            {`{}`, `{"path":"/artifacts"}`},
	"list_extensions":       {`{}`},
	"load_extension":        {`{"name":"pdf-tools"}`},
	"thread_start":          {`{"threads":[{"title":"a","objective":"do a","history":"forked","thread_group_id":"tgr_1"}]}`},
	"thread_followup":       {`{"thread_ids":["thr_1"],"text":"also b","activate":true}`, `{"thread_group_id":"tgr_1","text":"x"}`},
	"thread_request_report": {`{"thread_id":"thr_1","note":"status?"}`},
	"thread_list":           {`{}`, `{"thread_group_id":"tgr_1"}`},
	"thread_episodes":       {`{"thread_id":"thr_1","episode_ids":["epi_1"]}`, `{}`},
	"thread_current":        {`{}`},
	"thread_group":          {`{}`},
	"thread_report":         {`{"title":"t","body":"b","outcome":"delivered","artifacts":["art_1"]}`, `{"title":"t","body":"b"}`},
	"read_file":             {`{"path":"/artifacts/a.md","offset":2,"limit":10}`},
	"request_user_input":    {`{"questions":[{"id":"color","question":"Which?","options":[{"label":"red","recommended":true},{"label":"blue"}]}]}`},
	"write_file":            {`{"path":"/artifacts/a.md","content":"x"}`},
	"ask":                   {`{"target":"@calm-blue-otter-0a1b2c","subject":"s","text":"t","reply":"caller"}`},
	"peer_list":             {`{}`},
	"peer_sessions":         {`{"workspace_id":"ws_1"}`},
	"peer_path":             {`{"workspace_id":"ws_1","path":"/workspace/README.md"}`, `{"workspace_id":"ws_1"}`},
	"peer_ask":              {`{"target":"ws_1","text":"t","reply":"none"}`},
}

// required are the top-level required fields of every tool.
var required = map[string][]string{
	"acquire": {"action"}, "artifacts": {"action"}, "clarify": nil, "delete_file": {"path"},
	"apply_patch": {"patch"}, "edit_file": {"new_text", "old_text", "path"}, "exec_command": {"command"}, "write_stdin": {"session_id"}, "execute_typescript": {"code"}, "inspect": {"view"},
	"list_files": nil, "list_extensions": nil, "load_extension": {"name"}, "read_file": {"path"}, "request_user_input": {"questions"}, "write_file": {"content", "path"},
	"thread_start": {"threads"}, "thread_followup": {"text"}, "thread_request_report": {"thread_id"}, "thread_list": nil,
	"thread_episodes": nil, "thread_current": nil, "thread_group": nil, "thread_report": {"body", "title"},
	"ask": {"reply", "target", "text"}, "peer_list": nil, "peer_sessions": {"workspace_id"}, "peer_path": {"workspace_id"},
	"peer_ask": {"reply", "target", "text"},
}

// roundTrip decodes raw with the tool's own decode and re-encodes the
// struct value.
func roundTrip(t *testing.T, tool Tool, raw string) (json.RawMessage, *Result) {
	t.Helper()
	var (
		out json.RawMessage
		bad *Result
		err error
	)
	switch x := tool.(type) {
	case askTool:
		out, bad, err = reencode(x.args, raw)
	case peerList:
		out, bad, err = reencode(x.args, raw)
	case peerSessions:
		out, bad, err = reencode(x.args, raw)
	case peerPath:
		out, bad, err = reencode(x.args, raw)
	case peerAsk:
		out, bad, err = reencode(x.args, raw)
	case acquire:
		out, bad, err = reencode(x.args, raw)
	case artifactsTool:
		out, bad, err = reencode(x.args, raw)
	case clarify:
		out, bad, err = reencode(x.args, raw)
	case deleteFile:
		out, bad, err = reencode(x.args, raw)
	case editFile:
		out, bad, err = reencode(x.args, raw)
	case execCommand:
		out, bad, err = reencode(x.args, raw)
	case executeTypeScript:
		out, bad, err = reencode(x.args, raw)
	case writeStdin:
		out, bad, err = reencode(x.args, raw)
	case inspect:
		out, bad, err = reencode(x.args, raw)
	case listFiles:
		out, bad, err = reencode(x.args, raw)
	case listExtensions:
		out, bad, err = reencode(x.args, raw)
	case loadExtension:
		out, bad, err = reencode(x.args, raw)
	case readFile:
		out, bad, err = reencode(x.args, raw)
	case threadStart:
		out, bad, err = reencode(x.args, raw)
	case threadFollowup:
		out, bad, err = reencode(x.args, raw)
	case threadRequestReport:
		out, bad, err = reencode(x.args, raw)
	case threadList:
		out, bad, err = reencode(x.args, raw)
	case threadEpisodes:
		out, bad, err = reencode(x.args, raw)
	case threadCurrent:
		out, bad, err = reencode(x.args, raw)
	case threadGroup:
		out, bad, err = reencode(x.args, raw)
	case threadReport:
		out, bad, err = reencode(x.args, raw)
	case requestUserInput:
		out, bad, err = reencode(x.args, raw)
	case writeFile:
		out, bad, err = reencode(x.args, raw)
	case applyPatch:
		out, bad, err = reencode(x.args, raw)
	default:
		t.Fatalf("tool %s: no round trip in this test; add it", tool.Name())
	}
	if err != nil {
		t.Fatalf("tool %s: %v", tool.Name(), err)
	}
	return out, bad
}

func reencode[A any](a args[A], raw string) (json.RawMessage, *Result, error) {
	v, bad, err := a.decode(json.RawMessage(raw))
	if bad != nil || err != nil {
		return nil, bad, err
	}
	b, err := json.Marshal(v)
	return b, nil, err
}

// TestSchemas: every tool's schema is JSON, meets the 2020-12 meta-schema
// and the provider subset, compiles, is self-contained (no $ref, $defs,
// $schema or $id), describes every field, requires what the tool needs,
// and round-trips: valid arguments decode into the struct, and the struct
// marshalled back validates against the same schema. It failed on the
// string-built schemas (clarify's was not JSON).
func TestSchemas(t *testing.T) {
	if err := Check(); err != nil {
		t.Fatal(err)
	}
	for _, tool := range All() {
		raw := tool.Schema()
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("tool %s: schema is not a JSON object: %v", tool.Name(), err)
		}
		sch, err := compile(tool.Name(), raw)
		if err != nil {
			t.Fatalf("tool %s: %v", tool.Name(), err)
		}
		if doc["type"] != "object" || doc["additionalProperties"] != false || doc["properties"] == nil {
			t.Fatalf("tool %s: top level %s", tool.Name(), raw)
		}
		var req []string
		for _, r := range asSlice(doc["required"]) {
			req = append(req, r.(string))
		}
		slices.Sort(req)
		if want, ok := required[tool.Name()]; !ok || !slices.Equal(req, want) {
			t.Fatalf("tool %s requires %v, want %v", tool.Name(), req, want)
		}
		walkSchema(t, tool.Name(), "", doc)
		if len(examples[tool.Name()]) == 0 {
			t.Fatalf("tool %s has no example", tool.Name())
		}
		for _, ex := range examples[tool.Name()] {
			if _, bad := validate(sch, json.RawMessage(ex)); bad != nil {
				t.Fatalf("tool %s: example %s: %s", tool.Name(), ex, bad.Message)
			}
			back, bad := roundTrip(t, tool, ex)
			if bad != nil {
				t.Fatalf("tool %s: decoding %s: %s", tool.Name(), ex, bad.Message)
			}
			if _, bad := validate(sch, back); bad != nil {
				t.Fatalf("tool %s: %s decoded and marshalled as %s, which its schema refuses: %s", tool.Name(), ex, back, bad.Message)
			}
			var in, out any
			json.Unmarshal([]byte(ex), &in)
			json.Unmarshal(back, &out)
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("tool %s: %s came back as %s", tool.Name(), ex, back)
			}
		}
	}
}

func asSlice(v any) []any { s, _ := v.([]any); return s }

// walkSchema: no $-keywords anywhere, every property described, every
// object closed.
func walkSchema(t *testing.T, tool, at string, s map[string]any) {
	t.Helper()
	for k := range s {
		if strings.HasPrefix(k, "$") {
			t.Fatalf("tool %s: %s has %s", tool, at, k)
		}
	}
	if s["type"] == "object" && s["additionalProperties"] != false {
		t.Fatalf("tool %s: object %s allows unknown fields", tool, at)
	}
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		ps := p.(map[string]any)
		if d, _ := ps["description"].(string); len(d) < 8 {
			t.Fatalf("tool %s: %s/%s has no description", tool, at, name)
		}
		walkSchema(t, tool, at+"/"+name, ps)
	}
	if it, ok := s["items"].(map[string]any); ok {
		walkSchema(t, tool, at+"/items", it)
	}
}

// fakeTool has whatever schema a test gives it.
type fakeTool struct{ name, schema string }

func (f fakeTool) Name() string                              { return f.name }
func (f fakeTool) Description() string                       { return "a test tool" }
func (f fakeTool) Schema() json.RawMessage                   { return json.RawMessage(f.schema) }
func (f fakeTool) Gate(*Env, json.RawMessage) (bool, string) { return false, "" }
func (f fakeTool) Run(context.Context, *Env, *Call) (*Result, error) {
	return &Result{}, nil
}

// TestCheckRefusesBrokenSchema: a tool whose schema is not JSON, breaks
// the meta-schema, or leaves the provider subset is refused by name; the
// real tools pass.
func TestCheckRefusesBrokenSchema(t *testing.T) {
	if err := check(All()); err != nil {
		t.Fatalf("the real tools: %v", err)
	}
	cases := []struct{ schema, want string }{
		{`{"type":"object","properties":{}},"x":1}`, "not JSON"},
		{`{"type":"object","properties":{"a":{"type":"strin"}},"additionalProperties":false}`, "meta-schema"},
		{`{"type":"object","properties":{"a":{"type":"string","minLength":"1"}},"additionalProperties":false}`, "meta-schema"},
		{`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string"}},"additionalProperties":false}`, "outside the subset"},
		{`{"type":"object","properties":{"a":{"type":"string"}}}`, "additionalProperties"},
		{`{"type":"array","items":{"type":"string"}}`, `"type":"object"`},
	}
	for _, c := range cases {
		ts := append(All(), fakeTool{name: "broken_tool", schema: c.schema})
		err := check(ts)
		if err == nil || !strings.Contains(err.Error(), "tool broken_tool") || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("schema %s: got %v, want an error naming broken_tool and %q", c.schema, err, c.want)
		}
	}
}

// TestBadArguments: a call with a wrong type, a missing required field, a
// value out of range, an unknown field or a value outside an enum is a
// BAD_INPUT result naming the field and what was wrong, and the tool does
// not run (the environment is empty: running would panic).
func TestBadArguments(t *testing.T) {
	cases := []struct {
		tool, args string
		want       []string
	}{
		{"read_file", `{"path":"/artifacts/a.md","offset":"3"}`, []string{"/offset: got string, want integer"}},
		{"read_file", `{"path":"/artifacts/a.md","limit":2.5}`, []string{"/limit: got number, want integer"}},
		{"read_file", `{"offset":1}`, []string{"/path: required, missing"}},
		{"read_file", `{"path":"/a","offset":-1}`, []string{"/offset: got -1, want at least 0"}},
		{"read_file", `{"path":"/a","limit":0}`, []string{"/limit: got 0, want at least 1"}},
		{"read_file", `{"path":"/a","bogus":true}`, []string{"/bogus: unknown field", "limit, offset, path"}},
		{"read_file", `{"Path":"/a"}`, []string{"/Path: unknown field", "/path: required, missing"}},
		{"read_file", `{"path":"/a","x":1,"y":2}`, []string{"/x, /y: unknown fields; the fields are limit, offset, path"}},
		{"read_file", `{"path":null}`, []string{"/path: got null, want string"}},
		{"read_file", `[1]`, []string{"/: got array, want object"}},
		{"read_file", `{"path":`, []string{"not valid JSON"}},
		{"write_file", ``, []string{"/content: required, missing", "/path: required, missing"}},
		{"exec_command", `{"command":"sleep 1","timeout_seconds":3600}`, []string{"/timeout_seconds: got 3600, want at most 1800"}},
		{"exec_command", `{"command":"sleep 1","timeout_seconds":0}`, []string{"/timeout_seconds: got 0, want at least 1"}},
		{"exec_command", `{"command":["ls"]}`, []string{"/command: got array, want string"}},
		{"exec_command", `{"command":"  "}`, []string{"/command: is empty"}},
		{"inspect", `{"view":"items"}`, []string{`/view: got "items", want one of "groups", "group", "item", "artifacts"`}},
		{"inspect", `{"view":"groups","limit":101}`, []string{"/limit: got 101, want at most 100"}},
		{"inspect", `{"view":"group"}`, []string{"/group_id: required, missing"}},
		{"inspect", `{"view":"artifacts","limit":-1}`, []string{"/limit: got -1, want at least 1"}}, // sliced xs[0:-1] and panicked before
		{"inspect", `{"view":"item"}`, []string{"/item_id: required, missing"}},
		{"artifacts", `{"action":"list","limit":500}`, []string{"/limit: got 500, want at most 200"}},
		{"artifacts", `{"action":"list","offset":-5}`, []string{"/offset: got -5, want at least 0"}},
		{"artifacts", `{"action":"inspect"}`, []string{"/id: required, missing"}},
		{"acquire", `{"action":"search","query":"q","limit":21}`, []string{"/limit: got 21, want at most 20"}},
		{"acquire", `{"action":"fetch"}`, []string{"/url: required, missing"}},
		{"acquire", `{"action":"fetch","url":"ftp://x"}`, []string{"/url: ", "not an absolute http or https URL"}},
		{"acquire", `{"action":"search"}`, []string{"/query: required, missing"}},
		{"acquire", `{"action":"note","text":" "}`, []string{"/text: required, missing"}},
		{"edit_file", `{"path":"/a","old_text":"","new_text":"x"}`, []string{"/old_text: is empty"}},
		{"edit_file", `{"path":"/a","old_text":"a","new_text":"b","replace_all":"yes"}`, []string{"/replace_all: got string, want boolean"}},
		{"list_files", `{"path":7}`, []string{"/path: got number, want string"}},
		{"request_user_input", `{"questions":[]}`, []string{"/questions: got 0 items, want at least 1"}},
		{"request_user_input", `{"questions":[{"question":"a","default":"x"},{"question":"b","default":"x"},{"question":"c","default":"x"},{"question":"d","default":"x"}]}`, []string{"/questions: got 4 items, want at most 3"}},
		{"request_user_input", `{"questions":[{"question":"Which?","options":[{"label":"a","recommended":true}]}]}`, []string{"/questions/0/options: got 1 item, want at least 2"}},
		{"request_user_input", `{"questions":[{"question":"Which?","options":[{"recommended":true},{"label":"b"}]}]}`, []string{"/questions/0/options/0/label: required, missing"}},
		{"request_user_input", `{"questions":[{"question":"Which?","options":[{"label":"a"},{"label":"b"}]}]}`, []string{"/questions/0/options: 0 are recommended; mark exactly one"}},
		{"request_user_input", `{"questions":[{"question":"Name?"}]}`, []string{"/questions/0: needs 2 or 3 options or a default answer"}},
		{"request_user_input", `{"questions":[{"question":"A?","default":"x"},{"id":"q1","question":"B?","default":"y"}]}`, []string{`/questions/1/id: "q1" is already the id of /questions/0`}},
		{"request_user_input", `{"questions":[{"question":"A?","default":"x","extra":1}]}`, []string{"/questions/0/extra: unknown field", "default, id, options, question"}},
		{"clarify", `{}`, []string{"/questions or /plan"}},
		{"clarify", `{"plan":{"steps":["a"]}}`, []string{"/plan/title: required, missing"}},
		{"clarify", `{"plan":{"title":"T","steps":[]}}`, []string{"/plan/steps: got 0 items, want at least 1"}},
		{"clarify", `{"plan":{"title":" ","steps":["a"]}}`, []string{"/plan/title: is empty"}},
		{"clarify", `{"plan":{"title":"T","steps":["a",""]}}`, []string{"/plan/steps/1: is empty"}},
		{"clarify", `{"plan":{"title":"T","steps":["a"]},"questions":[{"question":"Q?","default":"d"}]}`, []string{"not both"}},
		{"clarify", `{"plan":"do it"}`, []string{"/plan: got string, want object"}},
	}
	for _, c := range cases {
		tool := ByName(c.tool)
		res, err := tool.Run(context.Background(), &Env{}, &Call{CommandID: "cmd_1", Args: json.RawMessage(c.args)})
		if err != nil {
			t.Fatalf("%s %s: %v", c.tool, c.args, err)
		}
		if res.Code != CodeBadInput || !strings.HasPrefix(res.Message, "arguments: ") {
			t.Fatalf("%s %s: %s %q, want BAD_INPUT", c.tool, c.args, res.Code, res.Message)
		}
		for _, w := range c.want {
			if !strings.Contains(res.Message, w) {
				t.Fatalf("%s %s: %q does not say %q", c.tool, c.args, res.Message, w)
			}
		}
		// The model sees the same message in the tool result.
		if !strings.Contains(res.JSON(), `"code":"BAD_INPUT"`) || !strings.Contains(res.JSON(), `"message":`) {
			t.Fatalf("%s %s: result %s", c.tool, c.args, res.JSON())
		}
	}
}

// TestIntegralNumbers: 5.0 and 1e1 are integers to JSON Schema, so they
// decode into an int field instead of failing after validation.
func TestIntegralNumbers(t *testing.T) {
	back, bad := roundTrip(t, readFile{}, `{"path":"/a","offset":1e1,"limit":5.0}`)
	if bad != nil || string(back) != `{"path":"/a","offset":10,"limit":5}` {
		t.Fatalf("got %s %v", back, bad)
	}
}

// TestGateOfBadCall: a call its schema refuses asks nobody for approval
// (Run refuses it before anything happens); a valid one still does.
func TestGateOfBadCall(t *testing.T) {
	if gated, _ := (execCommand{}).Gate(nil, json.RawMessage(`{"command":1}`)); gated {
		t.Fatal("an invalid exec_command call asks for approval")
	}
	if gated, s := (execCommand{}).Gate(nil, json.RawMessage(`{"command":"ls","cwd":"/workspace"}`)); !gated || s != "(in /workspace) ls" {
		t.Fatalf("a valid exec_command call: %v %q", gated, s)
	}
	if gated, _ := (writeFile{}).Gate(nil, json.RawMessage(`{"path":"/workspace/x"}`)); gated {
		t.Fatal("a write_file call without content asks for approval")
	}
	if gated, s := (writeFile{}).Gate(nil, json.RawMessage(`{"path":"/workspace/x","content":""}`)); !gated || s != "write /workspace/x" {
		t.Fatalf("a valid write_file call: %v %q", gated, s)
	}
}

// TestClarify: valid questions reach the user as desk's questions (ids
// filled in); a valid plan card reaches Propose as the card the model
// sent, and the decision comes back.
func TestClarify(t *testing.T) {
	var asked []desk.InputQuestion
	var card json.RawMessage
	decision := desk.PlanApproved
	env := &Env{
		Ask: func(_ context.Context, id string, qs []desk.InputQuestion) (map[string]string, bool, error) {
			asked = qs
			return map[string]string{"q1": "red", "size": "L"}, false, nil
		},
		Propose: func(_ context.Context, id string, c json.RawMessage) (string, string, error) {
			card = c
			return decision, "fewer steps", nil
		},
	}
	run := func(args string) *Result {
		t.Helper()
		res, err := (clarify{}).Run(context.Background(), env, &Call{CommandID: "cmd_1", Args: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Code != "" {
			t.Fatalf("%s: %s %s", args, res.Code, res.Message)
		}
		return res
	}
	res := run(`{"questions":[{"question":"Color?","options":[{"label":"red","recommended":true},{"label":"blue"}]},{"id":"size","question":"Size?","default":"M"}]}`)
	want := []desk.InputQuestion{
		{ID: "q1", Question: "Color?", Options: []desk.InputOption{{Label: "red", Recommended: true}, {Label: "blue"}}},
		{ID: "size", Question: "Size?", Default: "M"},
	}
	if !reflect.DeepEqual(asked, want) {
		t.Fatalf("asked %+v, want %+v", asked, want)
	}
	if v := res.Value.(map[string]any); v["answers"].(map[string]string)["size"] != "L" || v["defaulted"] != false {
		t.Fatalf("result %v", res.Value)
	}

	plan := `{"title":"Ship it","steps":["build","test"],"notes":"risky"}`
	res = run(`{"plan":` + plan + `}`)
	if string(card) != plan {
		t.Fatalf("card %s, want %s", card, plan)
	}
	if res.Value.(map[string]any)["decision"] != "approved" || res.Stop != "" || res.Facts["plan"] != "Ship it" {
		t.Fatalf("approved: %+v", res)
	}
	decision = desk.PlanRevised
	if res = run(`{"plan":{"title":"Ship it","steps":["build"]}}`); res.Value.(map[string]any)["notes"] != "fewer steps" || string(card) != `{"title":"Ship it","steps":["build"]}` {
		t.Fatalf("revised: %+v, card %s", res, card)
	}
	decision = desk.PlanDeclined
	if res = run(`{"plan":{"title":"Ship it","steps":["build"]}}`); res.Stop == "" {
		t.Fatalf("declined: %+v", res)
	}
}

// TestRequestUserInput: valid questions are asked.
func TestRequestUserInput(t *testing.T) {
	var asked []desk.InputQuestion
	env := &Env{Ask: func(_ context.Context, id string, qs []desk.InputQuestion) (map[string]string, bool, error) {
		asked = qs
		return map[string]string{"color": "red"}, true, nil
	}}
	res, err := (requestUserInput{}).Run(context.Background(), env, &Call{CommandID: "cmd_1", Args: json.RawMessage(examples["request_user_input"][0])})
	if err != nil || res.Code != "" {
		t.Fatal(err, res)
	}
	if len(asked) != 1 || asked[0].ID != "color" || len(asked[0].Options) != 2 || !asked[0].Options[0].Recommended {
		t.Fatalf("asked %+v", asked)
	}
	if res.Value.(map[string]any)["defaulted"] != true {
		t.Fatalf("result %v", res.Value)
	}
}

// TestManyProblems: a call that gets everything wrong gets a bounded
// answer that still says how much more was wrong.
func TestManyProblems(t *testing.T) {
	qs := make([]string, 0, 12)
	for i := range 12 {
		qs = append(qs, `{"question":`+string(rune('0'+i%10))+`}`)
	}
	res, err := (requestUserInput{}).Run(context.Background(), &Env{}, &Call{Args: json.RawMessage(`{"questions":[` + strings.Join(qs, ",") + `]}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != CodeBadInput || strings.Count(res.Message, "; ") != maxProblems || !strings.HasSuffix(res.Message, "and 5 more") {
		t.Fatalf("%s", res.Message)
	}
}
