package archive

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
)

// wrongDirection lies about its direction.
type wrongDirection struct{ MessageInbound }

func (*wrongDirection) Direction() string { return Outbound }

// unknownSystem lies about its system type.
type unknownSystem struct{ TurnFailed }

func (*unknownSystem) SystemType() string { return "debug_dump" }

func TestContractRefusals(t *testing.T) {
	e := newEnv(t, Options{MaxRecordBytes: 4096})
	ok := env0(t0, "feishu", "oc_1")
	noChannel := ok
	noChannel.Channel = ""
	noConv := ok
	noConv.ConversationID = ""
	badUTF8Channel := ok
	badUTF8Channel.Channel = "fei\xffshu"
	badTurn := ok
	badTurn.TurnID = "\xc3\x28"
	farFuture := ok
	farFuture.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	otherWS := ok
	otherWS.Origin = &desk.Origin{WorkspaceID: "ws_other", Actor: "act_1", Kind: desk.OriginUser}
	badActor := ok
	badActor.Origin = &desk.Origin{WorkspaceID: testWS, Actor: "act_\xff", Kind: desk.OriginUser}
	badKind := ok
	badKind.Origin = &desk.Origin{WorkspaceID: testWS, Actor: "act_1", Kind: "model"}
	withTurn := ok
	withTurn.TurnID = "exe_1"

	cases := []struct {
		name  string
		rec   Record
		field string
	}{
		{"nil record", nil, ""},
		{"typed nil record", (*MessageInbound)(nil), ""},
		{"unknown event type", &fakeRecord{MessageInbound{Envelope: ok}}, "event_type"},
		{"wrong direction", &wrongDirection{MessageInbound{Envelope: ok}}, "event_type"},
		{"unknown system type", &unknownSystem{TurnFailed{Envelope: withTurn, Error: "x"}}, "event_type"},
		{"missing channel", &MessageInbound{Envelope: noChannel, Text: "x"}, "channel"},
		{"missing conversation", &MessageInbound{Envelope: noConv, Text: "x"}, "conversation_id"},
		{"at out of range", &MessageInbound{Envelope: farFuture, Text: "x"}, "at"},
		{"non-UTF-8 text", &MessageInbound{Envelope: ok, Text: "bad \xff text"}, "text"},
		{"non-UTF-8 channel", &MessageInbound{Envelope: badUTF8Channel}, "channel"},
		{"non-UTF-8 turn id", &MessageInbound{Envelope: badTurn}, "turn_id"},
		{"non-UTF-8 attachment", &MessageInbound{Envelope: ok, Attachments: []Attachment{{Kind: "file", Name: "\xfe"}}}, "attachments[0].name"},
		{"attachment without kind", &MessageInbound{Envelope: ok, Attachments: []Attachment{{Name: "a"}}}, "attachments[0].kind"},
		{"approval_id not allowed for text", &MessageOutboundChannel{Envelope: ok, EnvelopeType: "text", ApprovalID: "apr_1"}, "approval_id"},
		{"request_id not allowed for approval", &MessageOutboundChannel{Envelope: ok, EnvelopeType: "approval_request", ApprovalID: "a", RequestID: "r"}, "request_id"},
		{"approval delivery without approval_id", &MessageOutboundChannel{Envelope: ok, EnvelopeType: "approval_request"}, "approval_id"},
		{"unknown envelope type", &MessageOutboundChannel{Envelope: ok, EnvelopeType: "sdk_blob"}, "envelope_type"},
		{"missing status", &MessageOutboundRuntime{Envelope: ok, Reply: "x"}, "status"},
		{"unknown status", &MessageOutboundRuntime{Envelope: ok, Status: "done"}, "status"},
		{"progress without turn", &RuntimeProgress{Envelope: ok, Text: "x"}, "turn_id"},
		{"approval without tool", &ApprovalRequested{Envelope: ok, ApprovalID: "a"}, "tool"},
		{"unknown decision", &ApprovalResolved{Envelope: ok, ApprovalID: "a", Decision: "maybe"}, "decision"},
		{"no questions", &UserInputRequested{Envelope: ok, RequestID: "r"}, "questions"},
		{"empty question", &UserInputRequested{Envelope: ok, RequestID: "r", Questions: []string{"a", ""}}, "questions[1]"},
		{"answer without request", &UserInputSubmitted{Envelope: ok, Answer: "x"}, "request_id"},
		{"failure without error", &TurnFailed{Envelope: withTurn}, "error"},
		{"interrupt without turn", &TurnInterrupted{Envelope: ok, Reason: "user"}, "turn_id"},
		{"routine without id", &RoutineStarted{Envelope: ok}, "routine_id"},
		{"progress without progress", &RoutineProgress{Envelope: ok, RoutineID: "r"}, "progress"},
		{"unknown routine outcome", &RoutineFinished{Envelope: ok, RoutineID: "r", Status: "ok"}, "status"},
		{"origin of another workspace", &MessageInbound{Envelope: otherWS}, "origin.workspace_id"},
		{"origin with a non-UTF-8 actor", &MessageInbound{Envelope: badActor}, "origin.actor"},
		{"origin with unknown kind", &MessageInbound{Envelope: badKind}, "origin.kind"},
		{"record too large", &MessageInbound{Envelope: ok, Text: strings.Repeat("x", 5000)}, ""},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := e.a.Append(context.Background(), testWS, c.rec)
			var ce *ContractError
			if !errors.As(err, &ce) {
				t.Fatalf("Append = %v, want a contract refusal", err)
			}
			if ce.Field != c.field {
				t.Fatalf("refused field %q (%v), want %q", ce.Field, err, c.field)
			}
			if !desk.IsCode(err, desk.EINVALID) {
				t.Fatalf("code %q", desk.ErrorCode(err))
			}
			if got := e.a.Refused(); got != uint64(i+1) {
				t.Fatalf("Refused() = %d, want %d", got, i+1)
			}
			if files := e.archiveFiles(); len(files) != 0 {
				t.Fatalf("something was written: %v", files)
			}
		})
	}
	if n := strings.Count(e.logs.String(), "archive record refused"); n != len(cases) {
		t.Fatalf("%d refusals logged, want %d:\n%s", n, len(cases), e.logs.String())
	}
	if _, err := os.Stat(e.a.Dir(testWS)); !os.IsNotExist(err) {
		t.Fatalf("the archive directory exists after refusals only: %v", err)
	}
	// A valid record still goes through, and is not counted.
	e.append(&MessageInbound{Envelope: ok, Text: "fine"})
	if e.a.Refused() != uint64(len(cases)) || e.a.Stats().Appended != 1 {
		t.Fatalf("stats %+v", e.a.Stats())
	}
}

