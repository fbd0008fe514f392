package app_test

import (
	"bufio"
	"bytes"
	"context"
	cr "crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/execution"
	"github.com/desk-runtime/desk/internal/testwait"
)

// rawSSE reads a stream's lines as sent until one equals stop or ctx ends.
func rawSSE(t *testing.T, ctx context.Context, url, token, lastID, stop string) []string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if sc.Text() == stop {
			break
		}
	}
	return lines
}

// TestSSENeverSendsIDZero: a gap notice carries no id (a browser's
// EventSource stores "id: 0" and reconnects with Last-Event-ID: 0, which
// replays the whole log); every id sent is a real event's seq.
func TestSSENeverSendsIDZero(t *testing.T) {
	apptest.Parallel(t)
	w := prunedHistory(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lines := rawSSE(t, ctx, w.Server.URL+"/v1/events?session="+w.a.ID, w.Token, "1", "event: execution.ended")
	sawGap := false
	for i, l := range lines {
		if l == "id: 0" {
			t.Fatalf("stream sent id: 0 at line %d: %q", i, lines)
		}
		if l == "event: gap" {
			sawGap = true
			if i > 0 && strings.HasPrefix(lines[i-1], "id:") {
				t.Fatalf("the gap notice carries an id (%s): %q", lines[i-1], lines)
			}
		}
	}
	if !sawGap {
		t.Fatalf("no gap notice after a pruned id: %q", lines)
	}
}

// TestResolveIsIdempotent: resolving the same unknown target twice answers
// the one session the first resolution reconstructed.
func TestResolveIsIdempotent(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	target := map[string]any{"target": map[string]string{"kind": "session", "id": "ses_01ARZ3NDEKTSV4RRFFQ69G5FAV", "workspace_id": w.ws.ID}}
	var first, second struct {
		Resolution string
		SessionID  string `json:"session_id"`
		Created    bool
	}
	w.Must(200, "POST", "/v1/resolve", target, &first)
	w.Must(200, "POST", "/v1/resolve", target, &second)
	if first.Resolution != desk.ResolveReconstructed || !first.Created || second.SessionID != first.SessionID || second.Created {
		t.Fatalf("two resolutions of one unknown target: %+v then %+v", first, second)
	}
	xs, err := w.App.Store.ListSessions(t.Context(), desk.SessionFilter{WorkspaceID: w.ws.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 3 { // A, B and the one reconstruction
		t.Fatalf("%d sessions after two resolutions, want 3", len(xs))
	}
}

// TestRefusedAskCreatesNoSession: an ask whose prompt the desk refuses (no
// model configured) answers the refusal and leaves no reconstructed
// session behind, however often it is repeated.
func TestRefusedAskCreatesNoSession(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t) // no model: every submit is refused
	for i := 0; i < 3; i++ {
		r := w.Admin("POST", "/v1/ask", map[string]any{"target": map[string]string{"kind": "workspace", "id": w.ws.ID}, "prompt": "what happened here?"})
		if r.Status != 409 || !strings.Contains(r.ErrorMessage(), "no model") {
			t.Fatalf("ask %d = %d %s", i, r.Status, r.Body)
		}
	}
	xs, err := w.App.Store.ListSessions(t.Context(), desk.SessionFilter{WorkspaceID: w.ws.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(xs) != 2 {
		t.Fatalf("%d sessions after refused asks, want the 2 there were", len(xs))
	}
}

// TestAbsorbBrokenGit: a checkout whose .git git cannot read makes the plan
// (source) and the apply (target) answer 409 naming the workspace and its
// .git, not 500.
func TestAbsorbBrokenGit(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{})
	target, source, _ := absorbPair(e)
	url := "/v1/workspaces/" + target.ID + "/absorb?source=" + source.ID
	var plan desk.AbsorbPlan
	e.Must(200, "GET", url, nil, &plan)

	writeCheckout(e, source.ID, ".git", "gitdir: /nonexistent/broken\n")
	r := e.Admin("GET", url, nil)
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), source.ID) || !strings.Contains(r.ErrorMessage(), ".git") {
		t.Fatalf("plan with the source's .git broken = %d %s", r.Status, r.Body)
	}
	if err := os.Remove(checkoutPath(e, source.ID, ".git")); err != nil {
		t.Fatal(err)
	}
	writeCheckout(e, target.ID, ".git", "gitdir: /nonexistent/broken\n")
	r = e.Admin("POST", url, map[string]any{"digest": plan.Digest,
		"resolutions": map[string]string{"checkout/plan.md": "both", "checkout/keep.md": "target"}})
	if r.Status != 409 || !strings.Contains(r.ErrorMessage(), target.ID) || !strings.Contains(r.ErrorMessage(), ".git") {
		t.Fatalf("apply with the target's .git broken = %d %s", r.Status, r.Body)
	}
	if got := readCheckout(e, target.ID, "notes.md"); got != "<absent>" {
		t.Fatalf("a refused absorb wrote notes.md: %q", got)
	}
}

// TestModelsListedOnce: a default model that is the script provider is not
// listed twice.
func TestModelsListedOnce(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{Model: "script"})
	var ml struct {
		Default string
		Models  []string
	}
	e.Must(200, "GET", "/v1/models", nil, &ml)
	seen := map[string]bool{}
	for _, m := range ml.Models {
		if seen[m] {
			t.Fatalf("models lists %s twice: %v", m, ml.Models)
		}
		seen[m] = true
	}
	if ml.Default != "script" || !seen["script"] {
		t.Fatalf("models: %+v", ml)
	}
}

