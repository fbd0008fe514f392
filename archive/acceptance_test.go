package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/desk-runtime/desk/internal/testwait"
)

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
	schemaDoc  map[string]any
)

// loadSchema compiles docs/archive.schema.json.
func loadSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	schemaOnce.Do(func() {
		f, err := os.Open(filepath.Join("..", "docs", "archive.schema.json"))
		if err != nil {
			schemaErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			schemaErr = err
			return
		}
		schemaDoc = doc.(map[string]any)
		c := jsonschema.NewCompiler()
		if schemaErr = c.AddResource("archive.schema.json", doc); schemaErr != nil {
			return
		}
		schema, schemaErr = c.Compile("archive.schema.json")
	})
	if schemaErr != nil {
		t.Fatalf("schema: %v", schemaErr)
	}
	return schema
}

func validateLine(t *testing.T, line []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	if err != nil {
		t.Fatalf("unmarshal %s: %v", line, err)
	}
	return loadSchema(t).Validate(v)
}

// allLines returns every line of every archive file of the test workspace.
func (e *env) allLines() [][]byte {
	var out [][]byte
	for _, rel := range e.archiveFiles() {
		out = append(out, lines(e.readFile(rel))...)
	}
	return out
}

var envelopeKeys = []string{"schema_version", "at", "direction", "event_type", "channel", "conversation_id"}

