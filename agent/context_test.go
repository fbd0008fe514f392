package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/store/sqlite"
)

// TestRecentMessagesReadsOnlyWhatFits: a step of a long conversation reads
// the transcript back only as far as the model's window reaches, and starts
// at a user message.
func TestRecentMessagesReadsOnlyWhatFits(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "desk.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := desk.Now()
	w := &desk.Workspace{ID: desk.NewID(desk.PrefixWorkspace), Name: "w", State: desk.WorkspaceActive, CreatedAt: now, UpdatedAt: now}
	owner := &desk.Actor{ID: desk.NewID(desk.PrefixActor), WorkspaceID: w.ID, Name: desk.OwnerActorName, Kind: desk.ActorHuman, CreatedAt: now}
	if err := st.CreateWorkspace(ctx, w, owner, false); err != nil {
		t.Fatal(err)
	}
	x := &desk.Session{ID: desk.NewID(desk.PrefixSession), Signature: desk.NewSignature(), WorkspaceID: w.ID, Actor: owner.ID,
		Lifecycle: desk.SessionActive, CreatedAt: now, UpdatedAt: now, Origin: desk.Origin{WorkspaceID: w.ID, Actor: desk.AdminActor, Kind: desk.OriginUser}}
	if err := st.CreateSession(ctx, x); err != nil {
		t.Fatal(err)
	}
	// 1,000 exchanges of a user message, a tool-calling assistant message,
	// a tool result and an answer: about 100 tokens each message.
	text := strings.Repeat("word ", 80)
	const exchanges = 1000
	for i := range exchanges {
		for _, role := range []string{desk.RoleUser, desk.RoleAssistant, desk.RoleTool, desk.RoleAssistant} {
			m := &desk.Message{ID: desk.NewID("msg"), SessionID: x.ID, SurfaceID: x.SurfaceID, Role: role, Text: text, CreatedAt: now}
			if i == exchanges-1 && role == desk.RoleUser {
				m.Text = "the newest question"
			}
			if err := st.AppendMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := &Agent{store: st}
	all, err := a.recentMessages(ctx, x.SurfaceID, 0)
	if err != nil || len(all) != 4*exchanges {
		t.Fatalf("without a window: %d messages, %v", len(all), err)
	}
	const window = 20000
	ms, err := a.recentMessages(ctx, x.SurfaceID, window)
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Role != desk.RoleUser {
		t.Fatalf("the read starts with a %s message, not a user message", ms[0].Role)
	}
	if last := ms[len(ms)-1]; last.Seq != all[len(all)-1].Seq {
		t.Fatalf("the newest message is missing")
	}
	// What fits is about window/100 messages; the read may overshoot by
	// at most a page, never reach back through the whole history.
	if len(ms) > window/50+pageSize || len(ms) < window/200 {
		t.Fatalf("read %d of %d messages for a %d-token window", len(ms), len(all), window)
	}
	// The request built from it fits the window's 80 % budget.
	msgs := fitWindow(toProvider(ms), "system", window)
	n := 0
	for _, m := range msgs {
		n += estimateTokens(m.Content)
	}
	if n > window*8/10 || msgs[0].Role != desk.RoleUser {
		t.Fatalf("request = %d tokens starting with %s, budget %d", n, msgs[0].Role, window*8/10)
	}
}

// TestInterruptedStepReachesTheModelMarked: a partial assistant message
// (its step cut short by an interrupt) is sent to the model in the next
// request with a note saying it was interrupted and by whom, so the model
// does not take the fragment for a finished answer; a complete message is
// sent as it was.
func TestInterruptedStepReachesTheModelMarked(t *testing.T) {
	t.Parallel()
	done := &desk.Message{Role: desk.RoleAssistant, Text: "all of it"}
	part := &desk.Message{Role: desk.RoleAssistant, Text: "half of"}
	part.MarkInterrupted(&desk.Interruption{By: "act_ann", Reason: "user-interrupt"})
	pm := toProvider([]*desk.Message{done, part})
	if pm[0].Content != "all of it" {
		t.Fatalf("a complete message changed: %q", pm[0].Content)
	}
	if !strings.HasPrefix(pm[1].Content, "half of\n\n[this reply was interrupted here: stopped by act_ann;") {
		t.Fatalf("the partial message is not marked for the model: %q", pm[1].Content)
	}
	if done.Interrupted() != nil || part.Interrupted().By != "act_ann" {
		t.Fatal("Interrupted reads the mark wrongly")
	}
}
