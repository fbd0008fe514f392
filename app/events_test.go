package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/app/apptest"
)

type sseEvent struct {
	id   int64
	typ  string
	data string
}

// readSSE reads events until stop says so or the context ends.
func readSSE(t *testing.T, ctx context.Context, url, token string, lastID int64, stop func([]sseEvent) bool) []sseEvent {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events = %d", resp.StatusCode)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "id: "):
			cur.id, _ = strconv.ParseInt(l[4:], 10, 64)
		case strings.HasPrefix(l, "event: "):
			cur.typ = l[7:]
		case strings.HasPrefix(l, "data: "):
			cur.data = l[6:]
		case l == "" && cur.typ != "":
			out = append(out, cur)
			cur = sseEvent{}
			if stop(out) {
				return out
			}
		}
	}
	return out
}

func hasType(es []sseEvent, typ string) bool {
	for _, e := range es {
		if e.typ == typ {
			return true
		}
	}
	return false
}

// TestEventsResumeWithoutGaps follows a session's events, reconnects with
// Last-Event-ID and gets exactly the events after it; events are published
// only after their commit, ids only grow, and an actor token sees only its
// own sessions.
func TestEventsResumeWithoutGaps(t *testing.T) {
	apptest.Parallel(t)
	w := newExecWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	url := w.Server.URL + "/v1/events?session=" + w.a.ID
	got := make(chan []sseEvent, 1)
	go func() {
		got <- readSSE(t, ctx, url, w.Token, -1, func(es []sseEvent) bool { return hasType(es, "queue.delivered") })
	}()
	time.Sleep(100 * time.Millisecond) // the stream starts "from now"
	res := w.submit(w.a.ID, "emit 5")
	first := <-got
	for i := 1; i < len(first); i++ {
		if first[i].id <= first[i-1].id {
			t.Fatalf("ids not increasing: %v", first)
		}
	}
	for _, typ := range []string{"queue.queued", "queue.dispatching", "execution.starting", "execution.running", "assistant.delta", "execution.ended", "queue.delivered"} {
		if !hasType(first, typ) {
			t.Fatalf("no %s event in %v", typ, first)
		}
	}
	// Every execution event is visible in the store when delivered.
	for _, e := range first {
		var ev desk.Event
		json.Unmarshal([]byte(e.data), &ev)
		if ev.Seq != e.id || ev.SessionID != w.a.ID {
			t.Fatalf("event %d: %s", e.id, e.data)
		}
	}
	// Resume after the third event: the rest, no gap, no duplicate.
	mid := first[2].id
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	rest := readSSE(t, ctx2, url, w.Token, mid, func(es []sseEvent) bool { return len(es) >= len(first)-3 })
	if len(rest) != len(first)-3 || rest[0].id != first[3].id || rest[len(rest)-1].id != first[len(first)-1].id {
		t.Fatalf("resume after %d: %d events (%d..), want %d", mid, len(rest), rest[0].id, len(first)-3)
	}
	x := w.exe(res.ExecutionID)
	deltas := 0
	for _, e := range x.Events {
		if e.Type == "assistant.delta" {
			deltas++
		}
	}
	if deltas != 5 {
		t.Fatalf("execution lists %d deltas", deltas)
	}

	// An actor token does not see another actor's session.
	var bob struct{ Token string }
	w.Must(201, "POST", "/v1/workspaces/"+w.ws.ID+"/actors", map[string]string{"name": "bob", "kind": "human"}, &bob)
	if r := w.Req("GET", "/v1/events?session="+w.a.ID, bob.Token, nil); r.Status != 404 {
		t.Fatalf("bob follows the owner's session = %d", r.Status)
	}
}

// prunedHistory is a session with one turn whose events retention
// removed, then a second turn after it: resuming from the first id must
// report a gap.
func prunedHistory(t *testing.T) *execWorld {
	t.Helper()
	w := newExecWorld(t)
	res := w.submit(w.a.ID, "reply one")
	w.waitPhase(res.ExecutionID, desk.PhaseEnded)
	if _, err := w.App.Store.PruneEvents(t.Context(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	res = w.submit(w.a.ID, "reply two")
	w.waitPhase(res.ExecutionID, desk.PhaseEnded)
	return w
}

// TestEventsGapBeyondRetention: resuming from an id retention removed says
// so with a gap event before the rest.
func TestEventsGapBeyondRetention(t *testing.T) {
	apptest.Parallel(t)
	w := prunedHistory(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	es := readSSE(t, ctx, w.Server.URL+"/v1/events?session="+w.a.ID, w.Token, 1, func(es []sseEvent) bool { return hasType(es, "execution.ended") })
	if len(es) == 0 || es[0].typ != "gap" || !strings.Contains(es[0].data, `"requested":1`) {
		t.Fatalf("first event after a lost id: %+v", es)
	}
}