// withOrigin adds an "origin" a client might send to a JSON object body;
// other bodies stay as they are. docs/api.md says every JSON body accepts
// and ignores it (provenance is the server's).
func withOrigin(t *testing.T, body any) any {
	t.Helper()
	if body == nil {
		return nil
	}
	if _, ok := body.([]byte); ok {
		return body
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return body
	}
	m["origin"] = map[string]any{"actor": "act_forged", "kind": "agent", "workspace_id": "ws_forged"}
	return m
}

// logEntries reads the app log through its API with a query.
func logEntries(e *apptest.Env, query string) []desk.LogEntry {
	e.T.Helper()
	e.App.Logs.Flush(e.T.Context())
	var list struct{ Entries []desk.LogEntry }
	e.Must(200, "GET", "/v1/logs?limit=1000&"+query, nil, &list)
	return list.Entries
}

func hasMessage(es []desk.LogEntry, substr string) bool {
	for _, e := range es {
		if strings.Contains(e.Message, substr) {
			return true
		}
	}
	return false
}

// TestLogWorkspaceFilterFindsEveryComponent: components log the workspace
// under one key (workspace_id), so the log's workspace filter finds the
// template's and the absorb's lines about a workspace too.
func TestLogWorkspaceFilterFindsEveryComponent(t *testing.T) {
	apptest.Parallel(t)
	e := apptest.Start(t, app.Config{})
	registerTemplate(e, "starter", "1.0.0", map[string]string{"README.md": "hello\n"})
	var ws desk.Workspace
	e.Must(201, "POST", "/v1/workspaces", map[string]string{"name": "from-template", "template": "starter"}, &ws)
	if es := logEntries(e, "workspace="+ws.ID); !hasMessage(es, "workspace created from template") {
		t.Fatalf("the workspace filter misses the template's line: %+v", es)
	}
	target, source, _ := absorbPair(e)
	url := "/v1/workspaces/" + target.ID + "/absorb?source=" + source.ID
	var plan desk.AbsorbPlan
	e.Must(200, "GET", url, nil, &plan)
	e.Must(200, "POST", url, map[string]any{"digest": plan.Digest,
		"resolutions": map[string]string{"checkout/plan.md": "both", "checkout/keep.md": "target"}}, nil)
	if es := logEntries(e, "workspace="+target.ID); !hasMessage(es, "workspace absorbed") {
		t.Fatalf("the workspace filter misses the absorb's line: %+v", es)
	}
}

