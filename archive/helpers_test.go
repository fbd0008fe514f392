package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/layout"
)

const testWS = "ws_test"

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type env struct {
	t    *testing.T
	home layout.Home
	a    *Archive
	logs *lockedBuffer
}

// newEnv opens an archive on a fresh home with one workspace directory.
// Background view updates are off unless opt says otherwise.
func newEnv(t *testing.T, opt Options) *env {
	t.Helper()
	home := layout.Home{Root: t.TempDir()}
	if err := os.MkdirAll(home.Workspace(testWS), 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	if opt.ViewsInterval == 0 {
		opt.ViewsInterval = -1
	}
	a, err := Open(home, opt)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, home: home, a: a, logs: logs}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	return e
}

func (e *env) append(r Record) {
	e.t.Helper()
	if err := e.a.Append(context.Background(), testWS, r); err != nil {
		e.t.Fatalf("append %T: %v", r, err)
	}
}

// archiveFilesOf lists every file under the workspace's archive directory,
// slash paths relative to it.
func (e *env) archiveFiles() []string {
	e.t.Helper()
	var out []string
	root := e.a.Dir(testWS)
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func (e *env) readFile(rel string) []byte {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.a.Dir(testWS), filepath.FromSlash(rel)))
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// lines splits a file's bytes into its lines (without '\n'); an
// unterminated last line is returned too.
func lines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	ls := bytes.Split(b, []byte("\n"))
	if len(ls[len(ls)-1]) == 0 {
		ls = ls[:len(ls)-1]
	}
	return ls
}

// keysInOrder returns the top-level keys of a JSON object in file order.
func keysInOrder(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", line)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

var t0 = time.Date(2026, 3, 14, 9, 30, 0, 123456789, time.UTC)

func env0(at time.Time, ch, conv string) Envelope {
	return Envelope{At: at, Channel: ch, ConversationID: conv}
}

func testOrigin() *desk.Origin {
	return &desk.Origin{WorkspaceID: testWS, SessionID: "ses_1", ExecutionID: "exe_1", SurfaceID: "srf_1",
		CommandID: "cmd_1", Actor: "act_1", Kind: desk.OriginAgent}
}

// everyType returns one record of each of the 13 record types, each with
// every field it can carry filled in.
func everyType(at time.Time, ch, conv string) []Record {
	e := Envelope{At: at, Channel: ch, ConversationID: conv, ThreadID: "srf_1", TurnID: "exe_1", Origin: testOrigin()}
	return []Record{
		&MessageInbound{Envelope: e, MessageID: "om_1", SenderID: "ou_1", SenderName: "Alice", ChatType: "p2p",
			Text: "hello <world> & \"friends\"\nsecond line", ReplyToMessageID: "om_0", RootMessageID: "om_0",
			ReplyToText: "earlier", Attachments: []Attachment{{Kind: "image", Name: "a.png", Token: "img_1", Path: "/artifacts/a.png"}}},
		&MessageOutboundRuntime{Envelope: e, Status: "completed", Reply: "full reply", ReplyPreview: "full…", Error: ""},
		&MessageOutboundChannel{Envelope: e, EnvelopeType: "text", MessageID: "om_2", Text: "full reply", TextPreview: "full…"},
		&MessageOutboundChannel{Envelope: e, EnvelopeType: "approval_request", Text: "approve rm?", ApprovalID: "apr_1"},
		&MessageOutboundChannel{Envelope: e, EnvelopeType: "user_input_request", Text: "which?", RequestID: "req_1"},
		&RuntimeProgress{Envelope: e, Text: "reading files"},
		&ApprovalRequested{Envelope: e, ApprovalID: "apr_1", Tool: "shell", Summary: "rm -rf build"},
		&ApprovalResolved{Envelope: e, ApprovalID: "apr_1", Decision: "approved", Reason: "fine"},
		&UserInputRequested{Envelope: e, RequestID: "req_1", Questions: []string{"which branch?", "ship it?"}},
		&UserInputSubmitted{Envelope: e, RequestID: "req_1", Answer: "main; yes"},
		&TurnFailed{Envelope: e, Error: "model unavailable"},
		&TurnInterrupted{Envelope: e, Reason: "user"},
		&RoutineStarted{Envelope: e, RoutineID: "rt_1", Name: "nightly digest"},
		&RoutineProgress{Envelope: e, RoutineID: "rt_1", Name: "nightly digest", Progress: "3/10"},
		&RoutineFinished{Envelope: e, RoutineID: "rt_1", Name: "nightly digest", Status: "succeeded"},
	}
}

// minimal returns one record of each type with only what is required.
func minimal(at time.Time, ch, conv string) []Record {
	e := env0(at, ch, conv)
	te := e
	te.TurnID = "exe_9"
	return []Record{
		&MessageInbound{Envelope: e},
		&MessageOutboundRuntime{Envelope: e, Status: "failed", Error: "boom"},
		&MessageOutboundChannel{Envelope: e, EnvelopeType: "card"},
		&RuntimeProgress{Envelope: te, Text: "x"},
		&ApprovalRequested{Envelope: e, ApprovalID: "a", Tool: "t"},
		&ApprovalResolved{Envelope: e, ApprovalID: "a", Decision: "denied"},
		&UserInputRequested{Envelope: e, RequestID: "r", Questions: []string{"q"}},
		&UserInputSubmitted{Envelope: e, RequestID: "r"},
		&TurnFailed{Envelope: te, Error: "e"},
		&TurnInterrupted{Envelope: te, Reason: "owner-restarted"},
		&RoutineStarted{Envelope: e, RoutineID: "r"},
		&RoutineProgress{Envelope: e, RoutineID: "r", Progress: "p"},
		&RoutineFinished{Envelope: e, RoutineID: "r", Status: "failed"},
		// desk's own record: a system origin with no actor.
		&TurnInterrupted{Envelope: Envelope{At: at, Channel: ch, ConversationID: conv, TurnID: "exe_8",
			Origin: &desk.Origin{WorkspaceID: testWS, Kind: desk.OriginSystem}}, Reason: "owner-restarted"},
	}
}

func hasKey(v any, key string) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, vv := range x {
			if strings.EqualFold(k, key) || hasKey(vv, key) {
				return true
			}
		}
	case []any:
		for _, vv := range x {
			if hasKey(vv, key) {
				return true
			}
		}
	}
	return false
}