// TestSeedAcceptance checks the seven acceptance criteria of the Stable
// Archive Contract (seed 004, "Acceptance Criteria").
func TestSeedAcceptance(t *testing.T) {
	t.Run("1_path_structure", func(t *testing.T) {
		e := newEnv(t, Options{})
		e.append(&MessageInbound{Envelope: env0(t0, "feishu", "oc_8f3a"), Text: "hi"})
		e.append(&MessageInbound{Envelope: env0(t0.Add(time.Hour), "feishu", "oc_8f3a"), Text: "again"})
		e.append(&MessageInbound{Envelope: env0(t0.AddDate(0, 0, 1), "feishu", "oc_8f3a"), Text: "next day"})
		e.append(&MessageInbound{Envelope: env0(t0, "slack", "C042"), Text: "other"})
		want := []string{"2026/03/14/feishu--oc_8f3a.ndjson", "2026/03/14/slack--C042.ndjson", "2026/03/15/feishu--oc_8f3a.ndjson"}
		if got := e.archiveFiles(); !reflect.DeepEqual(got, want) {
			t.Fatalf("files = %v, want %v", got, want)
		}
		abs := filepath.Join(e.home.Root, "workspaces", testWS, ".system", "archive", "2026", "03", "14", "feishu--oc_8f3a.ndjson")
		if got, _ := e.a.Path(testWS, "feishu", "oc_8f3a", t0); got != abs {
			t.Fatalf("Path = %s, want %s", got, abs)
		}
		pattern := regexp.MustCompile(`^[0-9]{4}/[0-9]{2}/[0-9]{2}/[^/]+--[^/]+\.ndjson$`)
		for _, rel := range e.archiveFiles() {
			if !pattern.MatchString(rel) {
				t.Errorf("%s does not match .system/archive/YYYY/MM/DD/<channel>--<conversation-id>.ndjson", rel)
			}
			// One JSON object per line.
			for _, l := range lines(e.readFile(rel)) {
				var m map[string]any
				if err := json.Unmarshal(l, &m); err != nil {
					t.Errorf("%s: line is not one JSON object: %s", rel, l)
				}
			}
		}
		if n := len(lines(e.readFile(want[0]))); n != 2 {
			t.Fatalf("same conversation and day should share one file: %d lines", n)
		}
	})

	t.Run("2_envelope_on_every_record", func(t *testing.T) {
		e := newEnv(t, Options{})
		for _, r := range append(everyType(t0, "feishu", "oc_1"), minimal(t0, "feishu", "oc_1")...) {
			e.append(r)
		}
		ls := e.allLines()
		if len(ls) != 29 {
			t.Fatalf("%d lines", len(ls))
		}
		for _, l := range ls {
			keys := keysInOrder(t, l)
			if !reflect.DeepEqual(keys[:6], envelopeKeys) {
				t.Fatalf("envelope not first or out of order: %v", keys)
			}
			var m map[string]any
			_ = json.Unmarshal(l, &m)
			if m["schema_version"] != float64(1) || m["channel"] != "feishu" || m["conversation_id"] != "oc_1" {
				t.Fatalf("envelope values: %s", l)
			}
			for _, k := range envelopeKeys[1:] {
				if s, _ := m[k].(string); s == "" {
					t.Fatalf("empty %s: %s", k, l)
				}
			}
			if _, err := time.Parse(time.RFC3339Nano, m["at"].(string)); err != nil {
				t.Fatalf("at is not RFC 3339: %v", err)
			}
		}
	})

	// Criteria 3 and 4: neither a free payload nor a raw object exists, not
	// in the Go types, not in a written line, not in the schema, and neither
	// the reader nor the schema accepts one.
	for _, c := range []struct{ name, key string }{{"3_no_free_payload", "payload"}, {"4_no_raw", "raw"}} {
		t.Run(c.name, func(t *testing.T) {
			for _, r := range everyType(t0, "c", "x") {
				typ := reflect.TypeOf(r).Elem()
				for i := 0; i < typ.NumField(); i++ {
					f := typ.Field(i)
					if strings.EqualFold(f.Name, c.key) || strings.Contains(f.Tag.Get("json"), c.key) {
						t.Errorf("%s has a %s field", typ.Name(), c.key)
					}
					switch f.Type.Kind() {
					case reflect.Map, reflect.Interface:
						t.Errorf("%s.%s is free-form (%s)", typ.Name(), f.Name, f.Type)
					}
					if f.Type == reflect.TypeOf(json.RawMessage{}) {
						t.Errorf("%s.%s is raw JSON", typ.Name(), f.Name)
					}
				}
			}
			e := newEnv(t, Options{})
			for _, r := range everyType(t0, "c", "x") {
				e.append(r)
			}
			for _, l := range e.allLines() {
				var m any
				_ = json.Unmarshal(l, &m)
				if hasKey(m, c.key) {
					t.Fatalf("written record has %q: %s", c.key, l)
				}
				// Add the key and both the reader and the schema refuse it.
				bad := append(bytes.TrimSuffix(l, []byte("}")), []byte(`,"`+c.key+`":{"anything":1}}`)...)
				if _, err := ParseLine(bad); err == nil {
					t.Fatalf("ParseLine accepted %s", bad)
				}
				if err := validateLine(t, bad); err == nil {
					t.Fatalf("schema accepted %s", bad)
				}
			}
			if strings.Contains(mustJSON(t, schemaDoc["$defs"]), `"`+c.key+`"`) {
				t.Fatalf("schema defines a %q property", c.key)
			}
		})
	}

	t.Run("5_closed_event_set", func(t *testing.T) {
		e := newEnv(t, Options{})
		for _, r := range everyType(t0, "c", "x") {
			e.append(r)
		}
		events, systems := map[string]bool{}, map[string]bool{}
		for _, l := range e.allLines() {
			r, err := ParseLine(l)
			if err != nil {
				t.Fatal(err)
			}
			events[r.EventType()] = true
			if r.SystemType() != "" {
				systems[r.SystemType()] = true
			}
		}
		if got := sortedKeys(events); !reflect.DeepEqual(got, sorted(EventTypes)) {
			t.Fatalf("event types written %v, closed set %v", got, EventTypes)
		}
		if got := sortedKeys(systems); !reflect.DeepEqual(got, sorted(SystemTypes)) {
			t.Fatalf("system types written %v, closed list %v", got, SystemTypes)
		}
		wantSystem := []string{"approval_requested", "approval_resolved", "routine_finished", "routine_progress",
			"routine_started", "runtime_progress", "turn_failed", "turn_interrupted", "user_input_requested", "user_input_submitted"}
		if !reflect.DeepEqual(sorted(SystemTypes), wantSystem) {
			t.Fatalf("system types %v are not the seed's list", SystemTypes)
		}
		// The schema names exactly the same set.
		loadSchema(t)
		schemaEvents, schemaSystems := map[string]bool{}, map[string]bool{}
		for _, br := range schemaDoc["oneOf"].([]any) {
			ref := br.(map[string]any)["$ref"].(string)
			def := schemaDoc["$defs"].(map[string]any)[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			props := def["properties"].(map[string]any)
			schemaEvents[props["event_type"].(map[string]any)["const"].(string)] = true
			if st, ok := props["system_type"]; ok {
				schemaSystems[st.(map[string]any)["const"].(string)] = true
			}
		}
		if !reflect.DeepEqual(schemaEvents, events) || !reflect.DeepEqual(schemaSystems, systems) {
			t.Fatalf("schema names %v / %v", schemaEvents, schemaSystems)
		}
		// Anything outside the set is refused by the reader and the schema.
		good := string(e.allLines()[5]) // a runtime_progress line
		for _, bad := range []string{
			strings.Replace(good, `"system_type":"runtime_progress"`, `"system_type":"debug_dump"`, 1),
			strings.Replace(good, `"event_type":"system_event"`, `"event_type":"system"`, 1),
			strings.Replace(good, `"event_type":"system_event"`, `"event_type":"message_inbound"`, 1),
		} {
			if bad == good {
				t.Fatalf("replacement did not apply to %s", good)
			}
			if _, err := ParseLine([]byte(bad)); err == nil {
				t.Errorf("ParseLine accepted %s", bad)
			}
			if err := validateLine(t, []byte(bad)); err == nil {
				t.Errorf("schema accepted %s", bad)
			}
		}
		// And a Go type outside the set cannot be appended.
		if err := e.a.Append(context.Background(), testWS, &fakeRecord{MessageInbound{Envelope: env0(t0, "c", "x")}}); !IsRefused(err) {
			t.Fatalf("unknown record type: %v", err)
		}
	})

	t.Run("6_append_only", func(t *testing.T) {
		e := newEnv(t, Options{IdleClose: 20 * time.Millisecond})
		rel := "2026/03/14/feishu--oc_1.ndjson"
		var prefixes [][32]byte
		var sizes []int
		check := func() {
			b := e.readFile(rel)
			for i, sz := range sizes {
				if len(b) < sz || sha256.Sum256(b[:sz]) != prefixes[i] {
					t.Fatalf("bytes before offset %d changed after later appends", sz)
				}
			}
			sizes = append(sizes, len(b))
			prefixes = append(prefixes, sha256.Sum256(b))
		}
		for i, r := range everyType(t0, "feishu", "oc_1") {
			e.append(r)
			check()
			if i == 5 {
				// Idle close and reopen, and a whole new Archive on the
				// same home: still only appends.
				testwait.Until(t, 5*time.Second, func() bool { return e.a.Stats().Writers == 0 }, "the idle writer to close")
				if err := e.a.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				a2, err := Open(e.home, Options{ViewsInterval: -1})
				if err != nil {
					t.Fatal(err)
				}
				e.a = a2
				t.Cleanup(func() { _ = a2.Close(context.Background()) })
			}
		}
		// Views are rebuilt, with both paths; the archive does not move.
		if err := e.a.RebuildViews(context.Background(), testWS, false); err != nil {
			t.Fatal(err)
		}
		if err := e.a.RebuildViews(context.Background(), testWS, true); err != nil {
			t.Fatal(err)
		}
		e.append(&MessageInbound{Envelope: env0(t0, "feishu", "oc_1"), Text: "correction: a new record, never an edit"})
		check()
		// Records are in append order.
		var texts []string
		for _, l := range lines(e.readFile(rel)) {
			r, _ := ParseLine(l)
			texts = append(texts, r.EventType()+"/"+r.SystemType())
		}
		if len(texts) != len(everyType(t0, "", ""))+1 {
			t.Fatalf("%d records", len(texts))
		}
		// The API offers no way to rewrite, truncate, compact or delete.
		typ := reflect.TypeOf(e.a)
		for i := 0; i < typ.NumMethod(); i++ {
			name := strings.ToLower(typ.Method(i).Name)
			for _, w := range []string{"delete", "remove", "truncate", "compact", "rewrite", "update", "edit", "purge"} {
				if strings.Contains(name, w) {
					t.Errorf("Archive has a method %s", typ.Method(i).Name)
				}
			}
		}
	})

	t.Run("7_views_rebuild_without_touching_archive", func(t *testing.T) {
		e := newEnv(t, Options{})
		for d := 0; d < 3; d++ {
			for _, r := range everyType(t0.AddDate(0, 0, d), "feishu", "oc_1") {
				e.append(r)
			}
		}
		snap := e.snapshot()
		ctx := context.Background()
		if err := e.a.RebuildViews(ctx, testWS, false); err != nil {
			t.Fatal(err)
		}
		view := filepath.Join(e.home.Workspace(testWS), "conversations", "feishu--oc_1.md")
		first, err := os.ReadFile(view)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(filepath.Join(e.home.Workspace(testWS), "conversations")); err != nil {
			t.Fatal(err)
		}
		if err := e.a.RebuildViews(ctx, testWS, false); err != nil {
			t.Fatal(err)
		}
		if err := e.a.RebuildViews(ctx, testWS, true); err != nil {
			t.Fatal(err)
		}
		again, _ := os.ReadFile(view)
		if !bytes.Equal(first, again) {
			t.Fatalf("rebuilt view differs")
		}
		if got := e.snapshot(); !reflect.DeepEqual(got, snap) {
			t.Fatalf("the archive changed while views were rebuilt")
		}
		// The upper layers are not part of the archive: the schema has no
		// memory/digest field and the archive directory holds only days.
		for _, rel := range e.archiveFiles() {
			if !regexp.MustCompile(`^\d{4}/\d{2}/\d{2}/`).MatchString(rel) {
				t.Fatalf("unexpected file in the archive: %s", rel)
			}
		}
	})
}

type fileSnap struct {
	Sum   [32]byte
	MTime time.Time
	Mode  os.FileMode
}

// snapshot records hash, modification time and mode of every archive file.
func (e *env) snapshot() map[string]fileSnap {
	out := map[string]fileSnap{}
	for _, rel := range e.archiveFiles() {
		p := filepath.Join(e.a.Dir(testWS), filepath.FromSlash(rel))
		st, err := os.Stat(p)
		if err != nil {
			e.t.Fatal(err)
		}
		out[rel] = fileSnap{Sum: sha256.Sum256(e.readFile(rel)), MTime: st.ModTime(), Mode: st.Mode()}
	}
	return out
}

// fakeRecord embeds a real record and lies about its type.
type fakeRecord struct{ MessageInbound }

func (*fakeRecord) EventType() string { return "debug_dump" }
func (*fakeRecord) Direction() string { return Outbound }

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSchemaValidatesWrittenRecords(t *testing.T) {
	e := newEnv(t, Options{Location: time.FixedZone("", 8*3600)})
	for _, r := range append(everyType(t0, "feishu", "oc_1"), minimal(t0, "feishu", "oc_1")...) {
		e.append(r)
	}
	ls := e.allLines()
	if len(ls) != 29 {
		t.Fatalf("%d lines", len(ls))
	}
	for _, l := range ls {
		if err := validateLine(t, l); err != nil {
			t.Errorf("schema refuses a written record: %v\n%s", err, l)
		}
	}
	// The schema is as strict as the writer.
	good := string(ls[0]) // message_inbound with every field
	sub := func(old, new string) string {
		s := strings.Replace(good, old, new, 1)
		if s == good {
			t.Fatalf("%q not in %s", old, good)
		}
		return s
	}
	for name, bad := range map[string]string{
		"wrong direction":             sub(`"direction":"inbound"`, `"direction":"outbound"`),
		"schema version 2":            sub(`"schema_version":1`, `"schema_version":2`),
		"empty channel":               sub(`"channel":"feishu"`, `"channel":""`),
		"no conversation":             sub(`"conversation_id":"oc_1",`, ``),
		"at without offset":           sub(`"at":"2026-03-14T17:30:00.123456789+08:00"`, `"at":"2026-03-14T17:30:00"`),
		"field of another type":       sub(`"text":`, `"tool":"shell","text":`),
		"unknown attachment field":    sub(`"kind":"image"`, `"kind":"image","bytes":"AAAA"`),
		"origin with extra field":     sub(`"kind":"agent"`, `"kind":"agent","secret":"x"`),
		"system_type on a message":    sub(`"conversation_id":"oc_1"`, `"conversation_id":"oc_1","system_type":"turn_failed"`),
		"text of the wrong JSON type": sub(`"sender_name":"Alice"`, `"sender_name":7`),
	} {
		if err := validateLine(t, []byte(bad)); err == nil {
			t.Errorf("%s: schema accepted %s", name, bad)
		}
		if _, err := ParseLine([]byte(bad)); err == nil {
			t.Errorf("%s: ParseLine accepted %s", name, bad)
		}
	}
	// The conditional fields of channel deliveries.
	var approval []byte
	for _, l := range ls {
		if bytes.Contains(l, []byte(`"envelope_type":"approval_request"`)) {
			approval = l
		}
	}
	for _, bad := range []string{
		strings.Replace(string(approval), `"envelope_type":"approval_request"`, `"envelope_type":"text"`, 1),
		strings.Replace(string(approval), `,"approval_id":"apr_1"`, ``, 1),
	} {
		if err := validateLine(t, []byte(bad)); err == nil {
			t.Errorf("schema accepted %s", bad)
		}
		if _, err := ParseLine([]byte(bad)); err == nil {
			t.Errorf("ParseLine accepted %s", bad)
		}
	}
}

// TestEncodeParseRoundTrip: every record the writer can produce parses
// under the readers' rules and encodes back to the same bytes.
func TestEncodeParseRoundTrip(t *testing.T) {
	for _, loc := range []*time.Location{time.UTC, time.FixedZone("", -(3*3600 + 30*60))} {
		for _, r := range append(everyType(t0, "feishu", "oc_1"), minimal(t0, "飞书", "a--b")...) {
			line, err := encode(testWS, r, loc)
			if err != nil {
				t.Fatalf("%T: %v", r, err)
			}
			back, err := ParseLine(line[:len(line)-1])
			if err != nil {
				t.Fatalf("%T does not parse: %v\n%s", r, err, line)
			}
			again, err := encode(testWS, back, loc)
			if err != nil || !bytes.Equal(again, line) {
				t.Fatalf("%T round trip:\n%s%s", r, line, again)
			}
			if reflect.TypeOf(back) != reflect.TypeOf(r) || back.Direction() != r.Direction() {
				t.Fatalf("%T parsed as %T", r, back)
			}
		}
	}
}