// abandonUpload sends the head of an upload and part of its body, then
// drops the connection, as a client that went away does.
func abandonUpload(t *testing.T, e *apptest.Env, path string) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.Server.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: desk\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: 10000000\r\n\r\n", path, e.Token)
	conn.Write(bytes.Repeat([]byte("x"), 64<<10))
	// The server reads the head and this much body before it sees the
	// end of the stream, so its handler always runs and meets the drop.
	conn.Close()
}

// serverLog is a slog handler that announces each record desk logs (at
// any level, with its path if it names one): the events the disconnect
// tests wait for before they look at the app log.
type serverLog chan logRecord

type logRecord struct{ msg, path string }

func (h serverLog) Enabled(context.Context, slog.Level) bool { return true }
func (h serverLog) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == desk.LogPath {
			rec.path = a.Value.String()
		}
		return true
	})
	select {
	case h <- rec:
	default: // a full channel drops records no test waits for
	}
	return nil
}
func (h serverLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h serverLog) WithGroup(string) slog.Handler      { return h }

// serverLogWorld is a world whose desk announces what it logs on the
// returned channel.
func serverLogWorld(t *testing.T) (*world, serverLog) {
	h := make(serverLog, 10000)
	return newWorldOn(t, app.Config{Logger: slog.New(h)}), h
}

// waitRecord waits until desk logs a record that match accepts.
func waitRecord(t *testing.T, log serverLog, what string, match func(logRecord) bool) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		select {
		case rec := <-log:
			if match(rec) {
				return
			}
		case <-timeout:
			t.Fatalf("desk never logged %s", what)
		}
	}
}

// requestDone matches the server's line for a finished request whose path
// ends with suffix: its handler returned and logged what it had to.
func requestDone(suffix string) func(logRecord) bool {
	return func(r logRecord) bool { return r.msg == "request" && strings.HasSuffix(r.path, suffix) }
}

// TestClientDisconnectIsNotAnError: an upload whose client goes away
// mid-body is no error (nor warning) in the app log; the unread badge
// counts what the operator should look at.
func TestClientDisconnectIsNotAnError(t *testing.T) {
	apptest.Parallel(t)
	w, log := serverLogWorld(t)
	abandonUpload(t, w.Env, "/v1/sessions/"+w.a.ID+"/artifacts?name=big.bin")
	waitRecord(t, log, "the abandoned artifact upload's end", requestDone("/artifacts"))
	abandonUpload(t, w.Env, "/v1/workspaces/"+w.ws.ID+"/upload?path=/big.bin")
	waitRecord(t, log, "the abandoned file upload's end", requestDone("/upload"))
	if es := logEntries(w.Env, "min_level=warn"); len(es) != 0 {
		t.Fatalf("a client disconnect reached the app log as a problem: %+v", es)
	}
}

// TestExportDisconnectIsNotAnError: a client that stops reading an export
// part-way is not an error of desk's.
func TestExportDisconnectIsNotAnError(t *testing.T) {
	apptest.Parallel(t)
	w, log := serverLogWorld(t)
	// Incompressible bytes, so the archive outgrows every buffer between
	// the server and the client.
	big := make([]byte, 32<<20)
	cr.Read(big)
	w.put(w.a.ID, "big.bin", big)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", w.Server.URL+"/v1/workspaces/"+w.ws.ID+"/export", nil)
	req.Header.Set("Authorization", "Bearer "+w.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("export = %d", resp.StatusCode)
	}
	io.ReadFull(resp.Body, make([]byte, 1024))
	cancel()
	resp.Body.Close()
	// The handler aborts the cut-short archive after logging why (as an
	// error, or as a debug line when the client left).
	waitRecord(t, log, "the export's failure", func(r logRecord) bool { return strings.HasPrefix(r.msg, "export failed part-way") })
	if es := logEntries(w.Env, "min_level=warn"); len(es) != 0 {
		t.Fatalf("a client that left an export reached the app log as a problem: %+v", es)
	}
}

