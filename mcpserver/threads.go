package mcpserver

import (
	"context"

	"github.com/desk-runtime/desk"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Thread tools: an MCP host reads a session's handler threads and the
// episodes they reported, through the same HTTP routes (and so the same
// actor scoping) as every other tool.
type (
	threadsListArgs struct {
		SessionID     string `json:"session_id" jsonschema:"the session (ses_…)"`
		ThreadGroupID string `json:"thread_group_id,omitempty" jsonschema:"only the threads of this thread group (tgr_…)"`
	}
	threadEpisodesArgs struct {
		ThreadID   string   `json:"thread_id" jsonschema:"the thread (thr_…)"`
		EpisodeIDs []string `json:"episode_ids,omitempty" jsonschema:"only these episodes (epi_…); default all of them"`
	}
	threadsOut struct {
		Threads []*desk.Thread `json:"threads"`
	}
	episodesOut struct {
		Thread   *desk.Thread    `json:"thread"`
		Episodes []*desk.Episode `json:"episodes"`
	}
)

func (b *backend) addThreadTools(s *sdk.Server) {
	addTool(s, "threads_list", "List a session's handler threads in start order: objective, state (active or concluded), history mode, group, surface (send to it with session_send surface) and latest episode summary; never transcripts.",
		func(ctx context.Context, _ *sdk.CallToolRequest, in threadsListArgs) (threadsOut, error) {
			ts, err := caller(ctx).Threads(ctx, in.SessionID, in.ThreadGroupID)
			return threadsOut{nonNil(ts)}, err
		})
	addTool(s, "thread_episodes", "Read the durable episodes a handler thread reported, in the order recorded, with their bodies (episode_ids: only those).",
		b.threadEpisodes)
}

func (b *backend) threadEpisodes(ctx context.Context, _ *sdk.CallToolRequest, in threadEpisodesArgs) (*episodesOut, error) {
	t, err := caller(ctx).Thread(ctx, in.ThreadID)
	if err != nil {
		return nil, err
	}
	es, err := caller(ctx).Episodes(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	if len(in.EpisodeIDs) == 0 {
		return &episodesOut{Thread: t, Episodes: nonNil(es)}, nil
	}
	want := map[string]bool{}
	for _, id := range in.EpisodeIDs {
		want[id] = true
	}
	out := &episodesOut{Thread: t, Episodes: []*desk.Episode{}}
	for _, e := range es {
		if want[e.ID] {
			delete(want, e.ID)
			out.Episodes = append(out.Episodes, e)
		}
	}
	for _, id := range in.EpisodeIDs {
		if want[id] {
			return nil, desk.Errorf(desk.ENOTFOUND, "episode_ids: %s is not an episode of thread %s", id, t.ID)
		}
	}
	return out, nil
}
