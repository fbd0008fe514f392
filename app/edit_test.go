package app_test

import (
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/internal/modeltest/strict"
)

// Edit and resend, end to end through HTTP with the real OpenAI adapter
// and the strict local server, so the test sees what the model is sent.

type transcript struct {
	Messages []desk.Message `json:"messages"`
}

func (w *agentWorld) messages(x desk.Session, query string) []desk.Message {
	w.T.Helper()
	var tr transcript
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/messages"+query, nil, &tr)
	return tr.Messages
}

func texts(ms []desk.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Role+":"+m.Text)
	}
	return out
}

// TestEditAndResend: editing the second of three user messages branches
// from its parent; the active branch has the edited message and its answer
// and not the replaced ones, ?branches=true still has the original, and
// the model's requests from then on lack the replaced branch.
func TestEditAndResend(t *testing.T) {
	w, srv := strictWorld(t, strict.Reply{Text: "alpha"}, strict.Reply{Text: "bravo"}, strict.Reply{Text: "charlie"},
		strict.Reply{Text: "delta"}, strict.Reply{Text: "echo"})
	x := w.titled("edits")
	for _, q := range []string{"first question", "second question", "third question"} {
		w.turn(x, q)
	}
	before := w.messages(x, "")
	if got := strings.Join(texts(before), "|"); got != "user:first question|assistant:alpha|user:second question|assistant:bravo|user:third question|assistant:charlie" {
		t.Fatalf("transcript before the edit: %s", got)
	}
	second := before[2]

	var res desk.SubmitResult
	w.Must(202, "POST", "/v1/sessions/"+x.ID+"/messages/"+second.ID+"/edit", map[string]string{"text": "second question, revised"}, &res)
	if res.Item == nil || res.Item.EditOf != second.ID {
		t.Fatalf("the queued row does not name the edited message: %+v", res.Item)
	}
	if res.ExecutionID == "" {
		eventually(t, "the edit to be claimed", func() bool {
			res.ExecutionID = w.item(x.ID, res.Item.ID).ExecutionID
			return res.ExecutionID != ""
		})
	}
	oneTerminal(t, w.settled(res.ExecutionID), desk.PhaseEnded)

	active := w.messages(x, "")
	if got := strings.Join(texts(active), "|"); got != "user:first question|assistant:alpha|user:second question, revised|assistant:delta" {
		t.Fatalf("active branch after the edit: %s", got)
	}
	if ed := active[2]; ed.EditOf != second.ID || ed.ParentID != second.ParentID || ed.ParentID != before[1].ID {
		t.Fatalf("edited message: edit_of %q parent %q; want %s and %s", ed.EditOf, ed.ParentID, second.ID, before[1].ID)
	}
	if active[3].ParentID != active[2].ID {
		t.Fatalf("the answer's parent is %q, want the edited message %s", active[3].ParentID, active[2].ID)
	}
	all := w.messages(x, "?branches=true")
	if got := strings.Join(texts(all), "|"); got != "user:first question|assistant:alpha|user:second question|assistant:bravo|user:third question|assistant:charlie|user:second question, revised|assistant:delta" {
		t.Fatalf("all branches: %s", got)
	}
	for i, m := range all[:6] {
		if m.ID != before[i].ID || m.Text != before[i].Text || m.ParentID != before[i].ParentID {
			t.Fatalf("the original branch changed at %d: %+v, was %+v", i, m, before[i])
		}
	}

	// The next turn follows the active branch too.
	w.turn(x, "fourth question")
	reqs := accepted(t, srv, 5)
	for i, r := range reqs[3:] {
		body := string(r.Body)
		for _, gone := range []string{"third question", "bravo", "charlie"} {
			if strings.Contains(body, gone) {
				t.Errorf("model request %d after the edit carries the replaced %q: %v", i+4, gone, r.UserTexts())
			}
		}
		if !strings.Contains(body, "second question, revised") || !strings.Contains(body, "alpha") {
			t.Errorf("model request %d lacks the active branch: %v", i+4, r.UserTexts())
		}
	}
	if !strings.Contains(string(reqs[4].Body), "delta") {
		t.Errorf("the turn after the edit does not see the edit's answer: %s", reqs[4].Body)
	}
	if got := strings.Join(texts(w.messages(x, "")), "|"); !strings.HasSuffix(got, "user:second question, revised|assistant:delta|user:fourth question|assistant:echo") {
		t.Fatalf("active branch after the next turn: %s", got)
	}
}

// TestEditRefusals: only a committed user message of a session the caller
// can see is edited, with text; a refusal queues nothing.
func TestEditRefusals(t *testing.T) {
	w, _ := strictWorld(t, strict.Reply{Text: "alpha"})
	x := w.titled("refusals")
	w.turn(x, "only question")
	ms := w.messages(x, "")
	user, answer := ms[0], ms[1]
	y := w.titled("another")
	_, otherToken := w.newActor("stranger")
	edit := func(ses, msg string) string { return "/v1/sessions/" + ses + "/messages/" + msg + "/edit" }
	for _, c := range []struct {
		name, token, path string
		body              any
		status            int
		says              string
	}{
		{"an assistant message", w.Token, edit(x.ID, answer.ID), map[string]string{"text": "t"}, 400, "only user messages"},
		{"an unknown message", w.Token, edit(x.ID, "msg_nope"), map[string]string{"text": "t"}, 404, "msg_nope"},
		{"a malformed id", w.Token, edit(x.ID, "nope"), map[string]string{"text": "t"}, 404, "not found"},
		{"another session's message", w.Token, edit(y.ID, user.ID), map[string]string{"text": "t"}, 404, "not found in session"},
		{"empty text", w.Token, edit(x.ID, user.ID), map[string]string{"text": "  "}, 400, "text is required"},
		{"an unknown field", w.Token, edit(x.ID, user.ID), map[string]string{"txt": "t"}, 400, "txt"},
		{"another actor's session", otherToken, edit(x.ID, user.ID), map[string]string{"text": "t"}, 404, "not found"},
	} {
		r := w.Req("POST", c.path, c.token, c.body)
		if r.Status != c.status || !strings.Contains(string(r.Body), c.says) {
			t.Errorf("%s: %d %s; want %d naming %q", c.name, r.Status, r.Body, c.status, c.says)
		}
	}
	var q struct{ Items []desk.QueueItem }
	w.Must(200, "GET", "/v1/sessions/"+x.ID+"/queue?all=true", nil, &q)
	if len(q.Items) != 1 {
		t.Fatalf("refused edits queued rows: %+v", q.Items)
	}
}