// TestGuestScratchWhileRunning: the guest view shows the running
// execution's /scratch while it runs (docs/api.md), and not once it ended.
func TestGuestScratchWhileRunning(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "gate scratch-view")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	var scratch string
	for _, c := range w.ex.Calls() {
		if c.ExecutionID == res.ExecutionID {
			scratch = c.Scratch
		}
	}
	if scratch == "" {
		t.Fatal("the executor saw no scratch")
	}
	if err := os.WriteFile(filepath.Join(scratch, "note.txt"), []byte("work in progress"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path=/scratch/note.txt", nil)
	if r.Status != 200 || string(r.Body) != "work in progress" {
		t.Fatalf("guest /scratch/note.txt while running = %d %s", r.Status, r.Body)
	}
	var list struct{ Entries []desk.GuestEntry }
	w.Must(200, "GET", "/v1/sessions/"+w.a.ID+"/guest/list?path=/scratch", nil, &list)
	if len(list.Entries) != 1 || list.Entries[0].Name != "note.txt" {
		t.Fatalf("guest /scratch while running: %+v", list.Entries)
	}
	w.ex.Open("scratch-view")
	w.waitPhase(res.ExecutionID, desk.PhaseEnded)
	if r := w.Admin("GET", "/v1/sessions/"+w.a.ID+"/guest/file?path=/scratch/note.txt", nil); r.Status != 403 {
		t.Fatalf("guest /scratch after the turn = %d %s", r.Status, r.Body)
	}
}

// viewFiles lists the conversation views of a workspace.
func viewFiles(t *testing.T, home, ws string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(home, "workspaces", ws, "conversations", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// archiveSize is the total size of a workspace's archive files.
func archiveSize(t *testing.T, home, ws string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(filepath.Join(home, "workspaces", ws, ".system", "archive"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// TestDeletedViewsComeBackInAQuietWorkspace: docs/archive.md says a
// deleted conversations/ is rebuilt from the archive; it must come back
// within seconds with no new record to prompt it.
func TestDeletedViewsComeBackInAQuietWorkspace(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "reply archived")
	w.waitPhase(res.ExecutionID, desk.PhaseEnded)
	home := w.Config.Home
	waitFor(t, "the conversation views", func() bool { return len(viewFiles(t, home, w.ws.ID)) > 0 })
	before := viewFiles(t, home, w.ws.ID)
	content, err := os.ReadFile(before[0])
	if err != nil {
		t.Fatal(err)
	}
	size := archiveSize(t, home, w.ws.ID)
	// A rebuild may be writing into conversations/ right now (the turn's
	// last records arrive after it ended), which makes one RemoveAll fail
	// with "directory not empty"; a person deleting it would try again.
	var rmErr error
	if !testwait.Poll(time.Second, func() bool {
		rmErr = os.RemoveAll(filepath.Join(home, "workspaces", w.ws.ID, "conversations"))
		return rmErr == nil
	}) {
		t.Fatal(rmErr)
	}
	if !testwait.Poll(20*time.Second, func() bool { return len(viewFiles(t, home, w.ws.ID)) >= len(before) }) {
		t.Fatalf("conversations/ still missing 20 s after it was deleted (archive %d bytes, unchanged: %v)", size, archiveSize(t, home, w.ws.ID) == size)
	}
	if got := archiveSize(t, home, w.ws.ID); got != size {
		t.Fatalf("the archive grew from %d to %d bytes: the rebuild was prompted by a new record", size, got)
	}
	again, err := os.ReadFile(before[0])
	if err != nil || string(again) != string(content) {
		t.Fatalf("rebuilt view differs (%v):\n%s\n---\n%s", err, again, content)
	}
}

// waitLog waits until the app log holds an entry matching query whose
// message contains substr, and returns it.
func waitLog(t *testing.T, e *apptest.Env, query, substr string) desk.LogEntry {
	t.Helper()
	var found desk.LogEntry
	if !testwait.Poll(15*time.Second, func() bool {
		for _, x := range logEntries(e, query) {
			if strings.Contains(x.Message, substr) {
				found = x
			}
		}
		return found.Seq != 0
	}) {
		t.Fatalf("no app log entry %q for %s: %+v", substr, query, logEntries(e, ""))
	}
	return found
}

// TestOperatorEventsReachTheAppLog: failed executions, fault blocks and
// interruptions are in the app log, under the session they concern, and
// the ones that need the operator count as unread warnings.
func TestOperatorEventsReachTheAppLog(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	var res desk.SubmitResult
	for i := range 3 { // the third failure in a row makes an execution-fault block
		res = w.submit(w.a.ID, fmt.Sprintf("fail model said no %d", i))
		w.waitPhase(res.ExecutionID, desk.PhaseFailed)
	}
	failed := waitLog(t, w.Env, "min_level=warn&session="+w.a.ID, "execution failed")
	if failed.WorkspaceID != w.ws.ID || failed.Fields[desk.LogExecutionID] == nil || !strings.Contains(fmt.Sprint(failed.Fields["reason"]), "model said no") {
		t.Fatalf("failed execution entry: %+v", failed)
	}
	blocked := waitLog(t, w.Env, "min_level=warn&session="+w.a.ID, "admission blocked")
	if blocked.Fields["kind"] != desk.BlockExecutionFault {
		t.Fatalf("fault block entry: %+v", blocked)
	}
	var u desk.LogUnread
	w.Must(200, "GET", "/v1/logs/unread", nil, &u)
	if u.Counts["warn"] < 4 {
		t.Fatalf("unread after three failures and a block: %+v", u)
	}

	// A person's interrupt is found again (info), with who did it.
	res = w.submit(w.b.ID, "block")
	w.waitPhase(res.ExecutionID, desk.PhaseRunning)
	w.Must(200, "POST", "/v1/sessions/"+w.b.ID+"/executions/"+res.ExecutionID+"/interrupt", nil, nil)
	in := waitLog(t, w.Env, "session="+w.b.ID, "execution interrupted")
	if in.Fields["by"] != desk.AdminActor || in.Level != "info" {
		t.Fatalf("interrupt entry: %+v", in)
	}
}

// TestCancelledApprovalReachesTheAppLog: an approval cancelled because its
// turn was interrupted is in the app log.
func TestCancelledApprovalReachesTheAppLog(t *testing.T) {
	apptest.Parallel(t)
	w := newWorldOn(t, app.Config{Execution: execution.Options{StopTimeout: 5 * time.Second}})
	var x desk.Session
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/sessions", map[string]any{"model": "script",
		"script": map[string]any{"steps": []map[string]any{{"tool_calls": []any{map[string]any{"name": "exec_command", "arguments": map[string]any{"command": "echo hi"}}}}, {"text": "done"}}}}, &x)
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages", map[string]string{"text": "go"}, nil)
	var aps struct{ Approvals []desk.Approval }
	waitFor(t, "the approval", func() bool {
		w.Must(200, "GET", "/v1/sessions/"+x.ID+"/approvals", nil, &aps)
		return len(aps.Approvals) > 0
	})
	ap := aps.Approvals[0]
	w.Must(200, "POST", "/v1/sessions/"+x.ID+"/executions/"+ap.ExecutionID+"/interrupt", nil, nil)
	got := waitLog(t, w.Env, "session="+x.ID, "approval cancelled")
	if got.Fields["approval_id"] != ap.ID {
		t.Fatalf("cancelled approval entry: %+v", got)
	}
}

// TestAuthFailuresReachTheAppLogRateLimited: refused tokens are warnings in
// the app log, one entry per address per minute, however many there are.
func TestAuthFailuresReachTheAppLogRateLimited(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	for range 5 {
		if r := w.Req("GET", "/v1/workspaces", "wrong-token", nil); r.Status != 401 {
			t.Fatalf("wrong token = %d", r.Status)
		}
	}
	got := waitLog(t, w.Env, "min_level=warn", "authentication failed")
	n := 0
	for _, x := range logEntries(w.Env, "min_level=warn") {
		if strings.Contains(x.Message, "authentication failed") {
			n++
		}
	}
	if n != 1 || got.Fields[desk.LogRemote] != "127.0.0.1" {
		t.Fatalf("%d entries for five refused tokens from one address: %+v", n, got)
	}
}