// Failures that are not the caller's contract mistakes are errors, but not
// refusals.
func TestAppendOperationalErrors(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	rec := &MessageInbound{Envelope: env0(t0, "c", "x")}
	if err := e.a.Append(ctx, "../ws", rec); !desk.IsCode(err, desk.EINVALID) || IsRefused(err) {
		t.Fatalf("bad workspace id: %v", err)
	}
	if err := e.a.Append(ctx, "ws_missing", rec); !desk.IsCode(err, desk.ENOTFOUND) || IsRefused(err) {
		t.Fatalf("missing workspace: %v", err)
	}
	if _, err := os.Stat(e.home.Workspace("ws_missing")); !os.IsNotExist(err) {
		t.Fatal("Append created a workspace directory")
	}
	if e.a.Refused() != 0 {
		t.Fatal("operational errors counted as refusals")
	}
	// A zero At is stamped by the archive's clock.
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	e2 := newEnv(t, Options{Now: func() time.Time { return fixed }})
	r := &MessageInbound{Envelope: Envelope{Channel: "c", ConversationID: "x"}}
	e2.append(r)
	if !r.At.Equal(fixed) || e2.archiveFiles()[0] != "2030/01/02/c--x.ndjson" {
		t.Fatalf("stamped %v, files %v", r.At, e2.archiveFiles())
	}
	if err := e.a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.a.Append(ctx, testWS, &MessageInbound{Envelope: env0(t0, "c", "x")}); !desk.IsCode(err, desk.EUNAVAILABLE) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestParseLineRefusals(t *testing.T) {
	base := `{"schema_version":1,"at":"2026-03-14T09:30:00Z","direction":"system","event_type":"system_event","channel":"c","conversation_id":"x","system_type":"turn_failed","turn_id":"exe_1","error":"boom"`
	if _, err := ParseLine([]byte(base + `}`)); err != nil {
		t.Fatalf("good line refused: %v", err)
	}
	for name, line := range map[string]string{
		"fragment":            base[:60],
		"not json":            `hello`,
		"array":               `[1,2]`,
		"free payload":        base + `,"payload":{"a":1}}`,
		"raw object":          base + `,"raw":{"event":{}}}`,
		"field of other type": base + `,"tool":"shell"}`,
		"missing error":       strings.Replace(base, `,"error":"boom"`, ``, 1) + `}`,
		"unknown system type": strings.Replace(base, `turn_failed`, `turn_exploded`, 1) + `}`,
		"no system type":      strings.Replace(base, `,"system_type":"turn_failed"`, ``, 1) + `}`,
		"wrong direction":     strings.Replace(base, `"direction":"system"`, `"direction":"inbound"`, 1) + `}`,
		"unknown event type":  strings.Replace(base, `"event_type":"system_event"`, `"event_type":"memory_digest"`, 1) + `}`,
		"no schema version":   strings.Replace(base, `"schema_version":1,`, ``, 1) + `}`,
		"schema version 2":    strings.Replace(base, `"schema_version":1`, `"schema_version":2`, 1) + `}`,
		"no at":               strings.Replace(base, `"at":"2026-03-14T09:30:00Z",`, ``, 1) + `}`,
		"bad at":              strings.Replace(base, `2026-03-14T09:30:00Z`, `yesterday`, 1) + `}`,
		"empty channel":       strings.Replace(base, `"channel":"c"`, `"channel":""`, 1) + `}`,
		"trailing data":       base + `} {}`,
	} {
		if r, err := ParseLine([]byte(line)); err == nil {
			t.Errorf("%s: accepted as %T", name, r)
		}
	}
}
