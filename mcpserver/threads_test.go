package mcpserver_test

import (
	"context"
	"encoding/json"
	"github.com/desk-runtime/desk/app/apptest"
	"strings"
	"testing"

	"github.com/desk-runtime/desk"
	"github.com/desk-runtime/desk/client"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestThreadTools: threads_list and thread_episodes over MCP with the
// SDK's own client read what a script session's handler thread reported;
// another actor's session and thread are tool errors naming why, with no
// data; an episode id of another thread is refused by name.
func TestThreadTools(t *testing.T) {
	apptest.Parallel(t)
	w := newWorld(t)
	ctx := context.Background()
	scr, _ := json.Marshal(map[string]any{
		"steps": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_start", "arguments": map[string]any{
				"threads": []any{map[string]any{"title": "digger", "objective": "dig"}}}}}},
			map[string]any{"text": "delegated"}, map[string]any{"text": "noted 1"}, map[string]any{"text": "noted 2"},
		},
		"handlers": map[string]any{"digger": []any{
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_report", "arguments": map[string]any{"title": "halfway", "body": "bob-secret-halfway"}}}},
			map[string]any{"tool_calls": []any{map[string]any{"name": "thread_report", "arguments": map[string]any{"title": "dug", "body": "bob-secret-done", "outcome": "delivered"}}}},
			map[string]any{"text": "done"},
		}},
	})
	bs, err := w.clientB.CreateSession(ctx, w.ws, client.SessionCreate{Title: "bob's threads", Model: "script", Script: scr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.clientB.Send(ctx, bs.ID, client.SubmitInput{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	csB := w.connect(t, w.tokB)
	var got struct{ Threads []*desk.Thread }
	eventually(t, "the thread to conclude", func() bool {
		call(t, csB, "threads_list", map[string]any{"session_id": bs.ID}, &got)
		return len(got.Threads) == 1 && got.Threads[0].State == desk.ThreadConcluded
	})
	th := got.Threads[0]
	if th.Title != "digger" || th.Objective != "dig" || th.LatestEpisode == nil || th.LatestEpisode.Title != "dug" || th.EpisodeCount != 2 {
		t.Fatalf("threads_list = %+v", th)
	}
	var eps struct {
		Thread   *desk.Thread
		Episodes []*desk.Episode
	}
	call(t, csB, "thread_episodes", map[string]any{"thread_id": th.ID}, &eps)
	if eps.Thread == nil || eps.Thread.ID != th.ID || len(eps.Episodes) != 2 || eps.Episodes[0].Body != "bob-secret-halfway" ||
		eps.Episodes[1].Kind != desk.EpisodeConclusion || eps.Episodes[1].Outcome != desk.EpisodeDelivered {
		t.Fatalf("thread_episodes = %+v", eps)
	}
	call(t, csB, "thread_episodes", map[string]any{"thread_id": th.ID, "episode_ids": []string{eps.Episodes[1].ID}}, &eps)
	if len(eps.Episodes) != 1 || eps.Episodes[0].Body != "bob-secret-done" {
		t.Fatalf("thread_episodes with episode_ids = %+v", eps.Episodes)
	}
	if msg := callErr(t, csB, "thread_episodes", map[string]any{"thread_id": th.ID, "episode_ids": []string{"epi_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}); !strings.Contains(msg, "epi_01JZZZZZZZZZZZZZZZZZZZZZZZ") {
		t.Fatalf("an unknown episode id: %q", msg)
	}
	// The group filter.
	call(t, csB, "threads_list", map[string]any{"session_id": bs.ID, "thread_group_id": th.GroupID}, &got)
	if len(got.Threads) != 1 {
		t.Fatalf("threads_list of the group = %+v", got.Threads)
	}
	// Alice sees none of it: tool errors naming why, no data.
	csA := w.connect(t, w.tokA)
	for name, args := range map[string]map[string]any{
		"threads_list":    {"session_id": bs.ID},
		"thread_episodes": {"thread_id": th.ID},
	} {
		msg := callErr(t, csA, name, args)
		if strings.Contains(msg, "bob-secret") || strings.Contains(msg, "dig") {
			t.Errorf("%s leaked the data: %s", name, msg)
		}
		if !strings.Contains(msg, "not_found") || (!strings.Contains(msg, bs.ID) && !strings.Contains(msg, th.ID)) {
			t.Errorf("%s: the refusal does not say why: %q", name, msg)
		}
	}
	// Wrong argument types are refused before anything runs.
	res, err := csA.CallTool(ctx, &sdk.CallToolParams{Name: "threads_list", Arguments: map[string]any{"session_id": 7}})
	if err == nil && !res.IsError {
		t.Fatalf("threads_list with a number session_id succeeded")
	}
}
